/* tests/unit/engine/storage/storage_test.c — repo_* over the posix driver: opening, objects,
 * modes and ownership, key validation, listing, streaming writers, create-if-absent races.
 * Temp-file cleanup, the writer lock and chain cleanup are in storage_cleanup_test.c. */
#include "engine/storage/storage.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/engine/storage/storage_fixtures.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[256];

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (uint8_t)(seed >> 16);
    }
}

/* Fraction of the file's pages in the page cache, or -1 where that cannot be told
 * (tmpfs keeps everything in memory by design). */
static double cached_fraction(const char *path)
{
    struct statfs sf;
    if (statfs(path, &sf) < 0 || sf.f_type == 0x01021994 /* TMPFS_MAGIC */)
        return -1;
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || st.st_size == 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return -1;
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), n = ((size_t)st.st_size + pg - 1) / pg, in = 0;
    unsigned char *v = malloc(n);
    if (mincore(m, (size_t)st.st_size, v) == 0)
        for (size_t i = 0; i < n; i++)
            in += v[i] & 1;
    free(v);
    munmap(m, (size_t)st.st_size);
    return (double)in / (double)n;
}

static void test_open_errors(void)
{
    repo_opts o = REPO_OPTS_INIT;
    repo *r = NULL;
    pb_error e = PB_ERROR_INIT;
    char missing[512];
    snprintf(missing, sizeof(missing), "%s/does-not-exist", tmpdir);
    o.location = missing;
    PBT_CHECK(repo_open(&r, &o, &e) == PB_ENOENT);
    PBT_CHECK(r == NULL);
    PBT_CHECK(strstr(e.msg, missing) != NULL);

    char file[512];
    snprintf(file, sizeof(file), "%s/plainfile", tmpdir);
    FILE *f = fopen(file, "w");
    fclose(f);
    o.location = file;
    PBT_CHECK(repo_open(&r, &o, &e) == PB_EINVAL);
    PBT_CHECK(strstr(e.msg, "not a directory") != NULL);
    unlink(file);

    o.location = "";
    PBT_CHECK(repo_open(&r, &o, &e) == PB_EINVAL);
    o.location = NULL;
    PBT_CHECK(repo_open(&r, &o, &e) == PB_EINVAL);
    /* s3 locations are parsed before the driver is involved */
    o.location = "s3://";
    PBT_CHECK(repo_open(&r, &o, &e) == PB_EINVAL);
    PBT_CHECK(strstr(e.msg, "bucket") != NULL);
    o.location = "s3:///prefix";
    PBT_CHECK(repo_open(&r, &o, &e) == PB_EINVAL);
    o.location = "s3://bucket/a/../b";
    PBT_CHECK(repo_open(&r, &o, &e) == PB_EINVAL);
    PBT_CHECK(r == NULL);

    o.location = tmpdir;
    PBT_CHECK(repo_open(&r, &o, &e) == 0);
    PBT_CHECK(r && repo_is_local(r));
    PBT_CHECK(r && strcmp(repo_location(r), tmpdir) == 0);
    repo_free(r);
    repo_free(NULL);
}

