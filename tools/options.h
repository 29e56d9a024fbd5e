/*
 * tools/options.h — the program's options: command line first, then PAGEBACK_*
 * and the standard PG* / AWS_* environment, then an optional config file.
 */
#ifndef PB_TOOLS_OPTIONS_H
#define PB_TOOLS_OPTIONS_H

#include <stdbool.h>
#include <stdio.h>

#include "engine/backup.h"
#include "engine/storage/storage.h"
#include "restore/restore.h"

#define PB_MAX_TBLSPC_MAP 64
#define PB_MAX_DB_INCLUDE 64

typedef struct pb_options {
    const char *command; /* NULL only for "pageback help" without a command */
    bool help_requested; /* --help or "help": print opts_usage(command), nothing else */
    const char *args[4]; /* positional arguments after the command */
    int nargs;
    const char *config_file;
    const char *state_dir;
    const char *program; /* absolute path of this executable, for restore_command */
    bool json;
    bool restore_points; /* info --restore-points */
    bool quiet;
    int retain_full;
    repo_opts repo;
    bk_opts backup;
    rs_opts restore;
    rs_tblspc_map tblspc[PB_MAX_TBLSPC_MAP];
    const char *db_include[PB_MAX_DB_INCLUDE]; /* restore --db-include NAME, repeatable */
    char s3_endpoint_buf[512];
    /* S3 settings as given, so restore_command can repeat them */
    const char *s3_uri_style;
    bool s3_insecure_given;
    char *config_text; /* the config file's contents; option strings point into it */
} pb_options;

/* Parse argv into opts (strings point into argv, the environment or a config buffer the
 * options own). A usage problem returns PB_EINVAL with err saying what is wrong. A
 * request for help ("pageback help [COMMAND]", "pageback --help", "COMMAND --help")
 * returns 0 with help_requested set and only command filled in. Free with opts_free,
 * also after a failure. */
int opts_parse(pb_options *opts, int argc, char **argv, pb_error *err);
void opts_free(pb_options *opts);
/* Print the usage of command (its options and the common ones) to out, or of every
 * command when command is NULL. PB_EINVAL, printing nothing, for an unknown command. */
int opts_usage(FILE *out, const char *command);

#endif
