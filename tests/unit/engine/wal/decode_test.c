/* tests/unit/engine/wal/decode_test.c — the WAL record decoder on real PostgreSQL 15
 * WAL (tests/fixtures/wal/, made by its make.sh): every record pg_waldump lists is found
 * with its LSN, xid and first block reference; the restore point, the commit, the abort,
 * the heap inserts and the full-page images the workload wrote are there; a start in
 * the middle of a record skips to the next; and hostile input (bad CRC, truncated
 * record, a length past the segment, block ids out of order) is refused naming the LSN. */
#include "engine/wal/wal.h"
#include "tests/unit/fixtures.h"

#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define MAXSEG 4
#define SEG_SIZE (1u << 20)

typedef struct fixture {
    uint64_t first_segno, start, end;
    uint32_t db, rel, commit_xid, abort_xid;
    unsigned nseg;
    uint8_t *seg[MAXSEG];
    size_t seg_len[MAXSEG]; /* what the source gives: tests shorten it */
} fixture;

static char fixdir[600];

static uint8_t *read_zst(const char *path, size_t *out_len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static uint8_t comp[4u << 20];
    size_t n = fread(comp, 1, sizeof(comp), f);
    fclose(f);
    unsigned long long raw = ZSTD_getFrameContentSize(comp, n);
    if (raw == ZSTD_CONTENTSIZE_ERROR)
        return NULL;
    if (raw == ZSTD_CONTENTSIZE_UNKNOWN) /* compressed from a pipe (waldump.txt.zst) */
        raw = 8u << 20;
    uint8_t *p = malloc(raw + 1);
    size_t got = ZSTD_decompress(p, raw, comp, n);
    if (ZSTD_isError(got)) {
        free(p);
        return NULL;
    }
    p[got] = 0;
    *out_len = got;
    return p;
}

static const char *fact(const char *facts, const char *key)
{
    static char val[64];
    const char *p = strstr(facts, key);
    val[0] = 0;
    if (p)
        sscanf(p + strlen(key), " %63s", val);
    return val;
}

static void load(fixture *fx)
{
    char path[700];
    snprintf(path, sizeof(path), "%s/facts.txt", fixdir);
    FILE *f = fopen(path, "r");
    PBT_CHECK(f != NULL);
    if (!f)
        exit(1);
    char facts[2048] = {0};
    size_t n = fread(facts, 1, sizeof(facts) - 1, f);
    facts[n] = 0;
    fclose(f);
    uint32_t tli;
    PBT_CHECK(arch_parse_segment(fact(facts, "first_segment"), SEG_SIZE, &tli, &fx->first_segno));
    uint64_t last;
    PBT_CHECK(arch_parse_segment(fact(facts, "last_segment"), SEG_SIZE, &tli, &last));
    PBT_CHECK(pb_lsn_parse(fact(facts, "start_lsn"), &fx->start) == 0);
    PBT_CHECK(pb_lsn_parse(fact(facts, "end_lsn"), &fx->end) == 0);
    fx->db = (uint32_t)atoi(fact(facts, "\ndb"));
    fx->rel = (uint32_t)atoi(fact(facts, "relfilenode"));
    fx->commit_xid = (uint32_t)atoi(fact(facts, "commit_xid"));
    fx->abort_xid = (uint32_t)atoi(fact(facts, "abort_xid"));
    fx->nseg = (unsigned)(last - fx->first_segno + 1);
    PBT_CHECK(fx->nseg <= MAXSEG);
    for (unsigned i = 0; i < fx->nseg && i < MAXSEG; i++) {
        char name[25];
        arch_segment_name(name, 1, fx->first_segno + i, SEG_SIZE);
        snprintf(path, sizeof(path), "%s/segments/%s.zst", fixdir, name);
        fx->seg[i] = read_zst(path, &fx->seg_len[i]);
        PBT_CHECK(fx->seg[i] != NULL && fx->seg_len[i] == SEG_SIZE);
    }
}

