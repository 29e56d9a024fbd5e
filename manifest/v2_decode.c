/*
 * manifest/v2_decode.c — decoding one version 2 file record (docs/MANIFEST.md). The
 * input is hostile: counts are bounded by the bytes left in the record, and a REL
 * file's shipped pages by its npages (at most MF_REL_MAX_PAGES), before any allocation,
 * so one record never costs more than 32 MiB of hashes plus its own size in runs.
 */
#include "manifest/v2_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MF_RUN_MIN_BYTES 7u

typedef struct rec_ctx {
    pb_reader r;    /* the record's body */
    const char *what;
    mf_file *f;
    pb_error *err;
} rec_ctx;

static int bad(rec_ctx *c, const char *field)
{
    return pb_fail(c->err, PB_ECORRUPT, "manifest %s: file %s: bad %s", c->what,
                   c->f->path ? c->f->path : "(unnamed)", field);
}

static int64_t unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

static bool rd_u32(pb_reader *r, uint32_t *out)
{
    uint64_t v = mf_rd_varint(r);
    *out = (uint32_t)v;
    return !r->bad && v <= UINT32_MAX;
}

static int rd_runs(rec_ctx *c)
{
    mf_file *f = c->f;
    pb_reader *r = &c->r;
    uint64_t n = mf_rd_varint(r);
    if (r->bad || n > r->left / MF_RUN_MIN_BYTES || (f->kind == MF_REL && n > f->npages))
        return bad(c, "run count");
    f->nruns = (uint32_t)n;
    if (n && !(f->runs = calloc(n, sizeof(*f->runs))))
        return pb_fail(c->err, PB_ENOMEM, "manifest %s: file %s: %llu runs", c->what, f->path,
                       (unsigned long long)n);
    uint64_t prev_end = 0, prev_off = 0, shipped = 0;
    uint32_t prev_pack = 0;
    for (uint32_t i = 0; i < f->nruns; i++) {
        mf_run *x = &f->runs[i];
        /* on the wire: first, count, pack, offset (deltas), clen, rlen, frame_page */
        uint64_t d_first = mf_rd_varint(r), count = mf_rd_varint(r);
        uint64_t d_pk = mf_rd_varint(r), d_off = mf_rd_varint(r);
        int64_t first = (int64_t)(prev_end + (uint64_t)unzigzag(d_first)); /* wraps, no UB */
        int64_t pack = (int64_t)((uint64_t)prev_pack + (uint64_t)unzigzag(d_pk));
        uint64_t off = prev_off + (uint64_t)unzigzag(d_off);
        if (!rd_u32(r, &x->clen) || !rd_u32(r, &x->rlen) || !rd_u32(r, &x->frame_page) ||
            first < 0 || first > UINT32_MAX || count > UINT32_MAX || pack < 0 ||
            pack > UINT32_MAX)
            return bad(c, "run");
        x->first = (uint32_t)first;
        x->count = (uint32_t)count;
        x->pack_no = (uint32_t)pack;
        x->offset = off;
        shipped += count;
        if (f->kind == MF_REL && shipped > f->npages)
            return bad(c, "runs (more pages shipped than the file has)");
        prev_end = (uint64_t)first + count;
        prev_pack = x->pack_no;
        prev_off = off + x->clen;
    }
    return 0;
}

static int rd_hashes(rec_ctx *c, uint64_t zero_hash)
{
    mf_file *f = c->f;
    pb_reader *r = &c->r;
    uint64_t want = mf_shipped_pages(f), got = 0; /* <= npages, checked by rd_runs */
    if (want && !(f->page_hashes = malloc(want * 8)))
        return pb_fail(c->err, PB_ENOMEM, "manifest %s: file %s: %llu page hashes", c->what,
                       f->path, (unsigned long long)want);
    while (got < want) {
        uint64_t t = mf_rd_varint(r), n = t >> 1;
        if (r->bad || n == 0 || n > want - got || (!(t & 1) && n > r->left / 8))
            return bad(c, "page hashes");
        for (uint64_t i = 0; i < n; i++)
            f->page_hashes[got + i] = t & 1 ? zero_hash : pb_get_u64(pb_rd_bytes(r, 8));
        got += n;
    }
    return 0;
}

