/*
 * engine/wal/decode.c — one WAL record: its CRC32C and its layout, as
 * DecodeXLogRecord (access/transam/xlogreader.c) reads access/xlogrecord.h. A record is
 * the 24-byte XLogRecord header, then block headers (ids 0..32, in increasing order),
 * the optional origin and top-level xid, the main data header, then the block images
 * and data in block order, then the main data. Only what the callers need is kept:
 * which blocks a record touches and its main data (docs/DESIGN.md, "Rooms and arrows").
 * The layout is the same from PostgreSQL 14 to 19 but for the full-page-image flags
 * (bimg_info), which 15 reassigned: they come from the version's facts (engine/pgver).
 *
 * <isa-l/crc.h> is used here and nowhere else: crc32_iscsi is CRC-32C (Castagnoli),
 * the polynomial PostgreSQL's pg_crc32c uses, without the initial and final inversion.
 */
#include "engine/wal/wal.h"

#include <isa-l/crc.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define REC_HEADER 24u    /* SizeOfXLogRecord */
#define REC_CRC_OFF 20u   /* offsetof(XLogRecord, xl_crc) */
#define WAL_BLCKSZ 8192u

#define BLOCK_ID_MAX 32u  /* XLR_MAX_BLOCK_ID */
#define BLOCK_ID_DATA_SHORT 255u
#define BLOCK_ID_DATA_LONG 254u
#define BLOCK_ID_ORIGIN 253u
#define BLOCK_ID_TOPLEVEL_XID 252u

#define BKPBLOCK_FORK_MASK 0x0Fu
#define BKPBLOCK_HAS_IMAGE 0x10u
#define BKPBLOCK_HAS_DATA 0x20u
#define BKPBLOCK_WILL_INIT 0x40u
#define BKPBLOCK_SAME_REL 0x80u

/* Custom resource managers are 128..255 (access/rmgr.h, RmgrIdIsValid; from 15 on, but
 * 14 writes none there either); builtin ones end at pgv_facts.rm_max_builtin. */
#define RM_MIN_CUSTOM 128u

/* A cursor over the header part of a record; every read is bounds-checked. */
typedef struct cursor {
    const uint8_t *p;
    uint32_t left;
    uint64_t lsn;
    const pgv_facts *v;
    pb_error *err;
} cursor;

static int short_rec(cursor *c, const char *what)
{
    char at[32];
    pb_lsn_format(c->lsn, at);
    return pb_fail(c->err, PB_ECORRUPT, "WAL record at %s: record too short for its %s", at,
                   what);
}

static int take(cursor *c, void *dst, uint32_t n, const char *what)
{
    if (c->left < n)
        return short_rec(c, what);
    memcpy(dst, c->p, n);
    c->p += n;
    c->left -= n;
    return 0;
}

static int take_u8(cursor *c, uint8_t *v, const char *what) { return take(c, v, 1, what); }

static int take_u16(cursor *c, uint16_t *v, const char *what)
{
    uint8_t b[2];
    int rc = take(c, b, 2, what);
    *v = pb_get_u16(b);
    return rc;
}

static int take_u32(cursor *c, uint32_t *v, const char *what)
{
    uint8_t b[4];
    int rc = take(c, b, 4, what);
    *v = pb_get_u32(b);
    return rc;
}

static int bad(cursor *c, const char *fmt, unsigned v)
{
    char at[32], what[160];
    pb_lsn_format(c->lsn, at);
    snprintf(what, sizeof(what), fmt, v);
    return pb_fail(c->err, PB_ECORRUPT, "WAL record at %s: %s", at, what);
}

/* The image header of a block (XLogRecordBlockImageHeader) and its consistency rules;
 * *len is the image's length in the record. */
static int read_image(cursor *c, arch_blockref *b, uint32_t *len)
{
    uint16_t bimg_len, hole_off, hole_len = 0;
    uint8_t info;
    int rc = take_u16(c, &bimg_len, "block image header");
    if (!rc) rc = take_u16(c, &hole_off, "block image header");
    if (!rc) rc = take_u8(c, &info, "block image header");
    if (rc) return rc;
    bool compressed = (info & c->v->bkpimage_compressed) != 0;
    bool hole = (info & c->v->bkpimage_has_hole) != 0;
    if (compressed && hole && (rc = take_u16(c, &hole_len, "compressed image hole")))
        return rc;
    if (!compressed)
        hole_len = (uint16_t)(WAL_BLCKSZ - bimg_len);
    if (bimg_len == 0 || bimg_len > WAL_BLCKSZ)
        return bad(c, "block image length %u is not within a page", bimg_len);
    if (hole && (hole_off == 0 || hole_len == 0 || bimg_len == WAL_BLCKSZ))
        return bad(c, "block image with a hole at offset %u is inconsistent", hole_off);
    if (!hole && (hole_off != 0 || (!compressed && bimg_len != WAL_BLCKSZ)))
        return bad(c, "block image of %u bytes without a hole is inconsistent", bimg_len);
    if (compressed && bimg_len == WAL_BLCKSZ)
        return bad(c, "compressed block image of %u bytes is not compressed", bimg_len);
    b->has_image = true;
    b->apply_image = (info & c->v->bkpimage_apply) != 0;
    *len = bimg_len;
    return 0;
}

