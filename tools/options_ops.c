/*
 * tools/options_ops.c — the options that need more than a typed value of the option
 * table: --type (backup's or restore's), the S3 addressing, the log levels, the key
 * files, --verify-scan (a count or a duration), --io-class, the recovery targets,
 * --tablespace-map, --db-include, --annotation and --primary-conninfo; and what is
 * decided once every source is read (the recovery target, expire's --set).
 */
#include "tools/options_internal.h"

#include <stdlib.h>
#include <string.h>

/* key=value: a key of letters, digits, '_', '-' and '.', unique; a value of printable
 * text (a line of the manifest's annotation field, shown by info); all of them fit
 * MF_ANNOTATIONS_LEN. */
int opts_annotation(pb_options *o, const opts_def *d, const char *arg, pb_error *err)
{
    (void)d;
    const char *eq = strchr(arg, '=');
    size_t klen = eq ? (size_t)(eq - arg) : 0;
    bool ok = klen > 0 && klen <= 64 && strspn(arg, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklm"
                                              "nopqrstuvwxyz0123456789_-.") == klen;
    for (const char *p = eq ? eq + 1 : ""; ok && *p; p++)
        ok = (unsigned char)*p >= 0x20 && *p != 0x7f;
    if (!ok)
        return pb_fail(err, PB_EINVAL, "--annotation expects key=value (key: letters, digits, "
                       "_ - . up to 64; value: printable text), not '%s'", arg);
    for (const char *p = o->annotations; *p; p = strchr(p, '\n') + 1)
        if (!strncmp(p, arg, klen + 1))
            return pb_fail(err, PB_EINVAL, "--annotation %.*s is given twice", (int)klen, arg);
    size_t used = strlen(o->annotations), n = strlen(arg) + 1;
    if (used + n >= sizeof(o->annotations))
        return pb_fail(err, PB_EINVAL, "--annotation: all annotations of a backup take at most "
                       "%zu bytes", sizeof(o->annotations) - 1);
    snprintf(o->annotations + used, sizeof(o->annotations) - used, "%s\n", arg);
    o->backup.annotations = o->annotations;
    return 0;
}

/* restore --type standby|default; full and incr, backup's, are left to backup (from a
 * configuration or environment shared by both commands). */
int opts_type(pb_options *o, const opts_def *d, const char *arg, pb_error *err)
{
    (void)d;
    if (o->command && !strcmp(o->command, "restore")) {
        if (!strcmp(arg, "standby") || !strcmp(arg, "default")) {
            o->restore.standby = arg[0] == 's';
            return 0;
        }
        if (!strcmp(arg, "full") || !strcmp(arg, "incr"))
            return 0;
        return pb_fail(err, PB_EINVAL, "restore --type must be standby or default, not '%s'",
                       arg);
    }
    if (strcmp(arg, "full") && strcmp(arg, "incr"))
        return pb_fail(err, PB_EINVAL, "--type must be full or incr, not '%s'", arg);
    o->backup.type = arg[0] == 'f' ? 'F' : 'I';
    return 0;
}

/* Kept as given too, so restore_command can repeat it. */
int opts_s3_uri_style(pb_options *o, const opts_def *d, const char *arg, pb_error *err)
{
    if (strcmp(arg, "path") && strcmp(arg, "host"))
        return pb_fail(err, PB_EINVAL, "--%s must be path or host, not '%s'", d->name, arg);
    o->repo.s3_path_style = arg[0] == 'p';
    o->s3_uri_style = arg;
    return 0;
}

int opts_s3_insecure(pb_options *o, const opts_def *d, const char *arg, pb_error *err)
{
    (void)d, (void)arg, (void)err;
    o->repo.s3_insecure = true;
    o->s3_insecure_given = true;
    return 0;
}

/* lo 0: the console's level (--log-level, --log-level-console); 1: the file's, which
 * may be off. */
int opts_log_level(pb_options *o, const opts_def *d, const char *arg, pb_error *err)
{
    pb_log_level lv;
    if (pb_log_level_parse(arg, d->lo == 1, &lv))
        return pb_fail(err, PB_EINVAL, "--%s must be %serror, warn, info, detail or debug, "
                       "not '%s'", d->name, d->lo == 1 ? "off, " : "", arg);
    if (d->lo == 1)
        o->log_level_file = lv;
    else
        pb_log_set_level(lv);
    return 0;
}

int opts_key_file(pb_options *o, const opts_def *d, const char *arg, pb_error *err)
{
    if (o->n_key_files == REPO_MAX_KEYS)
        return pb_fail(err, PB_EINVAL, "at most %d --%s", REPO_MAX_KEYS, d->name);
    o->key_files[o->n_key_files++] = arg;
    return 0;
}

/* A number counts incrementals, anything else is a duration; one replaces both
 * defaults. */
int opts_verify_scan(pb_options *o, const opts_def *d, const char *arg, pb_error *err)
{
    unsigned u;
    int64_t secs;
    if (opts_parse_uint(arg, &u) == 0) {
        o->backup.verify_every = u;
        o->backup.verify_after_secs = 0;
    } else if (opts_parse_duration(arg, &secs) == 0) {
        o->backup.verify_every = 0;
        o->backup.verify_after_secs = secs;
    } else {
        return pb_fail(err, PB_EINVAL, "--%s expects a count (every Nth incremental) or a "
                       "duration like 7d, not '%s'", d->name, arg);
    }
    return 0;
}

