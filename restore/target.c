/*
 * restore/target.c — directories beneath the restore target, opened without following
 * links. A target directory may already hold links a restore did not create (a delta
 * restore into a directory someone prepared, base/<db> pointing elsewhere, pg_wal on
 * another disk after initdb -X); writing, pruning or chowning through one of them
 * would touch files outside the target. So every path is resolved from the target's
 * directory fd with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS (openat2, Linux 5.6+), or,
 * where the kernel lacks it, component by component with O_NOFOLLOW | O_DIRECTORY.
 * Manifest paths never hold "." or ".." (rs_check_entry), so the component walk
 * cannot climb out either. The only links followed are those the restore itself made
 * (pg_tblspc/<oid>, and pg_wal when the backup recorded it as a link): they are
 * registered with rs_target_add_link and resolved from the fd of their directory.
 * (docs/DESIGN.md rule 8: only beneath the target, no link followed.)
 */

#include "restore/plan.h"
#include "restore/restore_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_LINKS 256

typedef struct tgt_link {
    char *rel;   /* "pg_tblspc/16400" or "pg_wal" */
    char *dir;   /* the directory it points to (outside the target) */
    int fd;
} tgt_link;

struct rs_target {
    char *dir;
    int fd;
    bool have_openat2;
    tgt_link links[MAX_LINKS];
    size_t nlinks;
};

static int sys_openat2(int dirfd, const char *path, int flags)
{
#ifdef SYS_openat2
    struct open_how how;
    memset(&how, 0, sizeof(how));
    how.flags = (uint64_t)flags;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
#else
    (void)dirfd, (void)path, (void)flags;
    errno = ENOSYS;
    return -1;
#endif
}

int rs_target_open(rs_target **out, const char *dir, bool allow_openat2, pb_error *err)
{
    *out = NULL;
    rs_target *t = calloc(1, sizeof(*t));
    if (!t || !(t->dir = strdup(dir))) {
        free(t);
        return pb_fail(err, PB_ENOMEM, "out of memory opening %s", dir);
    }
    /* The target itself is the DBA's choice and may be reached through links. */
    t->fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (t->fd < 0) {
        int rc = pb_fail_errno(err, PB_EIO, "cannot open target directory %s", dir);
        rs_target_free(t);
        return rc;
    }
    int probe = allow_openat2 ? sys_openat2(t->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    t->have_openat2 = probe >= 0;
    if (probe >= 0)
        close(probe);
    *out = t;
    return 0;
}

void rs_target_free(rs_target *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->nlinks; i++) {
        free(t->links[i].rel);
        free(t->links[i].dir);
        close(t->links[i].fd);
    }
    if (t->fd >= 0)
        close(t->fd);
    free(t->dir);
    free(t);
}

const char *rs_target_path(const rs_target *t) { return t->dir; }
int rs_target_fd(const rs_target *t) { return t->fd; }
size_t rs_target_nlinks(const rs_target *t) { return t->nlinks; }
int rs_target_link_fd(const rs_target *t, size_t i) { return t->links[i].fd; }
const char *rs_target_link_dir(const rs_target *t, size_t i) { return t->links[i].dir; }

int rs_target_add_link(rs_target *t, const char *rel, const char *dir, pb_error *err)
{
    if (t->nlinks == MAX_LINKS)
        return pb_fail(err, PB_EINVAL, "%s/%s: more than %d links", t->dir, rel, MAX_LINKS);
    tgt_link *l = &t->links[t->nlinks];
    l->fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (l->fd < 0)
        return pb_fail_errno(err, PB_EIO, "cannot open %s (the target of %s/%s)", dir, t->dir,
                             rel);
    l->rel = strdup(rel);
    l->dir = strdup(dir);
    if (!l->rel || !l->dir) {
        free(l->rel);
        free(l->dir);
        close(l->fd);
        return pb_fail(err, PB_ENOMEM, "out of memory registering %s", rel);
    }
    t->nlinks++;
    return 0;
}

/* Where resolution of rel starts: a registered link's directory, or the target. */
static int start_of(const rs_target *t, const char *rel, const char **rest)
{
    for (size_t i = 0; i < t->nlinks; i++) {
        size_t n = strlen(t->links[i].rel);
        if (strncmp(rel, t->links[i].rel, n) == 0 && (rel[n] == '\0' || rel[n] == '/')) {
            *rest = rel[n] ? rel + n + 1 : rel + n;
            return t->links[i].fd;
        }
    }
    *rest = rel;
    return t->fd;
}

