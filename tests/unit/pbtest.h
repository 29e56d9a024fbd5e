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

/* One test of a runner: its function and the name it is reported by. */
typedef struct pbt_case {
    void (*fn)(void);
    const char *name;
} pbt_case;
#define PBT_CASE(fn) {fn, #fn}
#define PBT_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* The main of a runner whose tests share one temp directory: make /tmp/pb-<name>.XXXXXX
 * in root (cap bytes), run the n cases in order as PBT_RUN does, remove the directory and
 * return the runner's exit status. */
static inline int pbt_main_in_tmpdir(char *root, size_t cap, const char *name,
                                     const pbt_case *cases, size_t n)
{
    if (pbt_tmpdir(root, cap, name) != 0)
        return 1;
    for (size_t i = 0; i < n; i++) {
        int before = pbt_failed;
        cases[i].fn();
        printf("%s %s\n", pbt_failed == before ? "ok  " : "FAIL", cases[i].name);
    }
    pbt_rmtree(root);
    return PBT_DONE();
}

#endif
