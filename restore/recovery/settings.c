/*
 * restore/recovery/settings.c — point-in-time targets as the user gives them (time, LSN,
 * xid, restore point name) and the recovery settings of the restored cluster. Which
 * backup can reach a target is choose_set.c; whether the WAL to get there is archived,
 * and along which timeline, is timeline.c.
 */
#include "restore/recovery/recovery.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

/* ---- targets ------------------------------------------------------------------------ */


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
    tv->time_us = tv->time * 1000000;
    for (int i = 1, scale = 100000; i < frac_len && scale > 0; i++, scale /= 10)
        tv->time_us += (frac[i] - '0') * scale;
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

int rs_parse_target(const rs_opts *opts, rs_target_val *tv, pb_error *err)
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

void rs_fmt_time(int64_t t, char out[40])
{
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(out, 40, "%Y-%m-%d %H:%M:%S+00", &tm);
}

/* ---- recovery settings ------------------------------------------------------------ */

/* A GUC string literal: PostgreSQL's GUC_scanstr reads '' as ' and a backslash as the
 * start of an escape, so both are doubled (a restore_command quoted for the shell holds
 * backslashes: '\''). */
static void put_setting(FILE *fp, const char *name, const char *value)
{
    fprintf(fp, "%s = '", name);
    for (const char *p = value; *p; p++) {
        if (*p == '\'' || *p == '\\')
            fputc(*p, fp);
        fputc(*p, fp);
    }
    fputs("'\n", fp);
}

/* A restored copy started with the source's settings would archive its new timeline
 * into the source's repository (history files and segments the source never wrote). */
static void put_archive_mode(FILE *fp, const rs_opts *opts, const char *path)
{
    if (opts->archive_preserve) {
        pb_info("archive_mode: the source's setting is kept (--archive-mode preserve): the "
                "restored copy archives with its archive_command once started");
        return;
    }
    put_setting(fp, "archive_mode", "off");
    pb_info("archive_mode = off written to %s: the restored copy does not archive "
            "(--archive-mode preserve keeps the source's setting)", path);
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

/* The target settings of a recovery that ends (recovery.signal). */
static void put_target(FILE *fp, const rs_opts *opts, const rs_target_val *tv,
                       const rs_timeline *tl)
{
    const char *name = target_setting(opts->target);
    if (opts->target == RS_TARGET_IMMEDIATE)
        put_setting(fp, "recovery_target", "immediate");
    else if (opts->target == RS_TARGET_TIME)
        put_setting(fp, name, tv->time_text);
    else if (name)
        put_setting(fp, name, opts->target_value);
    if (name)
        put_setting(fp, "recovery_target_inclusive", opts->target_exclusive ? "off" : "on");
    if (opts->target != RS_TARGET_END)
        put_setting(fp, "recovery_target_action",
                    opts->target_action ? opts->target_action : "promote");
    put_setting(fp, "recovery_target_timeline", tl->setting);
}

/* A standby (standby.signal) has no target: it replays the archive, streams from its
 * primary when given one, follows the newest timeline (a promotion upstream) and stays
 * in recovery until promoted. */
static void put_standby(FILE *fp, const rs_opts *opts)
{
    if (opts->primary_conninfo)
        put_setting(fp, "primary_conninfo", opts->primary_conninfo);
    put_setting(fp, "recovery_target_timeline", "latest");
}

/* What recovery will do, in one line. */
static void say_recovery(const rs_opts *opts, const rs_target_val *tv, const mf_backup *h)
{
    const char *action = opts->target_action ? opts->target_action : "promote";
    char lsn[32];
    pb_lsn_format(h->stop_lsn, lsn);
    if (opts->standby)
        pb_info("recovery will run as a standby: replay archived WAL%s, follow the newest "
                "timeline and stay in recovery until promoted", opts->primary_conninfo
                ? ", then stream from the primary (primary_conninfo)" : "");
    else if (opts->target == RS_TARGET_END)
        pb_info("recovery will replay archived WAL to its end, then promote "
                "(--target-immediate stops at backup %s's consistency point)", h->id);
    else if (opts->target == RS_TARGET_IMMEDIATE)
        pb_info("recovery will stop where backup %s is consistent (LSN %s), then %s",
                h->id, lsn, action);
    else
        pb_info("recovery will replay archived WAL to %s %s (%s), then %s",
                target_setting(opts->target), opts->target == RS_TARGET_TIME
                ? tv->time_text : opts->target_value, opts->target_exclusive
                ? "stopping before it" : "including it", action);
}

/* Settings an earlier restore wrote (the source may itself be a restored copy, promoted
 * and backed up): left in place, PostgreSQL would see two recovery targets, or an old
 * restore_command, beside the ones written now. */
static bool replaced_setting(const char *line, const rs_opts *opts)
{
    static const char *const names[] = {"restore_command", "recovery_end_command",
                                        "archive_cleanup_command", "recovery_target"};
    line += strspn(line, " \t");
    size_t len = strcspn(line, " \t=");
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        size_t n = strlen(names[i]);
        /* recovery_target and every recovery_target_* */
        if (len >= n && strncasecmp(line, names[i], n) == 0 &&
            (len == n || (i == 3 && line[n] == '_')))
            return true;
    }
    return (!opts->archive_preserve && len == 12 && strncasecmp(line, "archive_mode", 12) == 0) ||
           (opts->primary_conninfo && len == 16 &&
            strncasecmp(line, "primary_conninfo", 16) == 0);
}

