/*
 * tools/options_ops.c — the options of retention (expire --retain-full-days,
 * --retain-archive), restore kinds (restore --type standby, --primary-conninfo,
 * --target-immediate) and annotations (backup --annotation key=value), kept apart from
 * tools/options.c so that file stays the parser.
 */
#include "tools/options_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static int parse_count(const char *text, unsigned *out)
{
    char *end;
    unsigned long v = strtoul(text, &end, 10);
    if (end == text || *end || text[0] == '-' || v == 0 || v > 100000)
        return PB_EINVAL;
    *out = (unsigned)v;
    return 0;
}

/* key=value: a key of letters, digits, '_', '-' and '.', unique; a value of printable
 * text (a line of the manifest's annotation field, shown by info); all of them fit
 * MF_ANNOTATIONS_LEN. */
static int add_annotation(pb_options *o, const char *arg, pb_error *err)
{
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

int opts_restore_type(pb_options *o, const char *arg, pb_error *err)
{
    if (!strcmp(arg, "standby") || !strcmp(arg, "default")) {
        o->restore.standby = arg[0] == 's';
        return 0;
    }
    /* backup's types, from a configuration or environment shared by both commands */
    if (!strcmp(arg, "full") || !strcmp(arg, "incr"))
        return 0;
    return pb_fail(err, PB_EINVAL, "restore --type must be standby or default, not '%s'", arg);
}

int opts_apply_ops(pb_options *o, int c, const char *arg, pb_error *err)
{
    switch (c) {
    case O_RETAIN_DAYS:
        if (parse_count(arg, &o->retain_full_days))
            return pb_fail(err, PB_EINVAL, "--retain-full-days expects whole days, 1 or more, "
                           "not '%s'", arg);
        return 0;
    case O_RETAIN_ARCHIVE:
        if (parse_count(arg, &o->retain_archive))
            return pb_fail(err, PB_EINVAL, "--retain-archive expects a number of full backups, "
                           "1 or more, not '%s'", arg);
        return 0;
    case O_PRIMARY_CONNINFO:
        if (!arg[0])
            return pb_fail(err, PB_EINVAL, "--primary-conninfo expects a libpq connection "
                           "string");
        o->restore.primary_conninfo = arg;
        return 0;
    case O_TARGET_IMMEDIATE:
        o->restore.target_immediate = true;
        return 0;
    case O_ANNOTATION:
        return add_annotation(o, arg, err);
    }
    return 1;
}

static opts_source source_of(const pb_options *o, const char *name)
{
    const struct option *t = opts_long_table();
    for (int i = 0; t[i].name; i++)
        if (!strcmp(t[i].name, name))
            return (opts_source)o->source[i];
    return OPTS_DEFAULT;
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
    static const char *const kinds[] = {"target-time", "target-lsn", "target-xid",
                                        "target-name", "target-end"};
    opts_source given = OPTS_DEFAULT, imm = source_of(o, "target-immediate");
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (source_of(o, kinds[i]) > given)
            given = source_of(o, kinds[i]);
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
    if (o->command && !strcmp(o->command, "expire") && source_of(o, "set") != OPTS_FLAG)
        o->restore.set = NULL;
    return 0;
}
