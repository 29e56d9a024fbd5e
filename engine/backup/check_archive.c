/*
 * engine/backup/check_archive.c — the archive half of `pageback check`: where archive_command
 * sends WAL, as far as its text tells, and the wait for one segment to arrive.
 *
 * archive_command is a shell line. It is read as the shell would read the simple
 * commands in it (quotes, backslashes, ; && || | separators), after PostgreSQL's own
 * % substitution. A word the shell would expand ($VAR, backticks) cannot be told from
 * the text: the verdict is then "cannot tell", never a guess.
 */
#include "engine/backup/backup.h"

#include "engine/wal/wal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_WORDS 128

typedef struct word {
    char *text;   /* points into the words' buffer */
    bool sep;     /* a command separator: ; & && || | or a newline */
    bool dynamic; /* holds something the shell expands */
} word;

typedef struct words {
    word w[MAX_WORDS];
    size_t n;
    char *buf;
} words;

/* PostgreSQL replaces %% by % (and %p, %f, %r by paths) before the shell runs. */
static void pg_percent(const char *in, char *out)
{
    for (; *in; in++) {
        *out++ = *in;
        if (in[0] == '%' && in[1] == '%')
            in++;
    }
    *out = '\0';
}

static bool is_sep_char(char c)
{
    return c == ';' || c == '&' || c == '|' || c == '\n';
}

/* Split into shell words; false when there are too many or a quote is left open. */
static bool split(const char *line, words *ws)
{
    size_t len = strlen(line);
    ws->n = 0;
    ws->buf = malloc(2 * len + 2);
    if (!ws->buf)
        return false;
    char *out = ws->buf;
    const char *p = line;
    while (*p) {
        if (*p == ' ' || *p == '\t') {
            p++;
            continue;
        }
        if (ws->n == MAX_WORDS)
            return false;
        word *w = &ws->w[ws->n++];
        w->text = out;
        w->sep = w->dynamic = false;
        if (is_sep_char(*p)) {
            w->sep = true;
            while (is_sep_char(*p))
                *out++ = *p++;
            *out++ = '\0';
            continue;
        }
        while (*p && *p != ' ' && *p != '\t' && !is_sep_char(*p)) {
            if (*p == '\'') {
                const char *q = strchr(p + 1, '\'');
                if (!q)
                    return false;
                memcpy(out, p + 1, (size_t)(q - p - 1));
                out += q - p - 1;
                p = q + 1;
            } else if (*p == '"') {
                for (p++; *p && *p != '"'; p++) {
                    if (*p == '\\' && p[1] && strchr("\"\\$`", p[1]))
                        p++;
                    else if (*p == '$' || *p == '`')
                        w->dynamic = true;
                    *out++ = *p;
                }
                if (*p++ != '"')
                    return false;
            } else if (*p == '\\' && p[1]) {
                *out++ = p[1];
                p += 2;
            } else {
                if (*p == '$' || *p == '`' || *p == '*' || *p == '?' || *p == '~')
                    w->dynamic = true;
                *out++ = *p++;
            }
        }
        *out++ = '\0';
    }
    return true;
}

static bool is_program(const char *text)
{
    const char *base = strrchr(text, '/');
    return !strcmp(base ? base + 1 : text, "pageback");
}

typedef struct named {
    const char *value;
    bool dynamic;
} named;

/* --name VALUE or --name=VALUE at words i (advances *i past the value). */
static bool take_option(const words *ws, size_t *i, const char *name, named *out)
{
    const char *t = ws->w[*i].text;
    size_t n = strlen(name);
    if (strncmp(t, name, n))
        return false;
    if (t[n] == '=') {
        out->value = t + n + 1;
        out->dynamic = ws->w[*i].dynamic;
        return true;
    }
    if (t[n] || *i + 1 >= ws->n || ws->w[*i + 1].sep)
        return false;
    (*i)++;
    out->value = ws->w[*i].text;
    out->dynamic = ws->w[*i].dynamic;
    return true;
}

/* NAME=VALUE assignments before the program, in its simple command. */
static void take_env(const words *ws, size_t prog, named *loc, named *config, named *cluster)
{
    size_t i = prog;
    while (i > 0 && !ws->w[i - 1].sep)
        i--;
    for (; i < prog; i++) {
        const char *t = ws->w[i].text;
        named v = {strchr(t, '=') ? strchr(t, '=') + 1 : NULL, ws->w[i].dynamic};
        if (!strncmp(t, "PAGEBACK_REPO=", 14))
            *loc = v;
        else if (!strncmp(t, "PAGEBACK_CONFIG=", 16))
            *config = v;
        else if (!strncmp(t, "PAGEBACK_CLUSTER=", 17))
            *cluster = v;
    }
}

/* Two repository locations name the same repository: one path through links and
 * trailing slashes, or the same S3 URL. */