static int rd_string(rec_ctx *c, size_t max, char **out, const char *field)
{
    uint64_t n = mf_rd_varint(&c->r);
    const uint8_t *p = c->r.bad || n == 0 || n >= max ? NULL : pb_rd_bytes(&c->r, n);
    if (!p || memchr(p, '\0', n))
        return bad(c, field);
    if (!(*out = malloc(n + 1)))
        return pb_fail(c->err, PB_ENOMEM, "manifest %s: file %s", c->what, c->f->path);
    memcpy(*out, p, n);
    (*out)[n] = '\0';
    return 0;
}

static int rd_stored_in(rec_ctx *c)
{
    uint64_t n = mf_rd_varint(&c->r);
    const uint8_t *p = c->r.bad || n >= MF_ID_LEN ? NULL : pb_rd_bytes(&c->r, n);
    if (!p || memchr(p, '\0', n))
        return bad(c, "stored_in");
    memcpy(c->f->stored_in, p, n);
    return 0;
}

/* Fields a newer writer appended to the record: tag, length, value; skipped. */
static int skip_extensions(rec_ctx *c)
{
    while (c->r.left) {
        uint64_t tag = mf_rd_varint(&c->r), n = mf_rd_varint(&c->r);
        if (c->r.bad || tag == 0 || n > c->r.left || !pb_rd_bytes(&c->r, n))
            return bad(c, "extension field");
    }
    return 0;
}

static int rd_body(rec_ctx *c, uint64_t zero_hash)
{
    mf_file *f = c->f;
    const uint8_t *k = pb_rd_bytes(&c->r, 1);
    uint64_t mtime;
    if (!k || *k > MF_LINK || !rd_u32(&c->r, &f->mode))
        return bad(c, "kind or mode");
    f->kind = (mf_kind)*k;
    f->size = mf_rd_varint(&c->r);
    mtime = mf_rd_varint(&c->r);
    f->mtime = unzigzag(mtime);
    f->inode = mf_rd_varint(&c->r);
    if (c->r.bad)
        return bad(c, "size, mtime or inode");
    int rc = 0;
    if (f->kind == MF_LINK) {
        rc = rd_string(c, MF_PATH_MAX, &f->link_target, "link target");
    } else if (f->kind == MF_FILE) {
        f->hash = pb_rd_u64(&c->r);
        if (!(rc = rd_stored_in(c)))
            rc = rd_runs(c);
    } else if (f->kind == MF_REL) {
        if (!rd_u32(&c->r, &f->npages) || f->npages > MF_REL_MAX_PAGES)
            return bad(c, "page count");
        if (!(rc = rd_runs(c)))
            rc = rd_hashes(c, zero_hash);
    }
    return rc ? rc : skip_extensions(c);
}

static int rd_path(pb_reader *r, const char *prev, char **out)
{
    uint64_t shared = mf_rd_varint(r), n = mf_rd_varint(r);
    size_t plen = strlen(prev);
    const uint8_t *p = r->bad || shared > plen || n == 0 || shared + n >= MF_PATH_MAX
                           ? NULL : pb_rd_bytes(r, n);
    if (!p || memchr(p, '\0', n))
        return -1;
    char *s = malloc(shared + n + 1);
    if (!s)
        return PB_ENOMEM;
    memcpy(s, prev, shared);
    memcpy(s + shared, p, n);
    s[shared + n] = '\0';
    *out = s;
    return 0;
}

int mf_v2_rd_file(pb_reader *r, const char *prev, uint64_t zero_hash, const char *what,
                  mf_file *f, pb_error *err)
{
    memset(f, 0, sizeof(*f));
    int rc = rd_path(r, prev, &f->path);
    if (rc == PB_ENOMEM)
        return pb_fail(err, rc, "manifest %s: a path after %s", what, prev);
    if (rc)
        return pb_fail(err, PB_ECORRUPT, "manifest %s: bad path after \"%.300s\"", what, prev);
    uint64_t n = mf_rd_varint(r);
    const uint8_t *body = r->bad || n > r->left ? NULL : pb_rd_bytes(r, n);
    rec_ctx c = {{body, body ? n : 0, 0}, what, f, err};
    if (!body)
        rc = bad(&c, "record length");
    if (rc == 0)
        rc = rd_body(&c, zero_hash);
    if (rc == 0)
        rc = mf_check_file(f, PB_ECORRUPT, what, err);
    if (rc)
        mf_file_clear(f);
    return rc;
}
