/* tests/unit/pbtest.h — the tiny harness every unit test runner uses. */
#ifndef PB_TEST_H
#define PB_TEST_H
#include <stdio.h>
#include <stdlib.h>

static int pbt_passed, pbt_failed;

#define PBT_CHECK(cond)                                                                    \
    do {                                                                                   \
        if (cond) {                                                                        \
            pbt_passed++;                                                                  \
        } else {                                                                           \
            pbt_failed++;                                                                  \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                \
        }                                                                                  \
    } while (0)

#define PBT_RUN(fn)                                                                        \
    do {                                                                                   \
        int before = pbt_failed;                                                           \
        fn();                                                                              \
        printf("%s %s\n", pbt_failed == before ? "ok  " : "FAIL", #fn);                    \
    } while (0)

#define PBT_DONE()                                                                         \
    (printf("%d passed, %d failed\n", pbt_passed, pbt_failed), pbt_failed ? 1 : 0)

/* A fresh directory /tmp/pb-<name>.XXXXXX in buf (cap bytes); 0 on success. */
static inline int pbt_tmpdir(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "/tmp/pb-%s.XXXXXX", name);
    return mkdtemp(buf) ? 0 : -1;
}

/* Remove a runner's temp directory and everything under it. */
static inline void pbt_rmtree(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

#endif
