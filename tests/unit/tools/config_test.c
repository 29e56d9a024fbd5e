/*
 * tests/unit/tools/config_test.c — tools/config.c and the configuration half of
 * tools/options.c: INI parsing (sections, comments, quotes), bad lines named as
 * file:line, refusal of a file others may write, and the precedence flag >
 * PAGEBACK_<OPTION> > [cluster:NAME] > [global] > default, with each source recorded
 * for "pageback config check" and secrets flagged for masking.
 */
#include "tools/config.h"
#include "tools/options.h"
#include "tests/unit/tools/options_fixtures.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[4096];

static void test_parse_sections(void)
{
    cfg_file c = {0};
    pb_error err = PB_ERROR_INIT;
    char *text = strdup("# comment\n"
                        "repo = /top\n"
                        "; another comment\n"
                        "\n"
                        "[global]\n"
                        "  compress-level=3  \n"
                        "[cluster:main]\n"
                        "pgdata = \"/srv/pg main\"\n"
                        "[other]\n"
                        "type = full\r\n");
    PBT_CHECK(cfg_parse(&c, "t.conf", text, &err) == 0);
    PBT_CHECK(c.count == 4);
    PBT_CHECK(c.count == 4 && pbt_streq(c.items[0].section, "") && c.items[0].line == 2);
    PBT_CHECK(c.count == 4 && pbt_streq(c.items[1].name, "compress-level") &&
              pbt_streq(c.items[1].value, "3") && pbt_streq(c.items[1].section, ""));
    PBT_CHECK(c.count == 4 && pbt_streq(c.items[2].section, "main") &&
              pbt_streq(c.items[2].value, "/srv/pg main") && c.items[2].line == 8);
    PBT_CHECK(c.count == 4 && pbt_streq(c.items[3].section, "other") &&
              pbt_streq(c.items[3].value, "full"));
    PBT_CHECK(cfg_has_section(&c, "main") && cfg_has_section(&c, "other"));
    PBT_CHECK(!cfg_has_section(&c, "nosuch"));
    cfg_free(&c);
    cfg_free(NULL);
}

