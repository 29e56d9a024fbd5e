/*
 * restore/restore.c — restore a backup set into a directory: choose the set, check
 * the WAL it needs before writing anything, lay out directories and tablespace
 * links, rebuild every file from the chain, remove what should not exist (delta),
 * write recovery settings.
 */
#include "restore/restore_internal.h"

#include "engine/archive.h"
#include "engine/pgconn.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fts.h>
#include <ftw.h>
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

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    if (ftw->level == 0)
        return 0;
    return remove(path) == 0 ? 0 : -1;
}

static const char *mapped_dir(const rs_opts *opts, const mf_file *f)
{
    unsigned oid = (unsigned)strtoul(f->path + strlen("pg_tblspc/"), NULL, 10);
    for (size_t i = 0; i < opts->ntblspc; i++)
        if (opts->tblspc[i].oid == oid)
            return opts->tblspc[i].dir;
    return f->link_target;
}

static int make_link(const rs_opts *opts, const mf_file *f, const char *path, pb_error *err)
{
    const char *dir = mapped_dir(opts, f);
    if (!dir || dir[0] != '/')
        return pb_fail(err, PB_EINVAL, "tablespace %s has no absolute target directory; use "
                       "--tablespace-map OID=DIR", f->path);
    int rc = pb_mkdir_p(dir, 0700, err);
    if (rc)
        return rc;
    char cur[4096];
    ssize_t n = readlink(path, cur, sizeof(cur) - 1);
    if (n >= 0) {
        cur[n] = '\0';
        if (strcmp(cur, dir) == 0)
            return 0;
        unlink(path);
    }
    if (symlink(dir, path) != 0)
        return pb_fail_errno(err, PB_EIO, "cannot link %s to tablespace directory %s", path, dir);
    return 0;
}

/* Before anything is written: a tablespace directory in use (perhaps by the running
 * source cluster on this host) is never restored into. */
static int check_tablespaces(const rs_opts *opts, const mf_manifest *m, pb_error *err)
{
    for (size_t i = 0; i < mf_count(m) && !opts->delta; i++) {
        const mf_file *f = mf_at(m, i);
        const char *dir = f->kind == MF_LINK ? mapped_dir(opts, f) : NULL;
        bool exists = false;
        if (dir && !dir_is_empty(dir, &exists))
            return pb_fail(err, PB_EINVAL, "tablespace directory %s (for %s) is not empty: it "
                           "may belong to a running cluster; map it elsewhere with "
                           "--tablespace-map %s=DIR or use --delta", dir, f->path,
                           f->path + strlen("pg_tblspc/"));
    }
    return 0;
}

static int lay_out(const rs_opts *opts, const mf_manifest *m, pb_error *err)
{
    for (size_t i = 0; i < mf_count(m); i++) {
        const mf_file *f = mf_at(m, i);
        char path[8192];
        snprintf(path, sizeof(path), "%s/%s", opts->target_dir, f->path);
        int rc = 0;
        if (f->kind == MF_DIR) {
            rc = pb_mkdir_p(path, f->mode & 07777, err);
            if (rc == 0)
                chmod(path, f->mode & 07777);
        } else if (f->kind == MF_LINK) {
            rc = make_link(opts, f, path, err);
        }
        if (rc)
            return rc;
    }
    return 0;
}

/* tablespace_map must name the directories the links really point to. */
static int write_tablespace_map(const rs_opts *opts, const mf_manifest *m, pb_error *err)
{
    if (!opts->ntblspc || !mf_find(m, "tablespace_map"))
        return 0;
    char path[4096];
    snprintf(path, sizeof(path), "%s/tablespace_map", opts->target_dir);
    FILE *fp = fopen(path, "w");
    if (!fp)
        return pb_fail_errno(err, PB_EIO, "cannot write %s", path);
    for (size_t i = 0; i < mf_count(m); i++) {
        const mf_file *f = mf_at(m, i);
        if (f->kind == MF_LINK)
            fprintf(fp, "%s %s\n", f->path + strlen("pg_tblspc/"), mapped_dir(opts, f));
    }
    return fclose(fp) == 0 ? 0 : pb_fail_errno(err, PB_EIO, "cannot write %s", path);
}

typedef struct prune_ctx {
    const char *root;
    const mf_manifest *m;
    rs_stats *stats;
    pb_error *err;
    int rc;
} prune_ctx;