/* Comment out, in path, the settings replaced_setting names (as pgBackRest does), through
 * a new file renamed over it. A missing file is fine: there is nothing to replace. */
static int comment_out_replaced(const char *path, const rs_opts *opts, pb_error *err)
{
    FILE *in = fopen(path, "r");
    if (!in)
        return errno == ENOENT ? 0 : pb_fail_errno(err, PB_EIO, "cannot read %s", path);
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.pageback-new", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    FILE *out = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!out) {
        int rc = pb_fail_errno(err, PB_EIO, "cannot create %s", tmp);
        if (fd >= 0)
            close(fd);
        fclose(in);
        return rc;
    }
    char line[8192];
    unsigned removed = 0;
    while (fgets(line, sizeof(line), in)) {
        bool drop = replaced_setting(line, opts);
        removed += drop;
        fprintf(out, "%s%s", drop ? "# replaced by pageback restore: " : "", line);
    }
    bool ok = !ferror(in) && fflush(out) == 0 && fsync(fileno(out)) == 0;
    fclose(in);
    ok &= fclose(out) == 0;
    if (ok && rename(tmp, path) == 0) {
        if (removed)
            pb_info("%u recovery %s of an earlier restore commented out in %s", removed,
                    pb_plural(removed, "setting", "settings"), path);
        return 0;
    }
    int rc = pb_fail_errno(err, PB_EIO, "cannot rewrite %s", path);
    unlink(tmp);
    return rc;
}

int rs_write_recovery(const char *target_dir, const rs_opts *opts, const rs_target_val *tv,
                      const mf_backup *h, const rs_timeline *tl, pb_error *err)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/postgresql.auto.conf", target_dir);
    int rc = comment_out_replaced(path, opts, err);
    if (rc)
        return rc;
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
    if (opts->standby)
        put_standby(fp, opts);
    else
        put_target(fp, opts, tv, tl);
    put_archive_mode(fp, opts, path);
    if (fclose(fp) != 0)
        rc = pb_fail_errno(err, PB_EIO, "cannot write %s", path);
    /* One signal file: a backup from a standby holds its standby.signal, which would win
     * over recovery.signal and make the restored copy a standby of the source's primary;
     * a standby asked for must not promote through a recovery.signal a delta left. */
    const char *signal = opts->standby ? "standby.signal" : "recovery.signal";
    const char *other = opts->standby ? "recovery.signal" : "standby.signal";
    snprintf(path, sizeof(path), "%s/%s", target_dir, signal);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return pb_fail_errno(err, PB_EIO, "cannot create %s", path);
    close(fd);
    snprintf(path, sizeof(path), "%s/%s", target_dir, other);
    if (rc == 0 && unlink(path) != 0 && errno != ENOENT)
        rc = pb_fail_errno(err, PB_EIO, "cannot remove %s", path);
    if (rc == 0)
        say_recovery(opts, tv, h);
    return rc;
}

int rs_check_target(const rs_opts *opts, pb_error *err)
{
    rs_target_val tv;
    return rs_parse_target(opts, &tv, err);
}
