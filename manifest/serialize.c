/*
 * manifest/serialize.c — format version 1 (read for existing repositories; written
 * only by tests): a manifest as a self-contained, checksummed object and back. Layout in docs/MANIFEST.md. The object is not compressed here (manifest/
 * depends on no compression library); engine/ may compress it as a whole.
 *
 * The parser treats its input as hostile: the checksum is checked before anything
 * else is read, and every count is checked against the bytes that remain before
 * anything is allocated for it, so a crafted object with a valid checksum cannot
 * make it allocate more than the object's own size.
 */
#include "manifest/v2_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MF_RUN_BYTES 28u      /* first, count, pack_no, clen, offset, rlen */
#define MF_FILE_MIN_BYTES 61u /* a file record with a 1-byte path and nothing else */

/* ---- writing ---- */

static int put_fixed(pb_buf *b, const char *s, size_t size)
{
    size_t n = strnlen(s, size);
    if (n == size)
        return PB_EINVAL;
    if (pb_buf_u32(b, (uint32_t)n))
        return PB_ENOMEM;
    return pb_buf_append(b, s, n);
}

/* The header's extension block, after the files: a magic, a count, then (tag, u64)
 * pairs. A reader skips tags it does not know and defaults those absent, so a field is
 * added by a new tag alone (docs/MANIFEST.md, "Extension block"). */
#define MF_EXT_MAGIC 0x3158454du /* "MEX1" little-endian */
enum { MF_EXT_READ_MODE = 1, MF_EXT_VERIFY_SCAN = 2, MF_EXT_MTIME_HORIZON = 3,
       MF_EXT_FILES_SKIPPED = 4, MF_EXT_BYTES_SKIPPED = 5, MF_EXT_PAGES_MISSED = 6 };
#define MF_EXT_MAX 64u /* more tags than this in one block is corruption */
#define MF_FLAG_EXT 2u

static int put_header(pb_buf *b, const mf_backup *h)
{
    uint64_t secs;
    memcpy(&secs, &h->seconds, sizeof(secs));
    int rc = 0;
    rc |= pb_buf_append(b, MF_MAGIC, 8);
    rc |= pb_buf_u32(b, MF_VERSION);
    rc |= put_fixed(b, h->id, sizeof(h->id));
    rc |= put_fixed(b, h->parent, sizeof(h->parent));
    rc |= pb_buf_u32(b, (uint32_t)(unsigned char)h->type);
    rc |= pb_buf_u64(b, h->start_lsn);
    rc |= pb_buf_u64(b, h->stop_lsn);
    rc |= pb_buf_u32(b, h->timeline);
    rc |= pb_buf_u64(b, h->system_id);
    rc |= pb_buf_u32(b, h->pg_version);
    rc |= pb_buf_u32(b, h->wal_segment_size);
    /* bit 0: data checksums; bit 1: an extension block follows the files (put_ext) */
    rc |= pb_buf_u32(b, (h->data_checksums ? 1u : 0u) | MF_FLAG_EXT);
    rc |= pb_buf_u64(b, (uint64_t)h->start_time);
    rc |= pb_buf_u64(b, (uint64_t)h->stop_time);
    rc |= put_fixed(b, h->start_wal, sizeof(h->start_wal));
    rc |= put_fixed(b, h->stop_wal, sizeof(h->stop_wal));
    const uint64_t stats[] = {h->files,      h->pages_scanned, h->pages_changed,
                              h->pages_in_window, h->bytes_read, h->bytes_stored,
                              h->checksum_errors, h->collisions, secs};
    for (size_t i = 0; i < sizeof(stats) / sizeof(stats[0]); i++)
        rc |= pb_buf_u64(b, stats[i]);
    return rc;
}

