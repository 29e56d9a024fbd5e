/*
 * restore/restore.c — restore a backup set into a directory: choose the set, check
 * the WAL it needs and the target before writing anything, lay out directories and
 * tablespace links, rebuild every file from the chain, remove what should not exist
 * (delta), write recovery settings, and bring it all to stable storage. Every path
 * beneath the target is resolved without following links (restore/target.c), as
 * docs/DESIGN.md rule 8 asks.
 */
#include "restore/plan.h"
#include "restore/restore_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool dir_is_empty(const char *path, bool *exists)
{
    DIR *d = opendir(path);
    *exists = d != NULL;
    if (!d)
        return true;
    struct dirent *de;
    bool empty = true;
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
            empty = false;
            break;
        }
    closedir(d);
    return empty;
}

/* The --tablespace-map entry for the link f, or NULL (pg_wal, or not mapped). */
static const rs_tblspc_map *map_of(const rs_opts *opts, const mf_file *f)
{
    unsigned oid;
    if (!rs_link_oid(f->path, &oid))
        return NULL;
    for (size_t i = 0; i < opts->ntblspc; i++)
        if (opts->tblspc[i].oid == oid)
            return &opts->tblspc[i];
    return NULL;
}

/* The directory a link entry (checked by rs_check_entry) is to point to. */
static const char *mapped_dir(const rs_opts *opts, const mf_file *f)
{
    const rs_tblspc_map *map = map_of(opts, f);
    return map ? map->dir : f->link_target;
}

/* Create (or keep, when it already points there) the link f and register it, so that
 * the paths beneath it resolve into its directory. */
static int make_link(rs_target *t, const rs_opts *opts, const mf_file *f, pb_error *err)
{
    const char *dir = mapped_dir(opts, f);
    if (!dir || dir[0] != '/')
        return pb_fail(err, PB_EINVAL, "link %s has no absolute target directory; use "
                       "--tablespace-map OID=DIR", f->path);
    int pfd = -1;
    const char *base = NULL;
    int rc = pb_mkdir_p(dir, 0700, err);
    if (rc == 0)
        rc = rs_target_parent(t, f->path, RS_DIR_CREATE | RS_DIR_REPLACE, &pfd, &base, err);
    if (rc)
        return rc;
    char cur[4096], shown[8192];
    snprintf(shown, sizeof(shown), "%s/%s", opts->target_dir, f->path);
    ssize_t n = readlinkat(pfd, base, cur, sizeof(cur) - 1);
    cur[n > 0 ? n : 0] = '\0';
    bool keep = n > 0 && strcmp(cur, dir) == 0;
    if (!keep && (n >= 0 || errno == EINVAL))
        rc = rs_remove_at(pfd, base, shown, err); /* another link, a file or a directory */
    if (rc == 0 && !keep && symlinkat(dir, pfd, base) != 0)
        rc = pb_fail_errno(err, PB_EIO, "cannot link %s to %s", shown, dir);
    close(pfd);
    return rc ? rc : rs_target_add_link(t, f->path, dir, err);
}

/* ---- where the links will point, checked before anything is written ---- */

/* Append the components of rest to the canonical directory out, "." and ".." taken
 * lexically: they name directories that do not exist yet. */
static int append_lexically(char out[PATH_MAX], const char *rest, const char *path,
                            pb_error *err)
{
    char buf[PATH_MAX], *save = NULL;
    snprintf(buf, sizeof(buf), "%s", rest);
    for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        size_t n = strlen(out);
        if (!strcmp(c, "."))
            continue;
        if (!strcmp(c, "..")) {
            char *slash = strrchr(out, '/');
            slash[slash == out] = '\0'; /* "/" stays "/" */
            continue;
        }
        if (n + 1 + strlen(c) >= PATH_MAX)
            return pb_fail(err, PB_EINVAL, "directory name %s is too long", path);
        snprintf(out + n, PATH_MAX - n, "%s%s", n > 1 ? "/" : "", c);
    }
    return 0;
}

/* path ("/...") with links, ".", ".." and repeated slashes resolved, so that two names
 * of one directory compare equal: realpath for the part that exists, the rest (what
 * make_link's mkdir -p will create) lexically. */
