/*
 * tools/help.c — the help of the options, from the option table (tools/options.def):
 * the text of "pageback COMMAND --help", the common options of the global usage, and
 * the rule that refuses an option given to a command that does not use it.
 */
#include "tools/options_internal.h"

#include <stdio.h>
#include <string.h>

bool opts_option_applies(const char *name, const char *command)
{
    const opts_def *r = opts_find(name);
    if (!r || !command || !*command || !strcmp(r->commands, "*") || !strcmp(command, "config"))
        return true;
    size_t n = strlen(command);
    for (const char *p = r->commands; (p = strstr(p, command)); p += n)
        if ((p == r->commands || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return true;
    return false;
}

/* "  --flag ARG   meaning [default: D]", wrapped to stay within 79 columns. */
static void print_row(FILE *out, const opts_def *r)
{
    char flag[64];
    snprintf(flag, sizeof(flag), "--%s%s%s", r->name, r->arg ? " " : "", r->arg ? r->arg : "");
    int col = fprintf(out, "  %-26s", flag);
    if (col > 28) {
        fprintf(out, "\n%28s", "");
        col = 28;
    }
    col += fprintf(out, " ");
    col += fprintf(out, "%s", r->meaning);
    if (r->default_text[0]) {
        if ((size_t)col + strlen(r->default_text) + 12 > 79)
            fprintf(out, "\n%29s", "");
        fprintf(out, " [default: %s]", r->default_text);
    }
    fputc('\n', out);
}

void opts_help_options(FILE *out, const char *command)
{
    fputs("options:\n", out);
    for (size_t i = 0; i < OPTS_COUNT; i++)
        if (strcmp(opts_table[i].commands, "*") &&
            opts_option_applies(opts_table[i].name, command))
            print_row(out, &opts_table[i]);
    fputs("common options:\n", out);
    for (size_t i = 0; i < OPTS_COUNT; i++)
        if (!strcmp(opts_table[i].commands, "*"))
            print_row(out, &opts_table[i]);
    fputs("every option is also a PAGEBACK_<OPTION> environment variable (--read-size:\n"
          "PAGEBACK_READ_SIZE) and a setting of the configuration file (read-size = 1M);\n"
          "a flag wins over the environment, which wins over the [cluster:NAME] section,\n"
          "which wins over [global]. S3 credentials: AWS_ACCESS_KEY_ID,\n"
          "AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN or s3-key, s3-secret, s3-token in a\n"
          "mode 0600 configuration file.\n"
          "exit status: 0 success; 1 failure; 2 usage or configuration error\n"
          "(archive-get: 1 also when the WAL file is not in the archive; verify: 1 when\n"
          "it found problems).\n", out);
}

void opts_help_common(FILE *out)
{
    int col = fprintf(out, "common:");
    for (size_t i = 0; i < OPTS_COUNT; i++) {
        const opts_def *r = &opts_table[i];
        if (strcmp(r->commands, "*"))
            continue;
        char word[96];
        int n = snprintf(word, sizeof(word), "[--%s%s%s]", r->name, r->arg ? " " : "",
                         r->arg ? r->arg : "");
        if (col + 1 + n > 79) {
            fputs("\n       ", out);
            col = 7;
        }
        col += fprintf(out, " %s", word);
    }
    fputc('\n', out);
}