static void test_put_get(void)
{
    repo *r = pbt_repo_open(tmpdir);
    pb_error e = PB_ERROR_INIT;
    uint8_t data[10000];
    fill(data, sizeof(data), 7);
    PBT_CHECK(repo_put(r, "backup/B1/pack/000001", data, sizeof(data), &e) == 0);
    void *got = NULL;
    size_t n = 0;
    PBT_CHECK(repo_get(r, "backup/B1/pack/000001", &got, &n, &e) == 0);
    PBT_CHECK(n == sizeof(data) && got && memcmp(got, data, n) == 0);
    free(got);

    uint64_t size = 0;
    PBT_CHECK(repo_stat(r, "backup/B1/pack/000001", &size, &e) == 0 && size == sizeof(data));
    PBT_CHECK(repo_stat(r, "backup/B1/pack/000001", NULL, &e) == 0);
    PBT_CHECK(repo_stat(r, "backup/B1/pack", &size, &e) == PB_ENOENT); /* a directory */
    PBT_CHECK(repo_stat(r, "backup/B1/pack/000002", &size, &e) == PB_ENOENT);
    PBT_CHECK(strstr(e.msg, "backup/B1/pack/000002") != NULL);
    PBT_CHECK(strstr(e.msg, tmpdir) != NULL);
    PBT_CHECK(repo_get(r, "nope/x", &got, &n, &e) == PB_ENOENT && got == NULL);
    PBT_CHECK(strstr(e.msg, "nope/x") != NULL);

    /* empty object and overwrite */
    PBT_CHECK(repo_put(r, "empty", "", 0, &e) == 0);
    PBT_CHECK(repo_get(r, "empty", &got, &n, &e) == 0 && n == 0);
    free(got);
    PBT_CHECK(repo_put(r, "empty", "abc", 3, &e) == 0);
    PBT_CHECK(repo_get(r, "empty", &got, &n, &e) == 0 && n == 3 && memcmp(got, "abc", 3) == 0);
    free(got);

    /* ranges */
    uint8_t buf[100];
    PBT_CHECK(repo_get_range(r, "backup/B1/pack/000001", 5000, 100, buf, &e) == 0);
    PBT_CHECK(memcmp(buf, data + 5000, 100) == 0);
    PBT_CHECK(repo_get_range(r, "backup/B1/pack/000001", 9950, 100, buf, &e) == PB_ECORRUPT);
    PBT_CHECK(strstr(e.msg, "backup/B1/pack/000001") != NULL && strstr(e.msg, "9950") != NULL);
    /* a location with a trailing '/' works the same and names paths without "//" */
    repo_opts o = REPO_OPTS_INIT;
    char slashed[600];
    snprintf(slashed, sizeof(slashed), "%s//", tmpdir);
    o.location = slashed;
    repo *r2 = NULL;
    PBT_CHECK(repo_open(&r2, &o, &e) == 0);
    PBT_CHECK(r2 && repo_get_range(r2, "backup/B1/pack/000001", 0, 100, buf, &e) == 0);
    PBT_CHECK(r2 && repo_stat(r2, "missing", NULL, &e) == PB_ENOENT && !strstr(e.msg, "//"));
    repo_free(r2);
    PBT_CHECK(repo_get_range(r, "backup/B1/pack/000001", 20000, 1, buf, &e) == PB_ECORRUPT);
    PBT_CHECK(repo_get_range(r, "backup/B1/pack/000009", 0, 1, buf, &e) == PB_ENOENT);
    /* up to: the bytes there are and the object's size, in one operation */
    size_t got_n = 0;
    repo_requests q0, q1;
    repo_requests_get(r, &q0);
    PBT_CHECK(repo_get_range_upto(r, "backup/B1/pack/000001", 9950, 100, buf, &got_n, &size,
                                  &e) == 0);
    PBT_CHECK(got_n == 50 && size == sizeof(data) && memcmp(buf, data + 9950, 50) == 0);
    PBT_CHECK(repo_get_range_upto(r, "backup/B1/pack/000001", 0, 100, buf, &got_n, &size,
                                  &e) == 0 && got_n == 100 && memcmp(buf, data, 100) == 0);
    repo_requests_get(r, &q1);
    repo_requests d = repo_requests_since(&q1, &q0);
    PBT_CHECK(d.get_range == 2 && repo_requests_total(&d) == 2);
    PBT_CHECK(repo_get_range_upto(r, "backup/B1/pack/000001", sizeof(data), 1, buf, &got_n,
                                  &size, &e) == PB_ECORRUPT);
    PBT_CHECK(repo_get_range_upto(r, "backup/B1/pack/000009", 0, 1, buf, &got_n, &size, &e) ==
              PB_ENOENT);

    /* delete */
    PBT_CHECK(repo_delete(r, "empty", &e) == 0);
    PBT_CHECK(repo_stat(r, "empty", NULL, &e) == PB_ENOENT);
    PBT_CHECK(repo_delete(r, "empty", &e) == PB_ENOENT);
    PBT_CHECK(pbt_count_files(tmpdir, ".tmp.") == 0);
    repo_free(r);
}

static void test_permissions(void)
{
    repo *r = pbt_repo_open(tmpdir);
    pb_error e = PB_ERROR_INIT;
    mode_t old = umask(027);
    PBT_CHECK(repo_put(r, "perm/dir/obj", "x", 1, &e) == 0);
    umask(old);
    char p[512];
    struct stat st;
    snprintf(p, sizeof(p), "%s/perm/dir/obj", tmpdir);
    PBT_CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0640);
    snprintf(p, sizeof(p), "%s/perm/dir", tmpdir);
    PBT_CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0750);
    repo_free(r);
}

