/*
 * engine/pack/pack.c — writing and reading pack objects (format: docs/FORMAT.md).
 *
 * A pack is a 16-byte header followed by self-describing frames. Every frame carries
 * its raw and stored lengths and two hashes (stored payload, raw bytes), so a single
 * range read of [offset, offset + clen) is enough to verify and decode it, and a
 * corrupted byte anywhere in a frame is detected before anything is written by a
 * restore. Whole objects (manifests, archived WAL) use engine/pack/envelope.c instead; the
 * two are the only users of <zstd.h> in the tree.
 */
#include "engine/pack/pack.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define PACK_MAGIC "PBPACK01"
#define PACK_VERSION 1u
#define PACK_HEADER PACK_HEADER_LEN
#define FRAME_MAGIC "PBFR"
#define FRAME_STORED 0x1u /* payload is the raw bytes: zstd did not shrink them */
#define FRAME_KNOWN_FLAGS FRAME_STORED

struct pack_writer {
    repo *r;
    char *dir;
    uint64_t target_size;
    int level;
    ZSTD_CCtx *cctx;
    uint8_t *frame; /* header + worst-case compressed payload */
    size_t frame_cap;
    repo_writer *cur; /* open pack, NULL between packs */
    uint32_t pack_no; /* number of the open (or last) pack; the first is 1 */
    uint64_t offset;  /* bytes written to the open pack */
    uint64_t stored;  /* bytes written to all packs */
    uint32_t packs;   /* packs started */
    int failed;       /* a write failed: the pack stream is unusable */
    double compress_s; /* time in zstd (bk_stages) */
    double write_s;    /* time writing and committing packs */
};

void pack_key(char *out, size_t cap, const char *dir, uint32_t pack_no)
{
    snprintf(out, cap, "%s/pack/%06" PRIu32, dir, pack_no);
}

int pack_writer_open(pack_writer **out, repo *r, const char *dir, uint64_t target_size,
                     int level, pb_error *err)
{
    *out = NULL;
    if (!dir || !dir[0])
        return pb_fail(err, PB_EINVAL, "pack writer needs a directory key");
    pack_writer *w = calloc(1, sizeof(*w));
    if (!w)
        return pb_fail(err, PB_ENOMEM, "out of memory opening pack writer for %s", dir);
    w->r = r;
    w->target_size = target_size ? target_size : 1;
    w->level = level;
    w->frame_cap = PACK_FRAME_HEADER + ZSTD_compressBound(PACK_MAX_FRAME_RAW);
    w->dir = strdup(dir);
    w->cctx = ZSTD_createCCtx();
    w->frame = malloc(w->frame_cap);
    if (!w->dir || !w->cctx || !w->frame) {
        pack_writer_free(w);
        return pb_fail(err, PB_ENOMEM, "out of memory opening pack writer for %s", dir);
    }
    *out = w;
    return 0;
}

void pack_writer_free(pack_writer *w)
{
    if (!w)
        return;
    repo_writer_abort(w->cur);
    ZSTD_freeCCtx(w->cctx);
    free(w->frame);
    free(w->dir);
    free(w);
}

uint64_t pack_writer_stored_bytes(const pack_writer *w)
{
    return w->stored;
}

void pack_writer_set_first(pack_writer *w, uint32_t first)
{
    if (w && w->packs == 0 && first > 0)
        w->pack_no = first - 1;
}

uint32_t pack_writer_packs(const pack_writer *w)
{
    return w->packs;
}

void pack_writer_times(const pack_writer *w, double *compress, double *write)
{
    *compress = w->compress_s;
    *write = w->write_s;
}

int pack_level_min(void)
{
    return ZSTD_minCLevel();
}

static int start_pack(pack_writer *w, pb_error *err)
{
    char key[1024];
    uint8_t hdr[PACK_HEADER];
    pack_key(key, sizeof(key), w->dir, w->pack_no + 1);
    int rc = repo_writer_open(w->r, key, &w->cur, err);
    if (rc)
        return rc;
    memcpy(hdr, PACK_MAGIC, 8);
    pb_put_u32(hdr + 8, PACK_VERSION);
    pb_put_u32(hdr + 12, 0);
    if ((rc = repo_writer_write(w->cur, hdr, sizeof(hdr), err))) {
        repo_writer_abort(w->cur);
        w->cur = NULL;
        return rc;
    }
    w->pack_no++;
    w->packs++;
    w->offset = PACK_HEADER;
    w->stored += PACK_HEADER;
    return 0;
}

