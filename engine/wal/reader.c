/*
 * engine/wal/reader.c — the stream of WAL records over pages and segments, as
 * PostgreSQL's XLogReadRecord and XLogFindNextRecord (access/transam/xlogreader.c, the
 * same walk from 14 to 19) walk it: every 8 kB page starts with a header (the long one
 * at a segment's start); a record that does not fit continues on the next page, whose
 * header says so (XLP_FIRST_IS_CONTRECORD) and how much is left (xlp_rem_len); records
 * start 8-byte aligned; after an XLOG_SWITCH record the rest of the segment is unused.
 *
 * Where WAL stops being valid (a zero length where a record should start, a zeroed or
 * recycled page between records) the reader ends quietly with a reason, as recovery
 * does at the end of WAL. Anything wrong inside a record that has begun (a bad CRC, a
 * page that does not continue it, a length past the segment's bytes) is PB_ECORRUPT
 * naming the segment and LSN: in an archive every record was written whole.
 *
 * Which PostgreSQL wrote the WAL is read once, from the magic of the first page header
 * (engine/pgver): every later page must carry the same magic, and each record is decoded
 * with that version's facts. A magic of no supported version is PB_ECORRUPT naming it.
 */
#include "engine/wal/wal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WAL_BLCKSZ ARCH_WAL_PAGE
#define SHORT_PHD 24u      /* SizeOfXLogShortPHD */
#define LONG_PHD 40u       /* SizeOfXLogLongPHD */
#define XLP_FIRST_IS_CONTRECORD 0x0001u
#define XLP_LONG_HEADER 0x0002u
#define XLP_ALL_FLAGS 0x000Fu
#define REC_HEADER 24u
#define REC_MAX (1u << 30) /* no record is larger than an allocation PostgreSQL allows */
#define RM_XLOG_ID 0u
#define XLOG_SWITCH 0x40u
#define MAXALIGN(x) (((x) + 7u) & ~(uint64_t)7u)

struct arch_walreader {
    uint32_t seg_size;
    uint64_t start, end;   /* the range asked for */
    uint64_t pos;          /* where the next record starts (may be a page's start) */
    uint64_t prev;         /* LSN of the previous record, for its xl_prev */
    bool positioned, have_prev, done;
    arch_segment_fn get;
    void *ctx;
    bool have_seg;
    uint64_t segno;        /* the segment whose bytes seg holds */
    const uint8_t *seg;
    size_t seg_len;
    uint8_t *buf;          /* the record being gathered */
    size_t cap;
    arch_record rec;
    const pgv_facts *facts; /* from the first page's magic */
    char end_reason[200];
};

/* "XXXXXXXXYYYYYYYY": a segment's name without its timeline. */
static void seg_label(const arch_walreader *r, uint64_t segno, char out[20])
{
    uint64_t per_id = 0x100000000ull / r->seg_size;
    snprintf(out, 20, "%08X%08X", (unsigned)(segno / per_id), (unsigned)(segno % per_id));
}

static int corrupt(const arch_walreader *r, pb_error *err, uint64_t lsn, const char *what)
{
    char at[32], seg[20];
    pb_lsn_format(lsn, at);
    seg_label(r, lsn / r->seg_size, seg);
    return pb_fail(err, PB_ECORRUPT, "WAL segment %s at %s: %s", seg, at, what);
}

/* Stop quietly at the end of valid WAL. */
static int end_of_wal(arch_walreader *r, uint64_t lsn, const char *why)
{
    char at[32];
    pb_lsn_format(lsn, at);
    snprintf(r->end_reason, sizeof(r->end_reason), "no valid WAL at %s: %s", at, why);
    r->pos = lsn;
    r->done = true;
    return 1;
}

/* Stop at the end of the range asked for. */
static int end_of_range(arch_walreader *r, uint64_t lsn)
{
    char at[32];
    pb_lsn_format(r->end, at);
    snprintf(r->end_reason, sizeof(r->end_reason), "end of the range (%s) reached", at);
    r->pos = lsn;
    r->done = true;
    return 1;
}

