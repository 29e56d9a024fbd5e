/*
 * tests/unit/tools/options_test.c — tools/options.c: command-line flags, the PAGEBACK_*
 * and AWS_* environment, the config file, their precedence (command line, then
 * environment, then config), refused values, and help per command.
 */
#include "tools/options.h"
#include "tests/unit/tools/options_fixtures.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/pb-options-test.XXXXXX";

static void test_backup_flags(void)
{
    pb_options o;
    pb_error err;
    PBT_CHECK(PARSE(&o, &err, "backup", "--repo", "/r", "--type", "full", "--read-size", "1M",
                    "--queue-depth", "4", "--on-checksum-error", "fail", "--compress-level",
                    "5", "--full-every", "3", "--full-after", "7d", "--max-rate", "200M",
                    "--nice", "0", "--no-uring", "--no-direct", "--pgdata", "/pg", "--dbname",
                    "host=x", "--wal-timeout", "30", "--state-dir", "/sd") == 0);
    PBT_CHECK(pbt_streq(o.command, "backup") && !o.help_requested);
    PBT_CHECK(pbt_streq(o.repo.location, "/r") && pbt_streq(o.state_dir, "/sd"));
    PBT_CHECK(o.backup.type == 'F' && o.backup.read_size == (1u << 20));
    PBT_CHECK(o.backup.queue_depth == 4 && o.backup.on_checksum_error == BK_CHECKSUM_FAIL);
    PBT_CHECK(o.backup.zstd_level == 5 && o.backup.full_every == 3);
    PBT_CHECK(o.backup.full_after_secs == 7 * 86400 && o.backup.max_rate == 200u << 20);
    PBT_CHECK(o.backup.nice == 0 && !o.backup.use_uring && !o.backup.direct);
    PBT_CHECK(pbt_streq(o.backup.pgdata, "/pg") && pbt_streq(o.backup.conninfo, "host=x"));
    PBT_CHECK(o.backup.wal_timeout_secs == 30);
    opts_free(&o);

    /* Defaults when nothing is given. */
    PBT_CHECK(PARSE(&o, &err, "backup", "--repo", "/r") == 0);
    PBT_CHECK(o.backup.type == 0 && o.backup.read_size == 0 && o.backup.queue_depth == 0);
    PBT_CHECK(o.backup.use_uring && o.backup.direct && o.backup.nice == 10);
    PBT_CHECK(o.backup.full_after_secs == 0 && o.restore.jobs == 4);
    PBT_CHECK(pbt_streq(o.repo.s3_region, "us-east-1") && o.repo.s3_parallel == 4);
    PBT_CHECK(o.backup.incr_mode == BK_INCR_AUTO && o.backup.verify_every == 7 &&
              o.backup.verify_after_secs == 7 * 86400);
    opts_free(&o);

    /* How an incremental reads: a count or a duration replaces both defaults. */
    PBT_CHECK(PARSE(&o, &err, "backup", "--repo", "/r", "--incremental-mode", "file",
                    "--verify-scan", "3") == 0);
    PBT_CHECK(o.backup.incr_mode == BK_INCR_FILE && o.backup.verify_every == 3 &&
              o.backup.verify_after_secs == 0);
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "backup", "--repo", "/r", "--incremental-mode", "wal",
                    "--verify-scan", "2d") == 0);
    PBT_CHECK(o.backup.incr_mode == BK_INCR_WAL && o.backup.verify_every == 0 &&
              o.backup.verify_after_secs == 2 * 86400);
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "backup", "--repo", "/r", "--incremental-mode", "scan") == 0 &&
              o.backup.incr_mode == BK_INCR_SCAN);
    PBT_CHECK(o.backup.io_class == SCAN_IO_IDLE && o.backup.cpu_priority == BK_CPU_IDLE);
    PBT_CHECK(!o.backup.checkpoint_fast && o.backup.cpu_weight == 0 && o.backup.max_memory == 0);
    opts_free(&o);
}

