/* tools/options_internal.h — shared by tools/options.c and tools/options_sources.c. */
#ifndef PB_TOOLS_OPTIONS_INTERNAL_H
#define PB_TOOLS_OPTIONS_INTERNAL_H

#include "tools/options.h"

/* The long options, terminated by a zero row; an option's index here is its index in
 * pb_options.source and .given. */
const struct option *opts_long_table(void);
/* Apply option idx with arg (NULL for a switch), as the command line would. */
int opts_apply(pb_options *o, int idx, const char *arg, pb_error *err);
/* Fill from PAGEBACK_<OPTION> (and AWS_*) what the command line did not give. */
int opts_apply_env(pb_options *o, pb_error *err);
/* Load o->config_file and fill from its global section, then o->cluster's, what the
 * command line and the environment did not give. */
int opts_apply_config(pb_options *o, pb_error *err);
/* Read the --encrypt-key-file files (or PAGEBACK_ENCRYPT_KEY) into o->keys. */
int opts_load_keys(pb_options *o, pb_error *err);

/* Options of retention, restore kinds and annotations (tools/options_ops.c); their
 * values sit above the option enum of tools/options.c. */
enum {
    O_RETAIN_DAYS = 1024, O_RETAIN_ARCHIVE, O_PRIMARY_CONNINFO,
    O_TARGET_IMMEDIATE, O_ANNOTATION
};
/* 0 or a negative code when c is one of them, 1 when it is not. */
int opts_apply_ops(pb_options *o, int c, const char *arg, pb_error *err);
/* restore --type standby|default (full and incr, backup's, are left to backup). */
int opts_restore_type(pb_options *o, const char *arg, pb_error *err);
/* After every source: restore's recovery target from the options given (default: the
 * archive's end); expire's --set only from the command line. */
int opts_finish_ops(pb_options *o, pb_error *err);

#endif
