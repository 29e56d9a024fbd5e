/*
 * tools/help.c — the help of the options, from the option table (tools/options.def):
 * the text of "pageback COMMAND --help", the common options of the global usage, and
 * the rule that refuses an option given to a command that does not use it.
 */
#include "tools/options_internal.h"

#include <stdio.h>
#include <string.h>

/* Does the row's list of commands name command? */
static bool row_names(const opts_def *r, const char *command)
{
    size_t n = strlen(command);
    for (const char *p = r->commands; n && (p = strstr(p, command)); p += n)
        if ((p == r->commands || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return true;
    return false;
}

bool opts_option_applies(const char *name, const char *command)
{
    const opts_def *r = opts_find(name);
    if (!r || !command || !*command || !strcmp(r->commands, "*") || !strcmp(command, "config"))
        return true;
    return row_names(r, command);
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

/* Words on lines of at most 79 columns, continued lines indented by indent. */
typedef struct help_line {
    FILE *out;
    int col, indent;
} help_line;

static void put_word(help_line *l, const char *word)
{
    int n = (int)strlen(word);
    if (l->col > l->indent && l->col + 1 + n > 79)
        l->col = fprintf(l->out, "\n%*s", l->indent - 1, "") - 1;
    l->col += fprintf(l->out, " %s", word);
}

/* Every option of the rows that the commands filter takes (common: the "*" rows), as
 * "[--name ARG]". */
static void put_options(help_line *l, const char *command, bool common)
{
    for (size_t i = 0; i < OPTS_COUNT; i++) {
        const opts_def *r = &opts_table[i];
        if (common ? strcmp(r->commands, "*") != 0 : !row_names(r, command))
            continue;
        char word[96];
        snprintf(word, sizeof(word), "[--%s%s%s]", r->name, r->arg ? " " : "",
                 r->arg ? r->arg : "");
        put_word(l, word);
    }
}

void opts_help_synopsis(FILE *out, const char *command, const char *args, const char *note)
{
    help_line l = {out, 0, 11};
    l.col = fprintf(out, "  %-8s", command);
    if (args[0])
        put_word(&l, args);
    put_options(&l, command, false);
    /* the note in parentheses: on a line of its own unless it fits, word by word */
    if (note[0] && l.col > l.indent && l.col + 3 + (int)strlen(note) > 79)
        l.col = fprintf(out, "\n%*s", l.indent - 1, "") - 1;
    for (const char *p = note; *p;) {
        size_t n = strcspn(p, " ");
        char word[64];
        snprintf(word, sizeof(word), "%s%.*s%s", p == note ? "(" : "", (int)n, p,
                 p[n] ? "" : ")");
        put_word(&l, word);
        p += n + (p[n] == ' ');
    }
    fputc('\n', out);
}

void opts_help_common(FILE *out)
{
    help_line l = {out, 0, 8};
    l.col = fprintf(out, "common:");
    put_options(&l, NULL, true);
    fputc('\n', out);
}
