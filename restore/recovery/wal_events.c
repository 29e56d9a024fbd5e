/*
 * restore/recovery/wal_events.c — what the archived WAL holds for recovery targets:
 * restore points (XLOG_RESTORE_POINT) and transaction ends (commit, abort, and their
 * prepared forms), read segment by segment along the timeline path recovery will follow,
 * with what each segment held cached in the local state directory. Tablespace creations
 * (XLOG_TBLSPC_CREATE) are gathered into the view's record (rs_wal_seen) by every scan,
 * with the segments decoded whole; check mode (rs_events_check, wal_check.c) reads every
 * segment of a range, none answered from the cache.
 *
 * The cache is one small text file per archived segment, "<state>/walscan/<segment>",
 * whose first line carries the hash of the segment's content as its archive envelope
 * records it (arch_object_hash): a segment archived again with other content, or a
 * repository with another segment under the name, does not match and is decoded again.
 * A segment whose last record runs into a segment not archived yet is not cached (that
 * record is not known yet). The cache is only an index: a damaged or foreign file is
 * ignored and rewritten. Its format: docs/FORMAT.md, "WAL scan cache".
 *
 * Record layouts are PostgreSQL 15's: xl_restore_point {TimestampTz, char[64]}
 * (access/xlog_internal.h); xl_xact_commit / xl_xact_abort {TimestampTz} followed, with
 * XLOG_XACT_HAS_INFO, by xinfo and the parts it announces, in ParseCommitRecord's and
 * ParseAbortRecord's order (access/rmgrdesc/xactdesc.c).
 */
#include "restore/recovery/recovery.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RM_XLOG 0u
#define RM_XACT 1u
#define XLOG_RESTORE_POINT 0x70u
#define XACT_OPMASK 0x70u
#define XACT_COMMIT 0x00u
#define XACT_ABORT 0x20u
#define XACT_COMMIT_PREPARED 0x30u
#define XACT_ABORT_PREPARED 0x40u
#define XACT_HAS_INFO 0x80u
#define XINFO_DBINFO (1u << 0)
#define XINFO_SUBXACTS (1u << 1)
#define XINFO_RELFILENODES (1u << 2)
#define XINFO_INVALS (1u << 3)
#define XINFO_TWOPHASE (1u << 4)
#define XINFO_DROPPED_STATS (1u << 8)
#define PG_EPOCH_UNIX 946684800ll /* 2000-01-01 in unix seconds */

#define RM_TBLSPC 5u
#define XLOG_TBLSPC_CREATE 0x00u

#define CACHE_MAGIC "pageback walscan 3" /* 2: times in microseconds; 3: tablespaces */

/* A TimestampTz (microseconds since 2000-01-01) as unix microseconds. */
static int64_t pg_time_us(const uint8_t *p)
{
    return (int64_t)pb_get_u64(p) + PG_EPOCH_UNIX * 1000000;
}

/* Unix microseconds to whole seconds, rounding down. */
static int64_t unix_seconds(int64_t us)
{
    return us / 1000000 - (us % 1000000 < 0);
}

/* Skip a counted array (int count, then count items of size bytes) in the main data. */
static bool skip_array(const uint8_t *d, uint32_t len, uint32_t *off, uint32_t size)
{
    if (*off + 4 > len)
        return false;
    uint64_t n = pb_get_u32(d + *off);
    if (n > len || *off + 4 + n * size > len)
        return false;
    *off += 4 + (uint32_t)(n * size);
    return true;
}

/* The top-level xid a transaction end is for: the record's, or for a prepared
 * transaction the one in xinfo's two-phase part. */
