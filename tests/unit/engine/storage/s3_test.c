/*
 * tests/unit/engine/storage/s3_test.c — the S3 driver against a real S3-compatible
 * server that checks SigV4 signatures (OpenStack Swift + s3api, started by
 * tests/s3server/start.sh).
 *
 * The scripts are found through PB_SRCDIR (the source tree root; default "..", since
 * unit tests run from the build directory, e.g. build/tests/unit/engine/storage/s3_test
 * run in build/). libcurl is the driver's own business (it initialises it once): this
 * test does not include it.
 * If the server cannot start the test fails: it never skips. Retries against a fake
 * endpoint and a server that is down are in s3_retry_test.c.
 */
#include "engine/storage/storage.h"
#include "engine/storage/storage_internal.h"
#include "tests/unit/pbtest.h"
#include "tests/unit/engine/storage/s3_fixtures.h"

#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BUCKET "pbtest"

/* Test hook in engine/storage/s3/s3_ops.c. */
void repo_s3_test_set_list_page(void *impl, unsigned max_keys);

static char tmpdir[] = "/tmp/pb-s3-test-XXXXXX";
static char srcdir[1024];
static char endpoint[256];

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (uint8_t)(seed >> 16);
    }
}

static int run(const char *fmt, const char *a, const char *b)
{
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), fmt, a, b);
    int st = system(cmd);
    return st == 0 ? 0 : -1;
}

static int run3(const char *fmt, const char *a, const char *b, const char *c)
{
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), fmt, a, b, c);
    return system(cmd) == 0 ? 0 : -1;
}

static int server_start(void)
{
    char path[2048];
    char pid[32];
    snprintf(path, sizeof(path), "%s/tests/s3server/start.sh", srcdir);
    /* Our PID as WATCH_PID: the servers go away even if this test crashes. */
    snprintf(pid, sizeof(pid), "%ld", (long)getpid());
    if (run3("'%s' '%s' %s", path, tmpdir, pid) != 0)
        return -1;
    char envf[1100];
    snprintf(envf, sizeof(envf), "%s/env", tmpdir);
    FILE *f = fopen(envf, "r");
    if (!f)
        return -1;
    char line[512];
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = '\0';
        /* The helper scripts (s3tool.py) read the same variables. */
        setenv(line, eq + 1, 1);
        if (strcmp(line, "S3_ENDPOINT") == 0)
            snprintf(endpoint, sizeof(endpoint), "%s", eq + 1);
    }
    fclose(f);
    if (!endpoint[0])
        return -1;
    snprintf(path, sizeof(path), "%s/tests/s3server/mkbucket.sh", srcdir);
    return run("'%s' '%s' " BUCKET, path, tmpdir);
}

static void server_stop(void)
{
    char path[2048];
    snprintf(path, sizeof(path), "%s/tests/s3server/stop.sh", srcdir);
    run("'%s' '%s'", path, tmpdir);
}

static repo_opts base_opts(const char *location)
{
    return pbt_s3_opts(location, endpoint);
}

