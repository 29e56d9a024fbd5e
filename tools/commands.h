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

#endif