static int put_ext(pb_buf *b, const mf_backup *h)
{
    const uint64_t v[][2] = {
        {MF_EXT_READ_MODE, (uint64_t)(unsigned char)h->read_mode},
        {MF_EXT_VERIFY_SCAN, h->verify_scan ? 1 : 0},
        {MF_EXT_MTIME_HORIZON, (uint64_t)h->mtime_horizon},
        {MF_EXT_FILES_SKIPPED, h->files_skipped},
        {MF_EXT_BYTES_SKIPPED, h->bytes_skipped},
        {MF_EXT_PAGES_MISSED, h->pages_missed}};
    size_t n = sizeof(v) / sizeof(v[0]);
    int rc = pb_buf_u32(b, MF_EXT_MAGIC) | pb_buf_u32(b, (uint32_t)n);
    for (size_t i = 0; i < n; i++)
        rc |= pb_buf_u32(b, (uint32_t)v[i][0]) | pb_buf_u64(b, v[i][1]);
    return rc;
}

static int put_file(pb_buf *b, const mf_file *f)
{
    int rc = 0;
    rc |= pb_buf_str(b, f->path);
    rc |= pb_buf_u32(b, (uint32_t)f->kind);
    rc |= pb_buf_u32(b, f->mode);
    rc |= pb_buf_u64(b, f->size);
    rc |= pb_buf_u64(b, (uint64_t)f->mtime);
    rc |= pb_buf_str(b, f->kind == MF_LINK ? f->link_target : NULL);
    rc |= pb_buf_u64(b, f->hash);
    rc |= put_fixed(b, f->stored_in, sizeof(f->stored_in));
    rc |= pb_buf_u32(b, f->npages);
    rc |= pb_buf_u32(b, f->nruns);
    if (rc)
        return rc;
    if (pb_buf_reserve(b, (size_t)f->nruns * MF_RUN_BYTES))
        return PB_ENOMEM;
    for (uint32_t i = 0; i < f->nruns; i++) {
        const mf_run *r = &f->runs[i];
        rc |= pb_buf_u32(b, r->first);
        rc |= pb_buf_u32(b, r->count);
        rc |= pb_buf_u32(b, r->pack_no);
        rc |= pb_buf_u32(b, r->clen);
        rc |= pb_buf_u64(b, r->offset);
        rc |= pb_buf_u32(b, r->rlen);
    }
    uint64_t nh = f->kind == MF_REL ? mf_shipped_pages(f) : 0;
    rc |= pb_buf_u64(b, nh);
    if (rc || pb_buf_reserve(b, nh * 8))
        return PB_ENOMEM;
    for (uint64_t i = 0; i < nh; i++)
        pb_put_u64(b->data + b->len + i * 8, f->page_hashes[i]);
    b->len += nh * 8;
    return 0;
}

int mf_serialize_v1(const mf_manifest *m, pb_buf *out, pb_error *err)
{
    const mf_backup *h = &m->hdr;
    const mf_file **files = NULL, **owned = NULL;
    const char *id = strnlen(h->id, MF_ID_LEN) < MF_ID_LEN ? h->id : "(unterminated id)";
    size_t start = out->len;
    int rc = mf_sorted_view(m, &files, &owned, "serializing manifest", err);
    if (rc)
        goto out;
    if (h->type != 'F' && h->type != 'I' && h->type != 'S') {
        rc = pb_fail(err, PB_EINVAL, "serializing manifest %s: backup type %d is not F, I or S",
                     id, h->type);
        goto out;
    }
    if (put_header(out, h)) {
        rc = pb_fail(err, PB_EINVAL, "serializing manifest %.32s: header strings too long "
                                     "or out of memory", id);
        goto out;
    }
    if (pb_buf_u64(out, m->count)) {
        rc = pb_fail(err, PB_ENOMEM, "serializing manifest %s", id);
        goto out;
    }
    for (size_t i = 0; i < m->count; i++) {
        /* mf_add_file validated; re-check so a caller's later edit through
         * mf_header/mf_at casts cannot produce an unreadable object. */
        rc = mf_check_file(files[i], PB_EINVAL, "serializing manifest", err);
        if (rc)
            goto out;
        for (uint32_t k = 0; k < files[i]->nruns; k++)
            if (files[i]->runs[k].frame_page)
                rc = pb_fail(err, PB_EINVAL, "serializing manifest %s as version 1: file %s "
                             "has a run inside a shared frame", id, files[i]->path);
        if (rc)
            goto out;
        if (put_file(out, files[i])) {
            rc = pb_fail(err, PB_ENOMEM, "serializing manifest %s: file %s", id,
                         files[i]->path);
            goto out;
        }
    }
    if (put_ext(out, h) || pb_buf_u64(out, pb_hash64(out->data + start, out->len - start)))
        rc = pb_fail(err, PB_ENOMEM, "serializing manifest %s", id);
out:
    if (rc)
        out->len = start;
    free(owned);
    return rc;
}