static void test_roundtrip(void)
{
    repo_opts o = base_opts("s3://" BUCKET "/rt");
    repo *r = pbt_s3_open(&o);
    if (!r)
        return;
    pb_error e = PB_ERROR_INIT;
    uint8_t data[100000];
    fill(data, sizeof(data), 1);
    PBT_CHECK(pbt_check_ok(repo_put(r, "a/b/one", data, sizeof(data), &e), &e, "put"));

    void *got = NULL;
    size_t got_len = 0;
    PBT_CHECK(pbt_check_ok(repo_get(r, "a/b/one", &got, &got_len, &e), &e, "get"));
    PBT_CHECK(got_len == sizeof(data) && got && memcmp(got, data, sizeof(data)) == 0);
    free(got);

    uint64_t size = 0;
    PBT_CHECK(pbt_check_ok(repo_stat(r, "a/b/one", &size, &e), &e, "stat"));
    PBT_CHECK(size == sizeof(data));

    uint8_t part[5000];
    PBT_CHECK(pbt_check_ok(repo_get_range(r, "a/b/one", 12345, sizeof(part), part, &e), &e,
                       "get_range"));
    PBT_CHECK(memcmp(part, data + 12345, sizeof(part)) == 0);
    /* The last bytes exactly, then a range running past the end. */
    PBT_CHECK(pbt_check_ok(repo_get_range(r, "a/b/one", sizeof(data) - 10, 10, part, &e), &e,
                       "get_range tail"));
    PBT_CHECK(memcmp(part, data + sizeof(data) - 10, 10) == 0);
    PBT_CHECK(repo_get_range(r, "a/b/one", sizeof(data) - 10, 20, part, &e) == PB_ECORRUPT);
    PBT_CHECK(strstr(e.msg, "a/b/one") != NULL);
    PBT_CHECK(repo_get_range(r, "a/b/one", sizeof(data) + 10, 20, part, &e) == PB_ECORRUPT);

    /* Missing objects. */
    PBT_CHECK(repo_stat(r, "a/b/missing", &size, &e) == PB_ENOENT);
    PBT_CHECK(strstr(e.msg, "s3://" BUCKET "/rt/a/b/missing") != NULL);
    PBT_CHECK(repo_get(r, "a/b/missing", &got, &got_len, &e) == PB_ENOENT);
    PBT_CHECK(repo_get_range(r, "a/b/missing", 0, 10, part, &e) == PB_ENOENT);

    /* Empty object, and a key that needs percent-encoding. */
    PBT_CHECK(pbt_check_ok(repo_put(r, "empty", "", 0, &e), &e, "put empty"));
    got = NULL;
    PBT_CHECK(pbt_check_ok(repo_get(r, "empty", &got, &got_len, &e), &e, "get empty"));
    PBT_CHECK(got != NULL && got_len == 0);
    free(got);
    PBT_CHECK(repo_stat(r, "empty", &size, &e) == 0 && size == 0);
    const char *odd = "odd dir/k+y=1&x;%20~é";
    PBT_CHECK(pbt_check_ok(repo_put(r, odd, data, 777, &e), &e, "put odd key"));
    got = NULL;
    PBT_CHECK(pbt_check_ok(repo_get(r, odd, &got, &got_len, &e), &e, "get odd key"));
    PBT_CHECK(got_len == 777 && got && memcmp(got, data, 777) == 0);
    free(got);

    /* Overwrite, then delete. */
    PBT_CHECK(pbt_check_ok(repo_put(r, "a/b/one", data + 1, 1000, &e), &e, "overwrite"));
    PBT_CHECK(repo_stat(r, "a/b/one", &size, &e) == 0 && size == 1000);
    PBT_CHECK(pbt_check_ok(repo_delete(r, "a/b/one", &e), &e, "delete"));
    PBT_CHECK(repo_stat(r, "a/b/one", &size, &e) == PB_ENOENT);
    PBT_CHECK(pbt_check_ok(repo_delete(r, odd, &e), &e, "delete odd"));
    PBT_CHECK(pbt_check_ok(repo_delete(r, "empty", &e), &e, "delete empty"));
    repo_free(r);
}

/* A read ahead that runs past the object's end: one ranged GET gives the bytes there
 * are and the object's size (Content-Range), no HEAD. */
