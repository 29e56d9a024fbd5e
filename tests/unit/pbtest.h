/* tests/unit/pbtest.h — the tiny harness every unit test runner uses. */
#ifndef PB_TEST_H
#define PB_TEST_H
#include <stdio.h>

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

#endif