static bool xact_xid(const arch_record *rec, uint8_t op, uint32_t *xid)
{
    const uint8_t *d = rec->main_data;
    uint32_t len = rec->main_len, off = 8, xinfo = 0;
    *xid = rec->xid;
    if (rec->info & XACT_HAS_INFO) {
        if (off + 4 > len)
            return false;
        xinfo = pb_get_u32(d + off);
        off += 4;
    }
    bool commit = op == XACT_COMMIT || op == XACT_COMMIT_PREPARED;
    if (commit && (xinfo & XINFO_DBINFO))
        off += 8;
    if ((xinfo & XINFO_SUBXACTS) && !skip_array(d, len, &off, 4))
        return false;
    if ((xinfo & XINFO_RELFILENODES) && !skip_array(d, len, &off, 12))
        return false;
    if ((xinfo & XINFO_DROPPED_STATS) && !skip_array(d, len, &off, 12))
        return false;
    if (commit && (xinfo & XINFO_INVALS) && !skip_array(d, len, &off, 16))
        return false;
    if (xinfo & XINFO_TWOPHASE) {
        if (off + 4 > len)
            return false;
        *xid = pb_get_u32(d + off);
    }
    return true;
}

/* The event a record is, if any. */
static bool event_of(const arch_record *rec, rs_wal_event *e)
{
    memset(e, 0, sizeof(*e));
    e->lsn = rec->lsn;
    if (rec->rmid == RM_XLOG && (rec->info & 0xF0) == XLOG_RESTORE_POINT) {
        if (rec->main_len < 8 + 64)
            return false;
        e->kind = 'r';
        e->time_us = pg_time_us(rec->main_data);
        e->time = unix_seconds(e->time_us);
        memcpy(e->name, rec->main_data + 8, 63);
        e->name[63] = '\0';
        return true;
    }
    if (rec->rmid != RM_XACT || rec->main_len < 8)
        return false;
    uint8_t op = rec->info & XACT_OPMASK;
    const char *kinds = "caCA";
    int k = op == XACT_COMMIT ? 0 : op == XACT_ABORT ? 1 : op == XACT_COMMIT_PREPARED ? 2
          : op == XACT_ABORT_PREPARED ? 3 : -1;
    if (k < 0 || !xact_xid(rec, op, &e->xid))
        return false;
    e->kind = kinds[k];
    e->time_us = pg_time_us(rec->main_data);
    e->time = unix_seconds(e->time_us);
    return true;
}

/* ---- the findings of one segment -------------------------------------------------- */

typedef struct findings {
    rs_wal_event *ev;
    size_t n, cap;
    rs_spc_event *spc; /* tablespaces created in the segment (paths owned) */
    size_t nspc, spccap;
} findings;

static void findings_free(findings *f)
{
    for (size_t i = 0; i < f->nspc; i++)
        free(f->spc[i].path);
    free(f->spc);
    free(f->ev);
    memset(f, 0, sizeof(*f));
}

static int add_event(findings *f, const rs_wal_event *e)
{
    if (PB_GROW(f->ev, &f->cap, f->n + 1))
        return PB_ENOMEM;
    f->ev[f->n++] = *e;
    return 0;
}

/* Add a tablespace creation (path copied, len bytes at most). */
static int add_spc(findings *f, uint64_t lsn, uint32_t oid, const char *path, size_t len)
{
    if (PB_GROW(f->spc, &f->spccap, f->nspc + 1))
        return PB_ENOMEM;
    char *p = strndup(path, len);
    if (!p)
        return PB_ENOMEM;
    f->spc[f->nspc++] = (rs_spc_event){lsn, oid, "", p};
    return 0;
}

/* xl_tblspc_create_rec {Oid ts_id; char ts_path[]} (commands/tablespace.h): the path
 * NUL-terminated in the main data. */
static int spc_of(const arch_record *rec, findings *f)
{
    if (rec->rmid != RM_TBLSPC || (rec->info & 0xF0) != XLOG_TBLSPC_CREATE ||
        rec->main_len < 5)
        return 0;
    return add_spc(f, rec->lsn, pb_get_u32(rec->main_data), (const char *)rec->main_data + 4,
                   rec->main_len - 4);
}

/* Hex of n bytes of s into out (2n + 1 bytes). */
static void hex_bytes(const char *s, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", (unsigned char)s[i]);
    out[2 * n] = '\0';
}

static void hex_name(const char *name, char out[129])
{
    hex_bytes(name, strnlen(name, 63), out);
}