static void test_range_upto(void)
{
    repo_opts o = base_opts("s3://" BUCKET "/upto");
    repo *r = pbt_s3_open(&o);
    if (!r)
        return;
    pb_error e = PB_ERROR_INIT;
    uint8_t data[3000], part[4096];
    fill(data, sizeof(data), 3);
    PBT_CHECK(pbt_check_ok(repo_put(r, "obj", data, sizeof(data), &e), &e, "put"));
    repo_requests q0, q1;
    repo_requests_get(r, &q0);
    size_t got = 0;
    uint64_t size = 0;
    PBT_CHECK(pbt_check_ok(repo_get_range_upto(r, "obj", 1000, sizeof(part), part, &got, &size, &e),
                       &e, "upto past the end"));
    PBT_CHECK(got == 2000 && size == sizeof(data) && memcmp(part, data + 1000, 2000) == 0);
    PBT_CHECK(pbt_check_ok(repo_get_range_upto(r, "obj", 0, 100, part, &got, &size, &e), &e,
                       "upto inside"));
    PBT_CHECK(got == 100 && size == sizeof(data) && memcmp(part, data, 100) == 0);
    PBT_CHECK(pbt_check_ok(repo_get_range_upto(r, "obj", 0, sizeof(part), part, &got, &size, &e),
                       &e, "upto the whole object"));
    PBT_CHECK(got == sizeof(data) && size == sizeof(data) && memcmp(part, data, got) == 0);
    repo_requests_get(r, &q1);
    repo_requests d = repo_requests_since(&q1, &q0);
    PBT_CHECK(d.get_range == 3 && repo_requests_total(&d) == 3);
    PBT_CHECK(repo_get_range_upto(r, "obj", sizeof(data), 10, part, &got, &size, &e) ==
              PB_ECORRUPT);
    PBT_CHECK(strstr(e.msg, "obj") != NULL);
    PBT_CHECK(repo_get_range_upto(r, "missing", 0, 10, part, &got, &size, &e) == PB_ENOENT);
    PBT_CHECK(pbt_check_ok(repo_delete(r, "obj", &e), &e, "delete"));
    repo_free(r);
}

static void test_list(void)
{
    repo_opts o = base_opts("s3://" BUCKET "/lst/");
    void *impl = NULL;
    pb_error e = PB_ERROR_INIT;
    int rc = repo_s3_open(&o, BUCKET, "lst", &impl, &e);
    PBT_CHECK(pbt_check_ok(rc, &e, "repo_s3_open"));
    if (rc)
        return;
    const repo_driver *d = &repo_s3_driver;
    /* Small pages so continuation tokens are exercised: 23 keys, pages of 5. */
    repo_s3_test_set_list_page(impl, 5);
    uint8_t buf[64] = {0};
    int order[23];
    for (int i = 0; i < 23; i++)
        order[i] = (i * 7) % 23; /* written out of order */
    for (int i = 0; i < 23; i++) {
        char key[64];
        snprintf(key, sizeof(key), "dir/k%02d", order[i]);
        rc = d->put(impl, key, buf, (size_t)order[i], &e);
        PBT_CHECK(pbt_check_ok(rc, &e, key));
    }
    PBT_CHECK(pbt_check_ok(d->put(impl, "dirx", buf, 3, &e), &e, "put dirx"));
    PBT_CHECK(pbt_check_ok(d->put(impl, "other/z", buf, 4, &e), &e, "put other/z"));

    list_ctx c = {0};
    PBT_CHECK(pbt_check_ok(d->list(impl, "dir/", pbt_collect, &c, &e), &e, "list dir/"));
    PBT_CHECK(c.n == 23);
    int good = 1;
    for (int i = 0; i < 23 && i < c.n; i++) {
        char want[64];
        snprintf(want, sizeof(want), "dir/k%02d", i);
        good &= strcmp(c.keys[i], want) == 0 && c.sizes[i] == (uint64_t)i;
    }
    PBT_CHECK(good);

    /* A string prefix, the whole repository, and a stop from the callback. */
    memset(&c, 0, sizeof(c));
    PBT_CHECK(pbt_check_ok(d->list(impl, "dir", pbt_collect, &c, &e), &e, "list dir"));
    PBT_CHECK(c.n == 24 && strcmp(c.keys[23], "dirx") == 0);
    memset(&c, 0, sizeof(c));
    PBT_CHECK(pbt_check_ok(d->list(impl, "", pbt_collect, &c, &e), &e, "list all"));
    PBT_CHECK(c.n == 25 && strcmp(c.keys[24], "other/z") == 0 && c.sizes[24] == 4);
    memset(&c, 0, sizeof(c));
    c.stop_after = 7;
    PBT_CHECK(d->list(impl, "dir/", pbt_collect, &c, &e) == 42 && c.n == 7);
    memset(&c, 0, sizeof(c));
    PBT_CHECK(pbt_check_ok(d->list(impl, "nothing/", pbt_collect, &c, &e), &e, "list none"));
    PBT_CHECK(c.n == 0);
    d->free(impl);

    /* Through repo_open: keys come back relative to the repository prefix, and another
     * prefix in the same bucket sees none of them. */
    repo *r = pbt_s3_open(&o);
    if (r) {
        memset(&c, 0, sizeof(c));
        PBT_CHECK(pbt_check_ok(repo_list(r, "other/", pbt_collect, &c, &e), &e, "repo_list"));
        PBT_CHECK(c.n == 1 && strcmp(c.keys[0], "other/z") == 0);
        repo_free(r);
    }
    o.location = "s3://" BUCKET "/lst2";
    r = pbt_s3_open(&o);
    if (r) {
        memset(&c, 0, sizeof(c));
        PBT_CHECK(pbt_check_ok(repo_list(r, "", pbt_collect, &c, &e), &e, "repo_list lst2"));
        PBT_CHECK(c.n == 0);
        repo_free(r);
    }
}

