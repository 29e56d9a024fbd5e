/*
 * manifest/v2_write.c — writing format version 2 (docs/MANIFEST.md) chunk by chunk:
 * files arrive in path order, each chunk is handed to the caller's sink once it holds
 * MF_V2_CHUNK_TARGET bytes (or before a record would take it past that: a record larger
 * than the target is a chunk of its own), and only the index (one entry per chunk) stays
 * in memory. The open chunk and its compressed copy are what a writer holds.
 * The header and index come first in the object, so the caller writes the bytes
 * mf_writer_finish returns before the chunks it was given (a spool in between).
 */
#include "manifest/v2_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mf_writer {
    mf_backup hdr;
    const mf_codec *codec;
    pb_buf packed;       /* the open chunk compressed */
    mf_chunk_sink sink;
    void *ctx;
    pb_buf chunk;        /* records of the open chunk */
    uint32_t chunk_files;
    char *chunk_first;   /* first path of the open chunk */
    char *prev;          /* last path added (front coding and order) */
    mf_chunk_ref *chunks;
    size_t nchunks, cap;
    uint64_t nfiles;
    uint64_t zero_hash;
    uint64_t peak;       /* high-water mark of the bytes held (mf_writer_peak) */
    bool failed;
    size_t chunk_target; /* a chunk closes once it holds this much (MF_V2_CHUNK_TARGET) */
};

void mf_chunk_refs_free(mf_chunk_ref *c, size_t n)
{
    for (size_t i = 0; c && i < n; i++) {
        free(c[i].first);
        free(c[i].last);
    }
    free(c);
}

int mf_writer_new(mf_writer **out, const mf_backup *hdr, const mf_codec *codec,
                  mf_chunk_sink sink, void *ctx, pb_error *err)
{
    *out = NULL;
    const char *id = strnlen(hdr->id, MF_ID_LEN) < MF_ID_LEN ? hdr->id : "(unterminated id)";
    if (hdr->type != 'F' && hdr->type != 'I' && hdr->type != 'S')
        return pb_fail(err, PB_EINVAL, "writing manifest %.32s: backup type %d is not F, I "
                       "or S", id, hdr->type);
    mf_writer *w = calloc(1, sizeof(*w));
    if (!w)
        return pb_fail(err, PB_ENOMEM, "writing manifest %.32s", id);
    w->hdr = *hdr;
    w->codec = codec;
    w->sink = sink;
    w->ctx = ctx;
    w->zero_hash = mf_zero_page_hash();
    w->chunk_target = MF_V2_CHUNK_TARGET;
    *out = w;
    return 0;
}

mf_backup *mf_writer_header(mf_writer *w)
{
    return &w->hdr;
}

void mf_writer_set_chunk_target(mf_writer *w, size_t bytes)
{
    w->chunk_target = bytes == 0 || bytes > MF_V2_CHUNK_TARGET ? MF_V2_CHUNK_TARGET : bytes;
}

void mf_writer_free(mf_writer *w)
{
    if (!w)
        return;
    pb_buf_free(&w->chunk);
    pb_buf_free(&w->packed);
    free(w->chunk_first);
    free(w->prev);
    mf_chunk_refs_free(w->chunks, w->nchunks);
    free(w);
}

/* Room for need bytes in b, grown by doubling up to max(need, cap_to) and never past it:
 * a chunk closes before a record would take it past its target, so its buffer is the
 * target or one record, not the double of either (memory bounds). */
static int reserve_upto(pb_buf *b, size_t need, size_t cap_to)
{
    if (need <= b->cap)
        return 0;
    size_t n = b->cap ? b->cap : 4096;
    while (n < need)
        n *= 2;
    if (n > cap_to)
        n = need > cap_to ? need : cap_to;
    uint8_t *p = realloc(b->data, n);
    if (!p)
        return PB_ENOMEM;
    b->data = p;
    b->cap = n;
    return 0;
}

/* The compressed copy's room: a codec that expands incompressible records by at most
 * 1/64 and 4 KiB (zstd: 1/256) never grows it; another grows it itself. */
#define PACKED_ROOM(len) ((len) + (len) / 64 + 4096)

static void note_peak(mf_writer *w)
{
    uint64_t held = w->chunk.cap + w->packed.cap + w->cap * sizeof(*w->chunks);
    if (held > w->peak)
        w->peak = held;
}

