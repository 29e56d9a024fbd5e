/*
 * engine/storage/posix.c — the posix repository driver: each object is a file under
 * the repository directory, its key the path relative to that directory.
 *
 * Atomicity: an object is written to "<key>.tmp.<pid>.<random>", made durable with
 * fdatasync, renamed over its final name, and the directory is fsynced, so a reader
 * sees either nothing or the whole object. The writer keeps its temp file flock'ed until
 * the rename, which is how a cleanup tells a dead writer's temp file from a live one's
 * (posix_excl.c). The write and flush path (temp file to durable object, page cache
 * and writeback pacing) lives in posix_write.c.
 *
 * Permissions: objects 0640 and directories 0750 (posix_internal.h), set at
 * creation and never widened by a lax umask; the repository holds pg_authid. Run
 * archive-push and backup as the same user (the postgres user), as the tools do; a
 * root process writing into a repository that another user owns gives what it creates
 * to that user, so the owner can still read and extend it.
 *
 * Create-if-absent objects and the writer lock file live in posix_excl.c; deferred
 * directory syncs (a backup's objects before its manifest) in posix_defer.c.
 */
#include "engine/storage/posix_internal.h"
#include "common/fault.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TMP_MARK POSIX_TMP_MARK


static int open_object(posix_repo *pr, const char *key, int *fd, pb_error *err)
{
    *fd = openat(pr->dirfd, key, O_RDONLY | O_CLOEXEC);
    if (*fd >= 0)
        return 0;
    if (errno == ENOENT || errno == ENOTDIR)
        return pb_fail(err, PB_ENOENT, "object %s/%s does not exist", pr->root, key);
    return pb_fail_errno(err, PB_EIO, "cannot open %s/%s", pr->root, key);
}

/* ---- open / free ------------------------------------------------------------- */

int repo_posix_open(const repo_opts *opts, const char *dir, void **impl, pb_error *err)
{
    *impl = NULL;
    struct stat st;
    if (stat(dir, &st) < 0) {
        if (errno == ENOENT)
            return pb_fail(err, PB_ENOENT,
                           "repository directory %s does not exist: run pageback init "
                           "--repo %s (a mistyped path does not create a repository)",
                           dir, dir);
        return pb_fail_errno(err, PB_EIO, "cannot access repository directory %s", dir);
    }
    if (!S_ISDIR(st.st_mode))
        return pb_fail(err, PB_EINVAL, "repository location %s is not a directory", dir);
    posix_repo *pr = calloc(1, sizeof(*pr));
    if (!pr || !(pr->root = strdup(dir))) {
        free(pr);
        return pb_fail(err, PB_ENOMEM, "out of memory opening repository %s", dir);
    }
    /* "/srv/repo/" -> "/srv/repo" so messages read "/srv/repo/<key>" */
    for (size_t n = strlen(pr->root); n > 1 && pr->root[n - 1] == '/'; n--)
        pr->root[n - 1] = '\0';
    pr->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pr->dirfd < 0) {
        int rc = pb_fail_errno(err, PB_EIO, "cannot open repository directory %s", dir);
        free(pr->root);
        free(pr);
        return rc;
    }
    pthread_mutex_init(&pr->defer_mu, NULL);
    pr->give_away = geteuid() == 0 && st.st_uid != 0;
    pr->owner_uid = st.st_uid;
    pr->owner_gid = st.st_gid;
    *impl = pr;
    return 0;
}

static void posix_free(void *impl)
{
    posix_repo *pr = impl;
    if (!pr)
        return;
    close(pr->dirfd);
    posix_defer_free(pr);
    free(pr->root);
    free(pr);
}

/* ---- whole objects ----------------------------------------------------------- */

static int posix_put(void *impl, const char *key, const void *data, size_t len, pb_error *err)
{
    posix_repo *pr = impl;
    char tmp[PATH_MAX];
    int fd;
    int rc = posix_open_tmp(pr, key, tmp, sizeof(tmp), &fd, err);
    if (rc)
        return rc;
    if (posix_write_all(fd, data, len) < 0) {
        rc = pb_fail_errno(err, PB_EIO, "cannot write %s/%s", pr->root, tmp);
        close(fd);
        posix_remove_tmp(pr, tmp);
        return rc;
    }
    return posix_finish_tmp(pr, fd, tmp, key, err);
}