static int mem_source(void *ctx, uint64_t segno, const uint8_t **data, size_t *len,
                      pb_error *err)
{
    fixture *fx = ctx;
    if (segno < fx->first_segno || segno >= fx->first_segno + fx->nseg)
        return pb_fail(err, PB_ENOENT, "test segment %llu not there", (unsigned long long)segno);
    *data = fx->seg[segno - fx->first_segno];
    *len = fx->seg_len[segno - fx->first_segno];
    return 0;
}

/* One line of pg_waldump: its LSN, xid, total length and first block reference. */
typedef struct dump_rec {
    uint64_t lsn;
    uint32_t xid, tot, spc, db, rel, blk;
    bool has_blk, fpw;
} dump_rec;

static size_t parse_dump(const char *text, dump_rec *out, size_t cap)
{
    size_t n = 0;
    for (const char *line = text; line && *line && n < cap; line = strchr(line, '\n')) {
        if (*line == '\n')
            line++;
        const char *p = strstr(line, "len (rec/tot):");
        const char *eol = strchr(line, '\n');
        if (!p || (eol && p > eol))
            continue;
        dump_rec *d = &out[n];
        memset(d, 0, sizeof(*d));
        unsigned hi, lo, rec;
        if (sscanf(p, "len (rec/tot): %u/ %u, tx: %u, lsn: %X/%X", &rec, &d->tot, &d->xid, &hi,
                   &lo) != 5)
            continue;
        d->lsn = (uint64_t)hi << 32 | lo;
        const char *b = strstr(p, "blkref #0: rel ");
        if (b && (!eol || b < eol)) {
            d->has_blk = sscanf(b, "blkref #0: rel %u/%u/%u", &d->spc, &d->db, &d->rel) == 3;
            const char *k = strstr(b, " blk ");
            if (k)
                d->blk = (uint32_t)strtoul(k + 5, NULL, 10);
            const char *w = strstr(b, "FPW");
            d->fpw = w && (!eol || w < eol);
        }
        n++;
    }
    return n;
}

static int open_reader(fixture *fx, arch_walreader **r, uint64_t start, uint64_t end)
{
    pb_error e = PB_ERROR_INIT;
    return arch_walreader_open(r, SEG_SIZE, start, end, mem_source, fx, &e);
}

/* Every record of the range, as pg_waldump lists them. */
static void test_matches_waldump(fixture *fx)
{
    char path[700];
    snprintf(path, sizeof(path), "%s/waldump.txt.zst", fixdir);
    size_t len = 0;
    char *text = (char *)read_zst(path, &len);
    PBT_CHECK(text != NULL);
    if (!text)
        return;
    static dump_rec want[4096];
    size_t nwant = parse_dump(text, want, 4096);
    free(text);
    PBT_CHECK(nwant > 150);
    arch_walreader *r = NULL;
    PBT_CHECK(open_reader(fx, &r, fx->start, fx->end) == 0);
    const arch_record *rec;
    pb_error e = PB_ERROR_INIT;
    size_t n = 0, mismatches = 0;
    int rc;
    while ((rc = arch_walreader_next(r, &rec, &e)) == 0) {
        if (n < nwant) {
            const dump_rec *d = &want[n];
            bool ok = rec->lsn == d->lsn && rec->xid == d->xid && rec->end_lsn >= rec->lsn + d->tot;
            if (d->has_blk)
                ok = ok && rec->nblocks >= 1 && rec->blocks[0].spc == d->spc &&
                     rec->blocks[0].db == d->db && rec->blocks[0].rel == d->rel &&
                     rec->blocks[0].block == d->blk && rec->blocks[0].has_image == d->fpw;
            if (!ok && mismatches++ < 3)
                fprintf(stderr, "record %zu at %llX differs from pg_waldump's\n", n,
                        (unsigned long long)rec->lsn);
        }
        n++;
    }
    if (rc < 0)
        fprintf(stderr, "%s\n", e.msg);
    PBT_CHECK(rc == 1);
    PBT_CHECK(n == nwant);
    PBT_CHECK(mismatches == 0);
    arch_walreader_close(r);
}

