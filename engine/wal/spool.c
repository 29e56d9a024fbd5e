/*
 * engine/wal/spool.c — the archive-get spool and its prefetcher (see wal.h): recovery
 * asks for one segment at a time, so while it replays one, a background prefetcher
 * fetches, verifies and decompresses the next ones into pg_wal/pageback-spool.
 *
 * Spool entries are verified raw segments named "<segment>.<hash>" (the 64-bit hash of
 * the content in hex), so that taking one is a read, a hash and a rename: the
 * decompression happened in the prefetcher, off the replay's critical path.
 */
#include "engine/wal/wal.h"
#include "engine/wal/wal_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define SPOOL_REPO_FILE ".repository"
#define SPOOL_LOCK_FILE ".prefetch.lock"
#define SPOOL_ENTRY_LEN (24 + 1 + 16)

/* A temp file "<entry>.pbtmp.<pid>" whose writer is gone. */
static bool is_dead_temp(const char *entry)
{
    const char *t = strstr(entry, ".pbtmp.");
    if (!t)
        return false;
    long pid = strtol(t + 7, NULL, 10);
    return pid <= 0 || (kill((pid_t)pid, 0) != 0 && errno == ESRCH);
}

static bool is_spool_entry(const char *e)
{
    return strlen(e) == SPOOL_ENTRY_LEN && arch_all_hex(e, 24) && e[24] == '.' &&
           strspn(e + 25, "0123456789abcdef") == 16;
}

static bool spool_entry_is_stale(const char *e, const char *name, bool all)
{
    if (strstr(e, ".pbtmp."))
        return all || is_dead_temp(e);
    if (all || !is_spool_entry(e))
        return true; /* nothing else belongs here */
    /* A position (log + seg) before the requested one, whatever the timeline. */
    return strlen(name) >= 24 && arch_all_hex(name, 24) && strncmp(e + 8, name + 8, 16) < 0;
}

static int remove_spool_entries(const char *spool_dir, const char *name, bool all,
                                pb_error *err)
{
    DIR *d = opendir(spool_dir);
    if (!d)
        return pb_fail_errno(err, PB_EIO, "cannot open spool directory %s", spool_dir);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *e = de->d_name;
        if (e[0] == '.' || !spool_entry_is_stale(e, name, all))
            continue; /* ".", "..", the lock and the repository marker stay */
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", spool_dir, e);
        if (unlink(path) != 0 && errno != ENOENT)
            pb_warn("cannot remove stale spool file %s: %s", path, strerror(errno));
    }
    closedir(d);
    return 0;
}

/* The spooled entry of segment name, if any: entry gets "<name>.<hash>". */
static bool spool_find(const char *spool_dir, const char *name, char entry[64])
{
    DIR *d = opendir(spool_dir);
    if (!d)
        return false;
    struct dirent *de;
    bool found = false;
    while (!found && (de = readdir(d)) != NULL)
        if (is_spool_entry(de->d_name) && strncmp(de->d_name, name, 24) == 0 &&
            strlen(name) == 24) {
            memcpy(entry, de->d_name, SPOOL_ENTRY_LEN + 1);
            found = true;
        }
    closedir(d);
    return found;
}

int arch_spool_prepare(const char *spool_dir, const char *name, const char *repo_id,
                       pb_error *err)
{
    if (mkdir(spool_dir, 0700) != 0 && errno != EEXIST)
        return pb_fail_errno(err, PB_EIO, "cannot create spool directory %s", spool_dir);
    char path[PATH_MAX], cur[1024] = "";
    snprintf(path, sizeof(path), "%s/%s", spool_dir, SPOOL_REPO_FILE);
    FILE *fp = fopen(path, "r");
    if (fp) {
        if (!fgets(cur, sizeof(cur), fp))
            cur[0] = '\0';
        fclose(fp);
        cur[strcspn(cur, "\n")] = '\0';
    }
    bool same = strcmp(cur, repo_id) == 0;
    int rc = remove_spool_entries(spool_dir, name, !same, err);
    if (rc || same)
        return rc;
    fp = fopen(path, "w");
    if (!fp)
        return pb_fail_errno(err, PB_EIO, "cannot write %s", path);
    fprintf(fp, "%s\n", repo_id);
    if (fclose(fp) != 0)
        return pb_fail_errno(err, PB_EIO, "cannot write %s", path);
    return 0;
}

int arch_spool_take(const char *spool_dir, const char *name, const char *dest_path,
                    pb_error *err)
{
    char entry[64], path[PATH_MAX];
    if (!spool_find(spool_dir, name, entry))
        return pb_fail(err, PB_ENOENT, "%s is not in the spool %s", name, spool_dir);
    snprintf(path, sizeof(path), "%s/%s", spool_dir, entry);
    uint8_t *raw = NULL;
    size_t len = 0;
    int rc = arch_file_read(path, &raw, &len, err);
    if (rc)
        return rc == PB_ENOENT ? PB_ENOENT : rc;
    char hash[17];
    snprintf(hash, sizeof(hash), "%016" PRIx64, pb_hash64(raw, len));
    free(raw);
    if (strcmp(hash, entry + 25) != 0) {
        pb_warn("discarding spooled %s: its content hash is %s", path, hash);
        unlink(path);
        return pb_fail(err, PB_ENOENT, "%s: spooled copy was damaged", name);
    }
    /* Same file system (both in pg_wal): the verified file becomes the destination. */
    if (rename(path, dest_path) != 0)
        return pb_fail_errno(err, PB_EIO, "cannot move %s to %s", path, dest_path);
    return 0;
}

/* The spool vanished (recovery ended and recovery_end_command removed it): stop. */
static bool spool_alive(const char *spool_dir)
{
    struct stat st;
    return stat(spool_dir, &st) == 0 && S_ISDIR(st.st_mode);
}

static int prefetch_one(repo *r, const char *spool_dir, const char *name, pb_error *err)
{
    uint8_t *raw = NULL;
    size_t len = 0;
    int rc = arch_read(r, name, &raw, &len, err);
    if (rc == 0 && spool_alive(spool_dir)) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s.%016" PRIx64, spool_dir, name,
                 pb_hash64(raw, len));
        rc = arch_file_write_atomic(path, raw, len, false, err);
    }
    free(raw);
    return rc;
}

int arch_prefetch(repo *r, const char *spool_dir, const char *name, uint32_t seg_size,
                  unsigned count, pb_error *err)
{
    uint32_t tli;
    uint64_t segno;
    if (!arch_parse_segment(name, seg_size, &tli, &segno))
        return pb_fail(err, PB_EINVAL, "cannot prefetch after %s: not a WAL segment name "
                       "(segment size %u)", name, seg_size);
    if (!spool_alive(spool_dir))
        return 0; /* recovery is over */
    char lock[PATH_MAX];
    snprintf(lock, sizeof(lock), "%s/%s", spool_dir, SPOOL_LOCK_FILE);
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return pb_fail_errno(err, PB_EIO, "cannot open %s", lock);
    int rc = 0;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0)
        goto out; /* another prefetcher is at work; it fetches ahead too */
    for (unsigned i = 1; i <= count && rc == 0 && spool_alive(spool_dir); i++) {
        char next[25], entry[64];
        arch_segment_name(next, tli, segno + i, seg_size);
        if (spool_find(spool_dir, next, entry))
            continue;
        rc = prefetch_one(r, spool_dir, next, err);
        if (rc == PB_ENOENT) {
            rc = 0; /* the end of the archive (for now) */
            break;
        }
    }
out:
    close(fd);
    return rc;
}