static int posix_get(void *impl, const char *key, void **out, size_t *out_len, pb_error *err)
{
    posix_repo *pr = impl;
    int fd;
    int rc = open_object(pr, key, &fd, err);
    if (rc)
        return rc;
    struct stat st;
    uint8_t *data = NULL;
    if (fstat(fd, &st) < 0) {
        rc = pb_fail_errno(err, PB_EIO, "cannot stat %s/%s", pr->root, key);
        goto out;
    }
    size_t size = (size_t)st.st_size;
    /* one spare byte so an empty object still yields a non-NULL buffer */
    if (!(data = malloc(size + 1))) {
        rc = pb_fail(err, PB_ENOMEM, "out of memory reading %s/%s (%zu bytes)", pr->root, key,
                     size);
        goto out;
    }
    size_t got = 0;
    while (got < size) {
        ssize_t n = pread(fd, data + got, size - got, (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = pb_fail_errno(err, PB_EIO, "cannot read %s/%s", pr->root, key);
            goto out;
        }
        if (n == 0) {
            rc = pb_fail(err, PB_ECORRUPT, "object %s/%s shrank while being read", pr->root,
                         key);
            goto out;
        }
        got += (size_t)n;
    }
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    *out = data;
    *out_len = size;
    data = NULL;
out:
    free(data);
    close(fd);
    return rc;
}

static int posix_get_range(void *impl, const char *key, uint64_t off, size_t len, void *buf,
                           pb_error *err)
{
    posix_repo *pr = impl;
    int fd;
    int rc = open_object(pr, key, &fd, err);
    if (rc)
        return rc;
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, (uint8_t *)buf + got, len - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = pb_fail_errno(err, PB_EIO, "cannot read %s/%s at offset %llu", pr->root, key,
                               (unsigned long long)(off + got));
            break;
        }
        if (n == 0) {
            rc = pb_fail(err, PB_ECORRUPT,
                         "object %s/%s is too short: wanted %zu bytes at offset %llu, got %zu",
                         pr->root, key, len, (unsigned long long)off, got);
            break;
        }
        got += (size_t)n;
    }
    close(fd);
    return rc;
}

static int posix_stat(void *impl, const char *key, uint64_t *size, pb_error *err);

/* repo_get_range_upto as one operation (one request in the counts, as on S3). */
static int posix_get_range_upto(void *impl, const char *key, uint64_t off, size_t len,
                                void *buf, size_t *got, uint64_t *size, pb_error *err)
{
    posix_repo *pr = impl;
    int rc = posix_stat(impl, key, size, err);
    if (rc == 0 && off >= *size)
        rc = pb_fail(err, PB_ECORRUPT, "object %s/%s: offset %llu is at or past its end (%llu "
                     "bytes)", pr->root, key, (unsigned long long)off, (unsigned long long)*size);
    size_t n = rc == 0 && *size - off < len ? (size_t)(*size - off) : len;
    if (rc == 0)
        rc = posix_get_range(impl, key, off, n, buf, err);
    *got = rc == 0 ? n : 0;
    return rc;
}

static int posix_stat(void *impl, const char *key, uint64_t *size, pb_error *err)
{
    posix_repo *pr = impl;
    struct stat st;
    if (fstatat(pr->dirfd, key, &st, 0) < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return pb_fail(err, PB_ENOENT, "object %s/%s does not exist", pr->root, key);
        return pb_fail_errno(err, PB_EIO, "cannot stat %s/%s", pr->root, key);
    }
    if (!S_ISREG(st.st_mode))
        return pb_fail(err, PB_ENOENT, "%s/%s is not an object (not a regular file)", pr->root,
                       key);
    *size = (uint64_t)st.st_size;
    return 0;
}

/* Unlink key; its directory is fsynced when durable (so the removal survives a power
 * loss), and emptied backup directories are pruned. */
static int remove_object(posix_repo *pr, const char *key, bool durable, pb_error *err)
{
    if (unlinkat(pr->dirfd, key, 0) < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return pb_fail(err, PB_ENOENT, "object %s/%s does not exist", pr->root, key);
        return pb_fail_errno(err, PB_EIO, "cannot delete %s/%s", pr->root, key);
    }
    char parent[PATH_MAX];
    posix_parent_of(key, parent, sizeof(parent));
    int rc = durable ? posix_fsync_dir(pr, parent, err) : 0;
    if (rc == 0 && strncmp(key, "backup/", 7) == 0)
        posix_prune_backup_dirs(pr, parent);
    return rc;
}

static int posix_del(void *impl, const char *key, pb_error *err)
{
    return remove_object(impl, key, true, err);
}

/* The writer lock's removal needs no flush (posix_excl.c): a lock that comes back after
 * a power loss names a boot this host no longer has, and is taken over. */
static int posix_lock_remove(void *impl, const char *key, pb_error *err)
{
    return remove_object(impl, key, false, err);
}

/* ---- walking ------------------------------------------------------------------ */

typedef struct walk_entry {
    char *key;
    uint64_t size;
} walk_entry;

typedef struct walk_state {
    posix_repo *pr;
    const char *prefix; /* only keys starting with this are collected */
    bool want_tmp;      /* collect temp files instead of objects */
    walk_entry *v;
    size_t n, cap;
} walk_state;