static void test_invalid_keys(void)
{
    repo *r = pbt_repo_open(tmpdir);
    pb_error e = PB_ERROR_INIT;
    const char *bad[] = {"", "/abs", "..", "../escape", "a/../b", "a//b", "a/", "./a", "a/.",
                         "obj.tmp.1.2"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        void *got = NULL;
        size_t n;
        uint64_t sz;
        repo_writer *w = NULL;
        PBT_CHECK(repo_put(r, bad[i], "x", 1, &e) == PB_EINVAL);
        PBT_CHECK(strstr(e.msg, "invalid repository key") != NULL);
        PBT_CHECK(repo_get(r, bad[i], &got, &n, &e) == PB_EINVAL);
        PBT_CHECK(repo_stat(r, bad[i], &sz, &e) == PB_EINVAL);
        PBT_CHECK(repo_delete(r, bad[i], &e) == PB_EINVAL);
        PBT_CHECK(repo_writer_open(r, bad[i], &w, &e) == PB_EINVAL && w == NULL);
    }
    char p[512];
    snprintf(p, sizeof(p), "%s/../escape", tmpdir);
    PBT_CHECK(access(p, F_OK) != 0);
    PBT_CHECK(repo_list(r, "/x", NULL, NULL, &e) == PB_EINVAL);
    PBT_CHECK(repo_list(r, "a/../", NULL, NULL, &e) == PB_EINVAL);
    repo_free(r);
}

typedef struct listing {
    char keys[32][64];
    uint64_t sizes[32];
    int n;
    int stop_at;
} listing;

static int collect(void *ctx, const char *key, uint64_t size)
{
    listing *l = ctx;
    if (l->n < 32) {
        snprintf(l->keys[l->n], sizeof(l->keys[0]), "%s", key);
        l->sizes[l->n] = size;
    }
    l->n++;
    return l->stop_at && l->n == l->stop_at ? 42 : 0;
}

