/*
 * manifest/stream.c — reading a manifest as a stream of file records in path order
 * (docs/MANIFEST.md, "Streaming"). A version 2 object is read through the caller's
 * range reads: the prefix, the header, the index, then one chunk at a time, so what the
 * stream holds is the index plus one chunk plus the file it last returned, whatever the
 * number of files. Version 1 objects (and manifests built in memory) stream from a
 * parsed manifest. Every chunk is checked against its index entry (length, checksum,
 * file count, first and last path) before a record of it is returned.
 */
#include "manifest/v2_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MF_INDEX_ENTRY_MIN 15u  /* len, raw_len, nfiles, hash, two 1-byte paths */
#define MF_RECORD_MIN 9u

struct mf_stream {
    mf_source src;
    char what[320];
    mf_backup hdr;
    mf_chunk_ref *chunks;
    size_t nchunks, next;     /* next chunk to load */
    uint64_t nfiles, returned, index_bytes;
    uint8_t *buf;             /* the loaded chunk (decompressed) */
    size_t buf_cap;
    uint8_t *packed;          /* a compressed chunk as stored */
    size_t packed_cap;
    pb_reader r;
    uint32_t chunk_left;      /* records of the loaded chunk not yet returned */
    char *prev;               /* last path returned */
    uint64_t zero_hash;
    uint64_t peak;
    mf_manifest *mem;         /* in-memory mode (version 1, or mf_stream_from_manifest) */
    size_t mem_at;
};

static int rd_prefix(const mf_source *src, const char *what, uint8_t p[MF_V2_PREFIX],
                     uint32_t *hlen, uint32_t *xlen, pb_error *err)
{
    int rc = src->read(src->ctx, 0, MF_V2_PREFIX, p, err);
    if (rc)
        return rc;
    if (memcmp(p, MF_MAGIC, 8) != 0)
        return pb_fail(err, PB_ECORRUPT, "manifest %s: not a pageback manifest", what);
    if (pb_get_u32(p + 8) != MF_VERSION_2)
        return pb_fail(err, PB_EUNSUPPORTED, "manifest %s: format version %u cannot be "
                       "streamed (version 2 can)", what, pb_get_u32(p + 8));
    *hlen = pb_get_u32(p + 12);
    *xlen = pb_get_u32(p + 16);
    if (*hlen > MF_V2_HEADER_MAX || *xlen > MF_V2_INDEX_MAX)
        return pb_fail(err, PB_ECORRUPT, "manifest %s: header of %u or index of %u bytes "
                       "is beyond any writer's", what, *hlen, *xlen);
    return 0;
}

/* The header without the index: two small reads, for history and "latest". */
int mf_read_header(const mf_source *src, const char *what, mf_backup *out, pb_error *err)
{
    uint8_t pre[MF_V2_PREFIX];
    uint32_t hlen, xlen;
    int rc = rd_prefix(src, what, pre, &hlen, &xlen, err);
    uint8_t *p = rc ? NULL : malloc((size_t)MF_V2_PREFIX + hlen + 8);
    if (rc == 0 && !p)
        rc = pb_fail(err, PB_ENOMEM, "manifest %s: header of %u bytes", what, hlen);
    if (rc == 0)
        rc = src->read(src->ctx, MF_V2_PREFIX, (size_t)hlen + 8, p + MF_V2_PREFIX, err);
    if (rc == 0) {
        memcpy(p, pre, MF_V2_PREFIX);
        if (pb_hash64(p, MF_V2_PREFIX + hlen) != pb_get_u64(p + MF_V2_PREFIX + hlen))
            rc = pb_fail(err, PB_ECORRUPT, "manifest %s: header checksum mismatch", what);
    }
    if (rc == 0)
        rc = mf_v2_rd_header(p + MF_V2_PREFIX, hlen, what, out, err);
    free(p);
    return rc;
}

static int rd_index_str(pb_reader *r, char **out)
{
    uint64_t n = mf_rd_varint(r);
    const uint8_t *p = r->bad || n == 0 || n >= MF_PATH_MAX ? NULL : pb_rd_bytes(r, n);
    if (!p || memchr(p, '\0', n))
        return PB_ECORRUPT;
    if (!(*out = malloc(n + 1)))
        return PB_ENOMEM;
    memcpy(*out, p, n);
    (*out)[n] = '\0';
    return 0;
}