/* Write n bytes through a writer in odd-sized pieces, commit, read back and compare. */
static void writer_roundtrip(repo *r, const char *key, size_t n, uint32_t seed)
{
    pb_error e = PB_ERROR_INIT;
    uint8_t *data = malloc(n);
    if (!data) {
        PBT_CHECK(0);
        return;
    }
    fill(data, n, seed);
    repo_writer *w = NULL;
    int rc = repo_writer_open(r, key, &w, &e);
    PBT_CHECK(pbt_check_ok(rc, &e, "writer_open"));
    for (size_t off = 0; rc == 0 && off < n;) {
        size_t k = n - off < 100003 ? n - off : 100003;
        rc = repo_writer_write(w, data + off, k, &e);
        off += k;
    }
    PBT_CHECK(pbt_check_ok(rc, &e, "writer_write"));
    if (rc == 0) {
        rc = repo_writer_commit(w, &e);
        PBT_CHECK(pbt_check_ok(rc, &e, "writer_commit"));
    } else {
        repo_writer_abort(w);
    }
    uint64_t size = 0;
    PBT_CHECK(pbt_check_ok(repo_stat(r, key, &size, &e), &e, "stat after commit"));
    PBT_CHECK(size == n);
    void *got = NULL;
    size_t got_len = 0;
    PBT_CHECK(pbt_check_ok(repo_get(r, key, &got, &got_len, &e), &e, "get after commit"));
    PBT_CHECK(got_len == n && got && memcmp(got, data, n) == 0);
    free(got);
    /* A range across the first part boundary (5 MiB). */
    if (n > (5u << 20) + 4096) {
        uint8_t part[8192];
        PBT_CHECK(pbt_check_ok(repo_get_range(r, key, (5u << 20) - 4096, sizeof(part), part, &e),
                           &e, "range across parts"));
        PBT_CHECK(memcmp(part, data + (5u << 20) - 4096, sizeof(part)) == 0);
    }
    free(data);
}