static void test_list(void)
{
    char sub[512];
    snprintf(sub, sizeof(sub), "%s/L", tmpdir);
    mkdir(sub, 0700);
    repo_opts o = REPO_OPTS_INIT;
    o.location = sub;
    repo *r = NULL;
    pb_error e = PB_ERROR_INIT;
    PBT_CHECK(repo_open(&r, &o, &e) == 0);
    const char *keys[] = {"b/2", "a/10", "ab", "a/2/x", "c", "a/1", "a-b/z"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        PBT_CHECK(repo_put(r, keys[i], "0123456789", i + 1, &e) == 0);
    /* a leftover temp file must not show up */
    char tmp[600];
    snprintf(tmp, sizeof(tmp), "%s/a/zz.tmp.1.2", sub);
    FILE *f = fopen(tmp, "w");
    fclose(f);

    listing l = {0};
    PBT_CHECK(repo_list(r, "", collect, &l, &e) == 0);
    const char *all[] = {"a-b/z", "a/1", "a/10", "a/2/x", "ab", "b/2", "c"};
    PBT_CHECK(l.n == 7);
    for (int i = 0; i < 7 && i < l.n; i++)
        PBT_CHECK(strcmp(l.keys[i], all[i]) == 0);
    PBT_CHECK(l.sizes[1] == 6 && l.sizes[6] == 5); /* a/1 was 6th put, c 5th */

    memset(&l, 0, sizeof(l));
    PBT_CHECK(repo_list(r, "a/", collect, &l, &e) == 0);
    PBT_CHECK(l.n == 3 && !strcmp(l.keys[0], "a/1") && !strcmp(l.keys[2], "a/2/x"));
    memset(&l, 0, sizeof(l));
    PBT_CHECK(repo_list(r, "a", collect, &l, &e) == 0);
    PBT_CHECK(l.n == 5 && !strcmp(l.keys[0], "a-b/z") && !strcmp(l.keys[4], "ab"));
    memset(&l, 0, sizeof(l));
    PBT_CHECK(repo_list(r, "a/1", collect, &l, &e) == 0);
    PBT_CHECK(l.n == 2 && !strcmp(l.keys[1], "a/10"));
    memset(&l, 0, sizeof(l));
    PBT_CHECK(repo_list(r, "nothing/", collect, &l, &e) == 0 && l.n == 0);
    PBT_CHECK(repo_list(r, "c/", collect, &l, &e) == 0 && l.n == 0); /* c is an object */
    memset(&l, 0, sizeof(l));
    l.stop_at = 2;
    PBT_CHECK(repo_list(r, NULL, collect, &l, &e) == 42 && l.n == 2);
    unlink(tmp);
    repo_free(r);
}

static void test_writer(void)
{
    repo *r = pbt_repo_open(tmpdir);
    pb_error e = PB_ERROR_INIT;
    size_t total = (70u << 20) + 12345; /* crosses the 64 MiB flush point */
    uint8_t *data = malloc(total);
    fill(data, total, 99);
    repo_writer *w = NULL;
    PBT_CHECK(repo_writer_open(r, "big/obj", &w, &e) == 0);
    size_t off = 0, step = 1;
    while (off < total) {
        size_t n = step < total - off ? step : total - off;
        PBT_CHECK(repo_writer_write(w, data + off, n, &e) == 0);
        off += n;
        step = step * 3 + 7; /* odd sizes, below and above the buffer size */
        if (step > (5u << 20))
            step = 333;
    }
    PBT_CHECK(repo_stat(r, "big/obj", NULL, &e) == PB_ENOENT); /* invisible until commit */
    PBT_CHECK(pbt_count_files(tmpdir, ".tmp.") == 1);
    PBT_CHECK(repo_writer_commit(w, &e) == 0);
    uint64_t size = 0;
    PBT_CHECK(repo_stat(r, "big/obj", &size, &e) == 0 && size == total);
    /* what the repository wrote does not stay in the page cache */
    char path[600];
    snprintf(path, sizeof(path), "%s/big/obj", tmpdir);
    double cached = cached_fraction(path);
    if (cached >= 0)
        PBT_CHECK(cached < 0.05);
    else
        printf("     (page-cache check skipped: tmpfs)\n");
    void *got = NULL;
    size_t n = 0;
    PBT_CHECK(repo_get(r, "big/obj", &got, &n, &e) == 0 && n == total &&
              memcmp(got, data, total) == 0);
    free(got);
    PBT_CHECK(pbt_count_files(tmpdir, ".tmp.") == 0);

    PBT_CHECK(repo_writer_open(r, "big/aborted", &w, &e) == 0);
    PBT_CHECK(repo_writer_write(w, data, 3u << 20, &e) == 0);
    repo_writer_abort(w);
    repo_writer_abort(NULL);
    PBT_CHECK(repo_stat(r, "big/aborted", NULL, &e) == PB_ENOENT);
    PBT_CHECK(pbt_count_files(tmpdir, ".tmp.") == 0);

    PBT_CHECK(repo_writer_open(r, "big/empty", &w, &e) == 0);
    PBT_CHECK(repo_writer_commit(w, &e) == 0);
    PBT_CHECK(repo_stat(r, "big/empty", &size, &e) == 0 && size == 0);
    free(data);
    repo_free(r);
}

/* The bytes of the one temp file under dir in the page cache, or -1 (none, or tmpfs). */
static double tmp_cached_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    double got = -1;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strstr(de->d_name, ".tmp.")) {
            char p[4096];
            struct stat st;
            snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
            double f = cached_fraction(p);
            if (f >= 0 && stat(p, &st) == 0)
                got = f * (double)st.st_size;
        }
    closedir(d);
    return got;
}

/* A pack reaches the disk as it is written, not in one burst at its commit: while a 40 MiB
 * object is written, its dirty and cached bytes stay within a few MiB (the old writer kept
 * up to 128 MiB, so all 40 MiB, for the commit's fdatasync to write at once). */
static void test_writer_paces_writeback(void)
{
    repo *r = pbt_repo_open(tmpdir);
    pb_error e = PB_ERROR_INIT;
    size_t piece = 1u << 20, total = 40u << 20;
    uint8_t *data = malloc(piece);
    repo_writer *w = NULL;
    PBT_CHECK(repo_writer_open(r, "paced/obj", &w, &e) == 0);
    char dir[600];
    snprintf(dir, sizeof(dir), "%s/paced", tmpdir);
    double most = -1;
    for (size_t off = 0; off < total; off += piece) {
        fill(data, piece, (uint32_t)off);
        PBT_CHECK(repo_writer_write(w, data, piece, &e) == 0);
        double c = tmp_cached_bytes(dir);
        if (c > most)
            most = c;
    }
    PBT_CHECK(repo_writer_commit(w, &e) == 0);
    if (most >= 0) {
        printf("     at most %.1f MiB of the temp file cached while written\n", most / 1048576);
        PBT_CHECK(most <= 8.0 * 1048576);
    } else {
        printf("     (page-cache check skipped: tmpfs)\n");
    }
    uint64_t size = 0;
    PBT_CHECK(repo_stat(r, "paced/obj", &size, &e) == 0 && size == total);
    free(data);
    repo_free(r);
}