/* The polite-I/O options (docs/DESIGN.md, "Polite I/O"). */
static void test_polite_flags(void)
{
    pb_options o;
    pb_error err;
    PBT_CHECK(PARSE(&o, &err, "backup", "--repo", "/r", "--io-class", "best-effort:3",
                    "--cpu-priority", "nice", "--cpu-weight", "25", "--checkpoint", "fast",
                    "--max-memory", "64M") == 0);
    PBT_CHECK(o.backup.io_class == SCAN_IO_BEST_EFFORT && o.backup.io_level == 3);
    PBT_CHECK(o.backup.cpu_priority == BK_CPU_NICE && o.backup.cpu_weight == 25);
    PBT_CHECK(o.backup.checkpoint_fast && o.backup.max_memory == 64u << 20);
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "backup", "--repo", "/r", "--io-class", "best-effort",
                    "--cpu-priority", "normal", "--checkpoint", "spread") == 0);
    PBT_CHECK(o.backup.io_class == SCAN_IO_BEST_EFFORT && o.backup.io_level == 7);
    PBT_CHECK(o.backup.cpu_priority == BK_CPU_NORMAL && !o.backup.checkpoint_fast);
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "backup", "--repo", "/r", "--io-class", "default") == 0);
    PBT_CHECK(o.backup.io_class == SCAN_IO_DEFAULT);
    PBT_CHECK(o.backup.compress_adapt); /* adaptive compression is the default */
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "backup", "--repo", "/r", "--compress-adapt", "off") == 0);
    PBT_CHECK(!o.backup.compress_adapt);
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "backup", "--repo", "/r", "--compress-adapt", "yes") != 0);
    opts_free(&o);
}

static void test_restore_and_other_flags(void)
{
    pb_options o;
    pb_error err;
    PBT_CHECK(PARSE(&o, &err, "restore", "--repo", "/r", "--target-dir", "/t", "--set",
                    "latest", "--delta", "--target-lsn", "0/16B3748", "--target-exclusive",
                    "--target-action", "pause", "--target-timeline", "current",
                    "--tablespace-map", "16385=/ts/a", "--tablespace-map", "16386=/ts/b",
                    "--jobs", "8") == 0);
    PBT_CHECK(pbt_streq(o.restore.target_dir, "/t") && pbt_streq(o.restore.set, "latest"));
    PBT_CHECK(o.restore.delta && !o.restore.force && o.restore.target_exclusive);
    PBT_CHECK(o.restore.target == RS_TARGET_LSN && pbt_streq(o.restore.target_value, "0/16B3748"));
    PBT_CHECK(pbt_streq(o.restore.target_action, "pause"));
    PBT_CHECK(pbt_streq(o.restore.target_timeline, "current") && o.restore.jobs == 8);
    PBT_CHECK(o.restore.ntblspc == 2 && o.restore.tblspc == o.tblspc);
    PBT_CHECK(o.tblspc[1].oid == 16386 && pbt_streq(o.tblspc[1].dir, "/ts/b"));
    opts_free(&o);

    /* Positional arguments, before or after the options (getopt moves them). */
    PBT_CHECK(PARSE(&o, &err, "archive-get", "000000010000000000000001", "pg_wal/RECOVERYXLOG",
                    "--repo", "/r") == 0);
    PBT_CHECK(o.nargs == 2 && pbt_streq(o.args[0], "000000010000000000000001"));
    PBT_CHECK(pbt_streq(o.args[1], "pg_wal/RECOVERYXLOG"));
    opts_free(&o);

    PBT_CHECK(PARSE(&o, &err, "info", "--json", "--repo", "s3://b/p", "--s3-endpoint",
                    "http://127.0.0.1:9000", "--s3-region", "eu-west-1", "--s3-uri-style",
                    "host", "--s3-insecure", "--s3-parallel", "8", "--s3-retries", "0",
                    "--s3-part-size", "5M", "--s3-ca-file", "/ca.pem") == 0);
    PBT_CHECK(o.json && pbt_streq(o.repo.location, "s3://b/p"));
    PBT_CHECK(pbt_streq(o.repo.s3_endpoint, "http://127.0.0.1:9000"));
    PBT_CHECK(pbt_streq(o.repo.s3_region, "eu-west-1") && !o.repo.s3_path_style);
    PBT_CHECK(pbt_streq(o.s3_uri_style, "host") && o.repo.s3_insecure && o.s3_insecure_given);
    PBT_CHECK(o.repo.s3_parallel == 8 && o.repo.s3_retries == 0);
    PBT_CHECK(o.repo.s3_part_size == 5u << 20 && pbt_streq(o.repo.s3_ca_file, "/ca.pem"));
    opts_free(&o);

    PBT_CHECK(PARSE(&o, &err, "expire", "--repo", "/r", "--retain-full", "2") == 0);
    PBT_CHECK(o.retain_full == 2);
    opts_free(&o);
    /* tune reads no repository: it is the one command that needs none. */
    PBT_CHECK(PARSE(&o, &err, "tune", "--pgdata", "/pg") == 0);
    PBT_CHECK(o.repo.location == NULL);
    opts_free(&o);
}