static int canon_dir(const char *path, char out[PATH_MAX], pb_error *err)
{
    char head[PATH_MAX];
    if (!path || path[0] != '/' || strlen(path) >= sizeof(head))
        return pb_fail(err, PB_EINVAL, "%s is not an absolute directory name of a usable "
                       "length", path ? path : "(none)");
    snprintf(head, sizeof(head), "%s", path);
    size_t rest = strlen(head);
    while (!realpath(head, out)) {
        if (errno != ENOENT && errno != ENOTDIR)
            return pb_fail_errno(err, PB_EIO, "cannot resolve the directory name %s", path);
        char *slash = strrchr(head, '/');
        rest = (size_t)(slash - head);
        if (slash == head) {
            snprintf(out, PATH_MAX, "/");
            break;
        }
        *slash = '\0';
    }
    return append_lexically(out, path + rest, path, err);
}

/* The target directory, which may be given relative to the working directory. */
static int canon_target(const char *dir, char out[PATH_MAX], pb_error *err)
{
    char cwd[PATH_MAX], abs[PATH_MAX];
    if (dir[0] == '/')
        return canon_dir(dir, out, err);
    if (!getcwd(cwd, sizeof(cwd)) || snprintf(abs, sizeof(abs), "%s/%s", cwd, dir) >= PATH_MAX)
        return pb_fail_errno(err, PB_EINVAL, "cannot make the target directory %s absolute",
                             dir);
    return canon_dir(abs, out, err);
}

/* Is the canonical directory a the canonical directory b or beneath it? */
static bool within(const char *a, const char *b)
{
    size_t n = strlen(b);
    return n == 1 || (strncmp(a, b, n) == 0 && (a[n] == '\0' || a[n] == '/'));
}

typedef struct link_dir {
    const mf_file *f;
    char *canon; /* canonical name of the directory it will point to */
} link_dir;

/* Does the target's own link at f->path (reached without following a link on the
 * way) point at the canonical directory canon? */
static bool own_link_points_at(const rs_target *t, const mf_file *f, const char *canon)
{
    int pfd = -1;
    const char *base = NULL;
    pb_error ignored = PB_ERROR_INIT;
    if (!t || rs_target_parent(t, f->path, 0, &pfd, &base, &ignored) != 0)
        return false;
    char to[PATH_MAX], to_canon[PATH_MAX];
    ssize_t n = readlinkat(pfd, base, to, sizeof(to) - 1);
    close(pfd);
    to[n > 0 ? n : 0] = '\0';
    return n > 0 && canon_dir(to, to_canon, &ignored) == 0 && strcmp(to_canon, canon) == 0;
}

/* Where link ld will point: an absolute directory neither inside the target nor
 * holding it (the restore would write its own files twice, or prune the target). */
static int check_link_dir(const rs_opts *opts, const char *target, link_dir *ld,
                          pb_error *err)
{
    const char *dir = mapped_dir(opts, ld->f);
    char canon[PATH_MAX];
    if (!dir || dir[0] != '/')
        return pb_fail(err, PB_EINVAL, "link %s has no absolute target directory; use "
                       "--tablespace-map OID=DIR", ld->f->path);
    int rc = canon_dir(dir, canon, err);
    if (rc)
        return pb_error_wrap(err, "the directory for %s", ld->f->path);
    if (!(ld->canon = strdup(canon)))
        return pb_fail(err, PB_ENOMEM, "out of memory checking %s", ld->f->path);
    if (!within(canon, target) && !within(target, canon))
        return 0;
    char remedy[64] = "";
    unsigned oid;
    if (rs_link_oid(ld->f->path, &oid))
        snprintf(remedy, sizeof(remedy), ": map it elsewhere with --tablespace-map %u=DIR", oid);
    return pb_fail(err, PB_EINVAL, "directory %s (for %s) %s the target directory %s%s", dir,
                   ld->f->path, within(canon, target) ? "is or lies inside" : "contains",
                   opts->target_dir, remedy);
}

/* No two links point at one directory or one inside the other's: each would prune
 * or overwrite the other's files. ld is sorted by canon, so a directory's
 * subdirectories follow it. */
static int check_distinct(link_dir *ld, size_t n, pb_error *err)
{
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(ld[i].canon);
        for (size_t j = i + 1; j < n && !strncmp(ld[j].canon, ld[i].canon, len); j++)
            if (within(ld[j].canon, ld[i].canon))
                return pb_fail(err, PB_EINVAL, "%s and %s would point at %s and %s, one "
                               "directory or one inside the other: give each tablespace "
                               "its own directory with --tablespace-map OID=DIR",
                               ld[i].f->path, ld[j].f->path, ld[i].canon, ld[j].canon);
    }
    return 0;
}

/* A non-empty directory is written into only by a delta restore, and only when it is
 * this target's own (the target's link already points there) or the user mapped it
 * explicitly to somewhere other than the source's location. On the source's host the
 * manifest's locations are the running source cluster's directories. */
