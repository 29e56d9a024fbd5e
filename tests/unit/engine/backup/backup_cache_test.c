/*
 * tests/unit/engine/backup/backup_cache_test.c — engine/backup/backup_cache.c: mincore counts
 * a file's resident bytes (none after POSIX_FADV_DONTNEED, all after a buffered read, the short
 * last page by its bytes), and a read that leaves pages behind is counted once as left.
 */
#include "engine/backup/backup_internal.h"
#include "engine/backup/backup_throttle_internal.h"
#include "tests/unit/pbtest.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define FILE_BYTES (3u * 1048576u + 1000u) /* three MiB and a short last page */

static int write_file(const char *path)
{
    static char buf[65536];
    memset(buf, 'x', sizeof(buf));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    size_t left = FILE_BYTES;
    while (fd >= 0 && left) {
        size_t n = left < sizeof(buf) ? left : sizeof(buf);
        if (write(fd, buf, n) != (ssize_t)n)
            break;
        left -= n;
    }
    int ok = fd >= 0 && left == 0 && fdatasync(fd) == 0;
    if (fd >= 0)
        close(fd);
    return ok ? 0 : -1;
}

static void evict(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
}

static void read_all(const char *path)
{
    char buf[65536];
    int fd = open(path, O_RDONLY);
    while (fd >= 0 && read(fd, buf, sizeof(buf)) > 0)
        ;
    if (fd >= 0)
        close(fd);
}

static void test_resident(void)
{
    char dir[256], path[300];
    PBT_CHECK(pbt_tmpdir(dir, sizeof(dir), "cache") == 0);
    snprintf(path, sizeof(path), "%s/f", dir);
    PBT_CHECK(write_file(path) == 0);
    evict(path);
    PBT_CHECK(bk_cache_resident(path) == 0);
    read_all(path);
    PBT_CHECK(bk_cache_resident(path) == FILE_BYTES);

    /* what a read left behind is counted, what was resident before is not */
    bk_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    bk_cache_left(&ctx, path, bk_cache_resident(path));
    PBT_CHECK(ctx.io.page_cache_left_bytes == 0 && ctx.io.page_cache_files == 1);
    evict(path);
    uint64_t before = bk_cache_resident(path);
    read_all(path);
    bk_cache_left(&ctx, path, before);
    PBT_CHECK(ctx.io.page_cache_left_bytes == FILE_BYTES && ctx.io.page_cache_files == 2);
    evict(path);
    bk_cache_left(&ctx, path, FILE_BYTES); /* evicted meanwhile: nothing, never negative */
    PBT_CHECK(ctx.io.page_cache_left_bytes == FILE_BYTES);

    PBT_CHECK(bk_cache_resident("/nonexistent/pageback-cache-test") == 0);
    PBT_CHECK(bk_cache_resident(dir) == 0); /* not a regular file */
    pbt_rmtree(dir);
}

int main(void)
{
    PBT_RUN(test_resident);
    return PBT_DONE();
}
