/*
 * tests/fuzz/fuzz_options.c — libFuzzer target for the option parser (tools/options.c):
 * with bit 0 of the first byte set the rest is a config file read through --config
 * (opts_apply_config), otherwise it is split at NUL bytes into command-line arguments.
 */
#include "tools/options.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_ARGS 24

static char config_path[64];

static void parse(int argc, char **argv)
{
    pb_options o;
    pb_error err = PB_ERROR_INIT;
    opts_parse(&o, argc, argv, &err);
    opts_free(&o);
}

static void as_config(const uint8_t *data, size_t size)
{
    if (!config_path[0])
        snprintf(config_path, sizeof(config_path), "/tmp/pb-fuzz-options-%d.conf", (int)getpid());
    FILE *fp = fopen(config_path, "w");
    if (!fp)
        return;
    fwrite(data, 1, size, fp);
    fclose(fp);
    char a0[] = "pageback", a1[] = "info", a2[] = "--config";
    char *argv[] = {a0, a1, a2, config_path, NULL};
    parse(4, argv);
}

static void as_args(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1), *argv[MAX_ARGS + 2];
    if (!buf)
        return;
    memcpy(buf, data, size);
    buf[size] = '\0';
    char a0[] = "pageback";
    int argc = 0;
    argv[argc++] = a0;
    for (char *p = buf; p <= buf + size && argc < MAX_ARGS + 1; p += strlen(p) + 1)
        argv[argc++] = p;
    argv[argc] = NULL;
    parse(argc, argv);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    /* getopt keeps state between calls (a pointer into the last argv): reset it fully,
     * as a fresh process would have it; opts_parse then sets optind itself */
    static const struct option none[] = {{0, 0, 0, 0}};
    char d0[] = "x", *dummy[] = {d0, NULL};
    opterr = 0; /* getopt's own messages are noise here */
    optind = 0;
    getopt_long(1, dummy, "", none, NULL);
    if (data[0] & 1)
        as_config(data + 1, size - 1);
    else
        as_args(data + 1, size - 1);
    return 0;
}