/* The records the workload wrote, by what they are. */
static void test_known_records(fixture *fx)
{
    arch_walreader *r = NULL;
    PBT_CHECK(open_reader(fx, &r, fx->start, UINT64_MAX) == 0);
    const arch_record *rec;
    pb_error e = PB_ERROR_INIT;
    int rc, rp = 0, commit = 0, abort_ = 0, inserts = 0, fpi = 0, across_seg = 0, sw = 0;
    while ((rc = arch_walreader_next(r, &rec, &e)) == 0) {
        if (rec->rmid == 0 && (rec->info & 0xF0) == 0x70 && rec->main_len == 72 &&
            strcmp((const char *)rec->main_data + 8, "fixture_p1") == 0)
            rp++;
        if (rec->rmid == 1 && (rec->info & 0x70) == 0x00 && rec->xid == fx->commit_xid)
            commit++;
        if (rec->rmid == 1 && (rec->info & 0x70) == 0x20 && rec->xid == fx->abort_xid)
            abort_++;
        if (rec->rmid == 10 && (rec->info & 0x70) == 0x00 && rec->nblocks == 1 &&
            rec->blocks[0].rel == fx->rel && rec->blocks[0].db == fx->db &&
            rec->blocks[0].block == 0 && rec->xid == fx->commit_xid)
            inserts++;
        for (unsigned i = 0; i < rec->nblocks; i++)
            fpi += rec->blocks[i].has_image && rec->blocks[i].apply_image;
        across_seg += rec->lsn / SEG_SIZE != (rec->end_lsn - 1) / SEG_SIZE && rec->rmid == 21;
        sw += rec->rmid == 0 && (rec->info & 0xF0) == 0x40 && rec->end_lsn % SEG_SIZE == 0;
    }
    PBT_CHECK(rp == 1 && commit == 1 && abort_ == 1);
    PBT_CHECK(inserts == 100);
    PBT_CHECK(fpi >= 2);
    PBT_CHECK(across_seg == 1);
    PBT_CHECK(sw == 1);
    /* Past the last fixture segment the source has nothing: PB_ENOENT naming the LSN. */
    PBT_CHECK(rc == PB_ENOENT && strstr(e.msg, "reading WAL at 0/") != NULL);
    arch_walreader_close(r);
}

/* A start inside a record (and inside a page continued from the one before) gives the
 * next record; an end LSN stops before the record that starts there. */
static void test_start_mid_record(fixture *fx)
{
    arch_walreader *r = NULL;
    PBT_CHECK(open_reader(fx, &r, fx->start, fx->end) == 0);
    const arch_record *rec;
    pb_error e = PB_ERROR_INIT;
    uint64_t big = 0, big_end = 0, after = 0;
    while (arch_walreader_next(r, &rec, &e) == 0) {
        if (big && !after)
            after = rec->lsn;
        if (!big && rec->rmid == 21) {
            big = rec->lsn;
            big_end = rec->end_lsn;
        }
    }
    arch_walreader_close(r);
    PBT_CHECK(big && after && big_end - big > 2 * 8192);
    uint64_t starts[] = {big + 8, (big + 2 * 8192) & ~(uint64_t)8191};
    for (int i = 0; i < 2; i++) {
        PBT_CHECK(open_reader(fx, &r, starts[i], after + 1) == 0);
        PBT_CHECK(arch_walreader_next(r, &rec, &e) == 0 && rec->lsn == after);
        PBT_CHECK(arch_walreader_next(r, &rec, &e) == 1);
        PBT_CHECK(strstr(arch_walreader_end_reason(r), "end of the range") != NULL);
        arch_walreader_close(r);
    }
}

/* The LSN (as PostgreSQL prints it) is in the message. */
static bool names_lsn(const pb_error *e, uint64_t lsn)
{
    char at[32];
    pb_lsn_format(lsn, at);
    return strstr(e->msg, at) != NULL;
}