static int check_occupied(const rs_opts *opts, const rs_target *t, const link_dir *ld,
                          pb_error *err)
{
    const mf_file *f = ld->f;
    const char *dir = mapped_dir(opts, f);
    const rs_tblspc_map *map = map_of(opts, f);
    char source[PATH_MAX];
    pb_error ignored = PB_ERROR_INIT;
    unsigned oid = 0;
    bool exists = false, tblspc = rs_link_oid(f->path, &oid);
    if (dir_is_empty(dir, &exists) || (opts->delta && own_link_points_at(t, f, ld->canon)))
        return 0;
    if (!opts->delta)
        return tblspc ? pb_fail(err, PB_EINVAL, "tablespace directory %s (for %s) is not "
                                "empty: it may belong to a running cluster; map it elsewhere "
                                "with --tablespace-map %u=DIR, or use --delta if it is this "
                                "target's own", dir, f->path, oid)
                      : pb_fail(err, PB_EINVAL, "directory %s (for the link %s) is not "
                                "empty; use --delta if it is this target's own", dir, f->path);
    bool at_source = canon_dir(f->link_target, source, &ignored) == 0 &&
                     strcmp(source, ld->canon) == 0;
    if (map && !at_source)
        return 0;
    if (!tblspc)
        return pb_fail(err, PB_EINVAL, "directory %s (for the link %s) is not empty and "
                       "%s/%s does not point at it: it may be the running source cluster's, "
                       "and a delta restore writes only into its own (nothing was changed)",
                       dir, f->path, opts->target_dir, f->path);
    return pb_fail(err, PB_EINVAL, "tablespace %u: directory %s%s is not empty and %s/%s "
                   "does not point at it: it may be the running source cluster's tablespace, "
                   "and a delta restore writes only into the target's own; restore the "
                   "tablespace elsewhere with --tablespace-map %u=DIR (nothing was changed)",
                   oid, dir, map ? " (mapped, but the source's own location)" : "",
                   opts->target_dir, f->path, oid);
}

static int cmp_canon(const void *a, const void *b)
{
    return strcmp(((const link_dir *)a)->canon, ((const link_dir *)b)->canon);
}

/* Before anything is written: every directory a link of the backup will point to
 * (docs/DESIGN.md rule 8: never write outside the target but into the target's own
 * tablespaces). */
static int check_tablespaces(const rs_opts *opts, const mf_manifest *m, pb_error *err)
{
    size_t n = 0, k = 0;
    for (size_t i = 0; i < mf_count(m); i++)
        n += mf_at(m, i)->kind == MF_LINK;
    if (n == 0)
        return 0;
    char target[PATH_MAX];
    link_dir *ld = calloc(n, sizeof(*ld));
    rs_target *t = NULL;
    pb_error ignored = PB_ERROR_INIT;
    int rc = ld ? canon_target(opts->target_dir, target, err)
                : pb_fail(err, PB_ENOMEM, "out of memory checking tablespaces");
    for (size_t i = 0; rc == 0 && i < mf_count(m); i++)
        if (mf_at(m, i)->kind == MF_LINK) {
            ld[k].f = mf_at(m, i);
            rc = check_link_dir(opts, target, &ld[k++], err);
        }
    if (rc == 0) {
        qsort(ld, n, sizeof(*ld), cmp_canon);
        rc = check_distinct(ld, n, err);
    }
    if (rc == 0 && opts->delta && rs_target_open(&t, opts->target_dir, true, &ignored))
        t = NULL; /* no target yet: it has no links of its own */
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = check_occupied(opts, t, &ld[i], err);
    for (size_t i = 0; ld && i < n; i++)
        free(ld[i].canon);
    free(ld);
    rs_target_free(t);
    return rc;
}

/* Directories (with their modes) and links, parents first (the manifest is sorted). */
static int lay_out(rs_target *t, const rs_opts *opts, const mf_manifest *m, pb_error *err)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < mf_count(m); i++) {
        const mf_file *f = mf_at(m, i);
        if (f->kind == MF_LINK) {
            rc = make_link(t, opts, f, err);
        } else if (f->kind == MF_DIR) {
            int fd = -1;
            rc = rs_target_dir(t, f->path, RS_DIR_CREATE | RS_DIR_REPLACE, &fd, err);
            if (rc == 0 && fchmod(fd, f->mode & 07777) != 0)
                rc = pb_fail_errno(err, PB_EIO, "cannot set the mode of %s/%s",
                                   opts->target_dir, f->path);
            if (fd >= 0)
                close(fd);
        }
    }
    return rc;
}