static bool same_location(const char *a, const char *b)
{
    char ra[PATH_MAX], rb[PATH_MAX];
    bool local = strncmp(a, "s3://", 5) && strncmp(b, "s3://", 5);
    if (local && realpath(a, ra) && realpath(b, rb))
        return !strcmp(ra, rb);
    size_t na = strlen(a), nb = strlen(b);
    while (na > 1 && a[na - 1] == '/')
        na--;
    while (nb > 1 && b[nb - 1] == '/')
        nb--;
    return na == nb && !strncmp(a, b, na);
}

static ck_cmd_verdict judge(const named *loc, const named *config, const named *cluster,
                            const ck_target *want, char *why, size_t cap)
{
    if (loc->dynamic || config->dynamic || cluster->dynamic) {
        snprintf(why, cap, "archive_command runs pageback archive-push with a repository, "
                 "configuration or cluster the shell expands at run time");
        return CK_CMD_UNKNOWN;
    }
    if (cluster->value && want->cluster && strcmp(cluster->value, want->cluster)) {
        snprintf(why, cap, "archive_command archives for --cluster %s, this check is for "
                 "--cluster %s", cluster->value, want->cluster);
        return CK_CMD_ELSEWHERE;
    }
    if (loc->value && !same_location(loc->value, want->repo)) {
        snprintf(why, cap, "archive_command pushes into repository %s, this check's "
                 "repository is %s", loc->value, want->repo);
        return CK_CMD_ELSEWHERE;
    }
    if (!cluster->value != !want->cluster) {
        snprintf(why, cap, "archive_command runs pageback archive-push %s --cluster, this "
                 "check %s", cluster->value ? "with" : "without",
                 want->cluster ? "with one" : "without");
        return CK_CMD_UNKNOWN;
    }
    if (loc->value) {
        snprintf(why, cap, "archive_command runs pageback archive-push into %s", loc->value);
        return CK_CMD_SAME;
    }
    if (config->value && want->config && same_location(config->value, want->config)) {
        snprintf(why, cap, "archive_command runs pageback archive-push with this check's "
                 "--config %s", config->value);
        return CK_CMD_SAME;
    }
    snprintf(why, cap, "archive_command runs pageback archive-push without --repo: the "
             "repository comes from the server's environment or %s",
             config->value ? config->value : "its configuration file");
    return CK_CMD_UNKNOWN;
}

ck_cmd_verdict ck_archive_command(const char *cmd, const ck_target *want, char *why,
                                  size_t cap)
{
    words ws = {.n = 0, .buf = NULL};
    char *line = malloc(strlen(cmd) + 1);
    ck_cmd_verdict v = CK_CMD_UNKNOWN;
    snprintf(why, cap, "archive_command '%s' cannot be read as shell words", cmd);
    if (!line || (pg_percent(cmd, line), !split(line, &ws)))
        goto out;
    size_t prog = 0;
    while (prog + 1 < ws.n && !(is_program(ws.w[prog].text) &&
                                !strcmp(ws.w[prog + 1].text, "archive-push")))
        prog++;
    if (prog + 1 >= ws.n) {
        snprintf(why, cap, "archive_command '%s' does not run pageback archive-push", cmd);
        v = CK_CMD_NOT_PAGEBACK;
        goto out;
    }
    named loc = {NULL, false}, config = {NULL, false}, cluster = {NULL, false};
    take_env(&ws, prog, &loc, &config, &cluster);
    for (size_t i = prog + 2; i < ws.n && !ws.w[i].sep; i++)
        if (!take_option(&ws, &i, "--repo", &loc) &&
            !take_option(&ws, &i, "--config", &config))
            take_option(&ws, &i, "--cluster", &cluster);
    v = judge(&loc, &config, &cluster, want, why, cap);
out:
    free(ws.buf);
    free(line);
    return v;
}

int ck_wait_archived(repo *r, const char *name, unsigned timeout_secs, bool *arrived,
                     pb_error *err)
{
    double end = pb_now() + timeout_secs;
    long pause_ms = 50;
    for (;;) {
        int rc = arch_exists(r, name, arrived, err);
        if (rc || *arrived || pb_now() >= end)
            return rc;
        struct timespec ts = {0, pause_ms * 1000000L};
        nanosleep(&ts, NULL);
        pause_ms = pause_ms < 500 ? pause_ms * 2 : 500;
    }
}

int ck_pgdata_system_id(const char *pgdata, uint64_t *out, pb_error *err)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/global/pg_control", pgdata);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return pb_fail_errno(err, errno == ENOENT ? PB_ESTATE : PB_EIO,
                             "cannot open %s: is %s a PostgreSQL data directory?", path, pgdata);
    uint8_t b[8];
    ssize_t n = pread(fd, b, sizeof(b), 0);
    close(fd);
    if (n != (ssize_t)sizeof(b))
        return pb_fail(err, PB_ESTATE, "%s is too short for a control file", path);
    *out = pb_get_u64(b);
    return 0;
}
