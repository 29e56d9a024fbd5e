/* tools/pageback.c — the pageback command-line program. */
#include "tools/commands.h"
#include "common/fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct command {
    const char *name;
    int (*run)(pb_options *o);
} command;

static const command commands[] = {
    {"backup", cmd_backup}, {"restore", cmd_restore}, {"archive-push", cmd_archive_push},
    {"archive-get", cmd_archive_get}, {"info", cmd_info}, {"verify", cmd_verify},
    {"expire", cmd_expire}, {"rebase", cmd_rebase}, {"tune", cmd_tune},
};

/* Asked-for help goes to stdout and exits 0; help for a command that does not exist is
 * a usage error. */
static int help(const pb_options *o)
{
    if (opts_usage(stdout, o->command) == 0)
        return 0;
    fprintf(stderr, "pageback: unknown command '%s'\n", o->command);
    opts_usage(stderr, NULL);
    return 2;
}

int main(int argc, char **argv)
{
    pb_options opts;
    pb_error err = PB_ERROR_INIT;
    if (opts_parse(&opts, argc, argv, &err) != 0) {
        fprintf(stderr, "pageback: %s\n", err.msg);
        opts_usage(stderr, NULL);
        opts_free(&opts);
        return 2;
    }
    if (opts.help_requested) {
        int rc = help(&opts);
        opts_free(&opts);
        return rc;
    }
    /* Test-only crash points (docs/GUIDE.md, "Fault injection (tests only)"). */
    if (pb_fault_init(getenv("PAGEBACK_TEST_FAULT"), &err) != 0) {
        fprintf(stderr, "pageback: %s\n", err.msg);
        opts_free(&opts);
        return 2;
    }
    int rc = 2;
    size_t i;
    for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (!strcmp(commands[i].name, opts.command))
            break;
    if (i < sizeof(commands) / sizeof(commands[0])) {
        rc = commands[i].run(&opts);
    } else {
        fprintf(stderr, "pageback: unknown command '%s'\n", opts.command);
        opts_usage(stderr, NULL);
    }
    opts_free(&opts);
    return rc;
}
