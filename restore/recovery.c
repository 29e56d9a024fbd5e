/*
 * restore/recovery.c — point-in-time targets: which backup can reach a target, whether
 * the WAL to get there is in the repository (checked before anything is written), and
 * the recovery settings of the restored cluster.
 *
 * A backup can reach a target when replay from it becomes consistent (at its stop LSN)
 * before the target: PostgreSQL refuses a stop point before the consistent point. For
 * time and LSN targets the manifest says where the backup ends, so the newest backup
 * ending before the target is chosen. A transaction id or a restore point name cannot be
 * placed without reading WAL, so for those the newest backup is chosen and the message
 * says what to do if PostgreSQL finds the target inside the backup's window.
 *
 * Timelines follow PostgreSQL's rules: the target timeline ("latest" = the highest
 * timeline whose history file is archived, counting up from the backup's) must contain
 * the backup's timeline, and the backup must end before that timeline branched off.
 * Each WAL segment is looked for on the newest timeline of the history that had begun
 * by then, falling back to older ones as PostgreSQL does.
 */
#include "restore/restore_internal.h"

#include "engine/archive.h"

#include <ctype.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

/* ---- targets ------------------------------------------------------------------------ */

typedef struct rs_target_val {
    int64_t time;      /* RS_TARGET_TIME: unix seconds (fraction dropped) */
    bool zoned;        /* the text carried a time zone */
    char time_text[96];/* the time with an explicit offset, as written for PostgreSQL */
    uint64_t lsn;      /* RS_TARGET_LSN */
} rs_target_val;

/* "+HH", "+HHMM", "+HH:MM" (also "-"), "Z", "UTC", "GMT", "UT": seconds east of UTC. */
static int parse_zone(const char *p, int64_t *offset)
{
    if (!strcasecmp(p, "Z") || !strcasecmp(p, "UTC") || !strcasecmp(p, "GMT") ||
        !strcasecmp(p, "UT")) {
        *offset = 0;
        return 0;
    }
    if (*p != '+' && *p != '-')
        return PB_EINVAL;
    int sign = *p == '-' ? -1 : 1, hh = 0, mm = 0, ss = 0;
    const unsigned char *q = (const unsigned char *)p + 1;
    if (!isdigit(q[0]))
        return PB_EINVAL;
    hh = *q++ - '0';
    if (isdigit(*q))
        hh = hh * 10 + (*q++ - '0');
    bool colon = *q == ':';
    if (colon)
        q++;
    if (isdigit(q[0]) && isdigit(q[1])) {
        mm = (q[0] - '0') * 10 + (q[1] - '0');
        q += 2;
        if (colon && q[0] == ':' && isdigit(q[1]) && isdigit(q[2])) {
            ss = (q[1] - '0') * 10 + (q[2] - '0');
            q += 3;
        }
    } else if (colon) {
        return PB_EINVAL;
    }
    if (*q || hh > 15 || mm > 59 || ss > 59)
        return PB_EINVAL;
    *offset = sign * (hh * 3600 + mm * 60 + ss);
    return 0;
}

/*
 * PostgreSQL's timestamptz input, in the forms DBAs write: "2026-11-30 10:15:00",
 * optional ".fraction", optional zone (offset or UTC/Z), 'T' instead of the space, or a
 * date alone. Without a zone the time is read in pageback's local time zone, and the
 * setting written for PostgreSQL then carries that explicit offset, so the backup choice
 * and the server's stop point agree whatever the restored cluster's TimeZone is.
 */
