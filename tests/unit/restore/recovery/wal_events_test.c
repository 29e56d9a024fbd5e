/*
 * tests/unit/restore/recovery/wal_events_test.c — restore/recovery/wal_events.c over
 * the real PostgreSQL 15 WAL of
 * tests/fixtures/wal/ pushed into a posix repository: the restore point, the commit and
 * the abort the fixture's workload wrote are found with their xids and LSNs; a second
 * scan is answered from the state directory's cache without decoding; a cache file whose
 * content hash is not the archived segment's (another segment under that name) or that
 * is damaged, or written by version 1 (whole seconds), is not believed, and the segment is
 * decoded again; transaction-end times keep their microseconds through the cache; a
 * CREATE TABLESPACE record in a made-up segment is found and kept through the cache.
 */
#include "engine/wal/wal.h"
#include "restore/recovery/recovery.h"
#include "tests/unit/fixtures.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#define SEG (1u << 20)

static char root[256];

static uint8_t *read_zst(const char *path, size_t *out_len)
{
    static uint8_t comp[1u << 20];
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t n = fread(comp, 1, sizeof(comp), f);
    fclose(f);
    uint8_t *p = malloc(SEG);
    size_t got = p ? ZSTD_decompress(p, SEG, comp, n) : 0;
    if (!p || ZSTD_isError(got)) {
        free(p);
        return NULL;
    }
    *out_len = got;
    return p;
}