static int walk_add(walk_state *ws, const char *key, const struct stat *st, pb_error *err)
{
    if (ws->n == ws->cap) {
        size_t cap = ws->cap ? ws->cap * 2 : 64;
        walk_entry *v = realloc(ws->v, cap * sizeof(*v));
        if (!v)
            return pb_fail(err, PB_ENOMEM, "out of memory listing %s", ws->pr->root);
        ws->v = v;
        ws->cap = cap;
    }
    if (!(ws->v[ws->n].key = strdup(key)))
        return pb_fail(err, PB_ENOMEM, "out of memory listing %s", ws->pr->root);
    ws->v[ws->n].size = (uint64_t)st->st_size;
    ws->n++;
    return 0;
}

/* Could a key under directory dir ("" = root) start with prefix? */
static bool dir_may_match(const char *dir, const char *prefix)
{
    size_t dl = strlen(dir), pl = strlen(prefix);
    if (dl == 0)
        return true;
    size_t n = dl < pl ? dl : pl;
    if (strncmp(dir, prefix, n) != 0)
        return false;
    return dl >= pl || prefix[dl] == '/';
}

static int walk_dir(walk_state *ws, const char *dir, pb_error *err)
{
    posix_repo *pr = ws->pr;
    int fd = openat(pr->dirfd, dir[0] ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR) /* absent or removed by expire */
            return 0;
        return pb_fail_errno(err, PB_EIO, "cannot open directory %s/%s", pr->root, dir);
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        int rc = pb_fail_errno(err, PB_EIO, "cannot read directory %s/%s", pr->root, dir);
        close(fd);
        return rc;
    }
    int rc = 0;
    struct dirent *de;
    char path[PATH_MAX];
    while (!rc && (errno = 0, de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (snprintf(path, sizeof(path), "%s%s%s", dir, dir[0] ? "/" : "", de->d_name) >=
            (int)sizeof(path))
            continue;
        struct stat st;
        if (fstatat(pr->dirfd, path, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT)
                continue;
            rc = pb_fail_errno(err, PB_EIO, "cannot stat %s/%s", pr->root, path);
            break;
        }
        if (S_ISDIR(st.st_mode)) {
            if (dir_may_match(path, ws->prefix))
                rc = walk_dir(ws, path, err);
        } else if (S_ISREG(st.st_mode) && strncmp(path, ws->prefix, strlen(ws->prefix)) == 0 &&
                   (strstr(de->d_name, TMP_MARK) != NULL) == ws->want_tmp) {
            rc = walk_add(ws, path, &st, err);
        }
    }
    if (!rc && errno != 0)
        rc = pb_fail_errno(err, PB_EIO, "cannot read directory %s/%s", pr->root, dir);
    closedir(d);
    return rc;
}

static void walk_free(walk_state *ws)
{
    for (size_t i = 0; i < ws->n; i++)
        free(ws->v[i].key);
    free(ws->v);
}

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const walk_entry *)a)->key, ((const walk_entry *)b)->key);
}

/* The prefix is a string prefix of keys (as on S3); the walk starts at the deepest
 * directory the prefix names and prunes directories that cannot match. */
static int posix_list(void *impl, const char *prefix, repo_list_cb cb, void *ctx,
                      pb_error *err)
{
    walk_state ws = {.pr = impl, .prefix = prefix};
    char start[PATH_MAX];
    const char *slash = strrchr(prefix, '/');
    snprintf(start, sizeof(start), "%.*s", slash ? (int)(slash - prefix) : 0, prefix);
    int rc = walk_dir(&ws, start, err);
    if (!rc && ws.n > 1)
        qsort(ws.v, ws.n, sizeof(*ws.v), entry_cmp);
    for (size_t i = 0; !rc && i < ws.n; i++)
        rc = cb(ctx, ws.v[i].key, ws.v[i].size);
    walk_free(&ws);
    return rc;
}

/* ---- for the cleanup (posix_clean.c) ---------------------------------------------- */

int posix_walk_tmp(posix_repo *pr, int (*cb)(posix_repo *pr, const char *tmp, void *ctx),
                   void *ctx, pb_error *err)
{
    walk_state ws = {.pr = pr, .prefix = "", .want_tmp = true};
    int rc = walk_dir(&ws, "", err);
    for (size_t i = 0; !rc && i < ws.n; i++)
        rc = cb(pr, ws.v[i].key, ctx);
    walk_free(&ws);
    return rc;
}

const repo_driver repo_posix_driver = {
    .name = "posix",
    .free = posix_free,
    .put = posix_put,
    .get = posix_get,
    .get_range = posix_get_range,
    .stat = posix_stat,
    .del = posix_del,
    .list = posix_list,
    .writer_open = posix_writer_open,
    .writer_write = posix_writer_write,
    .writer_commit = posix_writer_commit,
    .writer_abort = posix_writer_abort,
    .cleanup = posix_cleanup,
    .cleanup_key = posix_cleanup_key,
    .io_counts = posix_io_counts,
    .put_new = posix_put_new,
    .lock_probe = posix_lock_probe,
    .lock_rewrite = posix_lock_rewrite,
    .lock_remove = posix_lock_remove,
    .get_range_upto = posix_get_range_upto,
    .defer_syncs = posix_defer_syncs,
    .sync_deferred = posix_sync_deferred,
};