/* Deleting a directory's last object beneath backup/ removes the emptied directories below
 * the top level (an empty backup/<id>/ would read as a backup without a manifest), and a later
 * put into the same place recreates them. */
static void test_delete_prunes_empty_dirs(void)
{
    repo *r = pbt_repo_open(tmpdir);
    pb_error e = PB_ERROR_INIT;
    char path[4200];
    struct stat st;
    PBT_CHECK(repo_put(r, "backup/id1/pack/000001", "a", 1, &e) == 0);
    PBT_CHECK(repo_put(r, "backup/id1/pack/000002", "b", 1, &e) == 0);
    PBT_CHECK(repo_put(r, "backup/id2/manifest", "c", 1, &e) == 0);
    PBT_CHECK(repo_delete(r, "backup/id1/pack/000001", &e) == 0);
    snprintf(path, sizeof(path), "%s/backup/id1/pack", tmpdir);
    PBT_CHECK(stat(path, &st) == 0); /* 000002 is still there */
    PBT_CHECK(repo_delete(r, "backup/id1/pack/000002", &e) == 0);
    snprintf(path, sizeof(path), "%s/backup/id1", tmpdir);
    PBT_CHECK(stat(path, &st) != 0);
    snprintf(path, sizeof(path), "%s/backup", tmpdir);
    PBT_CHECK(stat(path, &st) == 0); /* the top level stays, and so does id2 */
    PBT_CHECK(repo_stat(r, "backup/id2/manifest", NULL, &e) == 0);
    PBT_CHECK(repo_delete(r, "backup/id2/manifest", &e) == 0);
    PBT_CHECK(stat(path, &st) == 0);
    PBT_CHECK(repo_put(r, "backup/id1/pack/000001", "a", 1, &e) == 0);
    PBT_CHECK(repo_stat(r, "backup/id1/pack/000001", NULL, &e) == 0);
    /* an aborted writer (a failed backup) leaves no empty directory either */
    repo_writer *w = NULL;
    PBT_CHECK(repo_writer_open(r, "backup/id3/pack/000001", &w, &e) == 0);
    PBT_CHECK(w && repo_writer_write(w, "abc", 3, &e) == 0);
    repo_writer_abort(w);
    snprintf(path, sizeof(path), "%s/backup/id3", tmpdir);
    PBT_CHECK(stat(path, &st) != 0);
    repo_free(r);
}

/* Every file and directory under dir: files at most 0640, directories at most 0750. */
static int bad_modes(const char *dir, mode_t fmode, mode_t dmode)
{
    DIR *d = opendir(dir);
    if (!d)
        return 1;
    int bad = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char p[4096];
        snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
        struct stat st;
        if (lstat(p, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            if ((st.st_mode & 07777) != dmode) {
                fprintf(stderr, "  %s: mode %04o\n", p, (unsigned)(st.st_mode & 07777));
                bad++;
            }
            bad += bad_modes(p, fmode, dmode);
        } else if ((st.st_mode & 07777) != fmode) {
            fprintf(stderr, "  %s: mode %04o\n", p, (unsigned)(st.st_mode & 07777));
            bad++;
        }
    }
    closedir(d);
    return bad;
}


/* repo_defer_syncs (a backup's objects before its manifest): each object's data is
 * flushed at its commit, each directory that got new names once, at repo_sync_deferred;
 * then every commit is durable at once again. Without it: one directory fsync per object
 * and per new directory. */
