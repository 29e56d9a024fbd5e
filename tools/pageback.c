/* tools/pageback.c — the pageback command-line program. */
#include "tools/commands.h"
#include "tools/cluster_ns.h"
#include "tools/logfile.h"
#include "common/fault.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "unknown"
#endif

typedef struct command {
    const char *name;
    int (*run)(pb_options *o, cmd_outcome *res);
} command;

static const command commands[] = {
    {"backup", cmd_backup}, {"restore", cmd_restore}, {"archive-push", cmd_archive_push},
    {"archive-get", cmd_archive_get}, {"info", cmd_info}, {"verify", cmd_verify},
    {"expire", cmd_expire}, {"rebase", cmd_rebase}, {"tune", cmd_tune},
    {"config", cmd_config}, {"init", cmd_init}, {"check", cmd_check},
};

/* Asked-for help goes to stdout and exits 0; help for a command that does not exist is
 * a usage error, said in one line. */
static int help(const pb_options *o)
{
    if (opts_usage(stdout, o->command) == 0)
        return CMD_EXIT_OK;
    pb_log(PB_LOG_ERROR, "unknown command '%s' (pageback --help lists the commands)",
           o->command);
    return CMD_EXIT_USAGE;
}

static const command *find_command(const char *name)
{
    for (size_t i = 0; name && i < sizeof(commands) / sizeof(commands[0]); i++)
        if (!strcmp(commands[i].name, name))
            return &commands[i];
    return NULL;
}

/* The report and the metrics are written after the run, whatever its outcome; failing
 * to write them fails a run that had succeeded. */
static int finish(pb_options *o, cmd_outcome *res)
{
    pb_error err = PB_ERROR_INIT;
    int rc = res->exit_code;
    if (o->report_file && cmd_write_report(o->report_file, o, res, &err) != 0) {
        pb_log(PB_LOG_ERROR, "%s", err.msg);
        rc = rc ? rc : CMD_EXIT_FAILED;
    }
    if (o->metrics_file && cmd_write_metrics(o->metrics_file, o, res, &err) != 0) {
        pb_log(PB_LOG_ERROR, "%s", err.msg);
        rc = rc ? rc : CMD_EXIT_FAILED;
    }
    return rc;
}

static int run(pb_options *o, cmd_outcome *res)
{
    pb_error err = PB_ERROR_INIT;
    /* Test-only crash points (docs/GUIDE.md, "Fault injection (tests only)"). */
    if (pb_fault_init(getenv("PAGEBACK_TEST_FAULT"), &err) != 0)
        return cmd_usage_error(res, "%s", err.msg);
    const command *c = find_command(o->command);
    if (!c)
        return cmd_usage_error(res, "unknown command '%s' (pageback --help lists the "
                               "commands)", o->command);
    /* A named cluster works in its own namespace of the repository. */
    if (strcmp(c->name, "tune") && strcmp(c->name, "config") && cns_resolve(o, &err) != 0)
        return cmd_report(res, &err);
    return c->run(o, res);
}

/* glibc raises its mmap threshold each time a large block is freed, after which the
 * restore's and the backup's MiB-sized buffers (freed and grown again within their
 * budgets, docs/DESIGN.md) land in the worker threads' arenas and stay resident as
 * fragments: RSS then grows with the run's length, not with the budget. A fixed
 * threshold keeps every block of 512 KiB or more in its own mapping, returned on free. */
static void fix_malloc_threshold(void)
{
#ifdef M_MMAP_THRESHOLD
    mallopt(M_MMAP_THRESHOLD, 512 * 1024);
#endif
}

int main(int argc, char **argv)
{
    fix_malloc_threshold();
    pb_options opts;
    pb_error err = PB_ERROR_INIT;
    cmd_outcome res = {0};
    res.started = pb_now();
    res.started_unix = (int64_t)time(NULL);
    if (opts_parse(&opts, argc, argv, &err) != 0) {
        pb_log(PB_LOG_ERROR, "%s", err.msg); /* every usage error: "pageback: ERROR: ..." */
        res.command = opts.command;
        res.failed = true;
        res.err = err;
        res.exit_code = CMD_EXIT_USAGE;
        int rc = opts.report_file ? finish(&opts, &res) : CMD_EXIT_USAGE;
        opts_free(&opts);
        return rc;
    }
    int rc;
    if (opts.version_requested) {
        printf("pageback %s\n", PACKAGE_VERSION);
        rc = CMD_EXIT_OK;
    } else if (opts.help_requested) {
        rc = help(&opts);
    } else {
        res.command = opts.command;
        if (opts.quiet) /* errors only on the console; the log file as usual */
            pb_log_set_level(PB_LOG_ERROR);
        cmd_logfile lf = {-1, ""};
        if (find_command(opts.command)) /* an unknown command gets no log file */
            res.exit_code = cmd_logfile_open(&lf, &opts, &res);
        if (res.exit_code == 0)
            res.exit_code = run(&opts, &res);
        rc = finish(&opts, &res);
        cmd_logfile_close(&lf, &opts, rc, res.started);
    }
    chain_history_free(&res.history);
    repo_free(res.repo);
    opts_free(&opts);
    return rc;
}
