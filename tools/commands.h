/* tools/commands.h — one function per pageback command. Each returns the exit code. */
#ifndef PB_TOOLS_COMMANDS_H
#define PB_TOOLS_COMMANDS_H

#include "restore/verify/verify.h"
#include "tools/options.h"
#include <stdio.h>

/* Exit codes (docs/pageback.1, EXIT STATUS). */
enum { CMD_EXIT_OK = 0, CMD_EXIT_FAILED = 1, CMD_EXIT_USAGE = 2 };

/* What a command did, for --report and --metrics-file (tools/report.c, tools/metrics.c):
 * the structs the modules hand back, copied as they are, so a field added to one of
 * them is reported by adding one row to report.c. */
typedef struct cmd_outcome {
    const char *command;
    int exit_code;
    bool failed;
    pb_error err;             /* the failure, when failed */
    bool have_backup;
    mf_backup backup;         /* bk_run's committed manifest header */
    bool have_io;
    bk_io_report io;          /* what the backup's reads applied and decided (also on failure) */
    repo_requests backup_requests; /* the backup's object-store requests */
    /* What the command already holds, for --metrics-file (tools/metrics.c): its open
     * repository (freed by main after the metrics) and the backups' headers as the
     * backup's plan read them, this backup last (have_history). */
    repo *repo;
    bool have_history;
    chain_history history;
    bool have_restore;
    rs_stats restore;
    bool have_verify;
    rs_verify_stats verify;
    char rebase_id[MF_ID_LEN];
    uint64_t expired_backups, expired_wal;
    const char *state_dir;    /* the local state directory, when the command knows it */
    double started;           /* pb_now() at the start */
    int64_t started_unix;
} cmd_outcome;

int cmd_backup(pb_options *o, cmd_outcome *res);
int cmd_restore(pb_options *o, cmd_outcome *res);
int cmd_archive_push(pb_options *o, cmd_outcome *res);
int cmd_archive_get(pb_options *o, cmd_outcome *res);
int cmd_info(pb_options *o, cmd_outcome *res);
int cmd_verify(pb_options *o, cmd_outcome *res);
int cmd_expire(pb_options *o, cmd_outcome *res);
int cmd_rebase(pb_options *o, cmd_outcome *res);
int cmd_tune(pb_options *o, cmd_outcome *res);
int cmd_config(pb_options *o, cmd_outcome *res);
int cmd_init(pb_options *o, cmd_outcome *res);  /* tools/check_command.c */
int cmd_check(pb_options *o, cmd_outcome *res);

/* Shared by the commands (tools/cli_common.c). */
/* Open the repository o names (repo_open: free with repo_free). */
int cmd_open_repo(repo **out, const pb_options *o, pb_error *err);
/* Log err's message as the command's error, keep it in res, return CMD_EXIT_FAILED. */
int cmd_report(cmd_outcome *res, const pb_error *err);
/* A usage problem found by the command: log the message, keep it in res, return CMD_EXIT_USAGE. */
int cmd_usage_error(cmd_outcome *res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The local state directory of o's repository (catalog, counters), in buf; NULL when
 * there is no home directory to put it in. */
const char *cmd_state_dir(const pb_options *o, char *buf, size_t cap);
/* Does --set name a backup the repository lacks? ("latest" and none never do.) A
 * mistyped id is a usage error, told apart from a damaged backup. */
bool cmd_set_missing(repo *r, const char *set);
#define CMD_NO_SET_MSG "--set %s: no such backup in repository %s (pageback info lists them)"

/* Write data to path through a temp file beside it and a rename, so a reader sees the
 * old file or the new one, never half of one. */
int cmd_write_atomic(const char *path, const void *data, size_t len, pb_error *err);

/* tools/progress.c: the progress display of a backup or restore (bk_opts.progress,
 * rs_opts.progress). */
/* The figures of one progress call, kept as numbers: a line is formatted only when it is
 * drawn or logged. */
typedef struct cmd_progress_view {
    const char *what;
    const char *unit; /* what files_done counts: NULL = "files" */
    uint64_t bytes_done, bytes_total, files_done, files_total;
    bool pages; /* a backup: pages_changed and bytes_skipped are shown */
    uint64_t pages_changed, bytes_skipped;
    double at; /* when it was reported (now()) */
} cmd_progress_view;
typedef struct cmd_progress {
    bool tty, enabled, drew, pending;
    unsigned interval;
    double start, last, first_byte; /* first_byte: when bytes were first counted */
    cmd_progress_view latest; /* the newest figures, drawn or not: the end draws them */
    bool whole_repo;  /* verify of every backup: its files are backups */
    double (*now)(void *now_ctx); /* the clock: pb_now unless a test drives it */
    void *now_ctx;
    FILE *out;              /* the terminal's stream: stderr */
    unsigned long formats;  /* lines formatted so far (the unit test counts them) */
} cmd_progress;
void cmd_progress_init(cmd_progress *p, const pb_options *o);
void cmd_progress_backup(void *ctx, const bk_progress *b); /* a bk_progress_fn */
void cmd_progress_restore(void *ctx, const rs_progress *r); /* an rs_progress_fn */
void cmd_progress_verify(void *ctx, const rs_progress *r); /* an rs_progress_fn */
void cmd_progress_rebase(void *ctx, const rs_progress *r); /* an rs_progress_fn */
/* Before a line on stdout: take a drawn live line off the terminal (redrawn later). */
void cmd_progress_clear(cmd_progress *p);
/* The run succeeded: its last figures become 100% (drawn by cmd_progress_end; off a
 * terminal, logged when progress lines were). */
void cmd_progress_done(cmd_progress *p);
/* The log's console hook (pb_log_set_console_hook) while a live line is shown. */
void cmd_progress_before_log(void *ctx);
/* End the live line: on a terminal, draw the newest state (so even a run shorter than
 * one redraw shows its totals) and a newline. */
void cmd_progress_end(cmd_progress *p);

/* tools/report.c: the JSON report of a run, written atomically (temp + rename). */
int cmd_write_report(const char *path, const pb_options *o, const cmd_outcome *res,
                     pb_error *err);
/* tools/metrics.c: Prometheus text metrics, written atomically. */
int cmd_write_metrics(const char *path, pb_options *o, const cmd_outcome *res, pb_error *err);
/* Count one archive-push failure (success: record the time) in the state directory. */
void cmd_note_archive_push(const pb_options *o, bool ok);

#endif
