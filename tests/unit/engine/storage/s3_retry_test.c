/*
 * tests/unit/engine/storage/s3_retry_test.c — the S3 driver's retries without a real server:
 * which answers of a fake endpoint (s3tool.py fake, tests/s3server/) are retried and how
 * often, and an endpoint nobody listens on (every attempt refused, PB_EREMOTE naming the
 * object and the attempts). The driver against a real S3 server is s3_test.c.
 *
 * s3tool.py is found through PB_SRCDIR (the source tree root; default "..", as in
 * s3_test.c).
 */
#include "engine/storage/storage.h"
#include "tests/unit/pbtest.h"
#include "tests/unit/engine/storage/s3_fixtures.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define BUCKET "pbtest"

static char tmpdir[] = "/tmp/pb-s3-retry-test-XXXXXX";
static char srcdir[1024];

/* http://127.0.0.1:<port> of a port that was free a moment ago: nobody listens there. */
static void closed_endpoint(char *out, size_t cap)
{
    struct sockaddr_in a = {0};
    socklen_t len = sizeof(a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int port = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
                       getsockname(fd, (struct sockaddr *)&a, &len) == 0
                   ? ntohs(a.sin_port)
                   : 1;
    if (fd >= 0)
        close(fd);
    snprintf(out, cap, "http://127.0.0.1:%d", port);
}

/* A server that is down (nobody listens on its port): every attempt is refused, the error
 * is PB_EREMOTE and names the object and the number of attempts. */
static void test_server_down(void)
{
    char ep[64];
    closed_endpoint(ep, sizeof(ep));
    repo_opts o = pbt_s3_opts("s3://" BUCKET "/down", ep);
    o.s3_retries = 2;
    repo *r = pbt_s3_open(&o);
    if (!r)
        return;
    pb_error e = PB_ERROR_INIT;
    double t0 = pb_now();
    uint64_t size;
    int rc = repo_stat(r, "some/object", &size, &e);
    double dt = pb_now() - t0;
    PBT_CHECK(rc == PB_EREMOTE);
    PBT_CHECK(strstr(e.msg, "s3://" BUCKET "/down/some/object") != NULL);
    PBT_CHECK(strstr(e.msg, "3 attempts") != NULL);
    printf("  server down: %s (%.2f s)\n", e.msg, dt);
    /* Two backoffs of 50-100 ms and 100-200 ms. */
    PBT_CHECK(dt >= 0.15 && dt < 5.0);
    PBT_CHECK(repo_put(r, "some/object", "x", 1, &e) == PB_EREMOTE);
    repo_free(r);
}

/* ---------- retry classification against a fake endpoint (s3tool.py fake) ---------- */

static char fakedir[1100];

static void fake_script(const char *text)
{
    char path[1200];
    snprintf(path, sizeof(path), "%s/fake.script", fakedir);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    snprintf(path, sizeof(path), "%s/fake.log", fakedir);
    unlink(path);
}

static int fake_requests(void)
{
    char path[1200], line[512];
    snprintf(path, sizeof(path), "%s/fake.log", fakedir);
    FILE *f = fopen(path, "r");
    int n = 0;
    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f))
        n++;
    fclose(f);
    return n;
}

static void test_retries(void)
{
    char tool[1200], watch[32], path[1200];
    snprintf(fakedir, sizeof(fakedir), "%s/fake", tmpdir);
    mkdir(fakedir, 0700);
    fake_script("503 SlowDown\n");
    snprintf(tool, sizeof(tool), "%s/tests/s3server/s3tool.py", srcdir);
    snprintf(watch, sizeof(watch), "%ld", (long)getpid());
    pid_t pid = fork();
    if (pid == 0) {
        execl("/usr/bin/python3", "python3", tool, "fake", fakedir, watch, (char *)NULL);
        _exit(127);
    }
    PBT_CHECK(pid > 0);
    if (pid <= 0)
        return;
    int port = 0;
    snprintf(path, sizeof(path), "%s/fake.port", fakedir);
    for (int i = 0; i < 300 && !port; i++) {
        FILE *f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "%d", &port) != 1)
                port = 0;
            fclose(f);
        }
        if (!port)
            usleep(50000);
    }
    PBT_CHECK(port > 0);
    char ep[64];
    snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", port);
    repo_opts o = pbt_s3_opts("s3://" BUCKET "/fk", ep);
    o.s3_retries = 3;
    repo *r = port ? pbt_s3_open(&o) : NULL;
    if (r) {
        pb_error e = PB_ERROR_INIT;
        uint64_t size;
        /* The first write of a repository opened without a key first lists keycheck/
         * (docs/FORMAT.md, "Encrypted repositories"): done here, so the counts below are
         * the operations' own. */
        fake_script("200 OK\n200 OK\n");
        PBT_CHECK(pbt_check_ok(repo_put(r, "k", "x", 1, &e), &e, "first put"));
        PBT_CHECK(fake_requests() == 2);
        fake_script("503 SlowDown\n");
        /* 503 every time: 1 + 3 attempts, then PB_EREMOTE naming all of it. */
        PBT_CHECK(repo_put(r, "k", "x", 1, &e) == PB_EREMOTE);
        PBT_CHECK(fake_requests() == 4);
        PBT_CHECK(strstr(e.msg, "s3://" BUCKET "/fk/k") && strstr(e.msg, "4 attempts") &&
                  strstr(e.msg, "503") && strstr(e.msg, "SlowDown"));
        printf("  always 503: %s\n", e.msg);
        /* Other 4xx: no retry. */
        fake_script("400 InvalidArgument\n");
        PBT_CHECK(repo_put(r, "k", "x", 1, &e) == PB_EREMOTE);
        PBT_CHECK(fake_requests() == 1 && strstr(e.msg, "InvalidArgument") != NULL);
        fake_script("403 AccessDenied\n");
        PBT_CHECK(repo_stat(r, "k", &size, &e) == PB_EAUTH);
        PBT_CHECK(fake_requests() == 1);
        fake_script("404 NoSuchBucket\n");
        list_ctx c = {0};
        PBT_CHECK(repo_list(r, "", pbt_collect, &c, &e) == PB_EREMOTE);
        PBT_CHECK(strstr(e.msg, "NoSuchBucket") != NULL);
        /* Transient failures, then success. */
        fake_script("503 SlowDown\n500 InternalError\n200 OK\n");
        PBT_CHECK(pbt_check_ok(repo_put(r, "k", "x", 1, &e), &e, "put after 2 failures"));
        PBT_CHECK(fake_requests() == 3);
        fake_script("429 SlowDown\n200 OK\n");
        PBT_CHECK(pbt_check_ok(repo_delete(r, "k", &e), &e, "delete after 429"));
        PBT_CHECK(fake_requests() == 2);
        repo_free(r);
    }
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
}

int main(void)
{
    const char *s = getenv("PB_SRCDIR");
    snprintf(srcdir, sizeof(srcdir), "%s", s && *s ? s : "..");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    PBT_RUN(test_server_down);
    PBT_RUN(test_retries);
    pbt_rmtree(tmpdir);
    return PBT_DONE();
}