static int flush_chunk(mf_writer *w, pb_error *err)
{
    if (w->chunk_files == 0)
        return 0;
    if (PB_GROW(w->chunks, &w->cap, w->nchunks + 1))
        return pb_fail(err, PB_ENOMEM, "writing manifest %s: chunk %zu", w->hdr.id,
                       w->nchunks);
    /* compressed only when that is smaller: a chunk never costs more than its records */
    w->packed.len = 0;
    size_t room = PACKED_ROOM(w->chunk.len);
    if (w->codec && reserve_upto(&w->packed, room, room))
        return pb_fail(err, PB_ENOMEM, "writing manifest %s: chunk %zu", w->hdr.id,
                       w->nchunks);
    int rc = w->codec ? w->codec->compress(w->chunk.data, w->chunk.len, &w->packed, err) : 0;
    note_peak(w);
    if (rc)
        return rc;
    bool packed = w->codec && w->packed.len < w->chunk.len;
    const pb_buf *stored = packed ? &w->packed : &w->chunk;
    mf_chunk_ref *c = &w->chunks[w->nchunks];
    uint64_t at = w->nchunks ? w->chunks[w->nchunks - 1].offset +
                                   w->chunks[w->nchunks - 1].len : 0;
    *c = (mf_chunk_ref){at, (uint32_t)stored->len, packed ? (uint32_t)w->chunk.len : 0,
                        w->chunk_files, pb_hash64(stored->data, stored->len), w->chunk_first,
                        strdup(w->prev)};
    w->chunk_first = NULL;
    w->nchunks++;
    if (!c->last)
        return pb_fail(err, PB_ENOMEM, "writing manifest %s", w->hdr.id);
    rc = w->sink(w->ctx, stored->data, stored->len, err);
    w->chunk.len = 0;
    w->chunk_files = 0;
    return rc;
}

int mf_writer_add(mf_writer *w, const mf_file *f, pb_error *err)
{
    int rc = w->failed ? pb_fail(err, PB_ESTATE, "writing manifest %s: an earlier add "
                                 "failed", w->hdr.id) : 0;
    if (rc == 0)
        rc = mf_check_file(f, PB_EINVAL, "writing manifest", err);
    if (rc == 0 && w->prev && strcmp(w->prev, f->path) >= 0)
        rc = pb_fail(err, PB_EINVAL, "writing manifest %s: file %s after %s (path order, "
                     "no duplicates)", w->hdr.id, f->path, w->prev);
    /* the record goes into a chunk it fits, and the chunk's buffer is sized before it */
    size_t bound = rc ? 0 : mf_v2_file_bound(f, w->zero_hash);
    if (rc == 0 && w->chunk_files && w->chunk.len + bound > w->chunk_target)
        rc = flush_chunk(w, err);
    if (rc == 0 && reserve_upto(&w->chunk, w->chunk.len + bound, w->chunk_target))
        rc = pb_fail(err, PB_ENOMEM, "writing manifest %s: file %s", w->hdr.id, f->path);
    char *copy = rc ? NULL : strdup(f->path);
    if (rc == 0 && !copy)
        rc = pb_fail(err, PB_ENOMEM, "writing manifest %s: file %s", w->hdr.id, f->path);
    if (rc == 0 && mf_v2_put_file(&w->chunk, f, w->chunk_files ? w->prev : NULL, w->zero_hash))
        rc = pb_fail(err, PB_ENOMEM, "writing manifest %s: file %s", w->hdr.id, f->path);
    if (rc) {
        free(copy);
        w->failed = true;
        return rc;
    }
    if (w->chunk_files++ == 0)
        w->chunk_first = strdup(f->path);
    free(w->prev);
    w->prev = copy;
    w->nfiles++;
    if (!w->chunk_first)
        rc = pb_fail(err, PB_ENOMEM, "writing manifest %s", w->hdr.id);
    note_peak(w); /* the open chunk's buffers and the index entries so far */
    if (rc == 0 && w->chunk.len >= w->chunk_target)
        rc = flush_chunk(w, err);
    w->failed = rc != 0;
    return rc;
}

uint64_t mf_writer_peak(const mf_writer *w)
{
    return w ? w->peak : 0;
}