static int commit_pack(pack_writer *w, pb_error *err)
{
    repo_writer *cur = w->cur;
    w->cur = NULL;
    int rc = repo_writer_commit(cur, err);
    if (rc) {
        char key[1024];
        pack_key(key, sizeof(key), w->dir, w->pack_no);
        pb_error_wrap(err, "committing pack %s", key);
    }
    return rc;
}

/* Builds the frame for data in w->frame; returns its total length. */
static size_t build_frame(pack_writer *w, const void *data, size_t len, int level)
{
    uint8_t *payload = w->frame + PACK_FRAME_HEADER;
    double t0 = pb_now();
    size_t clen = ZSTD_compressCCtx(w->cctx, payload, w->frame_cap - PACK_FRAME_HEADER, data,
                                    len, level);
    w->compress_s += pb_now() - t0;
    uint32_t flags = 0;
    if (ZSTD_isError(clen) || clen >= len) {
        /* incompressible (or zstd refused): store as is, never larger than raw + header */
        memcpy(payload, data, len);
        clen = len;
        flags |= FRAME_STORED;
    }
    memcpy(w->frame, FRAME_MAGIC, 4);
    pb_put_u32(w->frame + 4, (uint32_t)len);
    pb_put_u32(w->frame + 8, (uint32_t)clen);
    pb_put_u32(w->frame + 12, flags);
    pb_put_u64(w->frame + 16, pb_hash64(payload, clen));
    pb_put_u64(w->frame + 24, pb_hash64(data, len));
    return PACK_FRAME_HEADER + clen;
}

static int write_frame(pack_writer *w, const void *data, size_t len, int level,
                       pack_loc *out, pb_error *err)
{
    if (w->failed)
        return pb_fail(err, PB_ESTATE, "pack writer for %s failed earlier", w->dir);
    if (len > PACK_MAX_FRAME_RAW)
        return pb_fail(err, PB_EINVAL, "frame of %zu bytes exceeds the %u-byte maximum", len,
                       PACK_MAX_FRAME_RAW);
    size_t flen = build_frame(w, data, len, level ? level : w->level);
    int rc = 0;
    double t0 = pb_now();
    if (!w->cur)
        rc = start_pack(w, err);
    if (!rc)
        rc = repo_writer_write(w->cur, w->frame, flen, err);
    w->write_s += pb_now() - t0;
    if (rc) {
        w->failed = 1;
        return rc;
    }
    if (out) {
        out->pack_no = w->pack_no;
        out->offset = w->offset;
        out->clen = (uint32_t)flen;
        out->rlen = (uint32_t)len;
    }
    w->offset += flen;
    w->stored += flen;
    /* commit as soon as a pack is full so its data is durable before the next begins */
    t0 = pb_now();
    if (w->offset >= w->target_size && (rc = commit_pack(w, err)))
        w->failed = 1;
    w->write_s += pb_now() - t0;
    return rc;
}

int pack_write_frame(pack_writer *w, const void *data, size_t len, pack_loc *out,
                     pb_error *err)
{
    return write_frame(w, data, len, 0, out, err);
}

int pack_write_runs(pack_writer *w, const void *data, size_t len, mf_run *runs, size_t nruns,
                    int level, pb_error *err)
{
    /* A whole file's piece is one run of count 1 whatever its length; pages must fit. */
    for (size_t i = 0; i < nruns && nruns > 1; i++)
        if (((uint64_t)runs[i].frame_page + runs[i].count) * PB_PAGE_SIZE > len)
            return pb_fail(err, PB_EINVAL,
                           "run of %u pages at page %u does not fit a frame of %zu bytes (%s)",
                           runs[i].count, runs[i].frame_page, len, w->dir);
    pack_loc loc;
    int rc = write_frame(w, data, len, level, &loc, err);
    for (size_t i = 0; rc == 0 && i < nruns; i++) {
        runs[i].pack_no = loc.pack_no;
        runs[i].offset = loc.offset;
        runs[i].clen = loc.clen;
        runs[i].rlen = loc.rlen;
    }
    return rc;
}