int opts_io_class(pb_options *o, const opts_def *d, const char *arg, pb_error *err)
{
    o->backup.io_level = 7;
    if (!strcmp(arg, "idle") || !strcmp(arg, "default") || !strcmp(arg, "best-effort")) {
        o->backup.io_class = arg[0] == 'i' ? SCAN_IO_IDLE : arg[0] == 'd' ? SCAN_IO_DEFAULT
                                                                          : SCAN_IO_BEST_EFFORT;
        return 0;
    }
    if (!strncmp(arg, "best-effort:", 12) && arg[12] >= '0' && arg[12] <= '7' && !arg[13]) {
        o->backup.io_class = SCAN_IO_BEST_EFFORT;
        o->backup.io_level = arg[12] - '0';
        return 0;
    }
    return pb_fail(err, PB_EINVAL, "--%s must be idle, best-effort, best-effort:0..7 or "
                   "default, not '%s'", d->name, arg);
}

/* lo: the kind of target (restore/restore.h); only one of them. */
int opts_target(pb_options *o, const opts_def *d, const char *arg, pb_error *err)
{
    if (o->restore.target != RS_TARGET_IMMEDIATE)
        return pb_fail(err, PB_EINVAL, "give only one of --target-time, --target-lsn, "
                       "--target-xid, --target-name, --target-end");
    o->restore.target = (rs_target_kind)d->lo;
    o->restore.target_value = d->arg ? arg : NULL;
    return 0;
}

int opts_tablespace_map(pb_options *o, const opts_def *d, const char *arg, pb_error *err)
{
    const char *eq = strchr(arg, '=');
    char *end;
    unsigned long oid = strtoul(arg, &end, 10);
    if (!eq || end != eq || eq[1] != '/' || o->restore.ntblspc >= PB_MAX_TBLSPC_MAP)
        return pb_fail(err, PB_EINVAL, "--%s expects OID=/absolute/dir, got '%s'", d->name,
                       arg);
    o->tblspc[o->restore.ntblspc].oid = (unsigned)oid;
    o->tblspc[o->restore.ntblspc].dir = eq + 1;
    o->restore.ntblspc++;
    o->restore.tblspc = o->tblspc;
    return 0;
}

int opts_db_include(pb_options *o, const opts_def *d, const char *arg, pb_error *err)
{
    if (!arg[0] || o->restore.ndb_include >= PB_MAX_DB_INCLUDE)
        return pb_fail(err, PB_EINVAL, "--%s expects a database name (at most %d)", d->name,
                       PB_MAX_DB_INCLUDE);
    o->db_include[o->restore.ndb_include++] = arg;
    o->restore.db_include = o->db_include;
    return 0;
}

int opts_primary_conninfo(pb_options *o, const opts_def *d, const char *arg, pb_error *err)
{
    if (!arg[0])
        return pb_fail(err, PB_EINVAL, "--%s expects a libpq connection string", d->name);
    o->restore.primary_conninfo = arg;
    return 0;
}

/*
 * The recovery a restore asks for. Without a target it replays the archived WAL to its
 * end and promotes (as pgBackRest's type=default, and what restoring a lost primary
 * needs); --target-immediate stops at the backup's consistency point. A target given on
 * a higher level (command line over environment over file) wins over one below it;
 * two on one level are refused. A standby takes no target: it never ends recovery.
 */
static int finish_restore(pb_options *o, pb_error *err)
{
    rs_opts *r = &o->restore;
    static const opts_id kinds[] = {OPT_TARGET_TIME, OPT_TARGET_LSN, OPT_TARGET_XID,
                                    OPT_TARGET_NAME, OPT_TARGET_END};
    opts_source given = OPTS_DEFAULT, imm = (opts_source)o->source[OPT_TARGET_IMMEDIATE];
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (o->source[kinds[i]] > given)
            given = (opts_source)o->source[kinds[i]];
    bool explicit = r->target != RS_TARGET_IMMEDIATE;
    if (r->target_immediate && explicit && imm == given)
        return pb_fail(err, PB_EINVAL, "give only one of --target-immediate, --target-time, "
                       "--target-lsn, --target-xid, --target-name, --target-end");
    if (r->target_immediate && explicit && imm > given) {
        r->target = RS_TARGET_IMMEDIATE;
        r->target_value = NULL;
    }
    r->target_immediate = r->target == RS_TARGET_IMMEDIATE && r->target_immediate;
    if (r->standby && (explicit || r->target_immediate) &&
        (given == OPTS_FLAG || imm == OPTS_FLAG))
        return pb_fail(err, PB_EINVAL, "restore --type standby takes no recovery target: a "
                       "standby replays and streams until it is promoted");
    if (r->standby || (!explicit && !r->target_immediate)) {
        r->target = RS_TARGET_END;
        r->target_value = NULL;
    }
    if (r->primary_conninfo && !r->standby)
        return pb_fail(err, PB_EINVAL, "--primary-conninfo is for restore --type standby");
    return 0;
}

int opts_finish_ops(pb_options *o, pb_error *err)
{
    if (o->command && !strcmp(o->command, "restore"))
        return finish_restore(o, err);
    /* expire --set removes a backup: only as a flag, never from a `set` meant for
     * restore in the environment or a configuration file */
    if (o->command && !strcmp(o->command, "expire") && o->source[OPT_SET] != OPTS_FLAG)
        o->restore.set = NULL;
    return 0;
}