static int rd_entry(pb_reader *r, mf_chunk_ref *c, uint64_t at)
{
    uint64_t len = mf_rd_varint(r), raw = mf_rd_varint(r), nf = mf_rd_varint(r);
    c->offset = at;
    c->hash = pb_rd_u64(r);
    uint64_t records = raw ? raw : len;
    if (r->bad || len == 0 || len > MF_V2_CHUNK_MAX || raw > MF_V2_CHUNK_MAX || nf == 0 ||
        nf > records / MF_RECORD_MIN)
        return PB_ECORRUPT;
    c->len = (uint32_t)len;
    c->raw_len = (uint32_t)raw;
    c->nfiles = (uint32_t)nf;
    int rc = rd_index_str(r, &c->first);
    if (rc == 0)
        rc = rd_index_str(r, &c->last);
    if (rc == 0 && strcmp(c->first, c->last) > 0)
        rc = PB_ECORRUPT;
    return rc;
}

int mf_v2_rd_index(const uint8_t *p, size_t len, uint64_t data_start, const char *what,
                   mf_chunk_ref **out, size_t *n, uint64_t *nfiles, pb_error *err)
{
    pb_reader r = {p, len, 0};
    *out = NULL;
    *n = 0;
    *nfiles = mf_rd_varint(&r);
    uint64_t count = mf_rd_varint(&r), sum = 0, at = data_start;
    if (r.bad || count > r.left / MF_INDEX_ENTRY_MIN)
        return pb_fail(err, PB_ECORRUPT, "manifest %s: chunk count exceeds the index", what);
    mf_chunk_ref *c = count ? calloc(count, sizeof(*c)) : NULL;
    if (count && !c)
        return pb_fail(err, PB_ENOMEM, "manifest %s: index of %llu chunks", what,
                       (unsigned long long)count);
    int rc = 0;
    for (uint64_t i = 0; rc == 0 && i < count; i++) {
        rc = rd_entry(&r, &c[i], at);
        if (rc == 0 && i && strcmp(c[i - 1].last, c[i].first) >= 0)
            rc = PB_ECORRUPT;
        at += c[i].len;
        sum += c[i].nfiles;
    }
    if (rc == 0 && (r.left || sum != *nfiles))
        rc = PB_ECORRUPT;
    if (rc) {
        mf_chunk_refs_free(c, count);
        return pb_fail(err, rc, "manifest %s: %s index", what,
                       rc == PB_ENOMEM ? "out of memory reading the" : "malformed");
    }
    *out = c;
    *n = count;
    return 0;
}

static int rd_head(mf_stream *s, pb_error *err)
{
    uint8_t pre[MF_V2_PREFIX];
    uint32_t hlen, xlen;
    int rc = rd_prefix(&s->src, s->what, pre, &hlen, &xlen, err);
    if (rc)
        return rc;
    size_t total = (size_t)MF_V2_PREFIX + hlen + 8 + xlen + 8;
    uint8_t *p = malloc(total);
    if (!p)
        return pb_fail(err, PB_ENOMEM, "manifest %s: header and index", s->what);
    memcpy(p, pre, MF_V2_PREFIX);
    rc = s->src.read(s->src.ctx, MF_V2_PREFIX, total - MF_V2_PREFIX, p + MF_V2_PREFIX, err);
    const uint8_t *x = p + MF_V2_PREFIX + hlen + 8;
    if (rc == 0 && (pb_hash64(p, MF_V2_PREFIX + hlen) != pb_get_u64(x - 8) ||
                    pb_hash64(x, xlen) != pb_get_u64(x + xlen)))
        rc = pb_fail(err, PB_ECORRUPT, "manifest %s: header or index checksum mismatch",
                     s->what);
    if (rc == 0)
        rc = mf_v2_rd_header(p + MF_V2_PREFIX, hlen, s->what, &s->hdr, err);
    if (rc == 0)
        rc = mf_v2_rd_index(x, xlen, total, s->what, &s->chunks, &s->nchunks, &s->nfiles, err);
    uint64_t end = s->nchunks ? s->chunks[s->nchunks - 1].offset + s->chunks[s->nchunks - 1].len
                              : total;
    if (rc == 0 && s->src.size != UINT64_MAX && s->src.size != end)
        rc = pb_fail(err, PB_ECORRUPT, "manifest %s: %llu bytes, its index says %llu",
                     s->what, (unsigned long long)s->src.size, (unsigned long long)end);
    s->index_bytes = total + s->nchunks * sizeof(*s->chunks);
    free(p);
    return rc;
}

