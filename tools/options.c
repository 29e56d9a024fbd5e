/*
 * tools/options.c — the command line: the command, its options (getopt over the option
 * table of tools/options.def) and its arguments, then the sources below it (the
 * environment and the configuration file, tools/options_sources.c); and the usage.
 */
#include "tools/options_internal.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Each command, in the order the global usage lists them: its positional arguments and
 * a note; its options come from the option table (tools/help.c). */
static const struct {
    const char *command, *args, *note;
} usages[] = {
    {"backup", "", "a full or incremental backup of the running cluster"},
    {"restore", "", "--target-dir required; recovers to the end of the archived WAL unless "
                    "a target is given"},
    {"archive-push", "WAL_PATH", "archive_command = 'pageback archive-push %p'"},
    {"archive-get", "WAL_NAME DEST_PATH", "restore_command"},
    {"info", "", "the backups and the archived WAL"},
    {"verify", "", "a backup's objects and pages"},
    {"expire", "", "one of --retain-full, --retain-full-days or --set"},
    {"rebase", "", "a synthetic full from a chain"},
    {"tune", "", "no --repo needed"},
    {"config", "check", "the effective settings and their sources, secrets masked"},
    {"init", "", "create the repository"},
    {"check", "", "would a backup succeed now?"},
};

static const char usage_env[] =
    "environment: PAGEBACK_<OPTION> for every option (PAGEBACK_REPO...), PAGEBACK_ENCRYPT_KEY,\n"
    "        PG* (libpq), AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION\n"
    "pageback --version; exit status 0 success, 1 failure, 2 usage or configuration error\n";

int opts_usage(FILE *out, const char *command)
{
    size_t n = sizeof(usages) / sizeof(usages[0]), i = 0;
    if (command) {
        while (i < n && strcmp(usages[i].command, command) != 0)
            i++;
        if (i == n)
            return PB_EINVAL;
        fprintf(out, "usage: pageback %s [options]\n", command);
        opts_help_synopsis(out, command, usages[i].args, usages[i].note);
        opts_help_options(out, command);
        return 0;
    }
    fputs("usage: pageback COMMAND [options]   (pageback COMMAND --help: one command)\n", out);
    for (i = 0; i < n; i++)
        opts_help_synopsis(out, usages[i].command, usages[i].args, usages[i].note);
    opts_help_common(out);
    fputs(usage_env, out);
    return 0;
}

static void find_program(pb_options *o, const char *argv0)
{
    static char self[4096]; /* program option, set once */
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        o->program = self;
    } else {
        o->program = argv0;
    }
}

/* "--foo=bar" -> "--foo" in a one-line message. */
static int bad_option(const char *text, const char *command, bool missing, pb_error *err)
{
    size_t n = strcspn(text, "=");
    if (missing)
        return pb_fail(err, PB_EINVAL, "option %.*s for %s needs a value", (int)n, text,
                       command);
    return pb_fail(err, PB_EINVAL, "unknown option %.*s for %s (see pageback %s --help)",
                   (int)n, text, command, command);
}

/* getopt's table, from the option table: an option's value is 256 + its opts_id. */
static void long_options(struct option out[OPTS_COUNT + 1])
{
    for (size_t i = 0; i < OPTS_COUNT; i++)
        out[i] = (struct option){opts_table[i].name, opts_table[i].arg ? 1 : 0, NULL,
                                 256 + (int)i};
    out[OPTS_COUNT] = (struct option){NULL, 0, NULL, 0};
}