/* Each refused value fails with PB_EINVAL and a message that names the option. */
static void test_bad_values(void)
{
    static const struct {
        const char *opt, *value, *names;
    } bad[] = {
        {"--type", "sometimes", "--type"},       {"--read-size", "12k", "--read-size"},
        {"--read-size", "4k", "--read-size"},     {"--read-size", "128M", "--read-size"},
        {"--read-size", "18014398509482984K", "--read-size"},
        {"--queue-depth", "0", "--queue-depth"}, {"--queue-depth", "257", "--queue-depth"},
        {"--compress-level", "20", "--compress-level"}, {"--nice", "20", "--nice"},
        {"--on-checksum-error", "ignore", "--on-checksum-error"},
        {"--full-after", "7w", "--full-after"},   {"--full-every", "x", "--full-every"},
        {"--s3-parallel", "0", "--s3-parallel"}, {"--s3-retries", "51", "--s3-retries"},
        {"--s3-part-size", "1M", "--s3-part-size"}, {"--s3-uri-style", "virtual", "--s3-uri-style"},
        {"--log-level", "loud", "--log-level"},  {"--jobs", "65", "--jobs"},
        {"--retain-full", "0", "--retain-full"}, {"--target-action", "stop", "--target-action"},
        {"--tablespace-map", "16385:/x", "--tablespace-map"},
        {"--tablespace-map", "16385=relative", "--tablespace-map"},
        {"--max-rate", "fast", "--max-rate"},
        {"--incremental-mode", "pages", "--incremental-mode"},
        {"--verify-scan", "often", "--verify-scan"},
        {"--io-class", "realtime", "--io-class"}, {"--io-class", "best-effort:8", "--io-class"},
        {"--cpu-priority", "low", "--cpu-priority"}, {"--cpu-weight", "0", "--cpu-weight"},
        {"--cpu-weight", "10001", "--cpu-weight"}, {"--checkpoint", "slow", "--checkpoint"},
        {"--max-memory", "0", "--max-memory"}, {"--max-memory", "lots", "--max-memory"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        pb_options o;
        pb_error err;
        int rc = PARSE(&o, &err, "backup", "--repo", "/r", bad[i].opt, bad[i].value);
        PBT_CHECK(rc == PB_EINVAL && strstr(err.msg, bad[i].names) != NULL);
        if (rc != PB_EINVAL)
            fprintf(stderr, "  accepted %s %s\n", bad[i].opt, bad[i].value);
        opts_free(&o);
    }
    pb_options o;
    pb_error err;
    PBT_CHECK(PARSE(&o, &err, "restore", "--repo", "/r", "--target-time", "2026-01-01",
                    "--target-end") == PB_EINVAL && strstr(err.msg, "only one of"));
    opts_free(&o);
    opterr = 0; /* getopt's own line for the unknown option is noise here */
    PBT_CHECK(PARSE(&o, &err, "backup", "--repo", "/r", "--no-such-option") == PB_EINVAL &&
              strstr(err.msg, "unknown option --no-such-option for backup"));
    opterr = 1;
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "archive-push", "a", "b", "c", "d", "e", "--repo", "/r") ==
              PB_EINVAL && strstr(err.msg, "too many arguments"));
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "info") == PB_EINVAL && strstr(err.msg, "no repository"));
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "--repo", "/r") == PB_EINVAL && strstr(err.msg, "no command"));
    opts_free(&o);
    char *argv[] = {(char *)"pageback", NULL};
    PBT_CHECK(opts_parse(&o, 1, argv, &err) == PB_EINVAL && strstr(err.msg, "no command"));
    opts_free(&o);
}