static uint64_t file_bytes(const mf_file *f);

static void name_stream(mf_stream *s, const char *what)
{
    snprintf(s->what, sizeof(s->what), "%.300s", what ? what : "(unnamed)");
}

int mf_stream_open(mf_stream **out, const mf_source *src, const char *what, pb_error *err)
{
    *out = NULL;
    mf_stream *s = calloc(1, sizeof(*s));
    if (!s)
        return pb_fail(err, PB_ENOMEM, "opening manifest %s", what ? what : "");
    s->src = *src;
    s->zero_hash = mf_zero_page_hash();
    name_stream(s, what);
    int rc = rd_head(s, err);
    if (rc) {
        s->src.close = NULL; /* the caller's still */
        mf_stream_close(s);
        return rc;
    }
    s->peak = s->index_bytes;
    *out = s;
    return 0;
}

int mf_stream_from_manifest(mf_stream **out, mf_manifest *m, pb_error *err)
{
    *out = NULL;
    mf_stream *s = calloc(1, sizeof(*s));
    if (!s) {
        mf_free(m);
        return pb_fail(err, PB_ENOMEM, "streaming a manifest");
    }
    mf_sort(m);
    s->mem = m;
    s->hdr = m->hdr;
    s->nfiles = m->count;
    for (size_t i = 0; i < m->count; i++) /* it holds the whole manifest */
        s->peak += file_bytes(&m->files[i]);
    name_stream(s, m->hdr.id);
    *out = s;
    return 0;
}

void mf_stream_close(mf_stream *s)
{
    if (!s)
        return;
    mf_chunk_refs_free(s->chunks, s->nchunks);
    free(s->buf);
    free(s->packed);
    free(s->prev);
    mf_free(s->mem);
    if (s->src.close)
        s->src.close(s->src.ctx);
    free(s);
}

const mf_backup *mf_stream_header(const mf_stream *s)
{
    return &s->hdr;
}

uint64_t mf_stream_peak(const mf_stream *s)
{
    return s->peak;
}

/* A buffer of at least len bytes (kept between chunks: it only grows to the largest). */
static int ensure(uint8_t **buf, size_t *cap, size_t len)
{
    if (len <= *cap)
        return 0;
    free(*buf);
    *cap = 0;
    if (!(*buf = malloc(len)))
        return PB_ENOMEM;
    *cap = len;
    return 0;
}

static int load_chunk(mf_stream *s, pb_error *err)
{
    const mf_chunk_ref *c = &s->chunks[s->next];
    if (c->raw_len && !(s->src.codec && s->src.codec->decompress))
        return pb_fail(err, PB_EUNSUPPORTED, "manifest %s: chunk %zu is compressed and no "
                       "codec was given", s->what, s->next);
    if (c->raw_len && c->raw_len / c->len >= s->src.codec->max_ratio)
        return pb_fail(err, PB_ECORRUPT, "manifest %s: chunk %zu of %u bytes claims %u "
                       "bytes decompressed, more than its codec can yield", s->what, s->next,
                       c->len, c->raw_len);
    uint8_t **into = c->raw_len ? &s->packed : &s->buf;
    size_t *cap = c->raw_len ? &s->packed_cap : &s->buf_cap;
    if (ensure(into, cap, c->len) || (c->raw_len && ensure(&s->buf, &s->buf_cap, c->raw_len)))
        return pb_fail(err, PB_ENOMEM, "manifest %s: chunk %zu of %u bytes", s->what,
                       s->next, c->raw_len ? c->raw_len : c->len);
    int rc = s->src.read(s->src.ctx, c->offset, c->len, *into, err);
    if (rc)
        return rc;
    if (pb_hash64(*into, c->len) != c->hash)
        return pb_fail(err, PB_ECORRUPT, "manifest %s: chunk %zu (files from %.300s) "
                       "checksum mismatch", s->what, s->next, c->first);
    if (c->raw_len && (rc = s->src.codec->decompress(s->packed, c->len, s->buf, c->raw_len,
                                                     err))) {
        pb_error_wrap(err, "manifest %s: chunk %zu", s->what, s->next);
        return rc;
    }
    s->r = (pb_reader){s->buf, c->raw_len ? c->raw_len : c->len, 0};
    s->chunk_left = c->nfiles;
    s->next++;
    return 0;
}

