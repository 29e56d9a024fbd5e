/*
 * tests/unit/tools/options_table_test.c — the option table (tools/options.def): every
 * row has a help row, an environment name and a parser that fits its field; no name,
 * environment variable or configuration key is there twice; every setting reaches its
 * field from the environment and from the configuration file; and every typed parser
 * refuses bad text naming the option and the value.
 */
#include "tests/unit/tools/options_fixtures.h"
#include "tools/options_internal.h"

#include <ctype.h>

static char tmpdir[256];

static size_t count_words(const char *words)
{
    size_t n = 1;
    for (const char *p = words; *p; p++)
        n += *p == '|';
    return n;
}

static bool typed(const opts_def *d)
{
    return d->kind != OPTK_FN && d->kind != OPTK_ASK;
}

/* A command that takes d: its first one, backup for the common options. */
static const char *command_of(const opts_def *d, char *buf, size_t cap)
{
    if (!strcmp(d->commands, "*"))
        return "backup";
    snprintf(buf, cap, "%.*s", (int)strcspn(d->commands, " "), d->commands);
    return buf;
}

/* Text each typed parser accepts: the lower bound, the first word, a path. */
static const char *good_value(const opts_def *d, char *buf, size_t cap)
{
    switch (d->kind) {
    case OPTK_UINT: snprintf(buf, cap, "%llu", d->lo); break;
    case OPTK_SIZE: snprintf(buf, cap, "%llu", d->lo > d->step ? d->lo : d->step); break;
    case OPTK_DURATION: snprintf(buf, cap, "90m"); break;
    case OPTK_CHOICE: case OPTK_WORD:
        snprintf(buf, cap, "%.*s", (int)strcspn(d->arg, "|"), d->arg);
        break;
    case OPTK_SWITCH: snprintf(buf, cap, "true"); break;
    default: snprintf(buf, cap, "/somewhere"); break;
    }
    return buf;
}

static void test_rows_complete(void)
{
    for (size_t i = 0; i < OPTS_COUNT; i++) {
        const opts_def *d = &opts_table[i];
        bool ok = d->name && d->name[0] && strspn(d->name, "abcdefghijklmnopqrstuvwxyz0123456789-")
                                               == strlen(d->name);
        ok = ok && d->commands && d->commands[0] && d->meaning && d->meaning[0] &&
             d->default_text;
        /* the parser: a switch has no value, every typed value has a placeholder */
        if (d->kind == OPTK_SWITCH || d->kind == OPTK_ASK)
            ok = ok && d->arg == NULL;
        else if (d->kind != OPTK_FN)
            ok = ok && d->arg && d->arg[0];
        if (d->kind == OPTK_FN)
            ok = ok && d->parse != NULL;
        if (d->kind == OPTK_STR || d->kind == OPTK_WORD)
            ok = ok && d->size == sizeof(const char *);
        if (d->kind == OPTK_SWITCH || d->kind == OPTK_UINT || d->kind == OPTK_SIZE ||
            d->kind == OPTK_DURATION || d->kind == OPTK_CHOICE)
            ok = ok && (d->size == 1 || d->size == 2 || d->size == 4 || d->size == 8) &&
                 d->off + d->size <= sizeof(pb_options);
        if (d->kind == OPTK_UINT || d->kind == OPTK_SIZE)
            ok = ok && d->lo <= d->hi;
        if (d->kind == OPTK_SIZE)
            ok = ok && d->step >= 1;
        if (d->kind == OPTK_CHOICE) /* one value per word of the help's placeholder */
            ok = ok && d->nvalues == count_words(d->arg);
        if (!ok)
            fprintf(stderr, "  incomplete row: %s\n", d->name ? d->name : "(null)");
        PBT_CHECK(ok);
    }
    /* the options that are no settings: they choose the configuration or ask */
    size_t cli = 0;
    for (size_t i = 0; i < OPTS_COUNT; i++)
        cli += opts_table[i].cli_only;
    PBT_CHECK(cli == 4 && opts_find("config")->cli_only && opts_find("cluster")->cli_only);
    PBT_CHECK(opts_find("help")->cli_only && opts_find("version")->cli_only);
}

/* No name twice: opts_find finds each row itself; the environment names are the names
 * upper-cased, distinct, and none is a secret's or the configuration's own. */
static void test_names_unique(void)
{
    for (size_t i = 0; i < OPTS_COUNT; i++) {
        const opts_def *d = &opts_table[i];
        PBT_CHECK(opts_find(d->name) == d);
        char env[80], expect[80];
        PBT_CHECK(opts_env_name(d->name, env, sizeof(env)));
        size_t n = (size_t)snprintf(expect, sizeof(expect), "PAGEBACK_%s", d->name);
        for (size_t k = 9; k < n; k++)
            expect[k] = expect[k] == '-' ? '_' : (char)toupper((unsigned char)expect[k]);
        PBT_CHECK(pbt_streq(env, expect));
        PBT_CHECK(strcmp(d->name, "s3-key") && strcmp(d->name, "s3-secret") &&
                  strcmp(d->name, "s3-token") && strcmp(d->name, "encrypt-key"));
        for (size_t j = 0; j < i; j++) {
            char other[80];
            opts_env_name(opts_table[j].name, other, sizeof(other));
            PBT_CHECK(strcmp(opts_table[j].name, d->name) != 0 && strcmp(other, env) != 0);
        }
    }
    char small[12];
    PBT_CHECK(!opts_env_name("on-checksum-error", small, sizeof(small)));
}