/* Each malformed line is named by file and line number. */
static void test_bad_lines(void)
{
    static const struct {
        const char *text, *where;
    } cases[] = {
        {"repo = /r\nno equals sign here\n", "b.conf:2:"},
        {"\n\n[ ]\n", "b.conf:3:"},
        {"[cluster:]\n", "b.conf:1:"},
        {"[unterminated\n", "b.conf:1:"},
        {"= value\n", "b.conf:1:"},
        {"two words = x\n", "b.conf:1:"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cfg_file c = {0};
        pb_error err = PB_ERROR_INIT;
        PBT_CHECK(cfg_parse(&c, "b.conf", strdup(cases[i].text), &err) == PB_EINVAL);
        PBT_CHECK(strncmp(err.msg, cases[i].where, strlen(cases[i].where)) == 0);
        cfg_free(&c);
    }
    /* Unknown names and bad values, through the options: file:line too. */
    pb_options o;
    pb_error err;
    const char *p = pbt_write_config(tmpdir, "u.conf", "repo = /r\n[x]\nno-such = 1\n", 0600);
    PBT_CHECK(PARSE(&o, &err, "info", "--config", p) == PB_EINVAL);
    PBT_CHECK(strstr(err.msg, "u.conf:3:") && strstr(err.msg, "no-such"));
    opts_free(&o);
    p = pbt_write_config(tmpdir, "v.conf", "repo = /r\n\nqueue-depth = 0\n", 0600);
    PBT_CHECK(PARSE(&o, &err, "info", "--config", p) == PB_EINVAL);
    PBT_CHECK(strstr(err.msg, "v.conf:3") && strstr(err.msg, "--queue-depth"));
    opts_free(&o);
}

static void test_permissions(void)
{
    cfg_file c;
    pb_error err = PB_ERROR_INIT;
    const char *p = pbt_write_config(tmpdir, "w.conf", "repo = /r\n", 0666);
    PBT_CHECK(cfg_load(&c, p, &err) == PB_EINVAL && strstr(err.msg, "anyone"));
    cfg_free(&c);
    chmod(p, 0620);
    PBT_CHECK(cfg_load(&c, p, &err) == PB_EINVAL && strstr(err.msg, "group"));
    cfg_free(&c);
    chmod(p, 0644);
    PBT_CHECK(cfg_load(&c, p, &err) == 0 && c.count == 1 && c.mode == 0644);
    cfg_free(&c);
    PBT_CHECK(cfg_load(&c, tmpdir, &err) == PB_EINVAL); /* a directory */
    cfg_free(&c);
}

static const char prec_conf[] = "repo = /global-repo\n"
                                "compress-level = 2\n"
                                "queue-depth = 5\n"
                                "[cluster:main]\n"
                                "compress-level = 3\n"
                                "no-direct = true\n"
                                "[spare]\n"
                                "repo = /spare-repo\n";

static void test_precedence(void)
{
    pb_options o;
    pb_error err;
    const char *p = pbt_write_config(tmpdir, "p.conf", prec_conf, 0600);
    /* default < global */
    PBT_CHECK(PARSE(&o, &err, "backup", "--config", p) == 0);
    PBT_CHECK(o.backup.zstd_level == 2 && o.backup.direct && o.backup.queue_depth == 5);
    PBT_CHECK(pbt_streq(o.repo.location, "/global-repo") && o.restore.jobs == 4);
    opts_free(&o);
    /* global < cluster */
    PBT_CHECK(PARSE(&o, &err, "backup", "--config", p, "--cluster", "main") == 0);
    PBT_CHECK(o.backup.zstd_level == 3 && !o.backup.direct && o.backup.queue_depth == 5);
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "backup", "--config", p, "--cluster", "spare") == 0);
    PBT_CHECK(pbt_streq(o.repo.location, "/spare-repo") && o.backup.zstd_level == 2);
    opts_free(&o);
    /* cluster < environment, and PAGEBACK_CLUSTER / PAGEBACK_CONFIG choose */
    setenv("PAGEBACK_CONFIG", p, 1);
    setenv("PAGEBACK_CLUSTER", "main", 1);
    setenv("PAGEBACK_COMPRESS_LEVEL", "4", 1);
    setenv("PAGEBACK_NO_DIRECT", "false", 1);
    PBT_CHECK(PARSE(&o, &err, "backup") == 0);
    PBT_CHECK(o.backup.zstd_level == 4 && o.backup.direct);
    opts_free(&o);
    /* environment < flag */
    PBT_CHECK(PARSE(&o, &err, "backup", "--compress-level", "5", "--no-direct") == 0);
    PBT_CHECK(o.backup.zstd_level == 5 && !o.backup.direct);
    opts_free(&o);
    /* a bad value in the environment names the variable */
    setenv("PAGEBACK_QUEUE_DEPTH", "zero", 1);
    PBT_CHECK(PARSE(&o, &err, "backup") == PB_EINVAL && strstr(err.msg, "PAGEBACK_QUEUE_DEPTH"));
    opts_free(&o);
    pbt_clear_env();
    /* a cluster the file does not have; a cluster without a file */
    PBT_CHECK(PARSE(&o, &err, "backup", "--config", p, "--cluster", "nosuch") == PB_EINVAL);
    PBT_CHECK(strstr(err.msg, "nosuch") && strstr(err.msg, "p.conf"));
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "backup", "--repo", "/r", "--cluster", "main") == PB_EINVAL);
    opts_free(&o);
}

typedef struct seen {
    opts_source repo, level, qd, secret;
    bool secret_flagged;
    const char *level_value;
} seen;