static int parse_time(const char *text, rs_target_val *tv)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    while (isspace((unsigned char)*text))
        text++;
    const char *p = strptime(text, "%Y-%m-%d", &tm);
    if (!p)
        return PB_EINVAL;
    if ((*p == 'T' || *p == ' ') && isdigit((unsigned char)p[1])) {
        p = strptime(p + 1, "%H:%M", &tm);
        if (!p)
            return PB_EINVAL;
        if (*p == ':' && isdigit((unsigned char)p[1]) && !(p = strptime(p + 1, "%S", &tm)))
            return PB_EINVAL;
    }
    const char *frac = p;
    if (*p == '.')
        p += 1 + strspn(p + 1, "0123456789");
    int frac_len = (int)(p - frac);
    while (*p == ' ')
        p++;
    char zone[32] = "";
    snprintf(zone, sizeof(zone), "%s", p);
    for (size_t n = strlen(zone); n > 0 && zone[n - 1] == ' '; n--)
        zone[n - 1] = '\0';
    int64_t offset = 0;
    tv->zoned = zone[0] != '\0';
    if (tv->zoned) {
        if (parse_zone(zone, &offset))
            return PB_EINVAL;
        struct tm copy = tm;
        tv->time = (int64_t)timegm(&copy) - offset;
    } else {
        struct tm copy = tm;
        copy.tm_isdst = -1;
        time_t t = mktime(&copy);
        if (t == (time_t)-1)
            return PB_EINVAL;
        tv->time = (int64_t)t;
        struct tm local;
        localtime_r(&t, &local);
        offset = local.tm_gmtoff;
    }
    /* Re-express in the zone it was given (or the local one), offset spelled out. */
    time_t shown = (time_t)(tv->time + offset);
    struct tm out;
    gmtime_r(&shown, &out);
    char base[40];
    strftime(base, sizeof(base), "%Y-%m-%d %H:%M:%S", &out);
    int64_t a = offset < 0 ? -offset : offset;
    snprintf(tv->time_text, sizeof(tv->time_text), "%s%.*s%c%02d:%02d", base,
             frac_len > 20 ? 20 : frac_len, frac, offset < 0 ? '-' : '+', (int)(a / 3600),
             (int)(a % 3600 / 60));
    return 0;
}

static int parse_target(const rs_opts *opts, rs_target_val *tv, pb_error *err)
{
    memset(tv, 0, sizeof(*tv));
    const char *v = opts->target_value;
    switch (opts->target) {
    case RS_TARGET_TIME:
        if (!v || parse_time(v, tv))
            return pb_fail(err, PB_EINVAL, "cannot read --target-time '%s': expected "
                           "'YYYY-MM-DD HH:MM:SS[.frac][+HH[:MM]|UTC]' (give time zones as "
                           "offsets)", v ? v : "");
        return 0;
    case RS_TARGET_LSN:
        if (!v || pb_lsn_parse(v, &tv->lsn))
            return pb_fail(err, PB_EINVAL, "cannot read --target-lsn '%s': expected X/Y "
                           "(hexadecimal, as pg_current_wal_lsn() shows it)", v ? v : "");
        return 0;
    case RS_TARGET_XID:
        if (!v || !*v || strspn(v, "0123456789") != strlen(v))
            return pb_fail(err, PB_EINVAL, "--target-xid expects a transaction id (digits), "
                           "not '%s'", v ? v : "");
        return 0;
    case RS_TARGET_NAME:
        if (!v || !*v || strlen(v) > 63)
            return pb_fail(err, PB_EINVAL, "--target-name expects a restore point name of "
                           "1 to 63 bytes, not '%s'", v ? v : "");
        return 0;
    default:
        return 0;
    }
}

static void fmt_time(int64_t t, char out[40])
{
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(out, 40, "%Y-%m-%d %H:%M:%S+00", &tm);
}

/* ---- recovery settings ------------------------------------------------------------ */

/* Single quotes inside a GUC value are doubled. */
static void put_setting(FILE *fp, const char *name, const char *value)
{
    fprintf(fp, "%s = '", name);
    for (const char *p = value; *p; p++) {
        if (*p == '\'')
            fputc('\'', fp);
        fputc(*p, fp);
    }
    fputs("'\n", fp);
}

static const char *target_setting(rs_target_kind kind)
{
    switch (kind) {
    case RS_TARGET_TIME: return "recovery_target_time";
    case RS_TARGET_LSN: return "recovery_target_lsn";
    case RS_TARGET_XID: return "recovery_target_xid";
    case RS_TARGET_NAME: return "recovery_target_name";
    default: return NULL;
    }
}

/* Consistency at the backup's end lies on the backup's own timeline: "current" there,
 * so a backup taken before a later promotion still restores without naming a timeline. */
static const char *timeline_setting(const rs_opts *opts)
{
    if (opts->target_timeline)
        return opts->target_timeline;
    return opts->target == RS_TARGET_IMMEDIATE ? "current" : "latest";
}