/* Each option is in the help of the first command that takes it, not in archive-push's
 * (unless common), and in the global usage. */
static void test_help_rows(void)
{
    static char buf[16384];
    for (size_t i = 0; i < OPTS_COUNT; i++) {
        const opts_def *d = &opts_table[i];
        char flag[64], cmd[32];
        snprintf(flag, sizeof(flag), "\n  --%s%s", d->name, d->arg ? " " : "");
        FILE *fp = fmemopen(buf, sizeof(buf), "w");
        int rc = opts_usage(fp, command_of(d, cmd, sizeof(cmd)));
        fclose(fp);
        PBT_CHECK(rc == 0 && strstr(buf, flag) != NULL);
        if (strcmp(d->commands, "*")) {
            fp = fmemopen(buf, sizeof(buf), "w");
            opts_usage(fp, "archive-push"); /* it takes only the common options */
            fclose(fp);
            PBT_CHECK(strstr(buf, flag) == NULL);
        }
        snprintf(flag, sizeof(flag), "[--%s%s", d->name, d->arg ? " " : "]");
        fp = fmemopen(buf, sizeof(buf), "w");
        opts_usage(fp, NULL); /* the synopsis of its commands, or the common ones */
        fclose(fp);
        PBT_CHECK(strstr(buf, flag) != NULL);
    }
}

/* Bad text is refused naming the option and the text, from a flag and from the
 * environment (which names its variable too). */
static void test_bad_values(void)
{
    for (size_t i = 0; i < OPTS_COUNT; i++) {
        const opts_def *d = &opts_table[i];
        if (!typed(d) || d->kind == OPTK_STR || d->kind == OPTK_SWITCH)
            continue;
        char flag[64], cmd[32], env[80];
        snprintf(flag, sizeof(flag), "--%s", d->name);
        const char *c = command_of(d, cmd, sizeof(cmd));
        pb_options o;
        pb_error err;
        int rc = PARSE(&o, &err, c, "--repo", "/r", flag, "bogus!x");
        bool named = strstr(err.msg, flag) && strstr(err.msg, "'bogus!x'");
        if (rc != PB_EINVAL || !named)
            fprintf(stderr, "  %s bogus!x: rc %d, %s\n", flag, rc, err.msg);
        PBT_CHECK(rc == PB_EINVAL && named);
        opts_free(&o);
        opts_env_name(d->name, env, sizeof(env));
        setenv(env, "bogus!x", 1);
        rc = PARSE(&o, &err, c, "--repo", "/r");
        PBT_CHECK(rc == PB_EINVAL && strstr(err.msg, flag) && strstr(err.msg, env));
        unsetenv(env);
        opts_free(&o);
    }
}

/* Every typed setting reaches its field from PAGEBACK_<NAME>, and from its key in the
 * configuration file, with its source remembered; the command line wins over both. */
static void test_every_setting_sources(void)
{
    static char conf[8192];
    size_t n = 0;
    for (size_t i = 0; i < OPTS_COUNT; i++) {
        const opts_def *d = &opts_table[i];
        char val[64], env[80];
        if (d->cli_only || !typed(d))
            continue;
        good_value(d, val, sizeof(val));
        n += (size_t)snprintf(conf + n, sizeof(conf) - n, "%s = %s\n", d->name, val);
        opts_env_name(d->name, env, sizeof(env));
        setenv(env, val, 1);
        pb_options o;
        pb_error err;
        PBT_CHECK(PARSE(&o, &err, "config", "check") == 0);
        PBT_CHECK(o.source[i] == OPTS_ENV && pbt_streq(o.given[i], val));
        opts_free(&o);
        unsetenv(env);
    }
    const char *path = pbt_write_config(tmpdir, "all.conf", conf, 0600);
    pb_options o;
    pb_error err;
    PBT_CHECK(PARSE(&o, &err, "config", "check", "--config", path, "--queue-depth", "7") == 0);
    for (size_t i = 0; i < OPTS_COUNT; i++) {
        const opts_def *d = &opts_table[i];
        if (d->cli_only || !typed(d))
            continue;
        bool flag = i == OPT_QUEUE_DEPTH;
        PBT_CHECK(o.source[i] == (flag ? OPTS_FLAG : OPTS_GLOBAL) && o.given[i]);
    }
    /* the fields themselves, one of each parser */
    PBT_CHECK(o.backup.queue_depth == 7 && o.backup.read_size == PB_PAGE_SIZE);
    PBT_CHECK(o.backup.full_after_secs == 90 * 60 && o.backup.on_checksum_error == BK_CHECKSUM_WARN);
    PBT_CHECK(pbt_streq(o.restore.target_action, "promote") && !o.backup.use_uring);
    PBT_CHECK(pbt_streq(o.repo.location, "/somewhere") && o.retain_full == 1);
    opts_free(&o);
}

int main(void)
{
    pbt_clear_env();
    if (pbt_tmpdir(tmpdir, sizeof(tmpdir), "options-table-test") != 0)
        return 1;
    PBT_RUN(test_rows_complete);
    PBT_RUN(test_names_unique);
    PBT_RUN(test_help_rows);
    PBT_RUN(test_bad_values);
    PBT_RUN(test_every_setting_sources);
    pbt_rmtree(tmpdir);
    return PBT_DONE();
}