static void test_multipart(void)
{
    pb_error e = PB_ERROR_INIT;
    repo_opts o = base_opts("s3://" BUCKET "/mp");
    o.s3_parallel = 1;
    repo *r = pbt_s3_open(&o);
    if (!r)
        return;
    writer_roundtrip(r, "big/seq", 12u << 20, 7); /* 3 parts: 5 + 5 + 2 MiB */
    writer_roundtrip(r, "big/exact", 5u << 20, 8); /* one part: a single PUT */
    writer_roundtrip(r, "big/small", 3000, 9);
    writer_roundtrip(r, "big/zero", 0, 10);
    /* repo_put of more than one part goes through multipart too. */
    size_t n = (11u << 20) + 5;
    uint8_t *data = malloc(n);
    if (data) {
        fill(data, n, 11);
        PBT_CHECK(pbt_check_ok(repo_put(r, "big/put", data, n, &e), &e, "put multipart"));
        void *got = NULL;
        size_t got_len = 0;
        PBT_CHECK(pbt_check_ok(repo_get(r, "big/put", &got, &got_len, &e), &e, "get multipart"));
        PBT_CHECK(got_len == n && got && memcmp(got, data, n) == 0);
        free(got);
        free(data);
    }
    /* An aborted writer leaves nothing visible. */
    repo_writer *w = NULL;
    uint8_t *six = calloc(1, 6u << 20);
    if (six && repo_writer_open(r, "big/aborted", &w, &e) == 0) {
        PBT_CHECK(pbt_check_ok(repo_writer_write(w, six, 6u << 20, &e), &e, "write before abort"));
        repo_writer_abort(w);
    }
    free(six);
    uint64_t size;
    PBT_CHECK(repo_stat(r, "big/aborted", &size, &e) == PB_ENOENT);
    repo_free(r);

    /* Parallel part uploads (threads), same results. */
    o.s3_parallel = 3;
    r = pbt_s3_open(&o);
    if (r) {
        writer_roundtrip(r, "big/par", (17u << 20) + 123, 12); /* 4 parts */
        repo_free(r);
    }
}

/* Virtual-host addressing: http://BUCKET.localhost:PORT/key. */
static void test_virtual_host(void)
{
    char ep[300];
    const char *port = strrchr(endpoint, ':');
    snprintf(ep, sizeof(ep), "http://localhost%s", port ? port : "");
    repo_opts o = base_opts("s3://" BUCKET "/vh");
    o.s3_endpoint = ep;
    o.s3_path_style = false;
    repo *r = pbt_s3_open(&o);
    if (!r)
        return;
    pb_error e = PB_ERROR_INIT;
    PBT_CHECK(pbt_check_ok(repo_put(r, "k", "hello", 5, &e), &e, "vhost put"));
    void *got = NULL;
    size_t len = 0;
    PBT_CHECK(pbt_check_ok(repo_get(r, "k", &got, &len, &e), &e, "vhost get"));
    PBT_CHECK(len == 5 && got && memcmp(got, "hello", 5) == 0);
    free(got);
    list_ctx c = {0};
    PBT_CHECK(pbt_check_ok(repo_list(r, "", pbt_collect, &c, &e), &e, "vhost list"));
    PBT_CHECK(c.n == 1 && strcmp(c.keys[0], "k") == 0);
    repo_free(r);
}

static void test_auth(void)
{
    repo_opts o = base_opts("s3://" BUCKET "/rt");
    o.s3_secret = "wrong-secret";
    repo *r = pbt_s3_open(&o);
    if (!r)
        return;
    pb_error e = PB_ERROR_INIT;
    uint64_t size;
    int rc = repo_put(r, "denied", "x", 1, &e);
    PBT_CHECK(rc == PB_EAUTH);
    PBT_CHECK(strstr(e.msg, "s3://" BUCKET "/rt/denied") != NULL);
    PBT_CHECK(strstr(e.msg, "403") != NULL);
    PBT_CHECK(strstr(e.msg, "SignatureDoesNotMatch") != NULL);
    printf("  wrong secret: %s\n", e.msg);
    PBT_CHECK(repo_stat(r, "denied", &size, &e) == PB_EAUTH);
    list_ctx c = {0};
    PBT_CHECK(repo_list(r, "", pbt_collect, &c, &e) == PB_EAUTH);
    repo_free(r);

    /* A wrong access key id. */
    o.s3_secret = "testing";
    o.s3_key = "nobody:none";
    r = pbt_s3_open(&o);
    if (r) {
        PBT_CHECK(repo_put(r, "denied", "x", 1, &e) == PB_EAUTH);
        PBT_CHECK(strstr(e.msg, "InvalidAccessKeyId") != NULL ||
                  strstr(e.msg, "SignatureDoesNotMatch") != NULL);
        repo_free(r);
    }
    /* Missing credentials are refused before any request. */
    o.s3_key = NULL;
    repo *none = NULL;
    PBT_CHECK(repo_open(&none, &o, &e) == PB_EINVAL && none == NULL);
}