static void push_fixture(repo *r, const char *src, const char *name)
{
    char in[700], path[700];
    snprintf(in, sizeof(in), "%s/tests/fixtures/wal/segments/%s.zst", src, name);
    size_t len = 0;
    uint8_t *data = read_zst(in, &len);
    PBT_CHECK(data != NULL && len == SEG);
    if (!data)
        return;
    snprintf(path, sizeof(path), "%s/%s", root, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    PBT_CHECK(fd >= 0 && write(fd, data, len) == (ssize_t)len);
    close(fd);
    free(data);
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(arch_push(r, path, &err) == 0);
    unlink(path);
}

typedef struct seen {
    unsigned rp, commits, aborts, events, sub_second;
    uint32_t commit_xid, abort_xid;
    int64_t us_sum; /* of every event's time_us */
    bool seconds_agree; /* time is time_us in whole seconds for every event */
} seen;

static int on_event(void *ctx, const rs_wal_event *e)
{
    seen *s = ctx;
    s->events++;
    s->us_sum += e->time_us;
    s->sub_second += e->time_us % 1000000 != 0;
    s->seconds_agree &= e->time == e->time_us / 1000000;
    if (e->kind == 'r' && !strcmp(e->name, "fixture_p1"))
        s->rp++;
    if (e->kind == 'c' && e->xid == s->commit_xid)
        s->commits++;
    if (e->kind == 'a' && e->xid == s->abort_xid)
        s->aborts++;
    return 0;
}

/* Scan the whole fixture; *decoded and *cached: the scan's segment counts. */
static seen scan(repo *r, rs_wal_view *v, const char *state, uint64_t *decoded,
                 uint64_t *cached)
{
    seen s = {0, 0, 0, 0, 0, 725, 726, 0, true};
    rs_events sc;
    pb_error err = PB_ERROR_INIT;
    rs_events_init(&sc, r, v, SEG, state);
    int rc = rs_events_range(&sc, 9ull * SEG, UINT64_MAX, on_event, &s, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    PBT_CHECK(rc == 0);
    PBT_CHECK(sc.at_end && sc.end_lsn == 11ull * SEG);
    *decoded = sc.decoded;
    *cached = sc.from_cache;
    rs_events_free(&sc);
    return s;
}

static void rewrite_hash(const char *path)
{
    FILE *f = fopen(path, "r+");
    PBT_CHECK(f != NULL);
    if (!f)
        return;
    fseek(f, (long)strlen("pageback walscan 2 "), SEEK_SET);
    fputs("0123456789abcdef", f);
    fclose(f);
}

/* A WAL record at `at` (rmid, info, main data of mlen bytes, short form); its length. */
static uint32_t put_record(uint8_t *at, uint64_t prev, uint8_t rmid, uint8_t info,
                           const void *main_data, uint8_t mlen)
{
    uint32_t n = 24 + (mlen ? 2u + mlen : 0u);
    memset(at, 0, n);
    pb_put_u32(at, n);
    pb_put_u64(at + 8, prev);
    at[16] = info;
    at[17] = rmid;
    if (mlen) {
        at[24] = 255; /* XLR_BLOCK_ID_DATA_SHORT */
        at[25] = mlen;
        memcpy(at + 26, main_data, mlen);
    }
    uint32_t crc = pbt_crc32c(0xFFFFFFFFu, at + 24, n - 24);
    pb_put_u32(at + 20, pbt_crc32c(crc, at, 20) ^ 0xFFFFFFFFu);
    return n;
}

/* Segment segno: a CREATE TABLESPACE record (OID 16500, location "/srv/ts x"), then a WAL
 * switch. */
static void push_tblspc_segment(repo *r, uint64_t segno)
{
    uint8_t *seg = calloc(1, SEG), mdata[32];
    char name[25], path[400];
    PBT_CHECK(seg != NULL);
    if (!seg)
        return;
    pb_put_u16(seg, 0xD110);
    pb_put_u16(seg + 2, 0x0002);
    pb_put_u32(seg + 4, 1);
    pb_put_u64(seg + 8, segno * SEG);
    pb_put_u32(seg + 32, SEG);
    pb_put_u32(seg + 36, 8192);
    pb_put_u32(mdata, 16500);
    memcpy(mdata + 4, "/srv/ts x", 10);
    uint32_t n = put_record(seg + 40, 0, 5, 0x00, mdata, 14); /* RM_TBLSPC_ID, CREATE */
    put_record(seg + 40 + ((n + 7) & ~7u), segno * SEG + 40, 0, 0x40, NULL, 0);
    arch_segment_name(name, 1, segno, SEG);
    snprintf(path, sizeof(path), "%s/%s", root, name);
    FILE *f = fopen(path, "wb");
    PBT_CHECK(f && fwrite(seg, 1, SEG, f) == SEG && fclose(f) == 0);
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(arch_push(r, path, &err) == 0);
    unlink(path);
    free(seg);
}

static int no_event(void *ctx, const rs_wal_event *e)
{
    (void)ctx, (void)e;
    return 0;
}

/* A tablespace creation is found by a check-mode scan, recorded with its segment as
 * checked, cached ("t" line) and read back from the cache by an ordinary scan; a
 * check-mode scan never answers from the cache. */
static void test_tblspc(repo *r, const char *state)
{
    const uint64_t segno = 0x20;
    char name[25];
    arch_segment_name(name, 1, segno, SEG);
    push_tblspc_segment(r, segno);
    pb_error err = PB_ERROR_INIT;
    for (int pass = 0; pass < 3; pass++) {
        rs_wal_view v;
        rs_events s;
        PBT_CHECK(rs_view_load(&v, r, ARCH_LIST_SEGMENTS | ARCH_LIST_HISTORY, &err) == 0);
        PBT_CHECK(rs_view_history(&v, 1, &err) == 0);
        rs_events_init(&s, r, &v, SEG, state);
        uint64_t lo = segno * SEG, hi = lo + SEG;
        int rc = pass == 1 ? rs_events_range(&s, lo, hi, no_event, NULL, &err)
                           : rs_events_check(&s, lo, hi, false, no_event, NULL, &err);
        PBT_CHECK(rc == 0);
        PBT_CHECK(pass == 1 ? s.from_cache == 1 && s.decoded == 0 : s.decoded == 1);
        PBT_CHECK(v.seen && v.seen->nspc == 1);
        if (v.seen && v.seen->nspc == 1) {
            PBT_CHECK(v.seen->spc[0].oid == 16500 && !strcmp(v.seen->spc[0].path, "/srv/ts x"));
            PBT_CHECK(!strcmp(v.seen->spc[0].seg, name) &&
                      v.seen->spc[0].lsn == segno * SEG + 40);
        }
        PBT_CHECK(rs_seen_checked(v.seen, name) == (pass != 1));
        rs_events_free(&s);
        rs_view_free(&v);
    }
    printf("ok   a CREATE TABLESPACE record is found, cached and read back\n");
}

int main(void)
{
    const char *src = getenv("PB_SRCDIR");
    src = src ? src : ".";
    if (pbt_tmpdir(root, sizeof(root), "walscan-test") != 0)
        return 1;
    char repodir[300], state[300], cache[400];
    snprintf(repodir, sizeof(repodir), "%s/repo", root);
    snprintf(state, sizeof(state), "%s/state", root);
    mkdir(repodir, 0700);
    repo_opts o = REPO_OPTS_INIT;
    o.location = repodir;
    repo *r = NULL;
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(repo_open(&r, &o, &err) == 0);
    push_fixture(r, src, "000000010000000000000009");
    push_fixture(r, src, "00000001000000000000000A");
    rs_wal_view v;
    PBT_CHECK(rs_view_load(&v, r, ARCH_LIST_SEGMENTS | ARCH_LIST_HISTORY, &err) == 0);
    PBT_CHECK(rs_view_history(&v, 1, &err) == 0);

    uint64_t decoded, cached;
    seen s = scan(r, &v, state, &decoded, &cached);
    PBT_CHECK(s.rp == 1 && s.commits == 1 && s.aborts == 1);
    PBT_CHECK(decoded == 2 && cached == 0);
    printf("ok   the fixture's restore point, commit and abort are found\n");

    seen again = scan(r, &v, state, &decoded, &cached);
    PBT_CHECK(decoded == 0 && cached == 2);
    PBT_CHECK(again.rp == 1 && again.commits == 1 && again.aborts == 1 &&
              again.events == s.events);
    printf("ok   a second scan is answered from the cache\n");
    PBT_CHECK(s.sub_second > 0 && s.seconds_agree && again.seconds_agree &&
              again.us_sum == s.us_sum);
    printf("ok   event times keep their microseconds, decoded and from the cache\n");

    snprintf(cache, sizeof(cache), "%s/walscan/000000010000000000000009", state);
    rewrite_hash(cache);
    seen other = scan(r, &v, state, &decoded, &cached);
    PBT_CHECK(decoded == 1 && cached == 1 && other.events == s.events);
    printf("ok   a cache entry for other content is not believed\n");

    FILE *f = fopen(cache, "r+"); /* the format version of the file: 1 */
    PBT_CHECK(f != NULL && fseek(f, (long)strlen("pageback walscan "), SEEK_SET) == 0 &&
              fputc('1', f) == '1' && fclose(f) == 0);
    other = scan(r, &v, state, &decoded, &cached);
    PBT_CHECK(decoded == 1 && cached == 1 && other.us_sum == s.us_sum);
    printf("ok   a version 1 cache entry (whole seconds) is not believed\n");

    PBT_CHECK(truncate(cache, 40) == 0); /* cut short: no "end" line */
    other = scan(r, &v, state, &decoded, &cached);
    PBT_CHECK(decoded == 1 && other.events == s.events);
    printf("ok   a damaged cache entry is not believed\n");

    other = scan(r, &v, NULL, &decoded, &cached);
    PBT_CHECK(decoded == 2 && cached == 0 && other.events == s.events);
    printf("ok   without a state directory every segment is decoded\n");

    rs_view_free(&v);
    test_tblspc(r, state);
    repo_free(r);
    pbt_rmtree(root);
    return PBT_DONE();
}