/* Delta restore: remove what the backup does not contain (depth first). */
static void prune_dir(prune_ctx *pc, const char *rel)
{
    char path[8192];
    snprintf(path, sizeof(path), "%s%s%s", pc->root, rel[0] ? "/" : "", rel);
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *de;
    while (pc->rc == 0 && (de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char child[4096], abs[8192];
        snprintf(child, sizeof(child), "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
        snprintf(abs, sizeof(abs), "%s/%s", pc->root, child);
        const mf_file *f = mf_find(pc->m, child);
        struct stat st;
        if (lstat(abs, &st) != 0)
            continue;
        if (f && f->kind == MF_DIR && S_ISDIR(st.st_mode)) {
            prune_dir(pc, child);
        } else if (f && f->kind == MF_LINK && S_ISLNK(st.st_mode)) {
            prune_dir(pc, child);
        } else if (f && (f->kind == MF_REL || f->kind == MF_FILE) && S_ISREG(st.st_mode)) {
            continue;
        } else {
            int rc = S_ISDIR(st.st_mode) ? nftw(abs, remove_entry, 16, FTW_DEPTH | FTW_PHYS)
                                          : 0;
            if (rc == 0)
                rc = remove(abs);
            if (rc != 0)
                pc->rc = pb_fail_errno(pc->err, PB_EIO, "cannot remove %s", abs);
            pc->stats->files_removed++;
        }
    }
    closedir(d);
}

static int prepare_target(const rs_opts *opts, pb_error *err)
{
    bool exists = false;
    if (dir_is_empty(opts->target_dir, &exists))
        return exists ? 0 : pb_mkdir_p(opts->target_dir, 0700, err);
    if (opts->delta)
        return 0;
    if (!opts->force)
        return pb_fail(err, PB_EINVAL, "target directory %s is not empty: use --delta to "
                       "update it in place or --force to replace its contents",
                       opts->target_dir);
    if (nftw(opts->target_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return pb_fail_errno(err, PB_EIO, "cannot empty %s", opts->target_dir);
    return 0;
}

/* Run as root, give the files to whoever owns the target directory (the DBA creates it
 * for the postgres user), so the restored cluster can start. The walk follows the
 * pg_tblspc links (the only links a restore creates) so tablespaces are included. */
static void fix_owner(const char *dir)
{
    struct stat st;
    if (geteuid() != 0 || stat(dir, &st) != 0 || st.st_uid == 0)
        return;
    char *const roots[] = {(char *)dir, NULL};
    FTS *fts = fts_open(roots, FTS_LOGICAL | FTS_NOCHDIR, NULL);
    FTSENT *e;
    bool failed = fts == NULL;
    while (fts && (e = fts_read(fts)) != NULL) {
        if (e->fts_info == FTS_DP)
            continue;
        if (lchown(e->fts_path, st.st_uid, st.st_gid) != 0 ||
            chown(e->fts_path, st.st_uid, st.st_gid) != 0)
            failed = true;
    }
    if (fts)
        fts_close(fts);
    if (failed)
        pb_warn("could not give everything under %s to uid %u", dir, (unsigned)st.st_uid);
}

static int rebuild_all(rs_ctx *ctx, const mf_manifest *m, unsigned jobs, pb_error *err)
{
    int rc = rs_rebuild_parallel(ctx, m, jobs, err);
    if (rc)
        return pb_error_wrap(err, "restoring backup %s", mf_header_c(m)->id);
    return 0;
}

int rs_restore(repo *r, const rs_opts *opts, rs_stats *stats, pb_error *err)
{
    char id[MF_ID_LEN], why[512];
    chain c = {0};
    rs_timeline tl;
    rs_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    memset(stats, 0, sizeof(*stats));
    double t0 = pb_now();
    int rc = rs_choose_set(r, opts, id, why, sizeof(why), err);
    if (rc)
        return rc;
    pb_info("restoring backup %s: %s", id, why);
    rc = chain_resolve(r, id, &c, err);
    if (rc)
        return rc;
    const mf_manifest *m = c.items[c.count - 1];
    rc = rs_check_wal(r, opts, mf_header_c(m), &tl, err);
    if (rc == 0)
        rc = check_tablespaces(opts, m, err);
    if (rc == 0)
        rc = prepare_target(opts, err);
    if (rc == 0)
        rc = lay_out(opts, m, err);
    if (rc)
        goto out;
    ctx.repo = r;
    ctx.chain = &c;
    ctx.target_dir = opts->target_dir;
    ctx.delta = opts->delta;
    ctx.stats = stats;
    rc = rebuild_all(&ctx, m, opts->jobs, err);
    if (rc == 0 && opts->delta) {
        prune_ctx pc = {opts->target_dir, m, stats, err, 0};
        prune_dir(&pc, "");
        rc = pc.rc;
    }
    if (rc == 0)
        rc = write_tablespace_map(opts, m, err);
    if (rc == 0)
        rc = rs_write_recovery(opts->target_dir, opts, mf_header_c(m), &tl, err);
    if (rc == 0) {
        fix_owner(opts->target_dir);
        snprintf(stats->id, sizeof(stats->id), "%s", id);
        stats->chain_length = c.count;
        int dfd = open(opts->target_dir, O_RDONLY | O_DIRECTORY);
        if (dfd >= 0) {
            syncfs(dfd); /* durability of the restore as a whole, once */
            close(dfd);
        }
    }
out:
    stats->seconds = pb_now() - t0;
    rs_ctx_free_buffers(&ctx);
    chain_free(&c);
    return rc;
}