/* Hex back into out (cap bytes with its NUL); "-" is the empty string. */
static bool unhex(const char *hex, char *out, size_t cap)
{
    size_t n = strcmp(hex, "-") ? strlen(hex) : 0;
    if (n % 2 || n / 2 >= cap)
        return false;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return false;
        out[i] = (char)v;
    }
    out[n / 2] = '\0';
    return true;
}

static void cache_path(const rs_events *s, const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s/walscan/%s", s->state_dir, name);
}

#define SPC_PATH_MAX 1024 /* MAXPGPATH */
#define LINE_MAX_LEN (2 * SPC_PATH_MAX + 80)

/* One line of a cache file into f; false when it is not one. */
static bool cache_line(const char *line, findings *f)
{
    rs_wal_event e;
    char hex[2 * SPC_PATH_MAX + 4], text[SPC_PATH_MAX];
    uint32_t oid;
    memset(&e, 0, sizeof(e));
    if (sscanf(line, "t %" SCNx64 " %" SCNu32 " %2051s", &e.lsn, &oid, hex) == 3)
        return unhex(hex, text, sizeof(text)) &&
               add_spc(f, e.lsn, oid, text, strlen(text)) == 0;
    if (sscanf(line, "r %" SCNx64 " %" SCNd64 " %139s", &e.lsn, &e.time_us, hex) == 3 &&
        unhex(hex, e.name, sizeof(e.name)))
        e.kind = 'r';
    else if (!(sscanf(line, "x %c %" SCNu32 " %" SCNx64 " %" SCNd64, &e.kind, &e.xid, &e.lsn,
                      &e.time_us) == 4 && strchr("caCA", e.kind)))
        return false;
    e.time = unix_seconds(e.time_us);
    return add_event(f, &e) == 0;
}

/* 0 with f filled when the cache holds segment name with this content hash; 1 when not. */
static int cache_load(const rs_events *s, const char *name, uint64_t hash, findings *f)
{
    char path[4200], line[LINE_MAX_LEN];
    cache_path(s, name, path, sizeof(path));
    FILE *fp = fopen(path, "r");
    if (!fp)
        return 1;
    uint64_t h = 0;
    bool ok = fgets(line, sizeof(line), fp) &&
              sscanf(line, CACHE_MAGIC " %" SCNx64, &h) == 1 && h == hash, done = false;
    while (ok && !done && fgets(line, sizeof(line), fp))
        if (!strcmp(line, "end\n"))
            done = true;
        else
            ok = cache_line(line, f);
    fclose(fp);
    if (ok && done)
        return 0;
    findings_free(f);
    return 1;
}

static void cache_write(FILE *fp, uint64_t hash, const findings *f)
{
    char hex[2 * SPC_PATH_MAX + 4];
    fprintf(fp, CACHE_MAGIC " %016" PRIx64 "\n", hash);
    for (size_t i = 0; i < f->n; i++) {
        const rs_wal_event *ev = &f->ev[i];
        hex_name(ev->name, hex);
        if (ev->kind == 'r')
            fprintf(fp, "r %" PRIx64 " %" PRId64 " %s\n", ev->lsn, ev->time_us, hex);
        else
            fprintf(fp, "x %c %" PRIu32 " %" PRIx64 " %" PRId64 "\n", ev->kind, ev->xid,
                    ev->lsn, ev->time_us);
    }
    for (size_t i = 0; i < f->nspc; i++) {
        const rs_spc_event *t = &f->spc[i];
        hex_bytes(t->path, strnlen(t->path, SPC_PATH_MAX - 1), hex);
        fprintf(fp, "t %" PRIx64 " %" PRIu32 " %s\n", t->lsn, t->oid, hex[0] ? hex : "-");
    }
    fputs("end\n", fp);
}