/* *p = the n bytes at lsn, inside one segment's bytes (loaded on demand). */
static int bytes_at(arch_walreader *r, uint64_t lsn, size_t n, const uint8_t **p,
                    pb_error *err)
{
    uint64_t segno = lsn / r->seg_size, off = lsn % r->seg_size;
    if (!r->have_seg || r->segno != segno) {
        r->have_seg = false;
        int rc = r->get(r->ctx, segno, &r->seg, &r->seg_len, err);
        if (rc) {
            char at[32];
            pb_lsn_format(lsn, at);
            return pb_error_wrap(err, "reading WAL at %s", at), rc;
        }
        r->have_seg = true;
        r->segno = segno;
    }
    if (off + n > r->seg_len) {
        char what[120];
        snprintf(what, sizeof(what), "past the end of the segment's %zu bytes", r->seg_len);
        return corrupt(r, err, lsn, what);
    }
    *p = r->seg + off;
    return 0;
}

/* The first page names the version (pgv_from_wal_magic); every later one must agree. */
static int page_version(arch_walreader *r, uint64_t page_lsn, uint16_t magic, pb_error *err)
{
    char what[200];
    if (r->facts && magic == r->facts->wal_page_magic)
        return 0;
    if (r->facts) {
        snprintf(what, sizeof(what), "page magic 0x%04X differs from the 0x%04X "
                 "(PostgreSQL %d) of the WAL read before it", magic, r->facts->wal_page_magic,
                 r->facts->major);
        return corrupt(r, err, page_lsn, what);
    }
    pb_error verr = PB_ERROR_INIT;
    if (pgv_from_wal_magic(&r->facts, magic, &verr) != 0)
        return corrupt(r, err, page_lsn, verr.msg);
    return 0;
}

typedef struct page_info {
    uint32_t hdr_len, rem_len;
    uint16_t info;
} page_info;

/* Check the header of the page at page_lsn (XLogReaderValidatePageHeader). 1 when the
 * page holds no WAL of this position (zeroed, or recycled from an older one). */
static int page_header(arch_walreader *r, uint64_t page_lsn, page_info *pi, pb_error *err)
{
    const uint8_t *p;
    int rc = bytes_at(r, page_lsn, WAL_BLCKSZ, &p, err);
    if (rc)
        return rc;
    uint16_t magic = pb_get_u16(p);
    uint64_t addr = pb_get_u64(p + 8);
    if (magic == 0 && addr == 0)
        return end_of_wal(r, page_lsn, "zeroed page");
    if ((rc = page_version(r, page_lsn, magic, err)))
        return rc;
    if (addr != page_lsn)
        return end_of_wal(r, page_lsn, "the page was recycled from older WAL");
    pi->info = pb_get_u16(p + 2);
    pi->rem_len = pb_get_u32(p + 16);
    bool first = page_lsn % r->seg_size == 0;
    if ((pi->info & ~XLP_ALL_FLAGS) || first != ((pi->info & XLP_LONG_HEADER) != 0))
        return corrupt(r, err, page_lsn, "invalid page header flags");
    if (first && (pb_get_u32(p + 32) != r->seg_size || pb_get_u32(p + 36) != WAL_BLCKSZ))
        return corrupt(r, err, page_lsn, "segment or page size differs from the expected");
    pi->hdr_len = first ? LONG_PHD : SHORT_PHD;
    return 0;
}

/* The first record that starts on the page of r->start or after it (XLogFindNextRecord:
 * skip the tail of a record continued from an earlier page). */
static int find_first(arch_walreader *r, pb_error *err)
{
    uint64_t page = r->start - r->start % WAL_BLCKSZ;
    for (;;) {
        page_info pi;
        int rc = page_header(r, page, &pi, err);
        if (rc)
            return rc;
        if (!(pi.info & XLP_FIRST_IS_CONTRECORD)) {
            r->pos = page + pi.hdr_len;
            break;
        }
        if (pi.rem_len < WAL_BLCKSZ - pi.hdr_len) {
            r->pos = page + pi.hdr_len + MAXALIGN(pi.rem_len);
            break;
        }
        page += WAL_BLCKSZ;
    }
    r->positioned = true;
    return 0;
}

/* Copy the tot_len bytes of the record at lsn into r->buf; *end = the byte after it. */
static int gather(arch_walreader *r, uint64_t lsn, uint32_t tot_len, uint64_t *end,
                  pb_error *err)
{
    uint64_t p = lsn;
    for (uint32_t got = 0; got < tot_len;) {
        if (p % WAL_BLCKSZ == 0) {
            page_info pi;
            int rc = page_header(r, p, &pi, err);
            if (rc == 1) {
                r->done = false;
                return corrupt(r, err, lsn, "record truncated: the next page holds no WAL");
            }
            if (rc)
                return rc;
            if (!(pi.info & XLP_FIRST_IS_CONTRECORD) || pi.rem_len != tot_len - got) {
                char what[160];
                snprintf(what, sizeof(what), "record of %u bytes is not continued by the "
                         "page at offset %u", tot_len, (unsigned)(p % r->seg_size));
                return corrupt(r, err, lsn, what);
            }
            p += pi.hdr_len;
        }
        uint32_t room = (uint32_t)(WAL_BLCKSZ - p % WAL_BLCKSZ), take = tot_len - got;
        if (take > room)
            take = room;
        const uint8_t *src;
        int rc = bytes_at(r, p, take, &src, err);
        if (rc)
            return rc;
        memcpy(r->buf + got, src, take);
        got += take;
        p += take;
    }
    *end = p;
    return 0;
}

