/*
 * tools/options_sources.c — the sources of an option below the command line: its
 * PAGEBACK_<OPTION> environment variable (and AWS_*), the [cluster:NAME] and global
 * sections of the configuration file. Each option remembers its source and its text,
 * so a lower source never overrides a higher one and "pageback config check" can say
 * where every value came from (docs/GUIDE.md, "Repository and configuration"); and the
 * encryption keys, read from their files or PAGEBACK_ENCRYPT_KEY.
 */
#include "tools/options_internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const secret_names[OPTS_NSECRETS] = {"s3-key", "s3-secret", "s3-token"};
static const char *const secret_aws[OPTS_NSECRETS] = {
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"};

static const char **secret_slot(pb_options *o, int s)
{
    return s == OPTS_S3_KEY ? &o->repo.s3_key
           : s == OPTS_S3_SECRET ? &o->repo.s3_secret : &o->repo.s3_token;
}

static int find_secret(const char *name)
{
    for (int s = 0; s < OPTS_NSECRETS; s++)
        if (!strcmp(secret_names[s], name))
            return s;
    return -1;
}

/* Apply option id from src unless a higher source already set it. A switch (no
 * argument) takes 1/true/yes/on or 0/false/no/off from the environment or the file. */
static int apply_from(pb_options *o, opts_id id, const char *value, opts_source src,
                      pb_error *err)
{
    if (o->source[id] > src)
        return 0;
    o->source[id] = (unsigned char)src;
    o->given[id] = value;
    if (opts_table[id].arg)
        return opts_apply(o, id, value, err);
    if (!*value || strspn(value, "1") == strlen(value) || !strcasecmp(value, "true") ||
        !strcasecmp(value, "yes") || !strcasecmp(value, "on"))
        return opts_apply(o, id, NULL, err);
    if (!strcmp(value, "0") || !strcasecmp(value, "false") || !strcasecmp(value, "no") ||
        !strcasecmp(value, "off"))
        return 0;
    return pb_fail(err, PB_EINVAL, "--%s is a switch: expected true or false, not '%s'",
                   opts_table[id].name, value);
}

/* The setting of a configuration key: NULL for a name that is none (or only a flag). */
static const opts_def *find_setting(const char *name)
{
    const opts_def *d = opts_find(name);
    return d && !d->cli_only ? d : NULL;
}

int opts_apply_env(pb_options *o, pb_error *err)
{
    char name[80];
    const char *v;
    for (size_t i = 0; i < OPTS_COUNT; i++) {
        if (opts_table[i].cli_only || !opts_env_name(opts_table[i].name, name, sizeof(name)) ||
            !(v = getenv(name)))
            continue;
        if (apply_from(o, (opts_id)i, v, OPTS_ENV, err))
            return pb_error_wrap(err, "in the environment variable %s", name);
    }
    for (int s = 0; s < OPTS_NSECRETS; s++) {
        opts_env_name(secret_names[s], name, sizeof(name));
        if ((v = getenv(name)) || (v = getenv(secret_aws[s]))) {
            *secret_slot(o, s) = v;
            o->secret_source[s] = OPTS_ENV;
        }
    }
    if (o->source[OPT_S3_REGION] < OPTS_ENV && (v = getenv("AWS_REGION"))) {
        o->repo.s3_region = v;
        o->source[OPT_S3_REGION] = OPTS_ENV;
        o->given[OPT_S3_REGION] = v;
    }
    return 0;
}

/* The value of a configuration line never reaches a message (it may be a secret, and
 * the message reaches the PostgreSQL log through archive_command and --report): every
 * occurrence in err->msg is replaced. */
static void redact_value(pb_error *err, const char *value)
{
    static const char shown[] = "(value not shown)";
    size_t vn = strlen(value);
    if (!err || vn == 0)
        return;
    char out[sizeof(err->msg)];
    size_t n = 0;
    for (const char *p = err->msg; *p && n < sizeof(out) - 1;) {
        if (strncmp(p, value, vn) == 0) {
            size_t k = sizeof(shown) - 1 < sizeof(out) - 1 - n ? sizeof(shown) - 1
                                                                : sizeof(out) - 1 - n;
            memcpy(out + n, shown, k);
            n += k;
            p += vn;
        } else {
            out[n++] = *p++;
        }
    }
    out[n] = '\0';
    memcpy(err->msg, out, n + 1);
}

/* One entry of the configuration file, from the section src names. */
static int apply_entry(pb_options *o, const cfg_entry *e, opts_source src, pb_error *err)
{
    int s = find_secret(e->name);
    if (s >= 0) {
        if (o->secret_source[s] <= src) {
            *secret_slot(o, s) = e->value;
            o->secret_source[s] = (unsigned char)src;
        }
        return 0;
    }
    const opts_def *d = find_setting(e->name);
    if (!d)
        return pb_fail(err, PB_EINVAL, "%s:%u: unknown setting '%s'", o->cfg.path, e->line,
                       e->name);
    if (apply_from(o, (opts_id)(d - opts_table), e->value, src, err)) {
        redact_value(err, e->value);
        return pb_error_wrap(err, "%s:%u: setting '%s'", o->cfg.path, e->line, e->name);
    }
    return 0;
}

/* The file: every name checked in every section; the global section first, then the
 * cluster's, each below what the environment and the command line gave. */
int opts_apply_config(pb_options *o, pb_error *err)
{
    int rc = cfg_load(&o->cfg, o->config_file, err);
    if (rc)
        return rc;
    bool secret = false;
    for (size_t i = 0; i < o->cfg.count; i++) {
        const cfg_entry *e = &o->cfg.items[i];
        int s = find_secret(e->name);
        secret |= s == OPTS_S3_SECRET || s == OPTS_S3_TOKEN;
        if (s < 0 && !find_setting(e->name))
            return pb_fail(err, PB_EINVAL, "%s:%u: unknown setting '%s'", o->config_file,
                           e->line, e->name);
    }
    if (secret && (o->cfg.mode & 0077))
        return pb_fail(err, PB_EINVAL, "config file %s holds an S3 secret but is readable by "
                       "others (mode %03o): chmod 600 it", o->config_file, o->cfg.mode & 0777);
    if (o->cluster && !cfg_has_section(&o->cfg, o->cluster))
        return pb_fail(err, PB_EINVAL, "no section [cluster:%s] or [%s] in %s", o->cluster,
                       o->cluster, o->config_file);
    for (size_t i = 0; rc == 0 && i < o->cfg.count; i++)
        if (!o->cfg.items[i].section[0])
            rc = apply_entry(o, &o->cfg.items[i], OPTS_GLOBAL, err);
    for (size_t i = 0; rc == 0 && o->cluster && i < o->cfg.count; i++)
        if (!strcmp(o->cfg.items[i].section, o->cluster))
            rc = apply_entry(o, &o->cfg.items[i], OPTS_CLUSTER, err);
    return rc;
}

const char *opts_source_name(opts_source src)
{
    static const char *const names[] = {"default", "config [global]", "config [cluster]",
                                        "environment", "command line"};
    return names[src];
}

void opts_each_setting(const pb_options *o, opts_setting_cb cb, void *ctx)
{
    for (size_t i = 0; i < OPTS_COUNT; i++)
        if (!opts_table[i].cli_only)
            cb(ctx, opts_table[i].name, o->given[i], opts_table[i].default_text,
               (opts_source)o->source[i], false);
    for (int s = 0; s < OPTS_NSECRETS; s++) {
        const char *v = s == OPTS_S3_KEY ? o->repo.s3_key
                        : s == OPTS_S3_SECRET ? o->repo.s3_secret : o->repo.s3_token;
        cb(ctx, secret_names[s], v, "", (opts_source)o->secret_source[s], true);
    }
}

/* A key file must be the user's and unreadable by others (it opens every backup); its
 * content, a trailing newline dropped, is the key material (docs/FORMAT.md). */
static int read_key_file(pb_options *o, const char *path, pb_error *err)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        return pb_fail_errno(err, PB_EINVAL, "cannot read encryption key file %s", path);
    struct stat st;
    int rc = 0;
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > 4096)
        rc = pb_fail(err, PB_EINVAL, "encryption key file %s is not a regular file of at "
                     "most 4096 bytes", path);
    else if (st.st_uid != geteuid())
        rc = pb_fail(err, PB_EINVAL, "encryption key file %s is owned by uid %u, not by the "
                     "user running pageback (uid %u)", path, (unsigned)st.st_uid,
                     (unsigned)geteuid());
    else if (st.st_mode & 0077)
        rc = pb_fail(err, PB_EINVAL, "encryption key file %s has mode %o: it must be 0600 or "
                     "stricter (chmod 600 it)", path, (unsigned)(st.st_mode & 0777));
    char *text = rc ? NULL : calloc(1, (size_t)st.st_size + 1);
    if (rc == 0 && !text)
        rc = pb_fail(err, PB_ENOMEM, "out of memory reading %s", path);
    size_t n = text ? fread(text, 1, (size_t)st.st_size, fp) : 0;
    fclose(fp);
    if (rc)
        return rc;
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r'))
        n--;
    size_t i = o->repo.n_keys;
    o->key_text[i] = text;
    o->keys[i].data = text;
    o->keys[i].len = n;
    o->repo.keys = o->keys;
    o->repo.n_keys = i + 1;
    return 0;
}

int opts_load_keys(pb_options *o, pb_error *err)
{
    for (size_t i = 0; i < o->n_key_files; i++) {
        int rc = read_key_file(o, o->key_files[i], err);
        if (rc)
            return rc;
    }
    const char *env = getenv("PAGEBACK_ENCRYPT_KEY");
    if (o->n_key_files == 0 && env && env[0]) {
        o->keys[0].data = env;
        o->keys[0].len = strlen(env);
        o->repo.keys = o->keys;
        o->repo.n_keys = 1;
    }
    return 0;
}
