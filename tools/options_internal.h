/*
 * tools/options_internal.h — the option table (tools/options.def, expanded by
 * tools/options_table.c) and what the files of the parser share: the typed parsers,
 * the options that need more than a typed value (tools/options_ops.c) and the sources
 * below the command line (tools/options_sources.c).
 */
#ifndef PB_TOOLS_OPTIONS_INTERNAL_H
#define PB_TOOLS_OPTIONS_INTERNAL_H

#include "tools/options.h"

/* How an option's text becomes its field. */
typedef enum opts_kind {
    OPTK_STR,      /* the text itself */
    OPTK_WORD,     /* the text, one of the words of arg ("promote|pause|shutdown") */
    OPTK_SWITCH,   /* no value: the field takes lo */
    OPTK_UINT,     /* a whole number lo..hi */
    OPTK_SIZE,     /* bytes with an optional K, M or G: lo..hi, a multiple of step */
    OPTK_DURATION, /* seconds, or a number with s, m, h or d */
    OPTK_CHOICE,   /* one of the words of arg: the field takes the matching value */
    OPTK_FN,       /* its own function (lo: a parameter for it) */
    OPTK_ASK,      /* --help (lo 0) or --version (lo 1): handled by the command line */
} opts_kind;

typedef struct opts_def opts_def;
/* arg is NULL for a switch. 0, or PB_EINVAL with err naming the option and the value. */
typedef int (*opts_parse_fn)(pb_options *o, const opts_def *d, const char *arg,
                             pb_error *err);

/* One row of tools/options.def. */
struct opts_def {
    const char *name, *commands, *arg, *default_text, *meaning;
    opts_kind kind;
    bool cli_only;     /* not a setting: no PAGEBACK_<NAME>, no configuration key */
    size_t off, size;  /* the field in pb_options */
    unsigned long long lo, hi, step;
    const long long *values; /* OPTK_CHOICE: one per word of arg */
    size_t nvalues;
    opts_parse_fn parse;
};

extern const opts_def opts_table[OPTS_COUNT];

/* The row of name (a long option or a configuration key); NULL for none. */
const opts_def *opts_find(const char *name);
/* "PAGEBACK_READ_SIZE" for read-size (and s3-key...); false when it does not fit cap. */
bool opts_env_name(const char *name, char *out, size_t cap);
/* Apply option id with arg (NULL for a switch), as the command line would. */
int opts_apply(pb_options *o, opts_id id, const char *arg, pb_error *err);
/* The typed parsers, also for the options of tools/options_ops.c: 0 or PB_EINVAL. */
int opts_parse_uint(const char *text, unsigned *out);
int opts_parse_size(const char *text, size_t *out);
int opts_parse_duration(const char *text, int64_t *out);

/* Fill from PAGEBACK_<OPTION> (and AWS_*) what the command line did not give. */
int opts_apply_env(pb_options *o, pb_error *err);
/* Load o->config_file and fill from its global section, then o->cluster's, what the
 * command line and the environment did not give. */
int opts_apply_config(pb_options *o, pb_error *err);
/* Read the --encrypt-key-file files (or PAGEBACK_ENCRYPT_KEY) into o->keys. */
int opts_load_keys(pb_options *o, pb_error *err);

/* The options that need their own function (tools/options_ops.c). */
int opts_type(pb_options *o, const opts_def *d, const char *arg, pb_error *err);
int opts_s3_uri_style(pb_options *o, const opts_def *d, const char *arg, pb_error *err);
int opts_s3_insecure(pb_options *o, const opts_def *d, const char *arg, pb_error *err);
int opts_log_level(pb_options *o, const opts_def *d, const char *arg, pb_error *err);
int opts_key_file(pb_options *o, const opts_def *d, const char *arg, pb_error *err);
int opts_verify_scan(pb_options *o, const opts_def *d, const char *arg, pb_error *err);
int opts_io_class(pb_options *o, const opts_def *d, const char *arg, pb_error *err);
int opts_annotation(pb_options *o, const opts_def *d, const char *arg, pb_error *err);
int opts_target(pb_options *o, const opts_def *d, const char *arg, pb_error *err);
int opts_tablespace_map(pb_options *o, const opts_def *d, const char *arg, pb_error *err);
int opts_db_include(pb_options *o, const opts_def *d, const char *arg, pb_error *err);
int opts_primary_conninfo(pb_options *o, const opts_def *d, const char *arg, pb_error *err);
/* After every source: restore's recovery target from the options given (default: the
 * archive's end); expire's --set only from the command line. */
int opts_finish_ops(pb_options *o, pb_error *err);

#endif