/* A delta restore replaces whatever stands where a directory belongs: a link is
 * removed (never what it points to), a file likewise. */
static int replace_with_dir(const rs_target *t, int dfd, const char *name, const char *rel,
                            pb_error *err)
{
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return pb_fail_errno(err, PB_EIO, "cannot stat %s/%s", t->dir, rel);
    if (S_ISLNK(st.st_mode)) {
        char to[4096];
        ssize_t n = readlinkat(dfd, name, to, sizeof(to) - 1);
        to[n > 0 ? n : 0] = '\0';
        pb_warn("%s/%s is a symbolic link to %s; the backup has a directory there: the link "
                "is replaced by a directory, %s is left untouched", t->dir, rel, to, to);
    }
    if (unlinkat(dfd, name, 0) != 0)
        return pb_fail_errno(err, PB_EIO, "cannot remove %s/%s", t->dir, rel);
    return 0;
}

/* One step of the fallback walk: open (creating or replacing as asked) name in dfd. */
static int step(const rs_target *t, int dfd, const char *name, const char *rel, unsigned how,
                int *out, pb_error *err)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) {
            *out = fd;
            return 0;
        }
        int rc = 0;
        if (errno == ENOENT && (how & RS_DIR_CREATE)) {
            if (mkdirat(dfd, name, 0700) != 0 && errno != EEXIST)
                return pb_fail_errno(err, PB_EIO, "cannot create directory %s/%s", t->dir, rel);
        } else if ((errno == ELOOP || errno == ENOTDIR) && (how & RS_DIR_REPLACE)) {
            rc = replace_with_dir(t, dfd, name, rel, err);
            if (rc == 0 && mkdirat(dfd, name, 0700) != 0 && errno != EEXIST)
                return pb_fail_errno(err, PB_EIO, "cannot create directory %s/%s", t->dir, rel);
        } else if (errno == ELOOP || errno == ENOTDIR) {
            return pb_fail(err, PB_EINVAL, "%s/%s is a symbolic link or not a directory: "
                           "restore does not write through links it did not create",
                           t->dir, rel);
        } else {
            return pb_fail_errno(err, errno == ENOENT ? PB_ENOENT : PB_EIO,
                                 "cannot open directory %s/%s", t->dir, rel);
        }
        if (rc)
            return rc;
    }
    return pb_fail(err, PB_EIO, "%s/%s keeps changing under the restore", t->dir, rel);
}

int rs_target_dir(const rs_target *t, const char *rel, unsigned how, int *out, pb_error *err)
{
    *out = -1;
    const char *rest;
    int start = start_of(t, rel, &rest);
    if (!*rest) {
        *out = fcntl(start, F_DUPFD_CLOEXEC, 0);
        return *out >= 0 ? 0 : pb_fail_errno(err, PB_EIO, "cannot open %s/%s", t->dir, rel);
    }
    if (t->have_openat2 && how == 0) {
        int fd = sys_openat2(start, rest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0) {
            *out = fd;
            return 0;
        }
        if (errno == ENOENT)
            return pb_fail_errno(err, PB_ENOENT, "cannot open directory %s/%s", t->dir, rel);
        if (errno != ELOOP && errno != ENOTDIR && errno != EXDEV)
            return pb_fail_errno(err, PB_EIO, "cannot open directory %s/%s", t->dir, rel);
        /* fall through to the walk, which names the offending component */
    }
    char buf[4096], sofar[4096];
    if (snprintf(buf, sizeof(buf), "%s", rest) >= (int)sizeof(buf))
        return pb_fail(err, PB_EINVAL, "path %s is too long", rel);
    int fd = fcntl(start, F_DUPFD_CLOEXEC, 0);
    if (fd < 0)
        return pb_fail_errno(err, PB_EIO, "cannot open %s", t->dir);
    size_t prefix = (size_t)(rest - rel);
    char *save = NULL;
    int rc = 0;
    for (char *c = strtok_r(buf, "/", &save); c && rc == 0; c = strtok_r(NULL, "/", &save)) {
        snprintf(sofar, sizeof(sofar), "%.*s%s", (int)(c - buf + prefix), rel, c);
        int next = -1;
        rc = step(t, fd, c, sofar, how, &next, err);
        close(fd);
        fd = next;
    }
    if (rc == 0)
        *out = fd;
    return rc;
}