static uint64_t file_bytes(const mf_file *f)
{
    return strlen(f->path) + 1 + (uint64_t)f->nruns * sizeof(mf_run) +
           (f->kind == MF_REL ? mf_shipped_pages(f) * 8 : 0) + sizeof(*f);
}

/* The next record of the loaded chunks, checked against the chunk's index entry. */
static int next_v2(mf_stream *s, mf_file *out, pb_error *err)
{
    if (s->chunk_left == 0 && s->r.left)
        return pb_fail(err, PB_ECORRUPT, "manifest %s: chunk %zu has %zu stray bytes",
                       s->what, s->next - 1, s->r.left);
    if (s->chunk_left == 0 && s->next == s->nchunks)
        return 0;
    int rc = 0;
    bool first = s->chunk_left == 0;
    if (first && (rc = load_chunk(s, err)))
        return rc;
    const mf_chunk_ref *c = &s->chunks[s->next - 1];
    rc = mf_v2_rd_file(&s->r, first ? "" : s->prev, s->zero_hash, s->what, out, err);
    if (rc)
        return rc;
    s->chunk_left--;
    if ((first && strcmp(c->first, out->path) != 0) ||
        (s->chunk_left == 0 && strcmp(c->last, out->path) != 0) ||
        (s->prev && strcmp(s->prev, out->path) >= 0)) {
        rc = pb_fail(err, PB_ECORRUPT, "manifest %s: file %.300s out of order or not where "
                     "the index puts it", s->what, out->path);
        mf_file_clear(out);
        return rc;
    }
    free(s->prev);
    if (!(s->prev = strdup(out->path))) {
        mf_file_clear(out);
        return pb_fail(err, PB_ENOMEM, "manifest %s", s->what);
    }
    return 1;
}

/* An in-memory file handed out as a copy, so the caller owns what it gets either way. */
static int next_mem(mf_stream *s, mf_file *out, pb_error *err)
{
    if (s->mem_at == s->mem->count)
        return 0;
    const mf_file *f = &s->mem->files[s->mem_at];
    *out = *f;
    out->path = strdup(f->path);
    out->link_target = f->link_target ? strdup(f->link_target) : NULL;
    out->runs = f->nruns ? malloc((size_t)f->nruns * sizeof(mf_run)) : NULL;
    uint64_t nh = f->kind == MF_REL ? mf_shipped_pages(f) : 0;
    out->page_hashes = nh ? malloc(nh * 8) : NULL;
    if (!out->path || (f->link_target && !out->link_target) || (f->nruns && !out->runs) ||
        (nh && !out->page_hashes)) {
        mf_file_clear(out);
        return pb_fail(err, PB_ENOMEM, "manifest %s: file %s", s->what, f->path);
    }
    if (f->nruns)
        memcpy(out->runs, f->runs, (size_t)f->nruns * sizeof(mf_run));
    if (nh)
        memcpy(out->page_hashes, f->page_hashes, nh * 8);
    s->mem_at++;
    return 1;
}

int mf_stream_next(mf_stream *s, mf_file *out, pb_error *err)
{
    memset(out, 0, sizeof(*out));
    int rc = s->mem ? next_mem(s, out, err) : next_v2(s, out, err);
    if (rc == 1) {
        s->returned++;
        uint64_t held = s->index_bytes + s->buf_cap + s->packed_cap + file_bytes(out);
        if (!s->mem && held > s->peak)
            s->peak = held;
    } else if (rc == 0 && s->returned != s->nfiles) {
        rc = pb_fail(err, PB_ECORRUPT, "manifest %s: %llu files, its index says %llu",
                     s->what, (unsigned long long)s->returned, (unsigned long long)s->nfiles);
    }
    return rc;
}
