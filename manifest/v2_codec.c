/*
 * manifest/v2_codec.c — the compact encoding of format version 2 (docs/MANIFEST.md):
 * LEB128 varints, the tagged header, and file records (front-coded paths, delta-coded
 * runs, all-zero pages as counted runs instead of hashes). Decoding treats its input as
 * hostile: every count is bounded by the bytes left, or by MF_REL_MAX_PAGES, before
 * anything is allocated for it.
 */
#include "manifest/v2_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MF_RUN_MIN_BYTES 7u /* seven varints of one byte */

#define VARINT_MAX 10u /* bytes of a u64 varint at most */

int mf_put_varint(pb_buf *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t n = 0;
    do {
        tmp[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            tmp[n] |= 0x80;
        n++;
    } while (v);
    return pb_buf_append(b, tmp, n);
}

uint64_t mf_rd_varint(pb_reader *r)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 70; shift += 7) {
        const uint8_t *p = pb_rd_bytes(r, 1);
        if (!p)
            return 0;
        if (shift == 63 && (*p & 0x7e)) /* would not fit in 64 bits */
            break;
        v |= (uint64_t)(*p & 0x7f) << shift;
        if (!(*p & 0x80))
            return v;
    }
    r->bad = 1;
    return 0;
}

static uint64_t zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

uint64_t mf_zero_page_hash(void)
{
    static const uint8_t zero[PB_PAGE_SIZE];
    return pb_hash64(zero, sizeof(zero));
}

/* ---- header: tag, length, value; numbers are varints, strings raw bytes ---- */

static int put_tag_bytes(pb_buf *b, unsigned tag, const void *p, size_t n)
{
    return mf_put_varint(b, tag) | mf_put_varint(b, n) | pb_buf_append(b, p, n);
}

static int put_tag_u64(pb_buf *b, unsigned tag, uint64_t v)
{
    pb_buf tmp = {0};
    int rc = mf_put_varint(&tmp, v);
    if (rc == 0)
        rc = put_tag_bytes(b, tag, tmp.data, tmp.len);
    pb_buf_free(&tmp);
    return rc;
}

static int put_tag_str(pb_buf *b, unsigned tag, const char *s, size_t size)
{
    size_t n = strnlen(s, size);
    return n == size ? PB_EINVAL : put_tag_bytes(b, tag, s, n);
}

int mf_v2_put_header(pb_buf *b, const mf_backup *h)
{
    uint64_t secs;
    memcpy(&secs, &h->seconds, sizeof(secs));
    int rc = put_tag_str(b, MF_T_ID, h->id, sizeof(h->id));
    rc |= put_tag_str(b, MF_T_PARENT, h->parent, sizeof(h->parent));
    const uint64_t nums[] = {(unsigned char)h->type, h->start_lsn, h->stop_lsn, h->timeline,
                             h->system_id, h->pg_version, h->wal_segment_size,
                             h->data_checksums ? 1 : 0, zigzag(h->start_time),
                             zigzag(h->stop_time)};
    for (unsigned i = 0; i < sizeof(nums) / sizeof(nums[0]); i++)
        rc |= put_tag_u64(b, MF_T_TYPE + i, nums[i]);
    rc |= put_tag_str(b, MF_T_START_WAL, h->start_wal, sizeof(h->start_wal));
    rc |= put_tag_str(b, MF_T_STOP_WAL, h->stop_wal, sizeof(h->stop_wal));
    const uint64_t stats[] = {h->files,      h->pages_scanned, h->pages_changed,
                              h->pages_in_window, h->bytes_read, h->bytes_stored,
                              h->checksum_errors, h->collisions, secs};
    for (unsigned i = 0; i < sizeof(stats) / sizeof(stats[0]); i++)
        rc |= put_tag_u64(b, MF_T_FILES + i, stats[i]);
    const uint64_t reads[] = {(unsigned char)h->read_mode, h->verify_scan ? 1 : 0,
                              zigzag(h->mtime_horizon), h->files_skipped, h->bytes_skipped,
                              h->pages_missed};
    for (unsigned i = 0; i < sizeof(reads) / sizeof(reads[0]); i++)
        rc |= put_tag_u64(b, MF_T_READ_MODE + i, reads[i]);
    if (h->ctl_recorded) {
        const uint64_t ctl[] = {h->ctl_checksum_version, h->ctl_redo_lsn, h->ctl_checkpoint_lsn,
                                h->ctl_timeline};
        for (unsigned i = 0; i < sizeof(ctl) / sizeof(ctl[0]); i++)
            rc |= put_tag_u64(b, MF_T_CTL_CHECKSUM_VERSION + i, ctl[i]);
    }
    if (h->ctl_history_known)
        rc |= put_tag_u64(b, MF_T_CTL_HISTORY, h->ctl_history_hash);
    if (h->read_why[0])
        rc |= put_tag_str(b, MF_T_READ_WHY, h->read_why, sizeof(h->read_why));
    if (h->annotations[0]) /* absent otherwise: an unannotated header is as before */
        rc |= put_tag_str(b, MF_T_ANNOTATIONS, h->annotations, sizeof(h->annotations));
    if (h->db_bytes)
        rc |= put_tag_u64(b, MF_T_DB_BYTES, h->db_bytes);
    return rc ? PB_EINVAL : 0;
}

