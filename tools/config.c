/*
 * tools/config.c — the INI configuration file: read, refuse a file others may write,
 * split into entries. What a name means is the option table's business
 * (tools/options.def); this file only knows lines, sections and where each entry came
 * from, so a bad line is named as "file:line" (docs/GUIDE.md, "Configuration").
 */
#include "tools/config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char *trim(char *s)
{
    s += strspn(s, " \t");
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* "[global]" -> "", "[cluster:NAME]" and "[NAME]" -> NAME; NULL when malformed. */
static const char *section_name(char *line)
{
    size_t n = strlen(line);
    if (n < 3 || line[n - 1] != ']')
        return NULL;
    line[n - 1] = '\0';
    char *name = trim(line + 1);
    if (!strcmp(name, "global"))
        return "";
    if (!strncmp(name, "cluster:", 8))
        name = trim(name + 8);
    if (!*name || strpbrk(name, " \t[]=") || !strcmp(name, "global"))
        return NULL;
    return name;
}

void cfg_key_of(const char *line, char out[CFG_KEY_SHOWN])
{
    size_t n = strspn(line, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                            "0123456789-_.");
    if (n >= CFG_KEY_SHOWN)
        n = CFG_KEY_SHOWN - 1;
    memcpy(out, line, n);
    out[n] = '\0';
}

/* A line may hold a secret (s3-secret = ... with a typo): a message names the file, the
 * line and the key (its leading word), never the rest, which reaches the PostgreSQL log
 * through archive_command and the --report file. */
static int add_entry(cfg_file *c, const char *section, char *line, unsigned lineno,
                     pb_error *err)
{
    char key[CFG_KEY_SHOWN];
    cfg_key_of(line, key);
    char *eq = strchr(line, '=');
    if (!eq)
        return pb_fail(err, PB_EINVAL, "%s:%u: expected 'name = value' or '[section]' (the "
                       "line starting with '%s' has no '='; its text is not shown)", c->path,
                       lineno, key);
    *eq = '\0';
    char *name = trim(line), *value = trim(eq + 1);
    size_t vn = strlen(value);
    if (vn >= 2 && value[0] == '"' && value[vn - 1] == '"') {
        value[vn - 1] = '\0';
        value++;
    }
    if (!*name || strlen(key) != strlen(name))
        return pb_fail(err, PB_EINVAL, "%s:%u: bad setting name (starting with '%s'; the rest "
                       "of the line is not shown)", c->path, lineno, key);
    if (PB_GROW(c->items, &c->cap, c->count + 1))
        return pb_fail(err, PB_ENOMEM, "out of memory reading %s", c->path);
    c->items[c->count++] = (cfg_entry){section, name, value, lineno};
    return 0;
}

int cfg_parse(cfg_file *c, const char *path, char *text, pb_error *err)
{
    c->path = path;
    c->text = text;
    const char *section = "";
    unsigned lineno = 0;
    for (char *line = text, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        lineno++;
        line = trim(line);
        if (!*line || *line == '#' || *line == ';')
            continue;
        if (*line == '[') {
            if (!(section = section_name(line)))
                return pb_fail(err, PB_EINVAL, "%s:%u: bad section header (expected [global], "
                               "[cluster:NAME] or [NAME])", path, lineno);
            continue;
        }
        int rc = add_entry(c, section, line, lineno, err);
        if (rc)
            return rc;
    }
    return 0;
}

int cfg_load(cfg_file *c, const char *path, pb_error *err)
{
    memset(c, 0, sizeof(*c));
    c->path = path;
    FILE *fp = fopen(path, "r");
    if (!fp)
        return pb_fail_errno(err, PB_EINVAL, "cannot read config file %s", path);
    struct stat st;
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(fp);
        return pb_fail(err, PB_EINVAL, "config file %s is not a regular file", path);
    }
    c->mode = (unsigned)st.st_mode & 07777;
    if (st.st_mode & 022) {
        fclose(fp);
        return pb_fail(err, PB_EINVAL, "config file %s may be written by %s (mode %03o): "
                       "refusing it; chmod go-w it", path,
                       st.st_mode & 002 ? "anyone" : "its group", c->mode);
    }
    char *text = malloc((size_t)st.st_size + 1);
    size_t n = text ? fread(text, 1, (size_t)st.st_size, fp) : 0;
    fclose(fp);
    if (!text)
        return pb_fail(err, PB_ENOMEM, "out of memory reading %s", path);
    text[n] = '\0';
    return cfg_parse(c, path, text, err);
}

bool cfg_has_section(const cfg_file *c, const char *cluster)
{
    for (size_t i = 0; i < c->count; i++)
        if (!strcmp(c->items[i].section, cluster))
            return true;
    return false;
}

void cfg_free(cfg_file *c)
{
    if (!c)
        return;
    free(c->text);
    free(c->items);
    memset(c, 0, sizeof(*c));
}