int rs_write_recovery(const char *target_dir, const rs_opts *opts, const mf_backup *h,
                      pb_error *err)
{
    rs_target_val tv;
    int rc = parse_target(opts, &tv, err);
    if (rc)
        return rc;
    char path[4096];
    snprintf(path, sizeof(path), "%s/postgresql.auto.conf", target_dir);
    FILE *fp = fopen(path, "a");
    if (!fp)
        return pb_fail_errno(err, PB_EIO, "cannot open %s", path);
    fprintf(fp, "\n# Recovery settings added by pageback restore of backup %s\n", h->id);
    if (opts->restore_command) {
        put_setting(fp, "restore_command", opts->restore_command);
        /* The archive-get prefetch spool has no use once recovery is over; the lock
         * waits for a prefetcher still at work (bounded) so that nothing is left. */
        put_setting(fp, "recovery_end_command",
                    "test ! -d pg_wal/pageback-spool || flock -w 60 "
                    "pg_wal/pageback-spool/.prefetch.lock rm -rf pg_wal/pageback-spool");
    }
    const char *name = target_setting(opts->target);
    if (opts->target == RS_TARGET_IMMEDIATE)
        put_setting(fp, "recovery_target", "immediate");
    else if (opts->target == RS_TARGET_TIME)
        put_setting(fp, name, tv.time_text);
    else if (name)
        put_setting(fp, name, opts->target_value);
    if (name)
        put_setting(fp, "recovery_target_inclusive", opts->target_exclusive ? "off" : "on");
    if (opts->target != RS_TARGET_END)
        put_setting(fp, "recovery_target_action",
                    opts->target_action ? opts->target_action : "promote");
    put_setting(fp, "recovery_target_timeline", timeline_setting(opts));
    if (fclose(fp) != 0)
        rc = pb_fail_errno(err, PB_EIO, "cannot write %s", path);
    snprintf(path, sizeof(path), "%s/recovery.signal", target_dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return pb_fail_errno(err, PB_EIO, "cannot create %s", path);
    close(fd);
    return rc;
}

/* ---- the archive as recovery will see it -------------------------------------------- */

typedef struct tl_entry {
    uint32_t tli;
    uint64_t begin, end; /* [begin, end); end = UINT64_MAX on the target timeline */
} tl_entry;

typedef struct wal_view {
    repo *r;
    uint32_t *hist;       /* timelines with an archived .history file */
    size_t nhist, hcap;
    char (*segs)[25];     /* archived segments, sorted */
    size_t nsegs, scap;
    tl_entry *tl;         /* history of timeline tl_of (oldest first) */
    size_t ntl;
    uint32_t tl_of;
} wal_view;

static int collect_name(void *vctx, const char *name)
{
    wal_view *v = vctx;
    if (strlen(name) == 24) {
        if (v->nsegs == v->scap) {
            size_t cap = v->scap ? v->scap * 2 : 1024;
            void *p = realloc(v->segs, cap * sizeof(*v->segs));
            if (!p)
                return PB_ENOMEM;
            v->segs = p;
            v->scap = cap;
        }
        memcpy(v->segs[v->nsegs++], name, 25);
        return 0;
    }
    if (v->nhist == v->hcap) {
        size_t cap = v->hcap ? v->hcap * 2 : 16;
        void *p = realloc(v->hist, cap * sizeof(*v->hist));
        if (!p)
            return PB_ENOMEM;
        v->hist = p;
        v->hcap = cap;
    }
    v->hist[v->nhist++] = (uint32_t)strtoul(name, NULL, 16);
    return 0;
}

static int cmp_seg(const void *a, const void *b)
{
    return memcmp(a, b, 24);
}

static int view_load(wal_view *v, repo *r, unsigned kinds, pb_error *err)
{
    memset(v, 0, sizeof(*v));
    v->r = r;
    int rc = arch_list(r, kinds, collect_name, v, err);
    if (rc == PB_ENOMEM)
        return pb_fail(err, rc, "out of memory listing the WAL archive of %s",
                       repo_location(r));
    if (rc)
        return pb_error_wrap(err, "listing the WAL archive");
    if (v->nsegs)
        qsort(v->segs, v->nsegs, sizeof(*v->segs), cmp_seg);
    return 0;
}

static void view_free(wal_view *v)
{
    free(v->hist);
    free(v->segs);
    free(v->tl);
    memset(v, 0, sizeof(*v));
}

static bool has_history(const wal_view *v, uint32_t tli)
{
    for (size_t i = 0; i < v->nhist; i++)
        if (v->hist[i] == tli)
            return true;
    return false;
}

static bool has_segment(const wal_view *v, const char *name)
{
    return v->nsegs && bsearch(name, v->segs, v->nsegs, sizeof(*v->segs), cmp_seg) != NULL;
}

static int add_entry(wal_view *v, uint32_t tli, uint64_t begin, uint64_t end)
{
    tl_entry *p = realloc(v->tl, (v->ntl + 1) * sizeof(*p));
    if (!p)
        return PB_ENOMEM;
    v->tl = p;
    v->tl[v->ntl++] = (tl_entry){tli, begin, end};
    return 0;
}

/* Parse "parentTLI <tab> X/Y <tab> reason" lines, as PostgreSQL's readTimeLineHistory. */
static int parse_history(wal_view *v, uint32_t tli, const char *text, size_t len,
                         pb_error *err)
{
    uint64_t prev = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        char line[256];
        snprintf(line, sizeof(line), "%.*s", (int)(n < 255 ? n : 255), p);
        p += n + 1;
        char *s = line + strspn(line, " \t");
        if (!*s || *s == '#')
            continue;
        unsigned parent, hi, lo;
        if (sscanf(s, "%u\t%X/%X", &parent, &hi, &lo) != 3 &&
            sscanf(s, "%u %X/%X", &parent, &hi, &lo) != 3)
            return pb_fail(err, PB_ECORRUPT, "history file %08X.history: bad line '%s'", tli,
                           s);
        uint64_t sw = ((uint64_t)hi << 32) | lo;
        if (parent >= tli || sw < prev)
            return pb_fail(err, PB_ECORRUPT, "history file %08X.history: timeline %u at "
                           "%X/%X is out of order", tli, parent, hi, lo);
        if (add_entry(v, parent, prev, sw))
            return pb_fail(err, PB_ENOMEM, "out of memory reading timeline history");
        prev = sw;
    }
    if (add_entry(v, tli, prev, UINT64_MAX))
        return pb_fail(err, PB_ENOMEM, "out of memory reading timeline history");
    return 0;
}