static void test_environment(void)
{
    pb_options o;
    pb_error err;
    setenv("PAGEBACK_REPO", "/env-repo", 1);
    setenv("PAGEBACK_STATE_DIR", "/env-state", 1);
    setenv("PAGEBACK_S3_ENDPOINT", "http://env:9000", 1);
    setenv("AWS_REGION", "ap-south-1", 1);
    setenv("AWS_ACCESS_KEY_ID", "env-key", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "env-secret", 1);
    setenv("AWS_SESSION_TOKEN", "env-token", 1);
    PBT_CHECK(PARSE(&o, &err, "info") == 0); /* the repository from the environment */
    PBT_CHECK(pbt_streq(o.repo.location, "/env-repo") && pbt_streq(o.state_dir, "/env-state"));
    PBT_CHECK(pbt_streq(o.repo.s3_endpoint, "http://env:9000"));
    PBT_CHECK(pbt_streq(o.repo.s3_region, "ap-south-1") && pbt_streq(o.repo.s3_key, "env-key"));
    PBT_CHECK(pbt_streq(o.repo.s3_secret, "env-secret") && pbt_streq(o.repo.s3_token, "env-token"));
    opts_free(&o);
    /* The command line wins over the environment. */
    PBT_CHECK(PARSE(&o, &err, "info", "--repo", "/flag-repo", "--state-dir", "/flag-state",
                    "--s3-endpoint", "http://flag:9000", "--s3-region", "eu-north-1") == 0);
    PBT_CHECK(pbt_streq(o.repo.location, "/flag-repo") && pbt_streq(o.state_dir, "/flag-state"));
    PBT_CHECK(pbt_streq(o.repo.s3_endpoint, "http://flag:9000"));
    PBT_CHECK(pbt_streq(o.repo.s3_region, "eu-north-1"));
    opts_free(&o);
    pbt_clear_env();
}

static void test_config_file(void)
{
    pb_options o;
    pb_error err;
    const char *path = pbt_write_config(tmpdir, "plain.conf",
                                    "# a comment line\n"
                                    "repo = /cfg-repo\n"
                                    "   compress-level=7\n"
                                    "state-dir =\t/cfg-state\n"
                                    "s3-key = cfg-key\n"
                                    "s3-token = cfg-token\n",
                                    0600); /* a session token is a secret too */
    PBT_CHECK(PARSE(&o, &err, "backup", "--config", path) == 0);
    PBT_CHECK(pbt_streq(o.config_file, path) && pbt_streq(o.repo.location, "/cfg-repo"));
    PBT_CHECK(o.backup.zstd_level == 7 && pbt_streq(o.state_dir, "/cfg-state"));
    PBT_CHECK(pbt_streq(o.repo.s3_key, "cfg-key") && pbt_streq(o.repo.s3_token, "cfg-token"));
    opts_free(&o);
    /* PAGEBACK_CONFIG names the file when --config does not. */
    setenv("PAGEBACK_CONFIG", path, 1);
    PBT_CHECK(PARSE(&o, &err, "backup") == 0 && pbt_streq(o.repo.location, "/cfg-repo"));
    opts_free(&o);
    pbt_clear_env();

    path = pbt_write_config(tmpdir, "unknown.conf", "repo = /r\nno-such-setting = 1\n", 0600);
    PBT_CHECK(PARSE(&o, &err, "info", "--config", path) == PB_EINVAL);
    PBT_CHECK(strstr(err.msg, "no-such-setting") && strstr(err.msg, path));
    opts_free(&o);
    path = pbt_write_config(tmpdir, "badvalue.conf", "repo = /r\nqueue-depth = 0\n", 0600);
    PBT_CHECK(PARSE(&o, &err, "info", "--config", path) == PB_EINVAL);
    PBT_CHECK(strstr(err.msg, "--queue-depth") && strstr(err.msg, path));
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "info", "--config", "/nonexistent/pageback.conf") == PB_EINVAL);
    PBT_CHECK(strstr(err.msg, "/nonexistent/pageback.conf") != NULL);
    opts_free(&o);

    /* A secret is refused in a file others may read, accepted at 0600. */
    path = pbt_write_config(tmpdir, "secret.conf", "repo = /r\ns3-secret = cfg-secret\n", 0644);
    PBT_CHECK(PARSE(&o, &err, "info", "--config", path) == PB_EINVAL);
    PBT_CHECK(strstr(err.msg, "chmod 600") != NULL);
    opts_free(&o);
    chmod(path, 0600);
    PBT_CHECK(PARSE(&o, &err, "info", "--config", path) == 0);
    PBT_CHECK(pbt_streq(o.repo.s3_secret, "cfg-secret"));
    opts_free(&o);
}

