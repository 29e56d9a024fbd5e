/*
 * tools/cli_common.c — what every command does the same way: open the repository the
 * options name, and turn a failure into its log line and exit code. One copy here, so
 * the commands cannot drift apart in how they report (docs/GUIDE.md, "Exit codes").
 */
#include "tools/commands.h"

int cmd_open_repo(repo **out, const pb_options *o, pb_error *err)
{
    return repo_open(out, &o->repo, err);
}

int cmd_report(const pb_error *err)
{
    pb_log(PB_LOG_ERROR, "%s", err->msg);
    return 1;
}