/* tablespace_map must name the directories the links really point to. */
static int write_tablespace_map(const rs_target *t, const rs_opts *opts, const mf_manifest *m,
                                pb_error *err)
{
    if (!opts->ntblspc || !mf_find(m, "tablespace_map"))
        return 0;
    int fd = openat(rs_target_fd(t), "tablespace_map",
                    O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    FILE *fp = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!fp) {
        if (fd >= 0)
            close(fd);
        return pb_fail_errno(err, PB_EIO, "cannot write %s/tablespace_map", opts->target_dir);
    }
    unsigned oid;
    for (size_t i = 0; i < mf_count(m); i++) {
        const mf_file *f = mf_at(m, i);
        if (f->kind == MF_LINK && rs_link_oid(f->path, &oid))
            fprintf(fp, "%u %s\n", oid, mapped_dir(opts, f));
    }
    bool ok = fflush(fp) == 0 && fsync(fileno(fp)) == 0;
    ok &= fclose(fp) == 0;
    return ok ? 0 : pb_fail_errno(err, PB_EIO, "cannot write %s/tablespace_map",
                                  opts->target_dir);
}

typedef struct prune_ctx {
    const rs_target *t;
    const mf_manifest *m;
    rs_stats *stats;
    pb_error *err;
} prune_ctx;

static int prune_dir(prune_ctx *pc, int dfd, const char *rel);

