/*
 * restore/restore.c — restore a backup set into a directory: choose the set, check
 * the WAL it needs and the target before writing anything, lay out directories and
 * tablespace links, rebuild every file from the chain, remove what should not exist
 * (delta), write recovery settings, and bring it all to stable storage. Every path
 * beneath the target is resolved without following links (restore/target.c), as
 * docs/DESIGN.md rule 8 asks.
 */
#include "restore/restore_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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

/* The directory a link entry (checked by rs_check_entry) is to point to. */
static const char *mapped_dir(const rs_opts *opts, const mf_file *f)
{
    unsigned oid;
    if (!rs_link_oid(f->path, &oid))
        return f->link_target; /* pg_wal */
    for (size_t i = 0; i < opts->ntblspc; i++)
        if (opts->tblspc[i].oid == oid)
            return opts->tblspc[i].dir;
    return f->link_target;
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

/* Before anything is written: a tablespace directory in use (perhaps by the running
 * source cluster on this host) is never restored into. */
static int check_tablespaces(const rs_opts *opts, const mf_manifest *m, pb_error *err)
{
    unsigned oid;
    for (size_t i = 0; i < mf_count(m) && !opts->delta; i++) {
        const mf_file *f = mf_at(m, i);
        const char *dir = f->kind == MF_LINK ? mapped_dir(opts, f) : NULL;
        bool exists = false;
        if (dir && !dir_is_empty(dir, &exists))
            return rs_link_oid(f->path, &oid)
                       ? pb_fail(err, PB_EINVAL, "tablespace directory %s (for %s) is not "
                                 "empty: it may belong to a running cluster; map it elsewhere "
                                 "with --tablespace-map %u=DIR or use --delta", dir, f->path,
                                 oid)
                       : pb_fail(err, PB_EINVAL, "directory %s (for the link %s) is not "
                                 "empty; use --delta", dir, f->path);
    }
    return 0;
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
    int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 0);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return pb_fail_errno(pc->err, PB_EIO, "cannot list %s/%s", rs_target_path(pc->t), rel);
    }
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
    int fd = fcntl(rs_target_fd(*out), F_DUPFD_CLOEXEC, 0);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return pb_fail_errno(err, PB_EIO, "cannot empty %s", opts->target_dir);
    }
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

static int rebuild_all(rs_ctx *ctx, const mf_manifest *m, unsigned jobs, pb_error *err)
{
    int rc = rs_rebuild_parallel(ctx, m, jobs, err);
    if (rc)
        return pb_error_wrap(err, "restoring backup %s", mf_header_c(m)->id);
    return 0;
}

/* After the files: prune (delta), tablespace_map, recovery settings, owner, and
 * everything on stable storage before success is reported. */
static int finish(rs_target *t, const rs_opts *opts, const mf_manifest *m, rs_stats *stats,
                  pb_error *err)
{
    int rc = 0;
    if (opts->delta) {
        prune_ctx pc = {t, m, stats, err};
        rc = prune_dir(&pc, rs_target_fd(t), "");
    }
    if (rc == 0)
        rc = write_tablespace_map(t, opts, m, err);
    if (rc == 0)
        rc = rs_write_recovery(opts->target_dir, opts, mf_header_c(m), err);
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
    char id[MF_ID_LEN], why[512];
    chain c = {0};
    rs_ctx ctx;
    rs_target *t = NULL;
    memset(&ctx, 0, sizeof(ctx));
    memset(stats, 0, sizeof(*stats));
    double t0 = pb_now();
    /* --delta and --force too: a live server's files are never touched. */
    int rc = rs_check_not_running(opts->target_dir, err);
    if (rc == 0)
        rc = rs_choose_set(r, opts, id, why, sizeof(why), err);
    if (rc)
        return rc;
    pb_info("restoring backup %s: %s", id, why);
    rc = chain_resolve(r, id, &c, err);
    if (rc)
        return rc;
    const mf_manifest *m = c.items[c.count - 1];
    rc = rs_check_manifest(m, err);
    if (rc == 0)
        rc = rs_check_wal(r, opts, mf_header_c(m), err);
    if (rc == 0)
        rc = check_tablespaces(opts, m, err);
    if (rc == 0)
        rc = prepare_target(opts, &t, err);
    if (rc == 0)
        rc = lay_out(t, opts, m, err);
    if (rc)
        goto out;
    ctx.repo = r;
    ctx.chain = &c;
    ctx.target_dir = opts->target_dir;
    ctx.target = t;
    ctx.delta = opts->delta;
    ctx.stats = stats;
    rc = rebuild_all(&ctx, m, opts->jobs, err);
    if (rc == 0)
        rc = finish(t, opts, m, stats, err);
    if (rc == 0) {
        snprintf(stats->id, sizeof(stats->id), "%s", id);
        stats->chain_length = c.count;
    }
out:
    stats->seconds = pb_now() - t0;
    rs_ctx_free_buffers(&ctx);
    rs_target_free(t);
    chain_free(&c);
    return rc;
}

int rs_verify(repo *r, const char *set, unsigned jobs, rs_stats *stats, pb_error *err)
{
    chain c = {0};
    rs_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    memset(stats, 0, sizeof(*stats));
    rs_opts o = RS_OPTS_INIT;
    o.set = set;
    char id[MF_ID_LEN], why[512];
    double t0 = pb_now();
    int rc = rs_choose_set(r, &o, id, why, sizeof(why), err);
    if (rc == 0)
        rc = chain_resolve(r, id, &c, err);
    if (rc)
        return rc;
    const mf_manifest *m = c.items[c.count - 1];
    ctx.repo = r;
    ctx.chain = &c;
    ctx.stats = stats;
    rc = rs_check_wal(r, &o, mf_header_c(m), err); /* start..stop, one listing */
    if (rc == 0)
        rc = rebuild_all(&ctx, m, jobs, err);
    snprintf(stats->id, sizeof(stats->id), "%s", id);
    stats->chain_length = c.count;
    stats->seconds = pb_now() - t0;
    rs_ctx_free_buffers(&ctx);
    chain_free(&c);
    return rc;
}