static int rd_tag_str(const uint8_t *v, size_t n, char *dst, size_t size)
{
    if (n >= size || memchr(v, '\0', n))
        return -1;
    memset(dst, 0, size);
    memcpy(dst, v, n);
    return 0;
}

static int rd_tag_u64(const uint8_t *v, size_t n, uint64_t *out)
{
    pb_reader r = {v, n, 0};
    *out = mf_rd_varint(&r);
    return r.bad || r.left ? -1 : 0;
}

/* One known tag into h; -1 when its value is malformed. */
static int rd_tag(mf_backup *h, unsigned tag, const uint8_t *v, size_t n)
{
    uint64_t x = 0;
    switch (tag) {
    case MF_T_ID: return rd_tag_str(v, n, h->id, sizeof(h->id));
    case MF_T_PARENT: return rd_tag_str(v, n, h->parent, sizeof(h->parent));
    case MF_T_START_WAL: return rd_tag_str(v, n, h->start_wal, sizeof(h->start_wal));
    case MF_T_STOP_WAL: return rd_tag_str(v, n, h->stop_wal, sizeof(h->stop_wal));
    case MF_T_READ_WHY: return rd_tag_str(v, n, h->read_why, sizeof(h->read_why));
    case MF_T_ANNOTATIONS: return rd_tag_str(v, n, h->annotations, sizeof(h->annotations));
    }
    if (rd_tag_u64(v, n, &x))
        return -1;
    switch (tag) {
    case MF_T_TYPE: h->type = (char)(x < 256 ? x : 0); return x < 256 ? 0 : -1;
    case MF_T_START_LSN: h->start_lsn = x; return 0;
    case MF_T_STOP_LSN: h->stop_lsn = x; return 0;
    case MF_T_TIMELINE: h->timeline = (uint32_t)x; return x >> 32 ? -1 : 0;
    case MF_T_SYSTEM_ID: h->system_id = x; return 0;
    case MF_T_PG_VERSION: h->pg_version = (uint32_t)x; return x >> 32 ? -1 : 0;
    case MF_T_WAL_SEG: h->wal_segment_size = (uint32_t)x; return x >> 32 ? -1 : 0;
    case MF_T_CHECKSUMS: h->data_checksums = x != 0; return x > 1 ? -1 : 0;
    case MF_T_START_TIME: h->start_time = unzigzag(x); return 0;
    case MF_T_STOP_TIME: h->stop_time = unzigzag(x); return 0;
    case MF_T_SECONDS: memcpy(&h->seconds, &x, sizeof(x)); return 0;
    case MF_T_READ_MODE: h->read_mode = (char)x; return x > 0xff ? -1 : 0;
    case MF_T_VERIFY_SCAN: h->verify_scan = x != 0; return x > 1 ? -1 : 0;
    case MF_T_MTIME_HORIZON: h->mtime_horizon = unzigzag(x); return 0;
    case MF_T_FILES_SKIPPED: h->files_skipped = x; return 0;
    case MF_T_BYTES_SKIPPED: h->bytes_skipped = x; return 0;
    case MF_T_PAGES_MISSED: h->pages_missed = x; return 0;
    case MF_T_CTL_CHECKSUM_VERSION: h->ctl_checksum_version = (uint32_t)x; return x >> 32 ? -1 : 0;
    case MF_T_CTL_REDO: h->ctl_redo_lsn = x; h->ctl_recorded = true; return 0;
    case MF_T_CTL_CHECKPOINT: h->ctl_checkpoint_lsn = x; return 0;
    case MF_T_CTL_TIMELINE: h->ctl_timeline = (uint32_t)x; return x >> 32 ? -1 : 0;
    case MF_T_CTL_HISTORY: h->ctl_history_hash = x; h->ctl_history_known = true; return 0;
    case MF_T_DB_BYTES: h->db_bytes = x; return 0;
    }
    uint64_t *stats[] = {&h->files,      &h->pages_scanned, &h->pages_changed,
                         &h->pages_in_window, &h->bytes_read, &h->bytes_stored,
                         &h->checksum_errors, &h->collisions};
    *stats[tag - MF_T_FILES] = x;
    return 0;
}