static int put_str(pb_buf *b, const char *s)
{
    size_t n = strlen(s);
    return mf_put_varint(b, n) | pb_buf_append(b, s, n);
}

int mf_v2_put_index(pb_buf *b, const mf_chunk_ref *chunks, size_t n, uint64_t nfiles)
{
    int rc = mf_put_varint(b, nfiles) | mf_put_varint(b, n);
    for (size_t i = 0; i < n; i++) {
        rc |= mf_put_varint(b, chunks[i].len) | mf_put_varint(b, chunks[i].raw_len);
        rc |= mf_put_varint(b, chunks[i].nfiles);
        rc |= pb_buf_u64(b, chunks[i].hash);
        rc |= put_str(b, chunks[i].first) | put_str(b, chunks[i].last);
    }
    return rc ? PB_ENOMEM : 0;
}

int mf_v2_put_head(pb_buf *head, const mf_backup *h, const mf_chunk_ref *chunks, size_t n,
                   uint64_t nfiles, pb_error *err)
{
    pb_buf hdr = {0}, index = {0};
    size_t start = head->len;
    int rc = 0;
    if (mf_v2_put_header(&hdr, h)) {
        rc = pb_fail(err, PB_EINVAL, "writing manifest %.32s: header strings too long or "
                     "out of memory", h->id);
    } else if (mf_v2_put_index(&index, chunks, n, nfiles) ||
               pb_buf_append(head, MF_MAGIC, 8) || pb_buf_u32(head, MF_VERSION_2) ||
               pb_buf_u32(head, (uint32_t)hdr.len) || pb_buf_u32(head, (uint32_t)index.len) ||
               pb_buf_append(head, hdr.data, hdr.len) ||
               pb_buf_u64(head, pb_hash64(head->data + start, head->len - start)) ||
               pb_buf_append(head, index.data, index.len) ||
               pb_buf_u64(head, pb_hash64(index.data, index.len))) {
        rc = pb_fail(err, PB_ENOMEM, "writing manifest %s: header and index", h->id);
    } else if (hdr.len > MF_V2_HEADER_MAX || index.len > MF_V2_INDEX_MAX) {
        rc = pb_fail(err, PB_EINVAL, "writing manifest %s: index of %zu chunks too large",
                     h->id, n);
    }
    if (rc)
        head->len = start;
    pb_buf_free(&hdr);
    pb_buf_free(&index);
    return rc;
}

int mf_writer_finish(mf_writer *w, pb_buf *head, pb_error *err)
{
    int rc = w->failed ? pb_fail(err, PB_ESTATE, "writing manifest %s: an earlier add "
                                 "failed", w->hdr.id) : flush_chunk(w, err);
    if (rc == 0)
        rc = mf_v2_put_head(head, &w->hdr, w->chunks, w->nchunks, w->nfiles, err);
    w->failed = true; /* finished: no more adds */
    return rc;
}

static int sink_buf(void *ctx, const void *data, size_t len, pb_error *err)
{
    if (pb_buf_append(ctx, data, len))
        return pb_fail(err, PB_ENOMEM, "serializing a manifest chunk of %zu bytes", len);
    return 0;
}

int mf_serialize(const mf_manifest *m, pb_buf *out, pb_error *err)
{
    return mf_serialize_codec(m, NULL, out, err);
}

int mf_serialize_codec(const mf_manifest *m, const mf_codec *codec, pb_buf *out,
                       pb_error *err)
{
    const mf_file **files = NULL, **owned = NULL;
    mf_writer *w = NULL;
    pb_buf body = {0};
    size_t start = out->len;
    int rc = mf_sorted_view(m, &files, &owned, "serializing manifest", err);
    if (rc == 0)
        rc = mf_writer_new(&w, &m->hdr, codec, sink_buf, &body, err);
    for (size_t i = 0; rc == 0 && i < m->count; i++)
        rc = mf_writer_add(w, files[i], err);
    if (rc == 0)
        rc = mf_writer_finish(w, out, err);
    if (rc == 0 && pb_buf_append(out, body.data, body.len))
        rc = pb_fail(err, PB_ENOMEM, "serializing manifest %s", m->hdr.id);
    if (rc)
        out->len = start;
    mf_writer_free(w);
    pb_buf_free(&body);
    free(owned);
    return rc;
}
