/*
 * tools/config_check.c — "pageback config check": every effective setting with the
 * source it came from (command line, environment, the cluster's section, the global
 * section, default), so an operator can see why a run used what it used. Secrets are
 * never printed, only whether and where they were set.
 */
#include "tools/commands.h"

#include <stdio.h>
#include <string.h>

static void print_setting(void *ctx, const char *name, const char *value,
                          const char *default_text, opts_source src, bool secret)
{
    (void)ctx;
    char shown[160];
    if (value && secret)
        snprintf(shown, sizeof(shown), "******** (masked)");
    else if (value)
        snprintf(shown, sizeof(shown), "%s", value);
    else
        snprintf(shown, sizeof(shown), "%s", default_text[0] ? default_text : "(unset)");
    printf("%-18s = %-40s  # %s\n", name, shown, value ? opts_source_name(src) : "default");
}

int cmd_config(pb_options *o, cmd_outcome *res)
{
    if (o->nargs != 1 || strcmp(o->args[0], "check") != 0)
        return cmd_usage_error(res, "config needs a subcommand: pageback config check");
    if (o->config_file)
        printf("config file        %s (mode %03o)\n", o->config_file, o->cfg.mode & 0777);
    else
        printf("config file        (none: no --config, PAGEBACK_CONFIG or /etc/pageback.conf)\n");
    printf("cluster            %s\n", o->cluster ? o->cluster : "(none: global section only)");
    opts_each_setting(o, print_setting, NULL);
    printf("configuration ok\n");
    return CMD_EXIT_OK;
}