int rs_target_parent(const rs_target *t, const char *rel, unsigned how, int *dirfd,
                     const char **base, pb_error *err)
{
    const char *slash = strrchr(rel, '/');
    *base = slash ? slash + 1 : rel;
    char parent[4096];
    size_t n = slash ? (size_t)(slash - rel) : 0;
    if (n >= sizeof(parent))
        return pb_fail(err, PB_EINVAL, "path %s is too long", rel);
    memcpy(parent, rel, n);
    parent[n] = '\0';
    /* The parent of a registered link is resolved normally; the link is its child. */
    return rs_target_dir(t, parent, how, dirfd, err);
}

/* rm -r of name in dfd without following any link (the link itself is removed). */
int rs_remove_at(int dfd, const char *name, const char *shown, pb_error *err)
{
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? 0 : pb_fail_errno(err, PB_EIO, "cannot stat %s", shown);
    if (!S_ISDIR(st.st_mode))
        return unlinkat(dfd, name, 0) == 0 || errno == ENOENT
                   ? 0 : pb_fail_errno(err, PB_EIO, "cannot remove %s", shown);
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return pb_fail_errno(err, PB_EIO, "cannot open %s", shown);
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char sub[4096];
        snprintf(sub, sizeof(sub), "%s/%s", shown, de->d_name);
        rc = rs_remove_at(dirfd(d), de->d_name, sub, err);
    }
    closedir(d);
    if (rc == 0 && unlinkat(dfd, name, AT_REMOVEDIR) != 0)
        rc = pb_fail_errno(err, PB_EIO, "cannot remove directory %s", shown);
    return rc;
}

DIR *rs_dir_list(int dfd)
{
    /* openat(".") makes a new open file description: a dup would share the offset, and
     * a directory read through it once (the delta restore's prune, --force's emptying)
     * would list as empty to every later reader (the ownership pass). */
    int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d && fd >= 0)
        close(fd);
    return d;
}

/* chown -R of the directory dfd without following links (a link gets its own owner). */
static bool chown_tree(int dfd, uid_t uid, gid_t gid)
{
    bool ok = fchown(dfd, uid, gid) == 0;
    DIR *d = rs_dir_list(dfd);
    if (!d)
        return false;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        struct stat st;
        if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            ok = false;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            ok &= fchownat(dfd, de->d_name, uid, gid, AT_SYMLINK_NOFOLLOW) == 0;
            continue;
        }
        int sub = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        ok &= sub >= 0 && chown_tree(sub, uid, gid);
        if (sub >= 0)
            close(sub);
    }
    closedir(d);
    return ok;
}

/* Run as root, give the files to whoever owns the target directory (the DBA creates it
 * for the postgres user), so the restored cluster can start. Links are never followed
 * except those the restore made (tablespaces), whose directories are walked from
 * their registered fds. The new owners are inode changes made after the files were
 * fsync'ed, so each file system involved is synced again (syncfs, result checked). */
int rs_target_fix_owner(const rs_target *t, pb_error *err)
{
    struct stat st;
    if (geteuid() != 0 || fstat(t->fd, &st) != 0 || st.st_uid == 0)
        return 0;
    bool ok = chown_tree(t->fd, st.st_uid, st.st_gid);
    for (size_t i = 0; i < t->nlinks; i++)
        ok &= chown_tree(t->links[i].fd, st.st_uid, st.st_gid);
    if (!ok)
        pb_warn("could not give everything under %s to uid %u", t->dir, (unsigned)st.st_uid);
    if (syncfs(t->fd) != 0)
        return pb_fail_errno(err, PB_EIO, "cannot sync the file system of %s", t->dir);
    for (size_t i = 0; i < t->nlinks; i++)
        if (syncfs(t->links[i].fd) != 0)
            return pb_fail_errno(err, PB_EIO, "cannot sync the file system of %s",
                                 t->links[i].dir);
    return 0;
}