/* ---- reading ---- */

typedef struct parse_ctx {
    pb_reader r;
    const char *what; /* "manifest <name>" for messages */
    pb_error *err;
    bool ext;         /* the header says an extension block follows the files */
} parse_ctx;

/* A string of at most max-1 bytes without NUL; *out malloc'd (NULL when empty and
 * allow_empty). `where` and `field` name it in the error. */
static int rd_string(parse_ctx *c, size_t max, bool allow_empty, char **out, const char *where,
                     const char *field)
{
    *out = NULL;
    uint32_t n = pb_rd_u32(&c->r);
    const uint8_t *p = c->r.bad || n >= max ? NULL : pb_rd_bytes(&c->r, n);
    if (!p || memchr(p, '\0', n) || (n == 0 && !allow_empty))
        return pb_fail(c->err, PB_ECORRUPT, "%s: %s: bad %s (length %u)", c->what, where,
                       field, n);
    if (n == 0)
        return 0;
    char *s = malloc((size_t)n + 1);
    if (!s)
        return pb_fail(c->err, PB_ENOMEM, "%s: %s: %s", c->what, where, field);
    memcpy(s, p, n);
    s[n] = '\0';
    *out = s;
    return 0;
}

static int rd_fixed(parse_ctx *c, char *dst, size_t size, const char *where, const char *field)
{
    char *s;
    int rc = rd_string(c, size, true, &s, where, field);
    if (rc)
        return rc;
    memset(dst, 0, size);
    if (s)
        memcpy(dst, s, strlen(s));
    free(s);
    return 0;
}

static int rd_header(parse_ctx *c, mf_backup *h)
{
    pb_reader *r = &c->r;
    int rc = 0;
    if ((rc = rd_fixed(c, h->id, sizeof(h->id), "header", "backup id")) ||
        (rc = rd_fixed(c, h->parent, sizeof(h->parent), "header", "parent id")))
        return rc;
    uint32_t type = pb_rd_u32(r);
    h->type = (char)type;
    h->start_lsn = pb_rd_u64(r);
    h->stop_lsn = pb_rd_u64(r);
    h->timeline = pb_rd_u32(r);
    h->system_id = pb_rd_u64(r);
    h->pg_version = pb_rd_u32(r);
    h->wal_segment_size = pb_rd_u32(r);
    uint32_t sums = pb_rd_u32(r);
    h->data_checksums = (sums & 1u) != 0;
    c->ext = (sums & MF_FLAG_EXT) != 0;
    h->start_time = (int64_t)pb_rd_u64(r);
    h->stop_time = (int64_t)pb_rd_u64(r);
    if ((rc = rd_fixed(c, h->start_wal, sizeof(h->start_wal), "header", "start WAL")) ||
        (rc = rd_fixed(c, h->stop_wal, sizeof(h->stop_wal), "header", "stop WAL")))
        return rc;
    uint64_t *stats[] = {&h->files,      &h->pages_scanned, &h->pages_changed,
                         &h->pages_in_window, &h->bytes_read, &h->bytes_stored,
                         &h->checksum_errors, &h->collisions};
    for (size_t i = 0; i < sizeof(stats) / sizeof(stats[0]); i++)
        *stats[i] = pb_rd_u64(r);
    uint64_t secs = pb_rd_u64(r);
    memcpy(&h->seconds, &secs, sizeof(secs));
    if (r->bad)
        return pb_fail(c->err, PB_ECORRUPT, "%s: truncated header", c->what);
    if ((type != 'F' && type != 'I' && type != 'S') || sums > (1u | MF_FLAG_EXT))
        return pb_fail(c->err, PB_ECORRUPT, "%s: bad backup type %u", c->what, type);
    return 0;
}