/* Count the unfinished multipart uploads for key in the bucket (signed by s3tool.py). */
static int count_uploads(const char *key)
{
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), "/usr/bin/python3 '%s/tests/s3server/s3tool.py' request GET "
             "'%s/" BUCKET "?uploads='", srcdir, endpoint);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    char want[256], buf[65536];
    snprintf(want, sizeof(want), "<Key>%s</Key>", key);
    size_t n = fread(buf, 1, sizeof(buf) - 1, p);
    buf[n] = '\0';
    if (pclose(p) != 0)
        return -1;
    int count = 0;
    for (char *s = buf; (s = strstr(s, want)) != NULL; s += strlen(want))
        count++;
    return count;
}

static void start_upload(const char *key)
{
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), "/usr/bin/python3 '%s/tests/s3server/s3tool.py' request POST "
             "'%s/" BUCKET "/%s?uploads=' > /dev/null", srcdir, endpoint, key);
    PBT_CHECK(system(cmd) == 0);
}

/* Cleanup aborts only the uploads of writers that are gone: under backup/ while we hold
 * the writer lock (only its holder writes there); WAL uploads (archive-push runs without
 * the lock) and anything without the lock only when old. */
static void test_cleanup(void)
{
    /* An orphan: an upload initiated by a backup that then died. */
    start_upload("cl/backup/20261201-000000F/pack/000001");
    /* A fresh WAL upload: a concurrent archive-push, to be left alone. */
    start_upload("cl/wal/00000001/000000010000000000000001.zst");
    /* And one outside this repository's prefix, which cleanup must leave alone. */
    start_upload("elsewhere/pack");
    PBT_CHECK(count_uploads("cl/backup/20261201-000000F/pack/000001") == 1);
    PBT_CHECK(count_uploads("elsewhere/pack") == 1);

    repo_opts o = base_opts("s3://" BUCKET "/cl");
    repo *r = pbt_s3_open(&o);
    if (!r)
        return;
    pb_error e = PB_ERROR_INIT;
    /* Without the lock a fresh upload may be a live writer's: nothing is aborted. */
    PBT_CHECK(pbt_check_ok(repo_cleanup(r, NULL, &e), &e, "cleanup unlocked"));
    PBT_CHECK(count_uploads("cl/backup/20261201-000000F/pack/000001") == 1);
    repo_lock *l = NULL;
    PBT_CHECK(pbt_check_ok(repo_lock_acquire(r, "test", &l, &e), &e, "lock"));
    PBT_CHECK(pbt_check_ok(repo_cleanup(r, l, &e), &e, "cleanup"));
    PBT_CHECK(count_uploads("cl/backup/20261201-000000F/pack/000001") == 0);
    PBT_CHECK(count_uploads("cl/wal/00000001/000000010000000000000001.zst") == 1);
    PBT_CHECK(count_uploads("elsewhere/pack") == 1);
    /* Nothing left: a second cleanup is a no-op. */
    PBT_CHECK(pbt_check_ok(repo_cleanup(r, l, &e), &e, "cleanup again"));
    repo_lock_release(l);
    repo_free(r);
}

