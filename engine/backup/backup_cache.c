/*
 * engine/backup/backup_cache.c — what a backup leaves in the page cache ("page-cache
 * bytes left behind", docs/DESIGN.md "Polite I/O"). Reads are O_DIRECT, or buffered with
 * POSIX_FADV_DONTNEED after them, so the backup should leave nothing; this measures it.
 *
 * For each file the backup reads (never the segments it skips), mincore(2) over a
 * read-only mapping counts the file's resident pages just before and just after the
 * read; what became resident meanwhile is counted as left behind (at least 0: the
 * database may evict pages meanwhile, and its own reads in that window are counted too,
 * so the figure is an upper bound). Mapping a file and asking mincore populate nothing.
 * The cost is two mappings and one byte of vector per 4 KiB page, window by window.
 */
#include "engine/backup/backup_internal.h"
#include "engine/backup/backup_throttle_internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CACHE_WINDOW (64ull << 20) /* bytes mapped at a time: a 16 KiB vector */

uint64_t bk_cache_resident(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    long psz = sysconf(_SC_PAGESIZE);
    unsigned char *vec = psz > 0 ? malloc(CACHE_WINDOW / (uint64_t)psz) : NULL;
    uint64_t resident = 0;
    if (fd < 0 || !vec || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        goto out;
    for (uint64_t off = 0; off < (uint64_t)st.st_size; off += CACHE_WINDOW) {
        size_t len = (size_t)((uint64_t)st.st_size - off < CACHE_WINDOW
                                  ? (uint64_t)st.st_size - off : CACHE_WINDOW);
        void *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, (off_t)off);
        if (map == MAP_FAILED)
            break;
        size_t pages = (len + (size_t)psz - 1) / (size_t)psz;
        if (mincore(map, len, vec) == 0)
            for (size_t i = 0; i < pages; i++)
                resident += vec[i] & 1 ? (uint64_t)psz : 0;
        munmap(map, len);
    }
    if (resident > (uint64_t)st.st_size)
        resident = (uint64_t)st.st_size; /* the last page counts only its bytes */
out:
    free(vec);
    if (fd >= 0)
        close(fd);
    return resident;
}

void bk_cache_left(bk_ctx *ctx, const char *path, uint64_t before)
{
    uint64_t after = bk_cache_resident(path);
    ctx->io.page_cache_files++;
    if (after > before)
        ctx->io.page_cache_left_bytes += after - before;
}
