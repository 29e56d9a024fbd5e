/*
 * tests/unit/tools/options_fixtures.h — what the option and configuration runners
 * (options_test.c, config_test.c) share: opts_parse over a literal argument list, a
 * clean PAGEBACK_* / AWS_* environment, and config files written with a given mode.
 * Header-only like pbtest.h.
 */
#ifndef PB_TEST_OPTIONS_FIXTURES_H
#define PB_TEST_OPTIONS_FIXTURES_H
#include "tests/unit/pbtest.h"
#include "tools/options.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PBT_MAX_ARGS 40

/* opts_parse over "pageback" + the given arguments (NULL-terminated); err is cleared
 * first. */
static inline int pbt_parse(pb_options *o, pb_error *err, const char *const *args)
{
    char *argv[PBT_MAX_ARGS + 1];
    int argc = 0;
    argv[argc++] = (char *)"pageback";
    for (const char *const *a = args; *a && argc < PBT_MAX_ARGS; a++)
        argv[argc++] = (char *)*a;
    argv[argc] = NULL;
    memset(err, 0, sizeof(*err));
    return opts_parse(o, argc, argv, err);
}
#define PARSE(o, err, ...) pbt_parse((o), (err), (const char *const[]){__VA_ARGS__, NULL})

/* Unset every variable a runner's tests set or that the caller's environment could
 * bring in, so each test starts from defaults. */
static inline void pbt_clear_env(void)
{
    static const char *const vars[] = {
        "PAGEBACK_REPO",      "PAGEBACK_STATE_DIR", "PAGEBACK_S3_ENDPOINT",
        "PAGEBACK_CONFIG",    "PAGEBACK_CLUSTER",   "PAGEBACK_COMPRESS_LEVEL",
        "PAGEBACK_NO_DIRECT", "PAGEBACK_S3_SECRET", "PAGEBACK_QUEUE_DEPTH",
        "AWS_REGION",         "AWS_ACCESS_KEY_ID",  "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
    };
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        unsetenv(vars[i]);
}

/* Write dir/name holding text with the given mode; returns its path (static: valid until
 * the next call). */
static inline const char *pbt_write_config(const char *dir, const char *name, const char *text,
                                           mode_t mode)
{
    static char path[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *fp = fopen(path, "w");
    if (fp) {
        fputs(text, fp);
        fclose(fp);
    }
    chmod(path, mode);
    return path;
}

/* Both strings present and equal. */
static inline bool pbt_streq(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

#endif