int pack_writer_finish(pack_writer *w, pb_error *err)
{
    if (w->failed)
        return pb_fail(err, PB_ESTATE, "pack writer for %s failed earlier", w->dir);
    if (!w->cur)
        return 0;
    double t0 = pb_now();
    int rc = commit_pack(w, err);
    w->write_s += pb_now() - t0;
    if (rc)
        w->failed = 1;
    return rc;
}

/* ---- reading ------------------------------------------------------------------ */

struct pack_reader {
    ZSTD_DCtx *dctx;
    uint8_t *frame; /* grows to the largest frame read */
    size_t frame_cap;
};

int pack_reader_new(pack_reader **out, pb_error *err)
{
    *out = NULL;
    pack_reader *rd = calloc(1, sizeof(*rd));
    if (!rd || !(rd->dctx = ZSTD_createDCtx())) {
        free(rd);
        return pb_fail(err, PB_ENOMEM, "out of memory creating a pack reader");
    }
    *out = rd;
    return 0;
}

void pack_reader_free(pack_reader *rd)
{
    if (!rd)
        return;
    ZSTD_freeDCtx(rd->dctx);
    free(rd->frame);
    free(rd);
}

/* dctx NULL: one-shot decompression (allocates a context per call). */
static int decode_payload(ZSTD_DCtx *dctx, const uint8_t *payload, uint32_t clen,
                          uint32_t rlen, uint32_t flags, void *out, const char *what,
                          pb_error *err)
{
    if (flags & FRAME_STORED) {
        if (clen != rlen)
            return pb_fail(err, PB_ECORRUPT,
                           "%s: stored frame has payload length %u but raw length %u", what,
                           clen, rlen);
        memcpy(out, payload, rlen);
        return 0;
    }
    size_t n = dctx ? ZSTD_decompressDCtx(dctx, out, rlen, payload, clen)
                    : ZSTD_decompress(out, rlen, payload, clen);
    if (ZSTD_isError(n))
        return pb_fail(err, PB_ECORRUPT, "%s: cannot decompress frame: %s", what,
                       ZSTD_getErrorName(n));
    if (n != rlen)
        return pb_fail(err, PB_ECORRUPT, "%s: frame decompressed to %zu bytes, header says %u",
                       what, n, rlen);
    return 0;
}

static int decode_frame(ZSTD_DCtx *dctx, const uint8_t *frame, size_t frame_len, void *out,
                        size_t cap, size_t *out_len, const char *what, pb_error *err)
{
    if (out_len)
        *out_len = 0;
    if (!what)
        what = "pack frame";
    if (frame_len < PACK_FRAME_HEADER)
        return pb_fail(err, PB_ECORRUPT, "%s: frame truncated to %zu bytes (header is %u)",
                       what, frame_len, PACK_FRAME_HEADER);
    if (memcmp(frame, FRAME_MAGIC, 4) != 0)
        return pb_fail(err, PB_ECORRUPT, "%s: bad frame magic (not a pageback pack frame)",
                       what);
    uint32_t rlen = pb_get_u32(frame + 4);
    uint32_t clen = pb_get_u32(frame + 8);
    uint32_t flags = pb_get_u32(frame + 12);
    uint64_t phash = pb_get_u64(frame + 16);
    uint64_t rhash = pb_get_u64(frame + 24);
    if (flags & ~FRAME_KNOWN_FLAGS)
        return pb_fail(err, PB_ECORRUPT, "%s: unknown frame flags 0x%x", what, flags);
    if (rlen > PACK_MAX_FRAME_RAW || clen > PACK_MAX_FRAME_RAW)
        return pb_fail(err, PB_ECORRUPT,
                       "%s: raw length %u or stored length %u exceeds the %u-byte maximum", what,
                       rlen, clen, PACK_MAX_FRAME_RAW);
    if ((uint64_t)clen + PACK_FRAME_HEADER != frame_len)
        return pb_fail(err, PB_ECORRUPT,
                       "%s: frame is %zu bytes but its header says %llu (truncated or "
                       "overwritten)", what, frame_len,
                       (unsigned long long)clen + PACK_FRAME_HEADER);
    if (rlen > cap)
        return pb_fail(err, PB_ECORRUPT,
                       "%s: raw length %u does not fit the expected %zu bytes", what, rlen,
                       cap);
    const uint8_t *payload = frame + PACK_FRAME_HEADER;
    if (pb_hash64(payload, clen) != phash)
        return pb_fail(err, PB_ECORRUPT, "%s: payload checksum mismatch", what);
    int rc = decode_payload(dctx, payload, clen, rlen, flags, out, what, err);
    if (rc)
        return rc;
    if (pb_hash64(out, rlen) != rhash)
        return pb_fail(err, PB_ECORRUPT, "%s: checksum of the decompressed data does not match",
                       what);
    if (out_len)
        *out_len = rlen;
    return 0;
}

