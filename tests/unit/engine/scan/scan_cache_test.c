/*
 * tests/unit/engine/scan/scan_cache_test.c — the scanner and the page cache: what a scan
 * leaves resident (next to nothing with O_DIRECT), and the buffered fallback, with
 * posix_fadvise(DONTNEED) and a warning, where O_DIRECT is refused (tmpfs).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/pb.h"
#include "engine/scan/scan.h"
#include "tests/unit/engine/scan/scan_sink.h"

static char tmpdir[64];

/* Pages of path resident in the page cache, or -1. */
static long resident_pages(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    struct stat st;
    long n = -1;
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
        long ps = sysconf(_SC_PAGESIZE);
        size_t pages = (size_t)((st.st_size + ps - 1) / ps);
        void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        unsigned char *vec = malloc(pages);
        if (map != MAP_FAILED && vec && mincore(map, (size_t)st.st_size, vec) == 0) {
            n = 0;
            for (size_t i = 0; i < pages; i++)
                n += vec[i] & 1;
        }
        free(vec);
        if (map != MAP_FAILED)
            munmap(map, (size_t)st.st_size);
    }
    close(fd);
    return n;
}

static void evict(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
}

static void test_page_cache_footprint(void)
{
    char path[128];
    size_t size = 4 * MiB;
    uint8_t *want = pbt_random_file(path, sizeof(path), tmpdir, "cold", size, 8);
    evict(path);
    long before = resident_pages(path);
    if (before != 0) {
        printf("  page cache of %s not evictable here (%ld resident): skipped\n", path, before);
        goto out;
    }
    for (int direct = 1; direct >= 0; direct--) {
        scan_opts o = SCAN_OPTS_INIT;
        o.read_size = 256 * KiB;
        o.direct = direct;
        scanner *s = NULL;
        PBT_CHECK(scan_open(&s, &o, NULL) == 0);
        sink k = sink_make(size, o.read_size);
        uint64_t got = 0;
        PBT_CHECK(scan_file(s, path, sink_cb, &k, &got, NULL) == 0);
        PBT_CHECK(got == size && memcmp(k.data, want, size) == 0);
        PBT_CHECK(strcmp(scan_method(s), direct ? "io_uring+O_DIRECT" : "buffered+fadvise") == 0);
        long after = resident_pages(path);
        printf("  %s: %ld of %zu pages resident after the scan\n", scan_method(s), after,
               size / 4096);
        PBT_CHECK(after == 0);
        free(k.data);
        scan_free(s);
        evict(path);
    }
out:
    unlink(path);
    free(want);
}

/* Count lines of stderr that fn writes containing needle. */
static int count_stderr(void (*fn)(void *), void *arg, const char *needle)
{
    char log[128];
    snprintf(log, sizeof(log), "%s/stderr.log", tmpdir);
    fflush(stderr);
    int saved = dup(2);
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    close(fd);
    fn(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    int n = 0;
    char line[2048];
    FILE *fp = fopen(log, "r");
    while (fp && fgets(line, sizeof(line), fp)) {
        fputs(line, stderr); /* keep it visible */
        n += strstr(line, needle) != NULL;
    }
    if (fp)
        fclose(fp);
    unlink(log);
    return n;
}

typedef struct fallback_run {
    const char *dir;
    bool expect_buffered;
    int ok_files;
    int methods_ok;
} fallback_run;

static void run_fallback(void *arg)
{
    fallback_run *r = arg;
    static const size_t sizes[] = {8191, MiB + 1, 3 * MiB};
    for (int uring = 0; uring < 2; uring++) {
        scan_opts o = SCAN_OPTS_INIT;
        o.read_size = 128 * KiB;
        o.queue_depth = 8;
        o.use_uring = uring;
        scanner *s = NULL;
        if (scan_open(&s, &o, NULL) != 0)
            continue;
        for (size_t i = 0; i < 3; i++) {
            char path[128];
            snprintf(path, sizeof(path), "%s/fb_%zu", r->dir, sizes[i]);
            uint8_t *want = pbt_random_bytes(sizes[i], i + 20);
            sink k = sink_make(sizes[i], o.read_size);
            uint64_t got = 0;
            if (pbt_write_bytes(path, want, sizes[i]) == 0 &&
                scan_file(s, path, sink_cb, &k, &got, NULL) == 0 && got == sizes[i] &&
                memcmp(k.data, want, sizes[i]) == 0 && k.bad_order == 0)
                r->ok_files++;
            bool buffered = strcmp(scan_method(s), "buffered+fadvise") == 0;
            r->methods_ok += buffered == r->expect_buffered;
            uint8_t b[100];
            if (scan_reread(s, path, sizes[i] - 100, b, 100, NULL) != 0 ||
                memcmp(b, want + sizes[i] - 100, 100) != 0)
                r->ok_files--;
            unlink(path);
            free(k.data);
            free(want);
        }
        scan_free(s);
    }
}

/* Does this directory's file system refuse O_DIRECT? */
static bool refuses_direct(const char *dir)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/probe", dir);
    int fd = open(path, O_WRONLY | O_CREAT, 0600);
    if (fd >= 0)
        close(fd);
    fd = open(path, O_RDONLY | O_DIRECT);
    bool refused = fd < 0 && errno == EINVAL;
    if (fd >= 0)
        close(fd);
    unlink(path);
    return refused;
}

static void check_fallback_dir(const char *dir)
{
    fallback_run r = {dir, refuses_direct(dir), 0, 0};
    int warnings = count_stderr(run_fallback, &r, "O_DIRECT refused");
    printf("  %s: O_DIRECT %s, %d warnings\n", dir, r.expect_buffered ? "refused" : "accepted",
           warnings);
    PBT_CHECK(r.ok_files == 6);
    PBT_CHECK(r.methods_ok == 6);
    /* Once per scanner (two scanners ran), naming the file. */
    PBT_CHECK(warnings == (r.expect_buffered ? 2 : 0));
}

static void test_buffered_fallback(void)
{
    /* /dev/shm is tmpfs; tmpfs accepts O_DIRECT since Linux 6.6, so the scanner must
     * pick whichever the kernel allows. ramfs refuses O_DIRECT on every kernel. */
    char shm[] = "/dev/shm/pbscanXXXXXX";
    if (mkdtemp(shm)) {
        check_fallback_dir(shm);
        rmdir(shm);
    }
    char ram[128];
    snprintf(ram, sizeof(ram), "%s/ramfs", tmpdir);
    mkdir(ram, 0700);
    if (mount("ramfs", ram, "ramfs", 0, NULL) == 0) {
        PBT_CHECK(refuses_direct(ram));
        check_fallback_dir(ram);
        umount(ram);
    } else {
        printf("  cannot mount ramfs (%s): fallback tested on /dev/shm only\n",
               strerror(errno));
    }
    rmdir(ram);
}

int main(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/pbscancacheXXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    PBT_RUN(test_page_cache_footprint);
    PBT_RUN(test_buffered_fallback);
    rmdir(tmpdir);
    return PBT_DONE();
}