/* Command line, then environment, then config file: each fills only what is unset. */
static void test_precedence(void)
{
    pb_options o;
    pb_error err;
    const char *path = pbt_write_config(tmpdir, "prec.conf",
                                    "repo = /cfg-repo\n"
                                    "state-dir = /cfg-state\n"
                                    "s3-key = cfg-key\n"
                                    "compress-level = 7\n"
                                    "queue-depth = 6\n",
                                    0600);
    setenv("PAGEBACK_REPO", "/env-repo", 1);
    setenv("AWS_ACCESS_KEY_ID", "env-key", 1);
    PBT_CHECK(PARSE(&o, &err, "backup", "--config", path, "--repo", "/flag-repo",
                    "--compress-level", "3") == 0);
    PBT_CHECK(pbt_streq(o.repo.location, "/flag-repo"));  /* flag over environment and file */
    PBT_CHECK(o.backup.zstd_level == 3);               /* flag over file */
    PBT_CHECK(o.backup.queue_depth == 6);              /* file fills what is unset */
    PBT_CHECK(pbt_streq(o.repo.s3_key, "env-key"));       /* environment over file */
    PBT_CHECK(pbt_streq(o.state_dir, "/cfg-state"));
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "backup", "--config", path) == 0);
    PBT_CHECK(pbt_streq(o.repo.location, "/env-repo") && o.backup.zstd_level == 7);
    opts_free(&o);
    pbt_clear_env();
    PBT_CHECK(PARSE(&o, &err, "backup", "--config", path) == 0);
    PBT_CHECK(pbt_streq(o.repo.location, "/cfg-repo") && pbt_streq(o.repo.s3_key, "cfg-key"));
    opts_free(&o);
}

static const char *const commands[] = {
    "backup", "restore", "archive-push", "archive-get", "info", "verify", "expire", "rebase",
    "tune",
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

/* opts_usage's text for command (NULL: global) in buf; its return code in *rc. */
static const char *usage_text(const char *command, int *rc, char *buf, size_t cap)
{
    FILE *fp = fmemopen(buf, cap, "w");
    *rc = fp ? opts_usage(fp, command) : -100;
    if (fp)
        fclose(fp);
    return buf;
}

/* Help is a field, not an error: no repository needed, nothing else parsed. */
static void test_help(void)
{
    pb_options o;
    pb_error err;
    for (size_t i = 0; i < NCOMMANDS; i++) {
        PBT_CHECK(PARSE(&o, &err, commands[i], "--help") == 0);
        PBT_CHECK(o.help_requested && pbt_streq(o.command, commands[i]) && err.msg[0] == '\0');
        opts_free(&o);
        char buf[4096] = "", head[64];
        int rc;
        usage_text(commands[i], &rc, buf, sizeof(buf));
        snprintf(head, sizeof(head), "usage: pageback %s [options]\n", commands[i]);
        PBT_CHECK(rc == 0 && strncmp(buf, head, strlen(head)) == 0);
        PBT_CHECK(strstr(buf, "--repo") != NULL); /* the common options follow */
        for (size_t j = 0; j < NCOMMANDS; j++) { /* and no other command's line */
            char line[64];
            snprintf(line, sizeof(line), "\n  %s ", commands[j]);
            PBT_CHECK((strstr(buf, line) != NULL) == (i == j));
        }
    }
    PBT_CHECK(PARSE(&o, &err, "backup", "--repo", "/r", "--help", "--queue-depth", "0") == 0);
    PBT_CHECK(o.help_requested); /* what follows --help is not even checked */
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "help") == 0 && o.help_requested && o.command == NULL);
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "--help") == 0 && o.help_requested && o.command == NULL);
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "help", "restore") == 0 && pbt_streq(o.command, "restore"));
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "backup", "--repo", "/r") == 0 && !o.help_requested);
    opts_free(&o);

    char buf[8192] = "";
    int rc;
    usage_text(NULL, &rc, buf, sizeof(buf));
    PBT_CHECK(rc == 0 && strncmp(buf, "usage: pageback COMMAND", 23) == 0);
    for (size_t j = 0; j < NCOMMANDS; j++) {
        char line[64];
        snprintf(line, sizeof(line), "\n  %s ", commands[j]);
        PBT_CHECK(strstr(buf, line) != NULL);
    }
    buf[0] = '\0';
    usage_text("nosuch", &rc, buf, sizeof(buf));
    PBT_CHECK(rc == PB_EINVAL && buf[0] == '\0');
}

