/*
 * restore/guard.c — checks a restore makes before it writes anything: every manifest
 * path is one that may be created beneath the target (links only where PostgreSQL
 * has them, docs/DESIGN.md "Invariants of what is stored"), and no server is running
 * in the target directory (docs/DESIGN.md rule 8).
 */
#include "restore/plan.h"
#include "restore/restore_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LINK_TARGET_MAX 4096

/* pg_tblspc/<oid>: an OID is 1..4294967295 in decimal. */
static bool is_tblspc_link(const char *path)
{
    const char *p = path + strlen("pg_tblspc/");
    if (strncmp(path, "pg_tblspc/", strlen("pg_tblspc/")) != 0 || !*p || *p == '0')
        return false;
    size_t n = strspn(p, "0123456789");
    return p[n] == '\0' && n <= 10 && strtoull(p, NULL, 10) <= UINT32_MAX;
}

bool rs_link_oid(const char *path, unsigned *oid)
{
    if (!path || !is_tblspc_link(path))
        return false;
    *oid = (unsigned)strtoul(path + strlen("pg_tblspc/"), NULL, 10);
    return true;
}

int rs_check_entry(const mf_file *f, pb_error *err)
{
    /* Checked here again, not only by the manifest parser: this is what stands between
     * a repository and a write outside the target. */
    if (!f->path || !mf_path_is_safe(f->path))
        return pb_fail(err, PB_ECORRUPT, "manifest path \"%.300s\" is not a relative path "
                       "beneath the target (empty, absolute, \".\" or \"..\" component)",
                       f->path ? f->path : "(null)");
    if (f->kind == MF_LINK) {
        if (!is_tblspc_link(f->path) && strcmp(f->path, "pg_wal") != 0)
            return pb_fail(err, PB_ECORRUPT, "manifest entry %s is a link: links are allowed "
                           "only at pg_tblspc/<oid> and pg_wal", f->path);
        if (!f->link_target || !f->link_target[0] ||
            strnlen(f->link_target, LINK_TARGET_MAX) == LINK_TARGET_MAX)
            return pb_fail(err, PB_ECORRUPT, "manifest link %s has an empty or overlong target",
                           f->path);
    }
    return 0;
}

/* The first line of postmaster.pid is the postmaster's PID (negative for a standalone
 * backend, see PostgreSQL's miscinit.c CreateLockFile). */
static int read_pid(const char *path, long *pid, pb_error *err)
{
    *pid = 0;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
        return 0; /* no pid file, or no target directory yet */
    if (fd < 0)
        return pb_fail_errno(err, PB_ESTATE, "cannot read %s, so cannot tell whether a server "
                             "is running in the target", path);
    char buf[64];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    char *end = NULL;
    long v = strtol(buf, &end, 10);
    if (end == buf || (*end != '\n' && *end != '\0'))
        pb_warn("%s does not start with a PID; taken as stale", path);
    else
        *pid = v < 0 ? -v : v;
    return 0;
}

int rs_check_not_running(const char *target_dir, pb_error *err)
{
    char path[4096];
    if (snprintf(path, sizeof(path), "%s/postmaster.pid", target_dir) >= (int)sizeof(path))
        return pb_fail(err, PB_EINVAL, "target directory name %s is too long", target_dir);
    long pid = 0;
    int rc = read_pid(path, &pid, err);
    if (rc || pid <= 0)
        return rc;
    if (kill((pid_t)pid, 0) == 0 || errno == EPERM)
        return pb_fail(err, PB_ESTATE, "%s names PID %ld, which is running: a server may be "
                       "using the target directory; stop it first (nothing was changed)",
                       path, pid);
    pb_info("%s names PID %ld, which is not running: a stale lock file", path, pid);
    return 0;
}
