/*
 * tools/logfile.h — the log file of a run: by default DIR/CLUSTER-COMMAND.log, DIR being
 * --log-path or "log" in the repository's local state directory; --log-file names another;
 * --log-level-file off writes none. Each run appends, and ends with a "complete" line
 * holding its exit status and duration.
 */
#ifndef PB_TOOLS_LOGFILE_H
#define PB_TOOLS_LOGFILE_H

#include "tools/commands.h"

typedef struct cmd_logfile {
    int fd;          /* -1: no log file this run */
    char path[4200];
} cmd_logfile;

/* Open the run's log file and hand it to the log. A file that cannot be opened warns
 * once and the run goes on without it; only an explicit --log-file that cannot be opened
 * fails a command, and never archive-push or archive-get (PostgreSQL runs them, and a
 * log must not stop WAL archiving or recovery): CMD_EXIT_USAGE then, else 0. */
int cmd_logfile_open(cmd_logfile *lf, const pb_options *o, cmd_outcome *res);
/* Write the "complete" line for exit code rc, detach the file from the log, close it. */
void cmd_logfile_close(cmd_logfile *lf, const pb_options *o, int rc, double started);

#endif