/* Read the whole range of a damaged copy; the error that stops it. */
static int read_all(fixture *fx, pb_error *e)
{
    arch_walreader *r = NULL;
    const arch_record *rec;
    int rc = open_reader(fx, &r, fx->start, fx->end);
    while (rc == 0)
        rc = arch_walreader_next(r, &rec, e);
    arch_walreader_close(r);
    return rc;
}

static void test_hostile(fixture *fx)
{
    /* Find the commit record and the first large message. */
    arch_walreader *r = NULL;
    const arch_record *rec;
    pb_error e = PB_ERROR_INIT;
    uint64_t commit = 0, big = 0;
    PBT_CHECK(open_reader(fx, &r, fx->start, fx->end) == 0);
    while (arch_walreader_next(r, &rec, &e) == 0) {
        if (rec->rmid == 1 && rec->xid == fx->commit_xid)
            commit = rec->lsn;
        if (!big && rec->rmid == 21)
            big = rec->lsn;
    }
    arch_walreader_close(r);
    uint8_t *seg0 = fx->seg[0], *copy = malloc(SEG_SIZE);
    fx->seg[0] = copy;

    memcpy(copy, seg0, SEG_SIZE); /* a flipped byte in the commit's main data */
    copy[commit % SEG_SIZE + 30] ^= 0x40;
    e = (pb_error)PB_ERROR_INIT;
    PBT_CHECK(read_all(fx, &e) == PB_ECORRUPT && names_lsn(&e, commit) && strstr(e.msg, "CRC"));

    memcpy(copy, seg0, SEG_SIZE); /* the message's next page zeroed: truncated */
    uint64_t next_page = (big | 8191) + 1;
    memset(copy + next_page % SEG_SIZE, 0, 8192);
    e = (pb_error)PB_ERROR_INIT;
    PBT_CHECK(read_all(fx, &e) == PB_ECORRUPT && names_lsn(&e, big) && strstr(e.msg, "truncated"));

    memcpy(copy, seg0, SEG_SIZE); /* the source gives fewer bytes than the record needs */
    fx->seg_len[0] = big % SEG_SIZE + 100;
    e = (pb_error)PB_ERROR_INIT;
    PBT_CHECK(read_all(fx, &e) == PB_ECORRUPT && strstr(e.msg, "past the end") &&
              strstr(e.msg, "0000000000000009"));
    fx->seg_len[0] = SEG_SIZE;

    memcpy(copy, seg0, SEG_SIZE); /* a length larger than anything PostgreSQL writes */
    pb_put_u32(copy + commit % SEG_SIZE, 0x7FFFFFF0u);
    e = (pb_error)PB_ERROR_INIT;
    PBT_CHECK(read_all(fx, &e) == PB_ECORRUPT && names_lsn(&e, commit));

    fx->seg[0] = seg0;
    free(copy);
}

/* The fixture's segments (orig) copied with magic on every page (or on page only_page
 * counted from the first segment's start); the source reads the copies. */
static void set_magic(fixture *fx, uint8_t **orig, uint8_t **copies, uint16_t magic,
                      int only_page)
{
    for (unsigned i = 0; i < fx->nseg; i++) {
        memcpy(copies[i], orig[i], SEG_SIZE);
        fx->seg[i] = copies[i];
        for (unsigned pg = 0; pg < SEG_SIZE / 8192; pg++)
            if (only_page < 0 || (int)(i * (SEG_SIZE / 8192) + pg) == only_page)
                pb_put_u16(copies[i] + pg * 8192, magic);
    }
}

/* The version comes from the first page's magic: the same WAL as PostgreSQL 16 or 18
 * would mark it reads record for record (their layouts are 15's), a page whose magic
 * differs from the first one's and a magic of no supported version are refused. */