int pack_decode_frame(const uint8_t *frame, size_t frame_len, void *out, size_t cap,
                      size_t *out_len, const char *what, pb_error *err)
{
    return decode_frame(NULL, frame, frame_len, out, cap, out_len, what, err);
}

int pack_reader_decode(pack_reader *rd, const uint8_t *frame, size_t frame_len, void *out,
                       size_t cap, size_t *out_len, const char *what, pb_error *err)
{
    return decode_frame(rd->dctx, frame, frame_len, out, cap, out_len, what, err);
}

/* Range-read and decode one frame; frame is a buffer of at least loc->clen bytes. */
static int read_frame(ZSTD_DCtx *dctx, uint8_t *frame, repo *r, const char *dir,
                      const pack_loc *loc, void *out, pb_error *err)
{
    char key[1024], what[1200];
    pack_key(key, sizeof(key), dir, loc->pack_no);
    snprintf(what, sizeof(what), "%s frame at offset %llu", key,
             (unsigned long long)loc->offset);
    size_t n = 0;
    int rc = repo_get_range(r, key, loc->offset, loc->clen, frame, err);
    if (!rc)
        rc = decode_frame(dctx, frame, loc->clen, out, loc->rlen, &n, what, err);
    if (!rc && n != loc->rlen)
        rc = pb_fail(err, PB_ECORRUPT, "%s: frame holds %zu bytes, the manifest expects %u",
                     what, n, loc->rlen);
    return rc;
}

int pack_loc_check(const char *key, uint64_t offset, uint32_t clen, uint32_t rlen,
                   pb_error *err)
{
    /* off_t is signed: an end past INT64_MAX cannot be read and must not wrap. */
    if (clen < PACK_FRAME_HEADER || clen > PACK_MAX_FRAME_STORED || rlen > PACK_MAX_FRAME_RAW ||
        offset < PACK_HEADER || offset > (uint64_t)INT64_MAX - clen)
        return pb_fail(err, PB_ECORRUPT,
                       "%s frame at offset %llu: impossible frame location (stored %u, raw %u)",
                       key, (unsigned long long)offset, clen, rlen);
    return 0;
}

/* A location that cannot describe a frame is refused before anything is allocated. */
static int check_loc(const char *dir, const pack_loc *loc, size_t cap, pb_error *err)
{
    char key[1024];
    pack_key(key, sizeof(key), dir, loc->pack_no);
    int rc = pack_loc_check(key, loc->offset, loc->clen, loc->rlen, err);
    if (rc)
        return rc;
    if (loc->rlen > cap)
        return pb_fail(err, PB_EINVAL,
                       "%s frame at offset %llu: buffer of %zu bytes is too small for %u", key,
                       (unsigned long long)loc->offset, cap, loc->rlen);
    return 0;
}

int pack_read_frame(repo *r, const char *dir, const pack_loc *loc, void *out, size_t cap,
                    pb_error *err)
{
    int rc = check_loc(dir, loc, cap, err);
    if (rc)
        return rc;
    uint8_t *frame = malloc(loc->clen);
    if (!frame)
        return pb_fail(err, PB_ENOMEM, "out of memory reading a frame of %s", dir);
    rc = read_frame(NULL, frame, r, dir, loc, out, err);
    free(frame);
    return rc;
}

int pack_reader_read(pack_reader *rd, repo *r, const char *dir, const pack_loc *loc, void *out,
                     size_t cap, pb_error *err)
{
    int rc = check_loc(dir, loc, cap, err);
    if (rc)
        return rc;
    if (rd->frame_cap < loc->clen) {
        uint8_t *p = realloc(rd->frame, loc->clen);
        if (!p)
            return pb_fail(err, PB_ENOMEM, "out of memory reading a frame of %s", dir);
        rd->frame = p;
        rd->frame_cap = loc->clen;
    }
    return read_frame(rd->dctx, rd->frame, r, dir, loc, out, err);
}