/* One block header (XLogRecordBlockHeader, then the image header, the RelFileNode
 * unless SAME_REL, and the block number); *datalen counts what it adds to the data. */
static int read_block(cursor *c, arch_record *out, uint8_t id, uint32_t *datalen)
{
    arch_blockref *b = &out->blocks[out->nblocks];
    uint8_t flags;
    uint16_t data_len;
    uint32_t img_len = 0;
    int rc = take_u8(c, &flags, "block header");
    if (!rc) rc = take_u16(c, &data_len, "block header");
    if (rc) return rc;
    memset(b, 0, sizeof(*b));
    b->fork = flags & BKPBLOCK_FORK_MASK;
    b->will_init = (flags & BKPBLOCK_WILL_INIT) != 0;
    if ((flags & BKPBLOCK_HAS_DATA) && data_len == 0)
        return bad(c, "block %u has BKPBLOCK_HAS_DATA but no data", id);
    if (!(flags & BKPBLOCK_HAS_DATA) && data_len != 0)
        return bad(c, "block %u has data without BKPBLOCK_HAS_DATA", id);
    if ((flags & BKPBLOCK_HAS_IMAGE) && (rc = read_image(c, b, &img_len)))
        return rc;
    if (flags & BKPBLOCK_SAME_REL) {
        if (out->nblocks == 0)
            return bad(c, "block %u has BKPBLOCK_SAME_REL but no previous relation", id);
        b->spc = b[-1].spc, b->db = b[-1].db, b->rel = b[-1].rel;
    } else if ((rc = take_u32(c, &b->spc, "relation")) || (rc = take_u32(c, &b->db, "relation")) ||
               (rc = take_u32(c, &b->rel, "relation"))) {
        return rc;
    }
    if ((rc = take_u32(c, &b->block, "block number")))
        return rc;
    *datalen += data_len + img_len;
    out->nblocks++;
    return 0;
}

/* The headers after XLogRecord, up to and including the main data header. */
static int read_headers(cursor *c, arch_record *out, uint32_t *datatotal)
{
    int max_id = -1, rc = 0;
    while (c->left > *datatotal) {
        uint8_t id, u8;
        uint16_t u16;
        uint32_t u32;
        if ((rc = take_u8(c, &id, "block id")))
            return rc;
        if (id == BLOCK_ID_DATA_SHORT || id == BLOCK_ID_DATA_LONG) {
            if (id == BLOCK_ID_DATA_SHORT) {
                rc = take_u8(c, &u8, "main data header");
                u32 = u8;
            } else {
                rc = take_u32(c, &u32, "main data header");
            }
            if (rc) return rc;
            out->main_len = u32;
            *datatotal += u32;
            return 0; /* the main data header always comes last */
        }
        if (id == BLOCK_ID_ORIGIN) {
            rc = take_u16(c, &u16, "origin");
        } else if (id == BLOCK_ID_TOPLEVEL_XID) {
            rc = take_u32(c, &u32, "top-level xid");
        } else if (id <= BLOCK_ID_MAX) {
            if ((int)id <= max_id)
                return bad(c, "block id %u out of order", id);
            max_id = id;
            rc = read_block(c, out, id, datatotal);
        } else {
            return bad(c, "invalid block id %u", id);
        }
        if (rc) return rc;
    }
    return 0;
}

static uint32_t record_crc(const uint8_t *rec, uint32_t tot_len)
{
    /* As PostgreSQL's XLogRecordAssemble: the payload first, then the header up to the
     * CRC field, between pg_crc32c's initial and final inversion. */
    unsigned crc = crc32_iscsi((unsigned char *)rec + REC_HEADER, (int)(tot_len - REC_HEADER),
                               0xFFFFFFFFu);
    crc = crc32_iscsi((unsigned char *)rec, (int)REC_CRC_OFF, crc);
    return crc ^ 0xFFFFFFFFu;
}

int arch_record_decode(const uint8_t *rec, uint32_t tot_len, uint64_t lsn, const pgv_facts *v,
                       arch_record *out, pb_error *err)
{
    cursor c = {rec, tot_len, lsn, v, err};
    memset(out, 0, offsetof(arch_record, blocks));
    out->lsn = lsn;
    if (tot_len < REC_HEADER || pb_get_u32(rec) != tot_len)
        return bad(&c, "invalid record length %u", tot_len);
    out->xid = pb_get_u32(rec + 4);
    out->info = rec[16];
    out->rmid = rec[17];
    if (out->rmid > v->rm_max_builtin && out->rmid < RM_MIN_CUSTOM)
        return bad(&c, "invalid resource manager id %u", out->rmid);
    uint32_t want = pb_get_u32(rec + REC_CRC_OFF), got = record_crc(rec, tot_len);
    if (want != got) {
        char at[32];
        pb_lsn_format(lsn, at);
        return pb_fail(err, PB_ECORRUPT,
                       "WAL record at %s: incorrect CRC32C (stored %08X, computed %08X)", at,
                       want, got);
    }
    c.p += REC_HEADER;
    c.left -= REC_HEADER;
    uint32_t datatotal = 0;
    int rc = read_headers(&c, out, &datatotal);
    if (rc)
        return rc;
    if (c.left != datatotal)
        return bad(&c, "record length does not match the %u bytes of data its headers declare",
                   datatotal);
    out->main_data = out->main_len ? rec + tot_len - out->main_len : NULL;
    return 0;
}