/* Load the history of timeline tli into v->tl (timeline 1, or one without an archived
 * history file, is a history of its own). */
static int load_history(wal_view *v, uint32_t tli, pb_error *err)
{
    if (v->tl && v->tl_of == tli)
        return 0;
    free(v->tl);
    v->tl = NULL;
    v->ntl = 0;
    v->tl_of = tli;
    if (tli == 1 || !has_history(v, tli))
        return add_entry(v, tli, 0, UINT64_MAX)
                   ? pb_fail(err, PB_ENOMEM, "out of memory reading timeline history") : 0;
    char name[32];
    snprintf(name, sizeof(name), "%08X.history", tli);
    uint8_t *text = NULL;
    size_t len = 0;
    int rc = arch_read(v->r, name, &text, &len, err);
    if (rc == 0)
        rc = parse_history(v, tli, (const char *)text, len, err);
    free(text);
    if (rc) {
        free(v->tl);
        v->tl = NULL;
        v->ntl = 0;
    }
    return rc;
}

/* The timeline recovery will follow from a backup on timeline backup_tli. */
static int target_tli(const wal_view *v, const rs_opts *opts, uint32_t backup_tli,
                      uint32_t *out, pb_error *err)
{
    const char *t = timeline_setting(opts);
    if (!strcmp(t, "current")) {
        *out = backup_tli;
    } else if (!strcmp(t, "latest")) {
        uint32_t tli = backup_tli;
        while (has_history(v, tli + 1)) /* PostgreSQL's findNewestTimeLine */
            tli++;
        *out = tli;
    } else {
        char *end;
        unsigned long n = strtoul(t, &end, 0);
        if (*end || n == 0 || n > UINT32_MAX)
            return pb_fail(err, PB_EINVAL, "--target-timeline must be latest, current or a "
                           "timeline id, not '%s'", t);
        *out = (uint32_t)n;
    }
    return 0;
}