static int rd_runs(parse_ctx *c, mf_file *f)
{
    pb_reader *r = &c->r;
    if (f->nruns > r->left / MF_RUN_BYTES)
        return pb_fail(c->err, PB_ECORRUPT, "%s: file %s: %u runs exceed the object",
                       c->what, f->path, f->nruns);
    if (f->nruns && !(f->runs = malloc((size_t)f->nruns * sizeof(*f->runs))))
        return pb_fail(c->err, PB_ENOMEM, "%s: file %s", c->what, f->path);
    for (uint32_t i = 0; i < f->nruns; i++) {
        mf_run *run = &f->runs[i];
        run->first = pb_rd_u32(r);
        run->count = pb_rd_u32(r);
        run->pack_no = pb_rd_u32(r);
        run->clen = pb_rd_u32(r);
        run->offset = pb_rd_u64(r);
        run->rlen = pb_rd_u32(r);
        run->frame_page = 0; /* version 1 cannot express a shared frame */
    }
    uint64_t nh = pb_rd_u64(r);
    uint64_t want = f->kind == MF_REL ? mf_shipped_pages(f) : 0;
    if (r->bad || nh != want)
        return pb_fail(c->err, PB_ECORRUPT,
                       "%s: file %s: %llu page hashes for %llu shipped pages", c->what,
                       f->path, (unsigned long long)nh, (unsigned long long)want);
    if (nh > r->left / 8)
        return pb_fail(c->err, PB_ECORRUPT, "%s: file %s: %llu hashes exceed the object",
                       c->what, f->path, (unsigned long long)nh);
    if (nh && !(f->page_hashes = malloc(nh * 8)))
        return pb_fail(c->err, PB_ENOMEM, "%s: file %s", c->what, f->path);
    const uint8_t *p = pb_rd_bytes(r, nh * 8);
    for (uint64_t i = 0; i < nh; i++)
        f->page_hashes[i] = pb_get_u64(p + i * 8);
    return 0;
}

static int rd_file(parse_ctx *c, mf_file *f, size_t index)
{
    pb_reader *r = &c->r;
    char where[32];
    snprintf(where, sizeof(where), "file #%zu", index);
    int rc = rd_string(c, MF_PATH_MAX, false, &f->path, where, "path");
    if (rc)
        return rc;
    uint32_t kind = pb_rd_u32(r);
    f->kind = kind <= MF_LINK ? (mf_kind)kind : MF_DIR;
    f->mode = pb_rd_u32(r);
    f->size = pb_rd_u64(r);
    f->mtime = (int64_t)pb_rd_u64(r);
    if ((rc = rd_string(c, MF_PATH_MAX, true, &f->link_target, f->path, "link target")))
        return rc;
    f->hash = pb_rd_u64(r);
    if ((rc = rd_fixed(c, f->stored_in, sizeof(f->stored_in), f->path, "stored_in")))
        return rc;
    f->npages = pb_rd_u32(r);
    f->nruns = pb_rd_u32(r);
    if (r->bad)
        return pb_fail(c->err, PB_ECORRUPT, "%s: file %s: truncated", c->what, f->path);
    if (kind > MF_LINK)
        return pb_fail(c->err, PB_ECORRUPT, "%s: file %s: unknown kind %u", c->what,
                       f->path, kind);
    if ((rc = rd_runs(c, f)))
        return rc;
    return mf_check_file(f, PB_ECORRUPT, c->what, c->err);
}

static int check_envelope(const uint8_t *p, size_t len, const char *what, pb_error *err)
{
    if (len < 8 + 4 + 8 || memcmp(p, MF_MAGIC, 8) != 0)
        return pb_fail(err, PB_ECORRUPT, "manifest %s: not a pageback manifest (%zu bytes)", what,
                       len);
    uint64_t want = pb_get_u64(p + len - 8);
    if (pb_hash64(p, len - 8) != want)
        return pb_fail(err, PB_ECORRUPT, "manifest %s: checksum mismatch (%zu bytes)", what, len);
    uint32_t version = pb_get_u32(p + 8);
    if (version != MF_VERSION)
        return pb_fail(err, PB_EUNSUPPORTED, "manifest %s: format version %u, this build reads %u",
                       what, version, MF_VERSION);
    return 0;
}

