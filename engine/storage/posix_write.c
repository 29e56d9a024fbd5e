/*
 * engine/storage/posix_write.c — the posix driver's write and flush path: a temp file
 * becomes a durable object (posix_finish_tmp), and the streaming writer behind
 * repo_writer_* (pack objects). Split from posix.c, which keeps reading, listing and
 * deleting.
 *
 * Durability (docs/DESIGN.md, data-safety rules): an object is fdatasync'ed before it is
 * renamed over its name and its directory is fsynced after (during a backup, once for
 * all its objects by repo_sync_deferred: posix_defer.c), so every pack is stable before
 * the manifest that names it commits. Whole objects created if absent (archive-push's WAL,
 * posix_excl.c) are written through the same pacing (posix_write_paced). Politeness on the database's device
 * (docs/DESIGN.md, "Polite I/O"): repository files are written once and rarely read
 * back on the host being backed up, so the writer never leaves them in the page cache
 * (POSIX_FADV_DONTNEED once a range is on disk), never flushes in small pieces (the one
 * fdatasync per object comes at its commit) and never writes in bursts: writeback of each
 * MiB starts as soon as it is written (sync_file_range), and ranges WRITER_LAG behind are
 * waited for and dropped. Left to the commit's fdatasync, a pack's tens of MiB reached the
 * disk in one burst that the database's reads queued behind (docs/BENCHMARKS.md, idle
 * machine, 2026-12-02, commit 48b9951). Every flush (fdatasync, fsync) is counted
 * (repo_io_counts): flushes per GB written is in the backup's report. Waiting for paced
 * writeback flushes no device cache and commits no metadata, so it is not counted as one.
 */
#include "engine/storage/posix_internal.h"
#include "common/fault.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define WRITER_BUF (1u << 20) /* writer buffer: one write(2) per MiB */
/* Writeback of a range is waited for once the writer is this far past it: the disk has had
 * time to write it, and the file's dirty and cached bytes stay under WRITER_LAG + a MiB. */
#define WRITER_LAG (4u << 20)
/* Where sync_file_range is not supported: one fdatasync and cache drop per this much. */
#define WRITER_FALLBACK_EVERY (64u << 20)

typedef struct posix_writer {
    posix_repo *pr;
    char *key;
    char tmp[PATH_MAX];
    int fd;
    uint8_t *buf;
    size_t buf_len;
    uint64_t written;      /* bytes handed to write(2) */
    uint64_t started_upto; /* writeback started for [0, started_upto) */
    uint64_t synced_upto;  /* [0, synced_upto) is on disk and dropped from the cache */
    bool no_range_sync;    /* sync_file_range unsupported here: fdatasync instead */
} posix_writer;

/* A failed or abandoned write: its temp file goes, and so do the directories it was
 * the last entry of (a failed backup must not leave an empty backup/<id>/ behind). */
void posix_remove_tmp(posix_repo *pr, const char *tmp)
{
    if (unlinkat(pr->dirfd, tmp, 0) != 0 || strncmp(tmp, "backup/", 7) != 0)
        return;
    char parent[PATH_MAX];
    posix_parent_of(tmp, parent, sizeof(parent));
    posix_prune_backup_dirs(pr, parent);
}

/* fdatasync, drop from cache, rename over key, close, fsync the directory. fd (and so
 * the temp file's flock) is closed only after the rename: until then a cleanup must see
 * a live writer. Closes fd in every case; the temp file is removed on failure. */