/* Is backup h on the path of the loaded history, ending before its timeline branched? */
static bool on_path(const wal_view *v, const mf_backup *h, char *why, size_t why_len)
{
    for (size_t i = 0; i < v->ntl; i++) {
        if (v->tl[i].tli != h->timeline)
            continue;
        if (h->stop_lsn <= v->tl[i].end)
            return true;
        char a[32], b[32];
        pb_lsn_format(h->stop_lsn, a);
        pb_lsn_format(v->tl[i].end, b);
        snprintf(why, why_len, "it ends at LSN %s on timeline %u, after timeline %u branched "
                 "off at %s", a, h->timeline, v->tl_of, b);
        return false;
    }
    snprintf(why, why_len, "its timeline %u is not in the history of target timeline %u",
             h->timeline, v->tl_of);
    return false;
}

/* Which archived file recovery reads for segment segno: the newest timeline of the
 * history that had begun by then, else an older one whose part ends inside or after it.
 * Returns whether one is archived; name is the one found, or the one expected. */
static bool segment_for(const wal_view *v, uint64_t segno, uint32_t seg_size, char name[25])
{
    name[0] = '\0';
    for (size_t i = v->ntl; i-- > 0;) {
        const tl_entry *e = &v->tl[i];
        if (e->begin / seg_size > segno || (e->end != UINT64_MAX && segno * seg_size >= e->end))
            continue;
        char cand[25];
        arch_segment_name(cand, e->tli, segno, seg_size);
        if (!name[0])
            memcpy(name, cand, 25);
        if (has_segment(v, cand)) {
            memcpy(name, cand, 25);
            return true;
        }
    }
    return false;
}

/* ---- choosing the backup ------------------------------------------------------------ */

/* 1 when backup h can reach the target, 0 (with the reason in why) when not. */
static int can_reach(wal_view *v, const rs_opts *opts, const rs_target_val *tv,
                     const mf_backup *h, char *why, size_t why_len, pb_error *err)
{
    if (opts->target != RS_TARGET_IMMEDIATE || opts->target_timeline) {
        uint32_t tli;
        int rc = target_tli(v, opts, h->timeline, &tli, err);
        if (rc == 0)
            rc = load_history(v, tli, err);
        if (rc)
            return rc;
        if (!on_path(v, h, why, why_len))
            return 0;
    }
    char a[40], b[40];
    if (opts->target == RS_TARGET_TIME && !(h->stop_time < tv->time)) {
        fmt_time(h->stop_time, a);
        snprintf(why, why_len, "it ended at %s, not before the target time %s", a,
                 tv->time_text);
        return 0;
    }
    if (opts->target == RS_TARGET_LSN && h->stop_lsn > tv->lsn) {
        pb_lsn_format(h->stop_lsn, a);
        pb_lsn_format(tv->lsn, b);
        snprintf(why, why_len, "it becomes consistent at LSN %s, after the target LSN %s", a,
                 b);
        return 0;
    }
    return 1;
}

static void explain_choice(const rs_opts *opts, const rs_target_val *tv, const mf_backup *h,
                           const char *older, bool explicit, char *why, size_t why_len)
{
    char a[40], stop[32];
    pb_lsn_format(h->stop_lsn, stop);
    fmt_time(h->stop_time, a);
    const char *how = explicit ? "requested with --set" : "the newest backup";
    switch (opts->target) {
    case RS_TARGET_TIME:
        snprintf(why, why_len, "%s that ended (at %s, LSN %s, timeline %u) before the target "
                 "time %s", how, a, stop, h->timeline, tv->time_text);
        break;
    case RS_TARGET_LSN:
        snprintf(why, why_len, "%s that becomes consistent (at LSN %s, timeline %u) before "
                 "the target LSN %s", how, stop, h->timeline, opts->target_value);
        break;
    case RS_TARGET_XID:
    case RS_TARGET_NAME:
        snprintf(why, why_len, "%s (ends at LSN %s, %s); a %s cannot be placed before or after "
                 "a backup without reading WAL: if PostgreSQL stops with \"requested recovery "
                 "stop point is before consistent recovery point\", restore with --set %s",
                 how, stop, a, opts->target == RS_TARGET_XID ? "transaction id"
                                                             : "restore point name",
                 older && older[0] ? older : "<an older backup>");
        break;
    default:
        snprintf(why, why_len, "%s (ends at LSN %s, %s, timeline %u)", how, stop, a,
                 h->timeline);
    }
}

