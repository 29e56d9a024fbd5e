/* tests/unit/engine/storage/s3_fixtures.h — what the S3 driver runners (s3_test.c against a
 * real server, s3_retry_test.c against a fake one) share: the repository options of the
 * test server's account, opening, and a listing collector. Include after pbtest.h. */
#ifndef PB_TEST_S3_FIXTURES_H
#define PB_TEST_S3_FIXTURES_H

#include "engine/storage/storage.h"

#include <stdio.h>

/* The options of a repository at location on endpoint, with the test account. */
static inline repo_opts pbt_s3_opts(const char *location, const char *endpoint)
{
    repo_opts o = REPO_OPTS_INIT;
    o.location = location;
    o.s3_endpoint = endpoint;
    o.s3_key = "test:tester";
    o.s3_secret = "testing";
    o.s3_region = "us-east-1";
    o.s3_part_size = 5u << 20;
    o.s3_retries = 2;
    return o;
}

/* repo_open that counts a failure as a failed check and says why; NULL then. */
static inline repo *pbt_s3_open(const repo_opts *o)
{
    repo *r = NULL;
    pb_error e = PB_ERROR_INIT;
    int rc = repo_open(&r, o, &e);
    PBT_CHECK(rc == 0);
    if (rc)
        fprintf(stderr, "repo_open %s: %s\n", o->location, e.msg);
    return r;
}

/* rc == 0, and when not, what failed and why on stderr. */
static inline int pbt_check_ok(int rc, const pb_error *e, const char *what)
{
    if (rc)
        fprintf(stderr, "  %s: %s (%s)\n", what, e->msg, pb_code_name(rc));
    return rc == 0;
}

/* A repo_list callback keeping the first 64 keys and sizes; stops (42) at stop_after. */
typedef struct list_ctx {
    char keys[64][64];
    uint64_t sizes[64];
    int n;
    int stop_after;
} list_ctx;

static inline int pbt_collect(void *ctx, const char *key, uint64_t size)
{
    list_ctx *c = ctx;
    if (c->n < 64) {
        snprintf(c->keys[c->n], sizeof(c->keys[0]), "%s", key);
        c->sizes[c->n] = size;
    }
    c->n++;
    return c->stop_after && c->n == c->stop_after ? 42 : 0;
}

#endif