/* The extension block (put_ext); a manifest written before it existed has none. */
static int rd_ext(parse_ctx *c, mf_backup *h)
{
    pb_reader *r = &c->r;
    if (!c->ext)
        return 0;
    if (pb_rd_u32(r) != MF_EXT_MAGIC)
        return pb_fail(c->err, PB_ECORRUPT, "%s: bad extension block after the files", c->what);
    uint32_t n = pb_rd_u32(r);
    if (r->bad || n > MF_EXT_MAX || n > r->left / 12)
        return pb_fail(c->err, PB_ECORRUPT, "%s: extension block of %u fields exceeds the "
                       "object", c->what, n);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t tag = pb_rd_u32(r);
        uint64_t v = pb_rd_u64(r);
        switch (tag) {
        case MF_EXT_READ_MODE: h->read_mode = (char)(v & 0xff); break;
        case MF_EXT_VERIFY_SCAN: h->verify_scan = v != 0; break;
        case MF_EXT_MTIME_HORIZON: h->mtime_horizon = (int64_t)v; break;
        case MF_EXT_FILES_SKIPPED: h->files_skipped = v; break;
        case MF_EXT_BYTES_SKIPPED: h->bytes_skipped = v; break;
        case MF_EXT_PAGES_MISSED: h->pages_missed = v; break;
        default: break; /* a later field: additive */
        }
    }
    if (r->bad)
        return pb_fail(c->err, PB_ECORRUPT, "%s: truncated extension block", c->what);
    return 0;
}

static int rd_files(parse_ctx *c, mf_manifest *m)
{
    uint64_t n = pb_rd_u64(&c->r);
    if (c->r.bad || n > c->r.left / MF_FILE_MIN_BYTES)
        return pb_fail(c->err, PB_ECORRUPT, "%s: file count %llu exceeds the object",
                       c->what, (unsigned long long)n);
    if (n && !(m->files = calloc(n, sizeof(*m->files))))
        return pb_fail(c->err, PB_ENOMEM, "%s: %llu files", c->what,
                       (unsigned long long)n);
    m->cap = n;
    for (size_t i = 0; i < n; i++) {
        m->count = i + 1; /* so mf_free releases a partly read file */
        int rc = rd_file(c, &m->files[i], i);
        if (rc)
            return rc;
        if (i && strcmp(m->files[i - 1].path, m->files[i].path) >= 0)
            m->sorted = false;
    }
    int rc = rd_ext(c, &m->hdr);
    if (rc)
        return rc;
    if (c->r.left)
        return pb_fail(c->err, PB_ECORRUPT, "%s: %zu stray bytes after the files",
                       c->what, c->r.left);
    mf_sort(m);
    for (size_t i = 1; !m->sorted && i < m->count; i++)
        if (strcmp(m->files[i - 1].path, m->files[i].path) == 0)
            return pb_fail(c->err, PB_ECORRUPT, "%s: file %s listed twice", c->what,
                           m->files[i].path);
    return 0;
}

int mf_parse_v1(const void *data, size_t len, const char *what, mf_manifest **out,
                pb_error *err)
{
    *out = NULL;
    what = what ? what : "(unnamed)";
    int rc = check_envelope(data, len, what, err);
    if (rc)
        return rc;
    char label[320];
    snprintf(label, sizeof(label), "manifest %.300s", what);
    parse_ctx c = {{(const uint8_t *)data + 12, len - 12 - 8, 0}, label, err, false};
    mf_manifest *m = NULL;
    if ((rc = mf_new(&m, NULL, err)) || (rc = rd_header(&c, &m->hdr)) || (rc = rd_files(&c, m))) {
        mf_free(m);
        return rc;
    }
    *out = m;
    return 0;
}