/* Name the newest backup and, when another, the oldest with their reasons: a time or LSN
 * before every backup shows in the oldest, a timeline mismatch in the newest. */
static int refuse(repo *r, const rs_opts *opts, const char *newest, const char *newest_why,
                  const char *oldest, const char *oldest_why, pb_error *err)
{
    char more[600] = "";
    if (strcmp(newest, oldest) != 0)
        snprintf(more, sizeof(more), "; the oldest, %s, because %s", oldest, oldest_why);
    return pb_fail(err, PB_ENOENT, "no backup in repository %s can reach the recovery target "
                   "%s%s%s: the newest, %s, cannot because %s%s", repo_location(r),
                   opts->target_value ? "'" : "", opts->target_value ? opts->target_value
                                                                     : "(end of backup)",
                   opts->target_value ? "'" : "", newest, newest_why, more);
}

/* PostgreSQL ends with "recovery ended before configured recovery target was reached"
 * when the target lies beyond the archived WAL; a target in the future always does. The
 * margin allows for a database host whose clock runs ahead of this one. */
static int check_future(const rs_opts *opts, const rs_target_val *tv, pb_error *err)
{
    int64_t now = (int64_t)time(NULL);
    if (opts->target != RS_TARGET_TIME || tv->time <= now)
        return 0;
    if (tv->time > now + 300)
        return pb_fail(err, PB_EINVAL, "the target time %s is in the future: recovery could "
                       "never reach it (PostgreSQL would stop with \"recovery ended before "
                       "configured recovery target was reached\"); use --target-end to replay "
                       "all archived WAL", tv->time_text);
    pb_warn("the target time %s is later than this host's clock: recovery reaches it only "
            "if WAL up to then is archived", tv->time_text);
    return 0;
}

/* Backups are tried newest state first (history order, never id order: a rebase's
 * synthetic full of an older state has the last id). */
int rs_choose_set(repo *r, const rs_opts *opts, char out_id[MF_ID_LEN], char *why,
                  size_t why_len, pb_error *err)
{
    rs_target_val tv;
    wal_view v;
    chain_history hist = {0};
    memset(&v, 0, sizeof(v));
    int rc = parse_target(opts, &tv, err);
    bool explicit = opts->set && strcmp(opts->set, "latest") != 0;
    if (rc == 0)
        rc = check_future(opts, &tv, err);
    if (rc == 0)
        rc = view_load(&v, r, ARCH_LIST_HISTORY, err);
    if (rc == 0)
        rc = chain_history_load(r, &hist, err);
    if (rc)
        goto out;
    if (hist.count == 0) {
        rc = pb_fail(err, PB_ENOENT, "repository %s holds no backup", repo_location(r));
        goto out;
    }
    char first_why[400] = "", newest[MF_ID_LEN] = "", last_why[400] = "",
         oldest[MF_ID_LEN] = "";
    rc = PB_ENOENT;
    for (size_t i = hist.count; i-- > 0 && rc == PB_ENOENT;) {
        const mf_backup *h = &hist.items[i];
        if (explicit && strcmp(h->id, opts->set) != 0)
            continue;
        char skip[400] = "";
        int ok = can_reach(&v, opts, &tv, h, skip, sizeof(skip), err);
        if (ok == 1) {
            snprintf(out_id, MF_ID_LEN, "%s", h->id);
            explain_choice(opts, &tv, h, i > 0 ? hist.items[i - 1].id : NULL, explicit, why,
                           why_len);
            rc = 0;
        } else if (ok == 0) {
            pb_debug("backup %s cannot reach the target: %s", h->id, skip);
            if (!newest[0]) {
                snprintf(newest, sizeof(newest), "%s", h->id);
                snprintf(first_why, sizeof(first_why), "%s", skip);
            }
            snprintf(oldest, sizeof(oldest), "%s", h->id);
            snprintf(last_why, sizeof(last_why), "%s", skip);
            rc = PB_ENOENT;
        } else {
            rc = ok;
        }
    }
    if (rc == PB_ENOENT && explicit && !newest[0])
        rc = pb_fail(err, PB_ENOENT, "backup set %s not found in repository %s", opts->set,
                     repo_location(r));
    else if (rc == PB_ENOENT && explicit)
        rc = pb_fail(err, PB_ENOENT, "backup %s cannot reach the recovery target '%s': %s",
                     opts->set, opts->target_value ? opts->target_value : "", first_why);
    else if (rc == PB_ENOENT)
        rc = refuse(r, opts, newest, first_why, oldest, last_why, err);
out:
    chain_history_free(&hist);
    view_free(&v);
    return rc;
}