static int parse_flags(pb_options *o, int argc, char **argv, pb_error *err)
{
    struct option long_opts[OPTS_COUNT + 1];
    long_options(long_opts);
    optind = 2;
    opterr = 0;
    int c, li;
    while (li = -1, (c = getopt_long(argc, argv, ":", long_opts, &li)) != -1) {
        if (c == '?' || c == ':' || li < 0)
            return bad_option(argv[optind - 1], o->command, c == ':', err);
        const opts_def *d = &opts_table[li];
        if (d->kind == OPTK_ASK) {
            /* Nothing else is needed or checked: help works without a repository. */
            o->help_requested = d->lo == 0;
            o->version_requested = d->lo == 1;
            return 1;
        }
        if (!opts_option_applies(d->name, o->command))
            return pb_fail(err, PB_EINVAL, "option --%s is not for %s (see pageback %s --help)",
                           d->name, o->command, o->command);
        int rc = opts_apply(o, (opts_id)li, optarg, err);
        if (rc)
            return rc;
        o->source[li] = OPTS_FLAG;
        o->given[li] = optarg ? optarg : "true";
    }
    for (; optind < argc && o->nargs < 4; optind++)
        o->args[o->nargs++] = argv[optind];
    if (optind < argc)
        return pb_fail(err, PB_EINVAL, "too many arguments for %s", o->command);
    return 0;
}

/* --report first, so a usage error anywhere on the line is reported too. */
static void find_report(pb_options *o, int argc, char **argv)
{
    o->report_file = getenv("PAGEBACK_REPORT");
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--"))
            break;
        if (!strcmp(argv[i], "--report") && i + 1 < argc)
            o->report_file = argv[i + 1];
        else if (!strncmp(argv[i], "--report=", 9))
            o->report_file = argv[i] + 9;
    }
}

static void opts_init(pb_options *o, const char *argv0)
{
    memset(o, 0, sizeof(*o));
    repo_opts ro = REPO_OPTS_INIT;
    bk_opts bo = BK_OPTS_INIT;
    rs_opts rso = RS_OPTS_INIT;
    o->repo = ro;
    o->backup = bo;
    o->restore = rso;
    o->progress_interval = 10;
    o->archive_timeout = 60;
    o->log_level_file = PB_LOG_DETAIL; /* the file keeps what the console leaves out */
    find_program(o, argv0);
}

int opts_parse(pb_options *o, int argc, char **argv, pb_error *err)
{
    opts_init(o, argv[0]);
    if (argc >= 2 && (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help"))) {
        o->help_requested = true; /* "pageback help [COMMAND]" */
        o->command = argc >= 3 ? argv[2] : NULL;
        return 0;
    }
    if (argc >= 2 && (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version"))) {
        o->version_requested = true;
        return 0;
    }
    if (argc < 2 || argv[1][0] == '-')
        return pb_fail(err, PB_EINVAL, "%s: the command comes first (pageback COMMAND "
                       "[options]; pageback --help lists the commands)",
                       argc < 2 ? "no command given" : "no command before the options");
    o->command = argv[1];
    find_report(o, argc, argv);
    int rc = parse_flags(o, argc, argv, err);
    if (rc)
        return rc > 0 ? 0 : rc;
    if ((rc = opts_apply_env(o, err)))
        return rc;
    const char *v;
    if (!o->config_file && (v = getenv("PAGEBACK_CONFIG")) && *v)
        o->config_file = v;
    if (!o->config_file && access("/etc/pageback.conf", F_OK) == 0)
        o->config_file = "/etc/pageback.conf";
    if (!o->cluster && (v = getenv("PAGEBACK_CLUSTER")) && *v)
        o->cluster = v;
    if (o->cluster && !o->config_file)
        return pb_fail(err, PB_EINVAL, "--cluster %s needs a configuration file (--config, "
                       "PAGEBACK_CONFIG or /etc/pageback.conf)", o->cluster);
    if (o->config_file && (rc = opts_apply_config(o, err)))
        return rc;
    if ((rc = opts_load_keys(o, err)) || (rc = opts_finish_ops(o, err)))
        return rc;
    if (!o->repo.location && strcmp(o->command, "tune") && strcmp(o->command, "config"))
        return pb_fail(err, PB_EINVAL, "no repository: give --repo DIR|s3://bucket/prefix or "
                       "set PAGEBACK_REPO");
    return 0;
}

void opts_free(pb_options *o)
{
    cfg_free(&o->cfg);
    free(o->cluster_location);
    o->cluster_location = NULL;
    for (size_t i = 0; i < REPO_MAX_KEYS; i++) {
        if (o->key_text[i]) /* key material: wiped, not just freed */
            memset(o->key_text[i], 0, o->keys[i].len);
        free(o->key_text[i]);
        o->key_text[i] = NULL;
    }
}