/* --encrypt-key-file: the key material read in order (a trailing newline dropped), a
 * file others can read refused naming its mode, PAGEBACK_ENCRYPT_KEY only without files. */
static void test_encrypt_keys(void)
{
    pbt_clear_env();
    pb_options o;
    pb_error e;
    char a[256], b[256];
    snprintf(a, sizeof(a), "%s",
             pbt_write_config(tmpdir, "k1", "first-key-material-0123456789abcdef\n", 0600));
    snprintf(b, sizeof(b), "%s",
             pbt_write_config(tmpdir, "k2", "second-key-material-0123456789abcd", 0400));
    PBT_CHECK(PARSE(&o, &e, "info", "--repo", "/r", "--encrypt-key-file", a,
                    "--encrypt-key-file", b) == 0);
    PBT_CHECK(o.repo.n_keys == 2 && o.repo.keys == o.keys);
    PBT_CHECK(o.keys[0].len == 35 && memcmp(o.keys[0].data, "first-key", 9) == 0);
    PBT_CHECK(o.keys[1].len == 34 && memcmp(o.keys[1].data, "second-key", 10) == 0);
    opts_free(&o);
    const char *open_key =
        pbt_write_config(tmpdir, "k3", "readable-key-material-0123456789abc", 0640);
    PBT_CHECK(PARSE(&o, &e, "info", "--repo", "/r", "--encrypt-key-file", open_key) ==
              PB_EINVAL);
    PBT_CHECK(strstr(e.msg, "mode 640") != NULL && strstr(e.msg, "chmod 600") != NULL);
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &e, "info", "--repo", "/r", "--encrypt-key-file", "/nonexistent/k") ==
              PB_EINVAL);
    opts_free(&o);
    setenv("PAGEBACK_ENCRYPT_KEY", "environment-key-material-0123456789", 1);
    PBT_CHECK(PARSE(&o, &e, "info", "--repo", "/r") == 0);
    PBT_CHECK(o.repo.n_keys == 1 && o.keys[0].len == 35);
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &e, "info", "--repo", "/r", "--encrypt-key-file", a) == 0);
    PBT_CHECK(o.repo.n_keys == 1 && memcmp(o.keys[0].data, "first-key", 9) == 0);
    opts_free(&o);
    unsetenv("PAGEBACK_ENCRYPT_KEY");
    PBT_CHECK(PARSE(&o, &e, "info", "--repo", "/r") == 0 && o.repo.n_keys == 0);
    opts_free(&o);
}