static void test_deferred_dir_syncs(void)
{
    repo *r = pbt_repo_open(tmpdir);
    pb_error e = PB_ERROR_INIT;
    uint64_t f0 = pbt_repo_flushes(r);
    PBT_CHECK(repo_put(r, "backup/d1/pack/000001", "a", 1, &e) == 0);
    PBT_CHECK(repo_put(r, "backup/d1/pack/000002", "b", 1, &e) == 0);
    PBT_CHECK(pbt_repo_flushes(r) - f0 >= 2 * 2 + 2); /* data + directory each, new d1 and pack */
    repo_defer_syncs(r);
    f0 = pbt_repo_flushes(r);
    for (int i = 1; i <= 3; i++) {
        char key[64];
        snprintf(key, sizeof(key), "backup/d2/pack/00000%d", i);
        repo_writer *w = NULL;
        PBT_CHECK(repo_writer_open(r, key, &w, &e) == 0);
        PBT_CHECK(w && repo_writer_write(w, "xyz", 3, &e) == 0);
        PBT_CHECK(w && repo_writer_commit(w, &e) == 0);
    }
    PBT_CHECK(repo_put(r, "backup/d2/databases", "d", 1, &e) == 0);
    PBT_CHECK(pbt_repo_flushes(r) - f0 == 4); /* the data of each, no directory */
    PBT_CHECK(repo_stat(r, "backup/d2/pack/000003", NULL, &e) == 0); /* visible meanwhile */
    PBT_CHECK(repo_sync_deferred(r, &e) == 0);
    PBT_CHECK(pbt_repo_flushes(r) - f0 == 4 + 3); /* pack/, d2/, backup/: once each */
    f0 = pbt_repo_flushes(r);
    PBT_CHECK(repo_put(r, "backup/d2/manifest", "m", 1, &e) == 0);
    PBT_CHECK(pbt_repo_flushes(r) - f0 == 2); /* deferral over: data and directory at once */
    f0 = pbt_repo_flushes(r);
    PBT_CHECK(repo_sync_deferred(r, &e) == 0 && pbt_repo_flushes(r) == f0); /* nothing left */
    repo_free(r);
}

/* Defect 4: a umask of 000 must not widen what the repository creates. */
static void test_umask_000(void)
{
    char root[600];
    snprintf(root, sizeof(root), "%s/um", tmpdir);
    PBT_CHECK(mkdir(root, 0750) == 0);
    repo_opts o = REPO_OPTS_INIT;
    o.location = root;
    repo *r = NULL;
    pb_error e = PB_ERROR_INIT;
    PBT_CHECK(repo_open(&r, &o, &e) == 0);
    if (!r)
        return;
    mode_t old = umask(0);
    PBT_CHECK(repo_put(r, "backup/a/b/obj", "x", 1, &e) == 0);
    PBT_CHECK(repo_put_new(r, "wal/00000001/seg", "y", 1, &e) == 0);
    repo_writer *w = NULL;
    PBT_CHECK(repo_writer_open(r, "backup/a/pack/000001", &w, &e) == 0);
    if (w) {
        PBT_CHECK(repo_writer_write(w, "zz", 2, &e) == 0);
        PBT_CHECK(repo_writer_commit(w, &e) == 0);
    }
    repo_lock *l = NULL;
    PBT_CHECK(repo_lock_acquire(r, "test", &l, &e) == 0);
    umask(old);
    PBT_CHECK(bad_modes(root, 0640, 0750) == 0);
    repo_lock_release(l);
    repo_free(r);
}

/* As root in a repository another user owns, what we create is given to that user
 * (archive-push runs as the owner and must read and extend it). Checked only as root. */
static void test_root_gives_away(void)
{
    if (geteuid() != 0)
        return;
    char root[600], p[700];
    snprintf(root, sizeof(root), "%s/owned", tmpdir);
    PBT_CHECK(mkdir(root, 0750) == 0 && chown(root, 65534, 65534) == 0);
    repo_opts o = REPO_OPTS_INIT;
    o.location = root;
    repo *r = NULL;
    pb_error e = PB_ERROR_INIT;
    PBT_CHECK(repo_open(&r, &o, &e) == 0);
    PBT_CHECK(r && repo_put(r, "wal/00000001/x", "x", 1, &e) == 0);
    struct stat st;
    snprintf(p, sizeof(p), "%s/wal/00000001/x", root);
    PBT_CHECK(stat(p, &st) == 0 && st.st_uid == 65534 && st.st_gid == 65534);
    snprintf(p, sizeof(p), "%s/wal/00000001", root);
    PBT_CHECK(stat(p, &st) == 0 && st.st_uid == 65534);
    repo_free(r);
}

int main(void)
{
    static const pbt_case cases[] = {PBT_CASE(test_open_errors),
                                     PBT_CASE(test_put_get),
                                     PBT_CASE(test_permissions),
                                     PBT_CASE(test_invalid_keys),
                                     PBT_CASE(test_list),
                                     PBT_CASE(test_writer),
                                     PBT_CASE(test_writer_paces_writeback),
                                     PBT_CASE(test_delete_prunes_empty_dirs),
                                     PBT_CASE(test_deferred_dir_syncs),
                                     PBT_CASE(test_umask_000),
                                     PBT_CASE(test_root_gives_away)};
    return pbt_main_in_tmpdir(tmpdir, sizeof(tmpdir), "storage-test", cases, PBT_COUNT(cases));
}