/* Create-if-absent: the first writer wins, the second gets PB_EEXIST and the object
 * keeps the first one's bytes (Swift s3api refuses If-None-Match with 501, so this also
 * runs the best-effort fallback). */
static void test_put_new(void)
{
    repo_opts o = base_opts("s3://" BUCKET "/pn");
    repo *r = pbt_s3_open(&o);
    if (!r)
        return;
    pb_error e = PB_ERROR_INIT;
    repo_requests before, after;
    repo_requests_get(r, &before);
    PBT_CHECK(pbt_check_ok(repo_put_new(r, "wal/seg", "first", 5, &e), &e, "put_new"));
    repo_requests_get(r, &after);
    /* One refused conditional PUT (a 501 is not retried: retrying it cost every S3
     * command ~3 s of backoff) and the fallback's own PUT. */
    repo_requests q = repo_requests_since(&after, &before);
    PBT_CHECK(q.put <= 2);
    if (q.put > 2)
        printf("  put_new took %llu PUTs\n", (unsigned long long)q.put);
    PBT_CHECK(repo_put_new(r, "wal/seg", "second", 6, &e) == PB_EEXIST);
    void *data = NULL;
    size_t len = 0;
    PBT_CHECK(pbt_check_ok(repo_get(r, "wal/seg", &data, &len, &e), &e, "get"));
    PBT_CHECK(len == 5 && data && memcmp(data, "first", 5) == 0);
    free(data);
    repo_free(r);
}

/* The writer lock on S3: a second acquirer (another repo handle, as another process
 * would have) fails naming the holder; after release it succeeds. */
static void test_lock(void)
{
    repo_opts o = base_opts("s3://" BUCKET "/lk");
    repo *a = pbt_s3_open(&o), *b = pbt_s3_open(&o);
    if (!a || !b) {
        repo_free(a);
        repo_free(b);
        return;
    }
    pb_error e = PB_ERROR_INIT;
    repo_lock *la = NULL, *lb = NULL;
    PBT_CHECK(pbt_check_ok(repo_lock_acquire(a, "backup", &la, &e), &e, "lock a"));
    PBT_CHECK(repo_lock_acquire(b, "expire", &lb, &e) == PB_ESTATE && !lb);
    PBT_CHECK(strstr(e.msg, "locked by another writer: backup") != NULL);
    PBT_CHECK(pbt_check_ok(repo_lock_renew(la, &e), &e, "renew"));
    repo_lock_release(la);
    PBT_CHECK(repo_stat(a, REPO_LOCK_KEY, NULL, &e) == PB_ENOENT);
    PBT_CHECK(pbt_check_ok(repo_lock_acquire(b, "expire", &lb, &e), &e, "lock b"));
    repo_lock_release(lb);
    repo_free(a);
    repo_free(b);
}

int main(void)
{
    const char *s = getenv("PB_SRCDIR");
    snprintf(srcdir, sizeof(srcdir), "%s", s && *s ? s : "..");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    double t0 = pb_now();
    if (server_start() != 0) {
        fprintf(stderr, "FAIL: cannot start the S3 test server with %s/tests/s3server/start.sh "
                "(set PB_SRCDIR to the source tree; logs in %s/log)\n", srcdir, tmpdir);
        server_stop();
        PBT_CHECK(!"S3 test server started");
        return PBT_DONE();
    }
    printf("S3 test server at %s ready in %.1f s\n", endpoint, pb_now() - t0);
    PBT_RUN(test_roundtrip);
    PBT_RUN(test_range_upto);
    PBT_RUN(test_list);
    PBT_RUN(test_multipart);
    PBT_RUN(test_virtual_host);
    PBT_RUN(test_auth);
    PBT_RUN(test_cleanup);
    PBT_RUN(test_put_new);
    PBT_RUN(test_lock);
    server_stop();
    pbt_rmtree(tmpdir);
    return PBT_DONE();
}