/* Restore kinds, the default target and its precedence, retention, annotations. */
static void test_ops_options(void)
{
    pb_options o;
    pb_error err;
    PBT_CHECK(PARSE(&o, &err, "restore", "--repo", "/r", "--target-dir", "/t") == 0);
    PBT_CHECK(o.restore.target == RS_TARGET_END && !o.restore.standby); /* the archive's end */
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "restore", "--repo", "/r", "--target-dir", "/t",
                    "--target-immediate") == 0);
    PBT_CHECK(o.restore.target == RS_TARGET_IMMEDIATE);
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "restore", "--repo", "/r", "--target-dir", "/t",
                    "--target-immediate", "--target-lsn", "0/1") == PB_EINVAL);
    PBT_CHECK(strstr(err.msg, "only one of --target-immediate") != NULL);
    opts_free(&o);
    setenv("PAGEBACK_TARGET_IMMEDIATE", "true", 1);
    PBT_CHECK(PARSE(&o, &err, "restore", "--repo", "/r", "--target-dir", "/t") == 0);
    PBT_CHECK(o.restore.target == RS_TARGET_IMMEDIATE);
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "restore", "--repo", "/r", "--target-dir", "/t",
                    "--target-name", "rp") == 0); /* the flag wins over the environment */
    PBT_CHECK(o.restore.target == RS_TARGET_NAME && pbt_streq(o.restore.target_value, "rp"));
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "restore", "--repo", "/r", "--target-dir", "/t", "--type",
                    "standby") == 0); /* a standby has no target, from anywhere */
    PBT_CHECK(o.restore.standby && o.restore.target == RS_TARGET_END);
    opts_free(&o);
    unsetenv("PAGEBACK_TARGET_IMMEDIATE");
    PBT_CHECK(PARSE(&o, &err, "restore", "--repo", "/r", "--target-dir", "/t", "--type",
                    "standby", "--primary-conninfo", "host=p") == 0);
    PBT_CHECK(o.restore.standby && pbt_streq(o.restore.primary_conninfo, "host=p"));
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "restore", "--repo", "/r", "--target-dir", "/t", "--type",
                    "standby", "--target-time", "2026-12-01 00:00:00+00") == PB_EINVAL);
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "restore", "--repo", "/r", "--target-dir", "/t",
                    "--primary-conninfo", "host=p") == PB_EINVAL);
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "restore", "--repo", "/r", "--target-dir", "/t", "--type",
                    "replica") == PB_EINVAL && strstr(err.msg, "standby or default"));
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "backup", "--repo", "/r", "--type", "standby") == PB_EINVAL);
    opts_free(&o);

    PBT_CHECK(PARSE(&o, &err, "expire", "--repo", "/r", "--retain-full-days", "14",
                    "--retain-archive", "2") == 0);
    PBT_CHECK(o.retain_full_days == 14 && o.retain_archive == 2);
    opts_free(&o);
    setenv("PAGEBACK_SET", "20261201-000000F", 1); /* restore's, never expire's */
    PBT_CHECK(PARSE(&o, &err, "expire", "--repo", "/r", "--retain-full", "1") == 0);
    PBT_CHECK(o.restore.set == NULL);
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "expire", "--repo", "/r", "--set", "20261202-000000F") == 0);
    PBT_CHECK(pbt_streq(o.restore.set, "20261202-000000F"));
    opts_free(&o);
    unsetenv("PAGEBACK_SET");
    PBT_CHECK(PARSE(&o, &err, "expire", "--repo", "/r", "--retain-full-days", "0") == PB_EINVAL);
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "expire", "--repo", "/r", "--retain-archive", "x") == PB_EINVAL);
    opts_free(&o);

    PBT_CHECK(PARSE(&o, &err, "backup", "--repo", "/r", "--annotation", "a=1",
                    "--annotation", "b.c=two words") == 0);
    PBT_CHECK(pbt_streq(o.backup.annotations, "a=1\nb.c=two words\n"));
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "backup", "--repo", "/r", "--annotation", "a=1",
                    "--annotation", "a=2") == PB_EINVAL && strstr(err.msg, "twice"));
    opts_free(&o);
    PBT_CHECK(PARSE(&o, &err, "restore", "--repo", "/r", "--target-dir", "/t",
                    "--annotation", "a=1") == PB_EINVAL); /* backup's option */
    opts_free(&o);
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    pbt_clear_env();
    PBT_RUN(test_backup_flags);
    PBT_RUN(test_restore_and_other_flags);
    PBT_RUN(test_polite_flags);
    PBT_RUN(test_bad_values);
    PBT_RUN(test_environment);
    PBT_RUN(test_config_file);
    PBT_RUN(test_precedence);
    PBT_RUN(test_help);
    PBT_RUN(test_encrypt_keys);
    PBT_RUN(test_ops_options);
    static const char *const files[] = {"plain.conf", "unknown.conf", "badvalue.conf",
                                        "secret.conf", "prec.conf"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char path[256];
        snprintf(path, sizeof(path), "%s/%s", tmpdir, files[i]);
        unlink(path);
    }
    rmdir(tmpdir);
    return PBT_DONE();
}