/* ---- the WAL a restore needs -------------------------------------------------------- */

/* After the required range: how far the archive goes on without a gap, and whether WAL
 * exists beyond a gap (replay would stop at the gap without reaching it). */
static void report_reach(const wal_view *v, const mf_backup *h, uint64_t last)
{
    uint32_t seg = h->wal_segment_size;
    char name[25], end[25] = "", gap[25];
    uint64_t s = last;
    while (segment_for(v, s + 1, seg, name)) {
        memcpy(end, name, 25);
        s++;
    }
    if (!end[0])
        segment_for(v, last, seg, end);
    segment_for(v, s + 1, seg, gap);
    bool beyond = false;
    for (size_t i = 0; i < v->nsegs && !beyond; i++) {
        uint32_t tli;
        uint64_t n;
        if (!arch_parse_segment(v->segs[i], seg, &tli, &n) || n <= s + 1)
            continue;
        for (size_t j = 0; j < v->ntl; j++)
            beyond |= v->tl[j].tli == tli;
    }
    char lsn[32];
    pb_lsn_format((s + 1) * (uint64_t)seg, lsn);
    if (beyond)
        pb_warn("WAL segment %s is missing from the repository although later WAL is "
                "archived: replay will end at LSN %s and cannot reach a target after it",
                gap, lsn);
    else
        pb_info("archived WAL runs without a gap to %s: replay can go up to LSN %s", end, lsn);
}

int rs_check_wal(repo *r, const rs_opts *opts, const mf_backup *h, pb_error *err)
{
    rs_target_val tv;
    wal_view v;
    uint32_t seg = h->wal_segment_size, tli = h->timeline;
    int rc = parse_target(opts, &tv, err);
    if (rc)
        return rc;
    if (!arch_valid_seg_size(seg))
        return pb_fail(err, PB_ECORRUPT, "backup %s records an impossible WAL segment size "
                       "%u", h->id, seg);
    rc = view_load(&v, r, ARCH_LIST_SEGMENTS | ARCH_LIST_HISTORY, err);
    if (rc == 0)
        rc = target_tli(&v, opts, h->timeline, &tli, err);
    if (rc == 0)
        rc = load_history(&v, tli, err);
    if (rc)
        goto out;
    uint64_t first = h->start_lsn / seg, need = (h->stop_lsn - 1) / seg, last = need;
    if (opts->target == RS_TARGET_LSN && tv.lsn / seg > last)
        last = tv.lsn / seg;
    for (uint64_t s = first; s <= last; s++) {
        char name[25];
        if (segment_for(&v, s, seg, name))
            continue;
        char what[200];
        if (s <= need)
            snprintf(what, sizeof(what), "to make backup %s consistent", h->id);
        else
            snprintf(what, sizeof(what), "to replay backup %s up to the target LSN %s", h->id,
                     opts->target_value);
        rc = pb_fail(err, PB_ENOENT, "WAL segment %s needed %s is missing from repository "
                     "%s; nothing was written", name[0] ? name : "(none on this timeline)",
                     what, repo_location(r));
        goto out;
    }
    if (opts->target != RS_TARGET_IMMEDIATE && opts->target != RS_TARGET_LSN)
        report_reach(&v, h, last);
out:
    view_free(&v);
    return rc;
}