int mf_v2_rd_header(const uint8_t *p, size_t len, const char *what, mf_backup *h,
                    pb_error *err)
{
    memset(h, 0, sizeof(*h));
    pb_reader r = {p, len, 0};
    uint64_t seen = 0, prev = 0;
    while (r.left) {
        uint64_t tag = mf_rd_varint(&r), n = mf_rd_varint(&r);
        const uint8_t *v = r.bad || n > r.left ? NULL : pb_rd_bytes(&r, n);
        if (!v || tag == 0 || tag <= prev)
            return pb_fail(err, PB_ECORRUPT, "manifest %s: header field %llu malformed or "
                           "out of order", what, (unsigned long long)tag);
        prev = tag;
        if (tag > MF_T_LAST_KNOWN)
            continue; /* a field of a newer writer: additive, skipped */
        if (rd_tag(h, (unsigned)tag, v, n))
            return pb_fail(err, PB_ECORRUPT, "manifest %s: header field %llu has a bad "
                           "value (%llu bytes)", what, (unsigned long long)tag,
                           (unsigned long long)n);
        seen |= 1ull << tag;
    }
    if (!(seen & (1ull << MF_T_ID)) || !h->id[0] ||
        (h->type != 'F' && h->type != 'I' && h->type != 'S'))
        return pb_fail(err, PB_ECORRUPT, "manifest %s: header lacks an id or has backup "
                       "type %d", what, h->type);
    return 0;
}

/* ---- file records ---- */

static int put_runs(pb_buf *b, const mf_file *f)
{
    int rc = mf_put_varint(b, f->nruns);
    uint64_t prev_end = 0, prev_off = 0;
    uint32_t prev_pack = 0;
    for (uint32_t i = 0; i < f->nruns; i++) {
        const mf_run *x = &f->runs[i];
        rc |= mf_put_varint(b, zigzag((int64_t)x->first - (int64_t)prev_end));
        rc |= mf_put_varint(b, x->count);
        rc |= mf_put_varint(b, zigzag((int64_t)x->pack_no - (int64_t)prev_pack));
        rc |= mf_put_varint(b, zigzag((int64_t)(x->offset - prev_off)));
        rc |= mf_put_varint(b, x->clen);
        rc |= mf_put_varint(b, x->rlen);
        rc |= mf_put_varint(b, x->frame_page);
        prev_end = (uint64_t)x->first + x->count;
        prev_pack = x->pack_no;
        prev_off = x->offset + x->clen;
    }
    return rc;
}

/* Shipped page hashes as tokens: (n << 1 | 1) = n all-zero pages, (n << 1) = n literal
 * u64 hashes follow. */
static int put_hashes(pb_buf *b, const uint64_t *h, uint64_t n, uint64_t zero_hash)
{
    int rc = 0;
    for (uint64_t i = 0; i < n;) {
        bool zero = h[i] == zero_hash;
        uint64_t j = i + 1;
        while (j < n && (h[j] == zero_hash) == zero)
            j++;
        rc |= mf_put_varint(b, (j - i) << 1 | (zero ? 1 : 0));
        if (!zero && pb_buf_reserve(b, (j - i) * 8) == 0) {
            for (uint64_t k = i; k < j; k++)
                pb_put_u64(b->data + b->len + (k - i) * 8, h[k]);
            b->len += (j - i) * 8;
        } else if (!zero) {
            rc = PB_ENOMEM;
        }
        i = j;
    }
    return rc;
}

