/*
 * tests/unit/restore/write_target_test.c — restore/write_target.c: a relation file is
 * written past the page cache (O_DIRECT) where the filesystem takes it, and nothing of
 * it stays cached; a write the filesystem refuses direct (here: a buffer off the
 * alignment) goes on buffered with the same bytes and is counted; whole files and a
 * delta restore's files are written buffered.
 */
#include "restore/rebuild_internal.h"
#include "tests/unit/pbtest.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define NPAGES 16u

static char root[256];
static bool dir_takes_direct; /* whether the test directory's filesystem opens O_DIRECT */

typedef struct fixture {
    rs_target *target;
    rs_stats st;
    rs_ctx ctx;
    mf_file f;
} fixture;

static void fixture_open(fixture *x, const char *path, mf_kind kind, bool delta)
{
    memset(x, 0, sizeof(*x));
    pb_error e = PB_ERROR_INIT;
    PBT_CHECK(rs_target_open(&x->target, root, true, &e) == 0);
    x->ctx.target = x->target;
    x->ctx.target_dir = root;
    x->ctx.stats = &x->st;
    x->ctx.delta = delta;
    x->f.path = (char *)path;
    x->f.kind = kind;
    x->f.npages = NPAGES;
    x->f.size = (uint64_t)NPAGES * PB_PAGE_SIZE;
}

static bool fd_direct(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl >= 0 && (fl & O_DIRECT);
}

static void fill(uint8_t *buf, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)(i * 31u + seed);
}

/* Whether the file at root/path holds exactly data[0..len). */
static bool holds(const char *path, const uint8_t *data, size_t len)
{
    char full[512];
    snprintf(full, sizeof(full), "%s/%s", root, path);
    uint8_t *back = malloc(len + 1);
    int fd = open(full, O_RDONLY);
    ssize_t n = fd >= 0 && back ? pread(fd, back, len + 1, 0) : -1;
    bool same = n == (ssize_t)len && memcmp(back, data, len) == 0;
    if (fd >= 0)
        close(fd);
    free(back);
    return same;
}

/* Pages of root/path in the page cache. */
static size_t cached_pages(const char *path, size_t len)
{
    char full[512];
    snprintf(full, sizeof(full), "%s/%s", root, path);
    int fd = open(full, O_RDONLY);
    void *m = fd >= 0 ? mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    size_t n = 0, pages = (len + 4095) / 4096;
    unsigned char *vec = malloc(pages);
    if (m != MAP_FAILED && vec && mincore(m, len, vec) == 0)
        for (size_t i = 0; i < pages; i++)
            n += vec[i] & 1;
    else
        n = (size_t)-1;
    if (m != MAP_FAILED)
        munmap(m, len);
    if (fd >= 0)
        close(fd);
    free(vec);
    return n;
}

static void test_relation_direct(void)
{
    fixture x;
    fixture_open(&x, "rel_direct", MF_REL, false);
    size_t len = (size_t)NPAGES * PB_PAGE_SIZE;
    uint8_t *buf = rb_io_alloc(len);
    PBT_CHECK(buf && (uintptr_t)buf % RB_IO_ALIGN == 0);
    fill(buf, len, 1);
    pb_error e = PB_ERROR_INIT;
    int fd = -1;
    PBT_CHECK(rb_open_target(&x.ctx, &x.f, &fd, &e) == 0);
    PBT_CHECK(fd_direct(fd) == dir_takes_direct);
    PBT_CHECK(rb_write_span(&x.ctx, fd, &x.f, 0, buf, len, &e) == 0);
    PBT_CHECK(fsync(fd) == 0 && close(fd) == 0);
    if (dir_takes_direct) /* written past the page cache: none of it is cached */
        PBT_CHECK(cached_pages("rel_direct", len) == 0);
    PBT_CHECK(holds("rel_direct", buf, len));
    PBT_CHECK(x.st.pages_written == NPAGES && x.st.bytes_written == len);
    PBT_CHECK(x.st.files_direct == (dir_takes_direct ? 1u : 0u));
    PBT_CHECK(x.st.direct_fallbacks == (dir_takes_direct ? 0u : 1u));
    free(buf);
    rs_target_free(x.target);
}

/* The restore's own buffers are aligned; a write that is not is refused direct by the
 * kernel (EINVAL), and the file goes on buffered: same bytes, one fallback counted. */
static void test_misaligned_goes_buffered(void)
{
    if (!dir_takes_direct)
        return;
    fixture x;
    fixture_open(&x, "rel_fallback", MF_REL, false);
    size_t len = (size_t)NPAGES * PB_PAGE_SIZE;
    uint8_t *raw = rb_io_alloc(len + 64);
    uint8_t *off = raw + 16;
    fill(off, len, 7);
    pb_error e = PB_ERROR_INIT;
    int fd = -1;
    PBT_CHECK(rb_open_target(&x.ctx, &x.f, &fd, &e) == 0);
    PBT_CHECK(fd_direct(fd));
    PBT_CHECK(rb_write_span(&x.ctx, fd, &x.f, 0, off, len, &e) == 0);
    PBT_CHECK(!fd_direct(fd));
    PBT_CHECK(x.st.direct_fallbacks == 1 && x.st.files_direct == 1);
    PBT_CHECK(close(fd) == 0);
    PBT_CHECK(holds("rel_fallback", off, len));
    free(raw);
    rs_target_free(x.target);
}

static void test_whole_and_delta_buffered(void)
{
    fixture x;
    pb_error e = PB_ERROR_INIT;
    int fd = -1;
    fixture_open(&x, "whole_file", MF_FILE, false);
    PBT_CHECK(rb_open_target(&x.ctx, &x.f, &fd, &e) == 0);
    PBT_CHECK(!fd_direct(fd) && x.st.files_direct == 0);
    close(fd);
    rs_target_free(x.target);
    fixture_open(&x, "rel_delta", MF_REL, true);
    PBT_CHECK(rb_open_target(&x.ctx, &x.f, &fd, &e) == 0);
    PBT_CHECK(!fd_direct(fd) && x.st.files_direct == 0);
    close(fd);
    rs_target_free(x.target);
}

int main(void)
{
    if (pbt_tmpdir(root, sizeof(root), "write-target") != 0)
        return 1;
    char probe[300];
    snprintf(probe, sizeof(probe), "%s/probe", root);
    int fd = open(probe, O_WRONLY | O_CREAT | O_DIRECT, 0600);
    dir_takes_direct = fd >= 0;
    if (fd >= 0)
        close(fd);
    printf("%s %s O_DIRECT\n", root, dir_takes_direct ? "takes" : "refuses");
    PBT_RUN(test_relation_direct);
    PBT_RUN(test_misaligned_goes_buffered);
    PBT_RUN(test_whole_and_delta_buffered);
    pbt_rmtree(root);
    return PBT_DONE();
}