static void collect(void *ctx, const char *name, const char *value, const char *dflt,
                    opts_source src, bool secret)
{
    seen *s = ctx;
    (void)dflt;
    if (!strcmp(name, "repo")) s->repo = src;
    if (!strcmp(name, "compress-level")) { s->level = src; s->level_value = value; }
    if (!strcmp(name, "queue-depth")) s->qd = src;
    if (!strcmp(name, "s3-secret")) { s->secret = src; s->secret_flagged = secret; }
}

/* What "config check" prints: each setting's source; secrets flagged. */
static void test_sources(void)
{
    pb_options o;
    pb_error err;
    const char *p = pbt_write_config(tmpdir, "s.conf", "queue-depth = 7\ns3-secret = hush\n[main]\n"
                                         "compress-level = 9\n", 0600);
    setenv("PAGEBACK_REPO", "/env-repo", 1);
    PBT_CHECK(PARSE(&o, &err, "config", "check", "--config", p, "--cluster", "main") == 0);
    seen s = {0};
    opts_each_setting(&o, collect, &s);
    PBT_CHECK(s.repo == OPTS_ENV && s.level == OPTS_CLUSTER && s.qd == OPTS_GLOBAL);
    PBT_CHECK(pbt_streq(s.level_value, "9"));
    PBT_CHECK(s.secret == OPTS_GLOBAL && s.secret_flagged);
    PBT_CHECK(pbt_streq(opts_source_name(OPTS_FLAG), "command line"));
    opts_free(&o);
    pbt_clear_env();
    /* a secret in a file others may read is refused */
    chmod(p, 0640);
    PBT_CHECK(PARSE(&o, &err, "info", "--repo", "/r", "--config", p) == PB_EINVAL);
    PBT_CHECK(strstr(err.msg, "chmod 600") != NULL);
    opts_free(&o);
}

/* Help and usage: one line naming the option and the command. */
static void test_option_errors(void)
{
    pb_options o;
    pb_error err;
    PBT_CHECK(PARSE(&o, &err, "backup", "--repo", "/r", "--foo") == PB_EINVAL);
    PBT_CHECK(strstr(err.msg, "unknown option --foo for backup") && !strchr(err.msg, '\n'));
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "backup", "--repo", "/r", "--foo=1") == PB_EINVAL);
    PBT_CHECK(strstr(err.msg, "unknown option --foo for backup") != NULL);
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "backup", "--repo", "/r", "--target-dir", "/t") == PB_EINVAL);
    PBT_CHECK(strstr(err.msg, "--target-dir is not for backup") != NULL);
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "info", "--repo") == PB_EINVAL);
    PBT_CHECK(strstr(err.msg, "--repo for info needs a value") != NULL);
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "--version") == 0 && o.version_requested);
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "info", "--version") == 0 && o.version_requested);
    opts_free(&o);
    PBT_CHECK(opts_option_applies("target-dir", "restore"));
    PBT_CHECK(!opts_option_applies("target-dir", "verify"));
    PBT_CHECK(opts_option_applies("set", "verify") && opts_option_applies("repo", "tune"));
    PBT_CHECK(opts_option_applies("no-such-row", "backup"));
    /* an empty command (fuzzer find: strstr of "" never advanced) is left to the
     * unknown-command error */
    PBT_CHECK(opts_option_applies("target-dir", ""));
    PBT_CHECK(!opts_option_applies("target-dir", "restor"));
}

int main(void)
{
    pbt_clear_env();
    if (pbt_tmpdir(tmpdir, sizeof(tmpdir), "config-test") != 0)
        return 1;
    PBT_RUN(test_parse_sections);
    PBT_RUN(test_bad_lines);
    PBT_RUN(test_permissions);
    PBT_RUN(test_precedence);
    PBT_RUN(test_sources);
    PBT_RUN(test_option_errors);
    pbt_rmtree(tmpdir);
    return PBT_DONE();
}