/* One entry of a directory being pruned: kept, descended into, or removed. */
static int prune_entry(prune_ctx *pc, int dfd, const char *name, const char *rel)
{
    char child[4096], shown[8192];
    snprintf(child, sizeof(child), "%s%s%s", rel, rel[0] ? "/" : "", name);
    snprintf(shown, sizeof(shown), "%s/%s", rs_target_path(pc->t), child);
    const mf_file *f = mf_find(pc->m, child);
    unsigned oid;
    if (!f && rs_link_oid(rel, &oid))
        return 0; /* a tablespace location is shared by each major version's PG_* dir */
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? 0 : pb_fail_errno(pc->err, PB_EIO, "cannot stat %s", shown);
    if (f && (f->kind == MF_REL || f->kind == MF_FILE) && S_ISREG(st.st_mode))
        return 0;
    bool dir = f && f->kind == MF_DIR && S_ISDIR(st.st_mode);
    bool link = f && f->kind == MF_LINK && S_ISLNK(st.st_mode); /* made by lay_out */
    if (!dir && !link) {
        pc->stats->files_removed++;
        return rs_remove_at(dfd, name, shown, pc->err);
    }
    int sub = -1;
    int rc = dir ? 0 : rs_target_dir(pc->t, child, 0, &sub, pc->err);
    if (dir && (sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
        rc = pb_fail_errno(pc->err, PB_EIO, "cannot open %s", shown);
    if (rc == 0)
        rc = prune_dir(pc, sub, child);
    if (sub >= 0)
        close(sub);
    return rc;
}

/* Delta restore: remove what the backup does not contain (depth first), never
 * following a link the restore did not make. */
static int prune_dir(prune_ctx *pc, int dfd, const char *rel)
{
    DIR *d = rs_dir_list(dfd);
    if (!d)
        return pb_fail_errno(pc->err, PB_EIO, "cannot list %s/%s", rs_target_path(pc->t), rel);
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            rc = prune_entry(pc, dfd, de->d_name, rel);
    closedir(d);
    return rc;
}

/* Create the target if needed, refuse a non-empty one without --delta or --force, and
 * empty it for --force (links inside are removed, not followed). */
static int prepare_target(const rs_opts *opts, rs_target **out, pb_error *err)
{
    bool exists = false;
    bool empty = dir_is_empty(opts->target_dir, &exists);
    int rc = exists ? 0 : pb_mkdir_p(opts->target_dir, 0700, err);
    if (rc == 0 && !empty && !opts->delta && !opts->force)
        rc = pb_fail(err, PB_EINVAL, "target directory %s is not empty: use --delta to "
                     "update it in place or --force to replace its contents",
                     opts->target_dir);
    if (rc == 0)
        rc = rs_target_open(out, opts->target_dir, true, err);
    if (rc || empty || opts->delta)
        return rc;
    DIR *d = rs_dir_list(rs_target_fd(*out));
    if (!d)
        return pb_fail_errno(err, PB_EIO, "cannot empty %s", opts->target_dir);
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        char shown[8192];
        snprintf(shown, sizeof(shown), "%s/%s", opts->target_dir, de->d_name);
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            rc = rs_remove_at(rs_target_fd(*out), de->d_name, shown, err);
    }
    closedir(d);
    return rc;
}

/* Every regular file, planned and rebuilt file by file from the chain's merged
 * manifest streams (plan_merge.c). */
static int rebuild_all(rs_ctx *ctx, const rs_outline *ol, unsigned jobs, pb_error *err)
{
    mf_merge *mg = NULL;
    int rc = rs_merge_open(ctx->repo, ctx->hdrs, ctx->nchain, &mg, err);
    if (rc == 0)
        rc = rs_rebuild_parallel(ctx, mg, &ol->totals, jobs, err);
    if (mg)
        ctx->stats->manifest_peak += mf_merge_peak(mg);
    mf_merge_close(mg);
    if (rc)
        return pb_error_wrap(err, "restoring backup %s", ctx->hdrs[ctx->nchain - 1].id);
    return 0;
}

/* After the files: prune (delta), tablespace_map, recovery settings, owner, and
 * everything on stable storage before success is reported. */
static int finish(rs_target *t, const rs_opts *opts, const rs_plan *p, const mf_manifest *m,
                  rs_stats *stats, pb_error *err)
{
    int rc = 0;
    if (opts->delta) {
        prune_ctx pc = {t, m, stats, err};
        rc = prune_dir(&pc, rs_target_fd(t), "");
    }
    if (rc == 0)
        rc = write_tablespace_map(t, opts, m, err);
    if (rc == 0)
        rc = rs_write_recovery(opts->target_dir, opts, &p->tv, rs_plan_header(p), &p->tl, err);
    if (rc == 0)
        rc = rs_target_fix_owner(t, err);
    if (rc == 0)
        rc = rs_sync_recovery(t, err);
    if (rc == 0)
        rc = rs_sync_dirs(t, m, err);
    return rc;
}

int rs_restore(repo *r, const rs_opts *opts, rs_stats *stats, pb_error *err)
{
    rs_plan *p = NULL;
    rs_ctx ctx;
    rs_target *t = NULL;
    rs_db_filter dbf = {0};
    rs_outline ol = {0};
    memset(&ctx, 0, sizeof(ctx));
    memset(stats, 0, sizeof(*stats));
    double t0 = pb_now();
    repo_requests q0, q1;
    repo_requests_get(r, &q0);
    /* --delta and --force too: a live server's files are never touched. */
    int rc = rs_check_not_running(opts->target_dir, err);
    /* What the state directory caches places xid and name targets: backup's checks. */
    if (rc == 0 && opts->state_dir)
        rc = pb_state_dir_ready(opts->state_dir, err);
    /* a delta restore prunes what the backup does not name: its outline keeps names */
    unsigned how = RS_OPEN_WAL | RS_OPEN_TABLESPACES | RS_OPEN_OUTLINE |
                   (opts->delta ? RS_OPEN_ENTRIES : 0);
    if (rc == 0)
        rc = rs_set_open(r, opts, how, "restoring", &p, &ol, err);
    if (!p)
        return rc;
    const mf_manifest *m = ol.m;
    if (rc == 0)
        rc = rs_db_filter_build(r, opts, p->id, &dbf, err);
    if (rc == 0)
        rc = check_tablespaces(opts, m, err);
    if (rc == 0)
        rc = prepare_target(opts, &t, err);
    if (rc == 0)
        rc = lay_out(t, opts, m, err);
    if (rc)
        goto out;
    rs_ctx_init(&ctx, r, p, stats);
    ctx.target_dir = opts->target_dir;
    ctx.target = t;
    ctx.delta = opts->delta;
    ctx.dbf = &dbf;
    ctx.progress = opts->progress;
    ctx.progress_ctx = opts->progress_ctx;
    ctx.max_memory = opts->max_memory;
    stats->manifest_peak = ol.peak;
    rc = rebuild_all(&ctx, &ol, opts->jobs, err);
    if (rc == 0)
        rc = finish(t, opts, p, m, stats, err);
    if (rc == 0) {
        snprintf(stats->id, sizeof(stats->id), "%s", p->id);
        stats->chain_length = p->nchain;
    }
out:
    stats->seconds = pb_now() - t0;
    repo_requests_get(r, &q1);
    stats->requests = repo_requests_since(&q1, &q0);
    rs_ctx_free_buffers(&ctx);
    rs_db_filter_free(&dbf);
    rs_target_free(t);
    rs_outline_free(&ol);
    rs_plan_free(p);
    return rc;
}