static void test_versions(fixture *fx)
{
    uint8_t *orig[MAXSEG], *copies[MAXSEG];
    for (unsigned i = 0; i < fx->nseg; i++)
        orig[i] = fx->seg[i], copies[i] = malloc(SEG_SIZE);
    size_t want = 0;
    arch_walreader *r = NULL;
    const arch_record *rec;
    pb_error e = PB_ERROR_INIT;
    PBT_CHECK(open_reader(fx, &r, fx->start, fx->end) == 0);
    PBT_CHECK(arch_walreader_facts(r) == NULL);
    while (arch_walreader_next(r, &rec, &e) == 0)
        want++;
    PBT_CHECK(arch_walreader_facts(r) == pgv_by_major(15));
    arch_walreader_close(r);
    const uint16_t magics[] = {0xD113, 0xD116, 0xD118};
    for (unsigned m = 0; m < 3; m++) {
        set_magic(fx, orig, copies, magics[m], -1);
        size_t n = 0;
        PBT_CHECK(open_reader(fx, &r, fx->start, fx->end) == 0);
        int rc;
        while ((rc = arch_walreader_next(r, &rec, &e)) == 0)
            n++;
        PBT_CHECK(rc == 1 && n == want);
        PBT_CHECK(arch_walreader_facts(r) && arch_walreader_facts(r)->wal_page_magic == magics[m]);
        PBT_CHECK(arch_walreader_facts(r)->major == 16 + (int)m);
        arch_walreader_close(r);
    }
    set_magic(fx, orig, copies, 0xD200, -1);
    e = (pb_error)PB_ERROR_INIT;
    PBT_CHECK(read_all(fx, &e) == PB_ECORRUPT && strstr(e.msg, "0xD200") &&
              strstr(e.msg, "14, 15, 16, 17, 18"));
    set_magic(fx, orig, copies, 0xD118, (int)((fx->start % SEG_SIZE) / 8192) + 3);
    e = (pb_error)PB_ERROR_INIT;
    PBT_CHECK(read_all(fx, &e) == PB_ECORRUPT && strstr(e.msg, "0xD118 differs from the 0xD110"));
    for (unsigned i = 0; i < fx->nseg; i++)
        fx->seg[i] = orig[i], free(copies[i]);
}

static void seal(uint8_t *rec, uint32_t len)
{
    pb_put_u32(rec, len);
    uint32_t crc = pbt_crc32c(0xFFFFFFFFu, rec + 24, len - 24);
    crc = pbt_crc32c(crc, rec, 20) ^ 0xFFFFFFFFu;
    pb_put_u32(rec + 20, crc);
}

/* A made-up record with two block references: in order it decodes, out of order (or
 * with a length that does not add up) it is refused naming the LSN. */
static void test_block_order(void)
{
    uint8_t rec[128] = {0};
    uint32_t n = 24;
    rec[16] = 0x00, rec[17] = 10; /* heap insert */
    uint8_t blocks[2] = {0, 1};
    for (int i = 0; i < 2; i++) {
        rec[n++] = blocks[i];
        rec[n++] = i ? 0x80 : 0x00; /* the second is BKPBLOCK_SAME_REL */
        n += 2;                      /* data_len 0 */
        if (!i) {
            pb_put_u32(rec + n, 1663), pb_put_u32(rec + n + 4, 5), pb_put_u32(rec + n + 8, 16384);
            n += 12;
        }
        pb_put_u32(rec + n, 7 + (uint32_t)i);
        n += 4;
    }
    rec[n++] = 255, rec[n++] = 3; /* main data, 3 bytes */
    memcpy(rec + n, "abc", 3);
    n += 3;
    seal(rec, n);
    arch_record out;
    pb_error e = PB_ERROR_INIT;
    PBT_CHECK(arch_record_decode(rec, n, 0x5000A28, pgv_by_major(15), &out, &e) == 0);
    PBT_CHECK(out.nblocks == 2 && out.blocks[1].rel == 16384 && out.blocks[1].block == 8);
    PBT_CHECK(out.main_len == 3 && memcmp(out.main_data, "abc", 3) == 0);

    rec[24] = 1, rec[24 + 4 + 12 + 4] = 0; /* ids 1 then 0 */
    seal(rec, n);
    PBT_CHECK(arch_record_decode(rec, n, 0x5000A28, pgv_by_major(15), &out, &e) == PB_ECORRUPT);
    PBT_CHECK(strstr(e.msg, "0/5000A28") && strstr(e.msg, "out of order"));

    rec[24] = 0, rec[24 + 4 + 12 + 4] = 1, rec[n - 4] = 9; /* main data longer than the record */
    seal(rec, n);
    PBT_CHECK(arch_record_decode(rec, n, 0x5000A28, pgv_by_major(15), &out, &e) == PB_ECORRUPT);
    PBT_CHECK(strstr(e.msg, "0/5000A28") != NULL);
}