/* Write the findings of segment name atomically; a failure only costs a later decode. */
static void cache_save(const rs_events *s, const char *name, uint64_t hash, const findings *f)
{
    char dir[4200], path[4200], tmp[4300];
    pb_error e = PB_ERROR_INIT;
    snprintf(dir, sizeof(dir), "%s/walscan", s->state_dir);
    if (pb_mkdir_p(dir, 0700, &e)) {
        pb_debug("WAL scan cache not written: %s", e.msg);
        return;
    }
    cache_path(s, name, path, sizeof(path));
    int fd = -1;
    FILE *fp = pb_temp_beside(path, tmp, sizeof(tmp), &fd, &e) ? NULL : fdopen(fd, "w");
    if (!fp) {
        pb_debug("WAL scan cache %s not written: %s", path, fd < 0 ? e.msg : strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        return;
    }
    cache_write(fp, hash, f);
    if (fclose(fp) != 0 || rename(tmp, path) != 0)
        unlink(tmp);
}

/* ---- what the command has seen -------------------------------------------------------- */

/* The tablespace creations of segment name into the view's record (once each); a
 * segment decoded whole without a fault is remembered as checked. */
static int remember(rs_events *s, const char *name, findings *f, bool checked)
{
    rs_wal_seen *w = s->v->seen;
    if (!w)
        return 0;
    if (checked && !rs_seen_checked(w, name)) {
        if (PB_GROW(w->checked, &w->chkcap, w->nchecked + 1))
            return PB_ENOMEM;
        memcpy(w->checked[w->nchecked++], name, 25);
    }
    for (size_t i = 0; i < f->nspc; i++) {
        bool known = false;
        for (size_t k = 0; k < w->nspc && !known; k++)
            known = w->spc[k].lsn == f->spc[i].lsn && !strcmp(w->spc[k].seg, name);
        if (known)
            continue;
        if (PB_GROW(w->spc, &w->spccap, w->nspc + 1))
            return PB_ENOMEM;
        w->spc[w->nspc] = f->spc[i];
        memcpy(w->spc[w->nspc++].seg, name, 25);
        f->spc[i].path = NULL; /* moved */
    }
    return 0;
}

/* ---- decoding ------------------------------------------------------------------------ */

/* The archive source, with the segment last given served again without a second
 * download: a record running into the next segment fetches it, and the next segment's
 * own scan then starts on the bytes already held. */
static int scan_get(void *ctx, uint64_t segno, const uint8_t **data, size_t *len,
                    pb_error *err)
{
    rs_events *s = ctx;
    if (s->held && s->held_segno == segno) {
        *data = s->held_data;
        *len = s->held_len;
        return 0;
    }
    s->held = false;
    int rc = arch_walsource_get(s->src, segno, data, len, err);
    if (rc == 0) {
        s->held = true;
        s->held_segno = segno;
        s->held_data = *data;
        s->held_len = *len;
    } else {
        s->failed_segno = segno;
    }
    return rc;
}

/* Decode segment segno into f. *complete: every record starting in it was read (else
 * the last one runs into a segment not archived); *wal_end: valid WAL ends inside it.
 * In check mode only records in [check_lo, check_hi) are read (*whole says whether that
 * was the whole segment). */
static int decode_segment(rs_events *s, uint64_t segno, findings *f, bool *complete,
                          bool *wal_end, bool *whole, pb_error *err)
{
    uint64_t lo = segno * s->seg_size, hi = lo + s->seg_size;
    if (s->check) {
        lo = s->check_lo > lo ? s->check_lo : lo;
        hi = s->check_hi < hi ? s->check_hi : hi;
    }
    *whole = lo == segno * s->seg_size && hi == (segno + 1) * s->seg_size;
    *complete = true;
    *wal_end = false;
    s->failed_segno = segno;
    int rc = 0;
    if (!s->src)
        rc = arch_walsource_open(&s->src, s->r, s->seg_size, s->v->tl, s->v->ntl, err);
    arch_walreader *rd = NULL;
    if (rc == 0)
        rc = arch_walreader_open(&rd, s->seg_size, lo, hi, scan_get, s, err);
    const arch_record *rec;
    while (rc == 0 && (rc = arch_walreader_next(rd, &rec, err)) == 0) {
        rs_wal_event e;
        if ((event_of(rec, &e) && add_event(f, &e)) || spc_of(rec, f))
            rc = pb_fail(err, PB_ENOMEM, "out of memory scanning WAL");
    }
    if (rc == 1) {
        rc = 0;
        s->valid_end = arch_walreader_end_lsn(rd);
        *wal_end = s->valid_end < hi;
        if (*wal_end && !s->check)
            pb_warn("archived WAL on the timeline path ends inside a segment: %s",
                    arch_walreader_end_reason(rd));
    } else if (rc == PB_ENOENT) { /* the last record runs into a segment not archived */
        rc = 0;
        s->valid_end = arch_walreader_end_lsn(rd);
        if (s->valid_end < lo) /* not even this segment's file could be read */
            s->valid_end = lo;
        *complete = false;
        *wal_end = true;
    }
    arch_walreader_close(rd);
    s->decoded++;
    return rc;
}

/* The findings of segment segno (archived as name): from the cache, else decoded (and
 * cached when complete). Check mode: always decoded. */
static int segment_findings(rs_events *s, uint64_t segno, const char *name, findings *f,
                            bool *wal_end, pb_error *err)
{
    uint64_t hash = 0;
    *wal_end = false;
    int rc = s->state_dir ? arch_object_hash(s->r, name, &hash, err) : 0;
    if (rc) {
        s->failed_segno = segno;
        return rc;
    }
    if (s->state_dir && !s->check && cache_load(s, name, hash, f) == 0) {
        s->from_cache++;
        return remember(s, name, f, false);
    }
    bool complete, whole;
    rc = decode_segment(s, segno, f, &complete, wal_end, &whole, err);
    if (rc == 0 && complete && whole && s->state_dir)
        cache_save(s, name, hash, f);
    if (rc == 0 && remember(s, name, f, complete && whole && !*wal_end))
        rc = pb_fail(err, PB_ENOMEM, "out of memory scanning WAL");
    return rc;
}

void rs_events_init(rs_events *s, repo *r, rs_wal_view *v, uint32_t seg_size,
                  const char *state_dir)
{
    memset(s, 0, sizeof(*s));
    s->r = r;
    s->v = v;
    s->seg_size = seg_size;
    s->state_dir = state_dir;
}

void rs_events_free(rs_events *s)
{
    arch_walsource_close(s->src);
    s->src = NULL;
    s->held = false;
}

int rs_events_range(rs_events *s, uint64_t lo, uint64_t hi, rs_event_fn fn, void *ctx,
                  pb_error *err)
{
    for (uint64_t segno = lo / s->seg_size; segno * s->seg_size < hi; segno++) {
        char name[25];
        if (!rs_segment_for(s->v, segno, s->seg_size, name)) {
            s->end_lsn = s->valid_end = segno * s->seg_size;
            s->at_end = true;
            return 0;
        }
        if (s->skip_checked && rs_seen_checked(s->v->seen, name)) {
            s->skipped++;
            continue;
        }
        findings f = {0};
        bool wal_end = false, stop = false;
        int rc = segment_findings(s, segno, name, &f, &wal_end, err);
        for (size_t i = 0; rc == 0 && i < f.n; i++)
            if (f.ev[i].lsn >= lo && f.ev[i].lsn < hi)
                stop |= fn(ctx, &f.ev[i]) != 0;
        findings_free(&f);
        if (rc)
            return pb_error_wrap(err, "scanning archived WAL segment %s", name);
        s->end_lsn = (segno + 1) * s->seg_size;
        if (wal_end) {
            s->at_end = true;
            return 0;
        }
        if (stop)
            return 0;
    }
    s->end_lsn = hi;
    return 0;
}

int rs_events_check(rs_events *s, uint64_t lo, uint64_t hi, bool skip_checked, rs_event_fn fn,
                  void *ctx, pb_error *err)
{
    s->check = true;
    s->skip_checked = skip_checked;
    s->check_lo = lo;
    s->check_hi = hi;
    int rc = rs_events_range(s, lo, hi, fn, ctx, err);
    s->check = s->skip_checked = false;
    return rc;
}
