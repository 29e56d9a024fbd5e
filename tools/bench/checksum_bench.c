/*
 * tools/bench/checksum_bench.c — page checksums per second on one core, in memory (no I/O).
 *
 *   checksum_bench [--pages N] [--rounds R] [--impl vec|plain|both] [--json FILE]
 *
 * Checksums N pages (default 4096 = 32 MiB, more than a typical L2 so the pages come from
 * memory as they do in a backup) R times (default 8) with each implementation: "vec" is
 * engine/pack/page.c's page_checksum (PostgreSQL's 32-lane layout, built vectorized, the AVX2
 * clone where the CPU has it); "plain" is the word-by-word reference of the unit test
 * (tools/bench/checksum_ref.h), built without vectorization: what the checksum costs
 * without the layout and the flags. Prints a table (GB/s of page bytes per core, ns per
 * page) and, with --json, writes the same as JSON. Wall-clock figures mean something only
 * on a quiet machine; on a busy one count instructions instead (tools/bench/checksum.sh
 * runs this program under callgrind with --rounds 1).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/pb.h"
#include "engine/pack/pack.h"
#include "tools/bench/checksum_ref.h"

typedef uint16_t (*checksum_fn)(const uint8_t *page, uint32_t blkno);

typedef struct result {
    const char *impl;
    double seconds, gbps, ns_per_page;
    uint32_t fold; /* sum of every checksum: keeps the calls from being optimised away */
} result;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Not inlined: the bench times a call per page, as the scanner makes. */
__attribute__((noinline)) static uint16_t plain_checksum(const uint8_t *page, uint32_t blkno)
{
    return checksum_ref(page, blkno);
}

static void run(const char *impl, checksum_fn fn, const uint8_t *pages, size_t n,
                unsigned rounds, result *out)
{
    uint32_t fold = 0;
    double t0 = now_s();
    for (unsigned r = 0; r < rounds; r++)
        for (size_t i = 0; i < n; i++)
            fold += fn(pages + i * PB_PAGE_SIZE, (uint32_t)i);
    double dt = now_s() - t0;
    double bytes = (double)n * rounds * PB_PAGE_SIZE;
    *out = (result){impl, dt, dt > 0 ? bytes / dt / 1e9 : 0,
                    n && rounds ? dt * 1e9 / ((double)n * rounds) : 0, fold};
}

static int write_json(const char *path, const result *r, int nr, size_t n, unsigned rounds)
{
    FILE *fp = fopen(path, "w");
    if (!fp) {
        perror(path);
        return -1;
    }
    fprintf(fp, "{\n  \"bench\": \"checksum\",\n  \"pages\": %zu,\n  \"rounds\": %u,\n"
                "  \"results\": [\n", n, rounds);
    for (int i = 0; i < nr; i++)
        fprintf(fp, "    {\"impl\": \"%s\", \"seconds\": %.6f, \"gb_per_s\": %.3f, "
                    "\"ns_per_page\": %.1f}%s\n",
                r[i].impl, r[i].seconds, r[i].gbps, r[i].ns_per_page, i + 1 < nr ? "," : "");
    fprintf(fp, "  ]\n}\n");
    return fclose(fp) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    size_t n = 4096;
    unsigned rounds = 8;
    const char *impl = "both", *json = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--pages") == 0)
            n = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--rounds") == 0)
            rounds = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--impl") == 0)
            impl = argv[i + 1];
        else if (strcmp(argv[i], "--json") == 0)
            json = argv[i + 1];
        else {
            fprintf(stderr, "usage: %s [--pages N] [--rounds R] [--impl vec|plain|both] "
                            "[--json FILE]\n", argv[0]);
            return 2;
        }
    }
    uint8_t *pages = aligned_alloc(PB_ALIGN, (n ? n : 1) * PB_PAGE_SIZE);
    if (!pages) {
        fprintf(stderr, "cannot allocate %zu pages\n", n);
        return 1;
    }
    uint64_t x = 88172645463325252ULL; /* xorshift64: the same pages every run */
    for (size_t k = 0; k < n * PB_PAGE_SIZE; k += 8) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        memcpy(pages + k, &x, 8);
    }
    result r[2];
    int nr = 0;
    if (strcmp(impl, "plain") != 0)
        run("vec", page_checksum, pages, n, rounds, &r[nr++]);
    if (strcmp(impl, "vec") != 0)
        run("plain", plain_checksum, pages, n, rounds, &r[nr++]);
    printf("%-6s %10s %10s %12s   (%zu pages x %u rounds)\n", "impl", "seconds", "GB/s",
           "ns/page", n, rounds);
    for (int i = 0; i < nr; i++)
        printf("%-6s %10.4f %10.2f %12.1f   fold %08x\n", r[i].impl, r[i].seconds, r[i].gbps,
               r[i].ns_per_page, r[i].fold);
    if (nr == 2 && r[0].fold != r[1].fold)
        fprintf(stderr, "the implementations disagree (fold %08x vs %08x)\n", r[0].fold,
                r[1].fold);
    int rc = json && write_json(json, r, nr, n, rounds) != 0 ? 1 : 0;
    free(pages);
    return rc || (nr == 2 && r[0].fold != r[1].fold);
}
