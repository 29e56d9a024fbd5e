/* tools/commands.h — one function per pageback command. Each returns the exit code. */
#ifndef PB_TOOLS_COMMANDS_H
#define PB_TOOLS_COMMANDS_H

#include "tools/options.h"

int cmd_backup(pb_options *o);
int cmd_restore(pb_options *o);
int cmd_archive_push(pb_options *o);
int cmd_archive_get(pb_options *o);
int cmd_info(pb_options *o);
int cmd_verify(pb_options *o);
int cmd_expire(pb_options *o);
int cmd_rebase(pb_options *o);
int cmd_tune(pb_options *o);

/* Shared by the commands (tools/cli_common.c). */
/* Open the repository o names (repo_open: free with repo_free). */
int cmd_open_repo(repo **out, const pb_options *o, pb_error *err);
/* Log err's message as the command's error and return the failure exit code, 1. */
int cmd_report(const pb_error *err);
/* The local state directory for o's repository (tools/commands.c), NULL when none. */
const char *cmd_state_dir(pb_options *o, char *buf, size_t cap);

#endif