static int put_body(pb_buf *b, const mf_file *f, uint64_t zero_hash)
{
    uint8_t kind = (uint8_t)f->kind;
    int rc = pb_buf_append(b, &kind, 1);
    rc |= mf_put_varint(b, f->mode) | mf_put_varint(b, f->size);
    rc |= mf_put_varint(b, zigzag(f->mtime)) | mf_put_varint(b, f->inode);
    if (f->kind == MF_LINK) {
        size_t n = strlen(f->link_target);
        rc |= mf_put_varint(b, n) | pb_buf_append(b, f->link_target, n);
    } else if (f->kind == MF_FILE) {
        size_t n = strnlen(f->stored_in, MF_ID_LEN);
        rc |= pb_buf_u64(b, f->hash) | mf_put_varint(b, n) | pb_buf_append(b, f->stored_in, n);
        rc |= put_runs(b, f);
    } else if (f->kind == MF_REL) {
        rc |= mf_put_varint(b, f->npages) | put_runs(b, f);
        rc |= put_hashes(b, f->page_hashes, mf_shipped_pages(f), zero_hash);
    }
    return rc;
}

/* The body goes straight into b behind room for its length's varint, which then moves
 * up against it: no copy of a 1 MiB record (a 1 GiB segment's hashes) on the side. */
int mf_v2_put_file(pb_buf *b, const mf_file *f, const char *prev, uint64_t zero_hash)
{
    size_t shared = 0, len = strlen(f->path);
    if (prev)
        while (prev[shared] && prev[shared] == f->path[shared])
            shared++;
    size_t start = b->len;
    int rc = mf_put_varint(b, shared) | mf_put_varint(b, len - shared);
    rc |= pb_buf_append(b, f->path + shared, len - shared);
    size_t at = b->len;
    rc |= pb_buf_append(b, "\0\0\0\0\0\0\0\0\0\0", VARINT_MAX);
    rc |= put_body(b, f, zero_hash);
    if (rc) {
        b->len = start;
        return PB_ENOMEM;
    }
    size_t body = b->len - at - VARINT_MAX, n = 0;
    uint8_t tmp[VARINT_MAX];
    for (uint64_t v = body; n == 0 || v; v >>= 7)
        tmp[n++] = (uint8_t)((v & 0x7f) | (v >> 7 ? 0x80 : 0));
    memcpy(b->data + at, tmp, n);
    memmove(b->data + at + n, b->data + at + VARINT_MAX, body);
    b->len -= VARINT_MAX - n;
    return 0;
}

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >>= 7)
        n++;
    return n;
}

/* put_hashes's bytes, exactly: its tokens and literals. */
static size_t hashes_size(const uint64_t *h, uint64_t n, uint64_t zero_hash)
{
    size_t bytes = 0;
    for (uint64_t i = 0; i < n;) {
        bool zero = h[i] == zero_hash;
        uint64_t j = i + 1;
        while (j < n && (h[j] == zero_hash) == zero)
            j++;
        bytes += varint_len((j - i) << 1) + (zero ? 0 : (j - i) * 8);
        i = j;
    }
    return bytes;
}

size_t mf_v2_file_bound(const mf_file *f, uint64_t zero_hash)
{
    /* path varints and body length, kind, mode, size, mtime, inode */
    size_t bytes = 3 * VARINT_MAX + strlen(f->path) + 1 + 4 * VARINT_MAX;
    size_t runs = VARINT_MAX + (size_t)f->nruns * 7 * VARINT_MAX;
    if (f->kind == MF_LINK)
        bytes += VARINT_MAX + strlen(f->link_target);
    else if (f->kind == MF_FILE)
        bytes += 8 + VARINT_MAX + MF_ID_LEN + runs;
    else if (f->kind == MF_REL)
        bytes += VARINT_MAX + runs + hashes_size(f->page_hashes, mf_shipped_pages(f), zero_hash);
    return bytes;
}