int posix_finish_tmp(posix_repo *pr, int fd, const char *tmp, const char *key, pb_error *err)
{
    int rc = 0;
    posix_count_flush(pr);
    if (fdatasync(fd) < 0)
        rc = pb_fail_errno(err, PB_EIO, "fdatasync of %s/%s failed", pr->root, tmp);
    else
        (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    if (!rc)
        PB_FAULT_POINT("put.after-temp-write");
    if (!rc && renameat(pr->dirfd, tmp, pr->dirfd, key) < 0)
        rc = pb_fail_errno(err, PB_EIO, "cannot rename %s/%s to %s", pr->root, tmp, key);
    if (rc) {
        close(fd);
        posix_remove_tmp(pr, tmp);
        return rc;
    }
    /* Data and size are durable (fdatasync): a failing close here is reported, but the
     * object stays what it is. */
    if (close(fd) < 0)
        return pb_fail_errno(err, PB_EIO, "close of %s/%s failed", pr->root, key);
    PB_FAULT_POINT("put.after-rename");
    char parent[PATH_MAX];
    posix_parent_of(key, parent, sizeof(parent));
    return posix_sync_entry(pr, parent, err);
}

static void writer_free(posix_writer *w)
{
    if (!w)
        return;
    free(w->buf);
    free(w->key);
    free(w);
}

int posix_writer_open(void *impl, const char *key, void **out, pb_error *err)
{
    posix_repo *pr = impl;
    *out = NULL;
    posix_writer *w = calloc(1, sizeof(*w));
    if (!w || !(w->buf = malloc(WRITER_BUF)) || !(w->key = strdup(key))) {
        writer_free(w);
        return pb_fail(err, PB_ENOMEM, "out of memory opening writer for %s", key);
    }
    w->pr = pr;
    int rc = posix_open_tmp(pr, key, w->tmp, sizeof(w->tmp), &w->fd, err);
    if (rc) {
        writer_free(w);
        return rc;
    }
    *out = w;
    return 0;
}

/* Where sync_file_range is unsupported: flush and drop everything written so far, once
 * per WRITER_FALLBACK_EVERY (a flush of its own, counted). */
static int writer_sync_fallback(posix_writer *w, pb_error *err)
{
    w->no_range_sync = true;
    if (w->written - w->synced_upto < WRITER_FALLBACK_EVERY)
        return 0;
    posix_count_flush(w->pr);
    if (fdatasync(w->fd) < 0)
        return pb_fail_errno(err, PB_EIO, "cannot flush %s/%s", w->pr->root, w->tmp);
    (void)posix_fadvise(w->fd, (off_t)w->synced_upto, (off_t)(w->written - w->synced_upto),
                        POSIX_FADV_DONTNEED);
    w->synced_upto = w->started_upto = w->written;
    return 0;
}

static bool range_sync_unsupported(void)
{
    return errno == ENOSYS || errno == EINVAL || errno == ESPIPE;
}

/* After each write(2): start writeback of what it wrote, then wait for the range more
 * than WRITER_LAG behind (started long enough ago to be on disk by now) and drop it from
 * the page cache. sync_file_range is enough here (the commit's fdatasync covers metadata
 * and the device cache). */
static int writer_pace(posix_writer *w, pb_error *err)
{
    if (w->no_range_sync)
        return writer_sync_fallback(w, err);
    if (sync_file_range(w->fd, (off_t)w->started_upto, (off_t)(w->written - w->started_upto),
                        SYNC_FILE_RANGE_WRITE) < 0)
        return range_sync_unsupported()
                   ? writer_sync_fallback(w, err)
                   : pb_fail_errno(err, PB_EIO, "cannot write back %s/%s", w->pr->root, w->tmp);
    w->started_upto = w->written;
    if (w->started_upto - w->synced_upto <= WRITER_LAG)
        return 0;
    off_t from = (off_t)w->synced_upto, len = (off_t)(w->started_upto - WRITER_LAG - from);
    if (sync_file_range(w->fd, from, len,
                        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                            SYNC_FILE_RANGE_WAIT_AFTER) < 0)
        return pb_fail_errno(err, PB_EIO, "cannot write back %s/%s", w->pr->root, w->tmp);
    (void)posix_fadvise(w->fd, from, len, POSIX_FADV_DONTNEED);
    w->synced_upto = (uint64_t)(from + len);
    return 0;
}

static int writer_flush(posix_writer *w, pb_error *err)
{
    if (w->buf_len == 0)
        return 0;
    if (posix_write_all(w->fd, w->buf, w->buf_len) < 0)
        return pb_fail_errno(err, PB_EIO, "cannot write %s/%s", w->pr->root, w->tmp);
    w->written += w->buf_len;
    atomic_fetch_add(&w->pr->bytes_written, w->buf_len);
    w->buf_len = 0;
    PB_FAULT_POINT("writer.mid-object");
    return writer_pace(w, err);
}

int posix_write_paced(posix_repo *pr, int fd, const char *tmp, const void *data, size_t len,
                      pb_error *err)
{
    posix_writer w = {.pr = pr, .fd = fd};
    snprintf(w.tmp, sizeof(w.tmp), "%s", tmp);
    const uint8_t *p = data;
    int rc = 0;
    for (size_t at = 0; rc == 0 && at < len; at += WRITER_BUF) {
        size_t n = len - at < WRITER_BUF ? len - at : WRITER_BUF;
        if (posix_write_all(fd, p + at, n) < 0)
            return pb_fail_errno(err, PB_EIO, "cannot write %s/%s", pr->root, tmp);
        w.written += n;
        atomic_fetch_add(&pr->bytes_written, n);
        rc = writer_pace(&w, err);
    }
    return rc;
}

int posix_writer_write(void *wp, const void *data, size_t len, pb_error *err)
{
    posix_writer *w = wp;
    const uint8_t *p = data;
    while (len > 0) {
        size_t n = WRITER_BUF - w->buf_len;
        if (n > len)
            n = len;
        memcpy(w->buf + w->buf_len, p, n);
        w->buf_len += n;
        p += n;
        len -= n;
        if (w->buf_len == WRITER_BUF) {
            int rc = writer_flush(w, err);
            if (rc)
                return rc;
        }
    }
    return 0;
}

void posix_writer_abort(void *wp)
{
    posix_writer *w = wp;
    if (!w)
        return;
    close(w->fd);
    posix_remove_tmp(w->pr, w->tmp);
    writer_free(w);
}

int posix_writer_commit(void *wp, pb_error *err)
{
    posix_writer *w = wp;
    int rc = writer_flush(w, err);
    if (rc) {
        posix_writer_abort(w);
        return rc;
    }
    rc = posix_finish_tmp(w->pr, w->fd, w->tmp, w->key, err);
    writer_free(w);
    if (rc == 0)
        PB_FAULT_POINT("writer.after-commit");
    return rc;
}



void posix_io_counts(void *impl, uint64_t *flushes, uint64_t *bytes_written)
{
    posix_repo *pr = impl;
    *flushes = atomic_load(&pr->flushes);
    *bytes_written = atomic_load(&pr->bytes_written);
}

/* ---- the temp file an object is written to ---------------------------------------- */

static int make_parents(posix_repo *pr, const char *key, pb_error *err)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s", key) >= (int)sizeof(path))
        return pb_fail(err, PB_EINVAL, "repository key too long: %s", key);
    for (char *s = strchr(path, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        if (mkdirat(pr->dirfd, path, POSIX_DIR_MODE) == 0) {
            if (pr->give_away &&
                fchownat(pr->dirfd, path, pr->owner_uid, pr->owner_gid, AT_SYMLINK_NOFOLLOW))
                return pb_fail_errno(err, PB_EIO, "cannot give %s/%s to uid %u", pr->root,
                                     path, (unsigned)pr->owner_uid);
            char parent[PATH_MAX];
            posix_parent_of(path, parent, sizeof(parent));
            int rc = posix_sync_entry(pr, parent, err);
            if (rc)
                return rc;
        } else if (errno != EEXIST) {
            return pb_fail_errno(err, PB_EIO, "cannot create directory %s/%s", pr->root, path);
        }
        *s = '/';
    }
    return 0;
}

/* Creates a fresh temp file beside key; fills tmp with its relative name. */
int posix_open_tmp(posix_repo *pr, const char *key, char *tmp, size_t cap, int *fd,
                    pb_error *err)
{
    int rc = make_parents(pr, key, err);
    if (rc)
        return rc;
    for (int attempt = 0; attempt < 8; attempt++) {
        uint32_t rnd = 0;
        if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
            rnd = (uint32_t)time(NULL) ^ (uint32_t)attempt;
        if (snprintf(tmp, cap, "%s" POSIX_TMP_MARK "%ld.%08x", key, (long)getpid(), rnd) >= (int)cap)
            return pb_fail(err, PB_EINVAL, "repository key too long: %s", key);
        *fd = openat(pr->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                     POSIX_FILE_MODE);
        if (*fd >= 0) {
            rc = posix_lock_tmp(pr, *fd, tmp, err);
            if (rc == 0 && pr->give_away && fchown(*fd, pr->owner_uid, pr->owner_gid) != 0)
                rc = pb_fail_errno(err, PB_EIO, "cannot give %s/%s to uid %u", pr->root, tmp,
                                   (unsigned)pr->owner_uid);
            if (rc == 0)
                return 0;
            close(*fd);
            *fd = -1;
            if (rc == PB_ENOENT) {
                rc = 0;
                continue; /* a cleaner took it before our flock: another name */
            }
            (void)unlinkat(pr->dirfd, tmp, 0);
            return rc;
        }
        if (errno == ENOENT && (rc = make_parents(pr, key, err)) == 0)
            continue; /* a delete pruned the emptied directory meanwhile */
        if (rc)
            return rc;
        if (errno != EEXIST)
            return pb_fail_errno(err, PB_EIO, "cannot create %s/%s", pr->root, tmp);
    }
    return pb_fail(err, PB_EIO, "cannot create a unique temp file for %s/%s", pr->root, key);
}
