/*
 * tools/options_ops.c — the options of retention (expire --retain-full-days,
 * --retain-archive), restore kinds (restore --type standby, --primary-conninfo,
 * --target-immediate), kept apart from tools/options.c so that file stays the parser.
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
    }
    return 1;
}