/* The record at r->pos into r->rec; 1 at the end of the range or of valid WAL. */
static int read_record(arch_walreader *r, pb_error *err)
{
    uint64_t lsn = r->pos;
    if (lsn >= r->end)
        return end_of_range(r, lsn);
    if (lsn % WAL_BLCKSZ == 0) {
        page_info pi;
        int rc = page_header(r, lsn, &pi, err);
        if (rc)
            return rc;
        if (pi.info & XLP_FIRST_IS_CONTRECORD)
            return corrupt(r, err, lsn, "a record starts here but the page says it continues one");
        lsn += pi.hdr_len;
    }
    if (lsn >= r->end)
        return end_of_range(r, lsn);
    const uint8_t *p;
    int rc = bytes_at(r, lsn, 4, &p, err);
    if (rc)
        return rc;
    uint32_t tot_len = pb_get_u32(p);
    if (tot_len == 0)
        return end_of_wal(r, lsn, "zero record length");
    if (tot_len < REC_HEADER || tot_len > REC_MAX) {
        char what[80];
        snprintf(what, sizeof(what), "invalid record length %u", tot_len);
        return corrupt(r, err, lsn, what);
    }
    if (PB_GROW(r->buf, &r->cap, tot_len)) {
        char at[32];
        pb_lsn_format(lsn, at);
        return pb_fail(err, PB_ENOMEM, "no memory for the %u-byte WAL record at %s", tot_len, at);
    }
    uint64_t end = lsn;
    if ((rc = gather(r, lsn, tot_len, &end, err)))
        return rc;
    if (r->have_prev && pb_get_u64(r->buf + 8) != r->prev)
        return corrupt(r, err, lsn, "record's xl_prev does not point to the previous record");
    if ((rc = arch_record_decode(r->buf, tot_len, lsn, r->facts, &r->rec, err)))
        return rc;
    if (r->rec.rmid == RM_XLOG_ID && (r->rec.info & 0xF0) == XLOG_SWITCH && end % r->seg_size)
        end += r->seg_size - end % r->seg_size;
    r->rec.end_lsn = end;
    r->prev = lsn;
    r->have_prev = true;
    r->pos = MAXALIGN(end);
    return 0;
}

int arch_walreader_open(arch_walreader **out, uint32_t seg_size, uint64_t start_lsn,
                        uint64_t end_lsn, arch_segment_fn get, void *ctx, pb_error *err)
{
    *out = NULL;
    if (!arch_valid_seg_size(seg_size) || !get)
        return pb_fail(err, PB_EINVAL, "WAL reader: invalid segment size %u", seg_size);
    arch_walreader *r = calloc(1, sizeof(*r));
    if (!r)
        return pb_fail(err, PB_ENOMEM, "no memory for a WAL reader");
    r->seg_size = seg_size;
    r->start = start_lsn;
    r->end = end_lsn;
    r->get = get;
    r->ctx = ctx;
    *out = r;
    return 0;
}

int arch_walreader_next(arch_walreader *r, const arch_record **out, pb_error *err)
{
    *out = NULL;
    if (r->done)
        return 1;
    int rc = r->positioned ? 0 : find_first(r, err);
    while (rc == 0 && (rc = read_record(r, err)) == 0 && r->rec.lsn < r->start)
        ; /* records that start before start_lsn are read only to find the next one */
    if (rc == 0)
        *out = &r->rec;
    return rc;
}

const char *arch_walreader_end_reason(const arch_walreader *r) { return r->end_reason; }

uint64_t arch_walreader_end_lsn(const arch_walreader *r) { return r->pos; }

const pgv_facts *arch_walreader_facts(const arch_walreader *r) { return r->facts; }

void arch_walreader_close(arch_walreader *r)
{
    if (!r)
        return;
    free(r->buf);
    free(r);
}
