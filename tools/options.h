/*
 * tools/options.h — the program's options. Each option comes from, in falling
 * precedence: the command line, its PAGEBACK_<OPTION> environment variable (and the
 * standard PG* / AWS_* environment), the [cluster:NAME] section of the configuration
 * file, its global section, the built-in default (docs/GUIDE.md, "Configuration").
 */
#ifndef PB_TOOLS_OPTIONS_H
#define PB_TOOLS_OPTIONS_H

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

#include "engine/backup/backup.h"
#include "engine/storage/storage.h"
#include "restore/restore.h"
#include "tools/config.h"

#define PB_MAX_TBLSPC_MAP 64

/* Every option, by its row in tools/options.def: OPT_READ_SIZE... */
typedef enum opts_id {
#define OPT(id, ...) OPT_##id,
#include "tools/options.def"
#undef OPT
    OPTS_COUNT
} opts_id;

/* Where an option's value came from, lowest precedence first. */
typedef enum opts_source {
    OPTS_DEFAULT = 0, OPTS_GLOBAL, OPTS_CLUSTER, OPTS_ENV, OPTS_FLAG
} opts_source;

/* The config-only settings (never flags: a secret on the command line is visible in
 * ps), also read from PAGEBACK_S3_KEY... and the AWS_* environment. */
enum { OPTS_S3_KEY, OPTS_S3_SECRET, OPTS_S3_TOKEN, OPTS_NSECRETS };
#define PB_MAX_DB_INCLUDE 64

typedef struct pb_options {
    const char *command; /* NULL only for "pageback help" without a command */
    bool help_requested; /* --help or "help": print opts_usage(command), nothing else */
    bool version_requested; /* --version or "version" */
    const char *args[4]; /* positional arguments after the command */
    int nargs;
    const char *config_file;
    const char *cluster;
    const char *state_dir;
    const char *program; /* absolute path of this executable, for restore_command */
    bool json;
    bool restore_points; /* info --restore-points */
    bool quiet;
    int retain_full;
    bool dry_run;        /* expire --dry-run: list what would go, remove nothing */
    unsigned retain_full_days; /* expire --retain-full-days D (0: not given) */
    unsigned retain_archive;   /* expire --retain-archive N (0: not given) */
    char annotations[MF_ANNOTATIONS_LEN]; /* backup --annotation lines (backup.annotations) */
    repo_opts repo;
    bk_opts backup;
    rs_opts restore;
    rs_tblspc_map tblspc[PB_MAX_TBLSPC_MAP];
    const char *db_include[PB_MAX_DB_INCLUDE]; /* restore --db-include NAME, repeatable */
    char s3_endpoint_buf[512];
    /* S3 settings as given, so restore_command can repeat them */
    const char *s3_uri_style;
    bool s3_insecure_given;
    /* --encrypt-key-file, in order, and the keys read from them (or PAGEBACK_ENCRYPT_KEY);
     * repo.keys points to keys */
    const char *key_files[REPO_MAX_KEYS];
    size_t n_key_files;
    char *key_text[REPO_MAX_KEYS];
    repo_key keys[REPO_MAX_KEYS];
    const char *report_file;  /* --report: JSON report of the run */
    const char *metrics_file; /* --metrics-file: Prometheus text */
    const char *log_file;     /* --log-file: instead of the default log file */
    const char *log_path;     /* --log-path: the default log file's directory */
    pb_log_level log_level_file; /* --log-level-file (PB_LOG_OFF: no log file) */
    unsigned progress_interval; /* seconds between progress log lines off a terminal */
    unsigned archive_timeout;   /* check: seconds the WAL round trip may take */
    /* Per option (opts_id): its source and its text as given. */
    unsigned char source[OPTS_COUNT];
    const char *given[OPTS_COUNT];
    unsigned char secret_source[OPTS_NSECRETS];
    cfg_file cfg; /* the configuration file; option strings may point into it */
    /* A named cluster's namespace in the repository (tools/cluster_ns.c): repo.location
     * then points to cluster_location (owned, with the cluster's own state directory
     * behind it when the global section names one), repo_root to the configured one. */
    const char *repo_root;
    char *cluster_location;
} pb_options;

/* Parse argv into opts (strings point into argv, the environment or the configuration
 * the options own). A usage problem returns PB_EINVAL with err saying what is wrong in
 * one line. A request for help ("pageback help [COMMAND]", "pageback --help", "COMMAND
 * --help") returns 0 with help_requested set and only command filled in; --version the
 * same with version_requested. Free with opts_free, also after a failure. */
int opts_parse(pb_options *opts, int argc, char **argv, pb_error *err);
void opts_free(pb_options *opts);
/* Print the usage of command (its options with their meanings and defaults, then the
 * common ones) to out, or of every command when command is NULL. PB_EINVAL, printing
 * nothing, for an unknown command. */
int opts_usage(FILE *out, const char *command);

/* Each effective setting, for "pageback config check": cb sees the option's name, its
 * value as given (NULL: default_text applies), its source and whether it is a secret. */
typedef void (*opts_setting_cb)(void *ctx, const char *name, const char *value,
                                const char *default_text, opts_source src, bool secret);
void opts_each_setting(const pb_options *opts, opts_setting_cb cb, void *ctx);
const char *opts_source_name(opts_source src);

/* tools/help.c: does command take option name? (true for a name that is no option, and
 * for every option of "config check") */
bool opts_option_applies(const char *name, const char *command);
/* The options part of a command's help: its own options, then the common ones. */
void opts_help_options(FILE *out, const char *command);
/* A command's line of the usage: "  backup   [--type full|incr|standby] ... (note)",
 * args (its positional arguments) first, then each of its own options. */
void opts_help_synopsis(FILE *out, const char *command, const char *args, const char *note);
/* The common options as a usage synopsis: "[--repo DIR|s3://B/P] [--config FILE]...". */
void opts_help_common(FILE *out);

#endif