/* A record with one full-page image whose page has a hole: bimg_info is read with the
 * version's flags (14: HAS_HOLE 0x01, IS_COMPRESSED 0x02, APPLY 0x04; 15 on: HAS_HOLE
 * 0x01, APPLY 0x02, compression 0x04/0x08/0x10). */
static uint32_t fpi_record(uint8_t *rec, uint8_t bimg_info)
{
    uint32_t n = 24;
    memset(rec, 0, 256);
    rec[16] = 0x00, rec[17] = 10; /* heap insert */
    rec[n++] = 0;                  /* block id 0 */
    rec[n++] = 0x10;               /* BKPBLOCK_HAS_IMAGE, main fork */
    n += 2;                        /* data_len 0 */
    pb_put_u16(rec + n, 100), pb_put_u16(rec + n + 2, 40), rec[n + 4] = bimg_info;
    n += 5;
    pb_put_u32(rec + n, 1663), pb_put_u32(rec + n + 4, 5), pb_put_u32(rec + n + 8, 16384);
    pb_put_u32(rec + n + 12, 3);
    n += 16 + 100; /* the image: 100 bytes, the hole of 8092 left out */
    seal(rec, n);
    return n;
}

static void test_fpi_flags(void)
{
    uint8_t rec[256];
    arch_record out;
    pb_error e = PB_ERROR_INIT;
    uint32_t n = fpi_record(rec, 0x05); /* 14: hole + apply; 15: hole + pglz */
    PBT_CHECK(arch_record_decode(rec, n, 0x5000A28, pgv_by_major(14), &out, &e) == 0);
    PBT_CHECK(out.nblocks == 1 && out.blocks[0].has_image && out.blocks[0].apply_image &&
              out.blocks[0].block == 3);
    PBT_CHECK(arch_record_decode(rec, n, 0x5000A28, pgv_by_major(15), &out, &e) == PB_ECORRUPT);
    n = fpi_record(rec, 0x03); /* 15 on: hole + apply; 14: hole + compressed */
    for (int major = 15; major <= 18; major++) {
        PBT_CHECK(arch_record_decode(rec, n, 0x5000A28, pgv_by_major(major), &out, &e) == 0);
        PBT_CHECK(out.nblocks == 1 && out.blocks[0].apply_image);
    }
    PBT_CHECK(arch_record_decode(rec, n, 0x5000A28, pgv_by_major(14), &out, &e) == PB_ECORRUPT);
    n = fpi_record(rec, 0x01); /* hole, not applied (a wal_consistency_checking image) */
    PBT_CHECK(arch_record_decode(rec, n, 0x5000A28, pgv_by_major(14), &out, &e) == 0);
    PBT_CHECK(out.blocks[0].has_image && !out.blocks[0].apply_image);
}

int main(void)
{
    const char *src = getenv("PB_SRCDIR");
    snprintf(fixdir, sizeof(fixdir), "%s/tests/fixtures/wal", src ? src : ".");
    static fixture fx;
    load(&fx);
    if (pbt_failed)
        return PBT_DONE();
    test_matches_waldump(&fx);
    test_known_records(&fx);
    test_start_mid_record(&fx);
    test_hostile(&fx);
    test_block_order();
    test_versions(&fx);
    test_fpi_flags();
    printf("ok   decoder on real PostgreSQL 15 WAL and hostile input\n");
    for (unsigned i = 0; i < fx.nseg; i++)
        free(fx.seg[i]);
    return PBT_DONE();
}
