/*
 * engine/backup/backup.c — one backup, start to commit. Order matters for safety:
 * pg_backup_start -> walk + scan (pg_control last) -> pg_backup_stop -> backup_label
 * -> packs committed -> WAL start..stop verified in the repository -> manifest
 * committed (the backup becomes visible) -> catalog head moved.
 *
 * The whole run holds the repository's writer lock (storage.h): no other backup, expire
 * or rebase runs meanwhile, whatever host or state directory it uses, so what this run
 * finds half-written under backup/ at its start is the debris of a writer that is gone.
 */
#include "engine/wal/wal.h"
#include "engine/backup/backup_internal.h"
#include "engine/backup/backup_file_internal.h"
#include "engine/backup/backup_identity_internal.h"
#include "engine/backup/backup_plan_internal.h"
#include "engine/backup/backup_records_internal.h"
#include "engine/backup/backup_skip_internal.h"
#include "engine/backup/backup_standby_internal.h"
#include "engine/backup/backup_throttle_internal.h"
#include "engine/backup/backup_wal_wait_internal.h"
#include "engine/chain/chain.h"
#include "engine/pg/pg.h"
#include "common/fault.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <unistd.h>

/* The bytes of e the walk saw (relations and plain files; 0 for the rest). */
static uint64_t walk_bytes(const walk_entry *e)
{
    return e->kind == WALK_REL || e->kind == WALK_FILE ? e->size : 0;
}

/* The progress total is planned from the walk alone (bk_planned_read): the parent's
 * records are streamed once, by the backup itself, and each file corrects the total (and
 * the skipped bytes) by what it really read. */
static void plan_progress(bk_ctx *ctx, const walk_list *list, uint64_t *plan)
{
    bk_progress *pg = &ctx->progress;
    for (size_t i = 0; plan && i < list->count; i++) {
        const walk_entry *e = &list->items[i];
        plan[i] = bk_planned_read(ctx, e);
        pg->bytes_total += plan[i];
        pg->bytes_skipped += walk_bytes(e) - plan[i];
    }
}

static void correct_progress(bk_ctx *ctx, const walk_entry *e, uint64_t planned, uint64_t read)
{
    bk_progress *pg = &ctx->progress;
    uint64_t size = walk_bytes(e);
    pg->bytes_total += read - planned;
    pg->bytes_skipped -= size - planned;
    pg->bytes_skipped += size > read ? size - read : 0;
}

/* A full backup reads every file whole, in walk order: the scanner may read the next one's
 * first request while this one's last is checked (scan_set_next). Empty files in between
 * (a data directory holds hundreds) are passed over: they have nothing to read, and the
 * scanner keeps the read ahead across them. An incremental reads few files, or parts of
 * them: nothing is read ahead. */
static int name_next(bk_ctx *ctx, const walk_list *list, size_t i, pb_error *err)
{
    size_t j = i + 1;
    while (j < list->count && list->items[j].size == 0 &&
           (list->items[j].kind == WALK_REL || list->items[j].kind == WALK_FILE))
        j++;
    const walk_entry *n = j < list->count ? &list->items[j] : NULL;
    if (ctx->cat || !n || (n->kind != WALK_REL && n->kind != WALK_FILE))
        return scan_set_next(ctx->scan, NULL, err);
    char path[4096];
    if (snprintf(path, sizeof(path), "%s/%s", ctx->pgdata, n->path) >= (int)sizeof(path))
        return scan_set_next(ctx->scan, NULL, err);
    return scan_set_next(ctx->scan, path, err);
}

static int scan_all(bk_ctx *ctx, pb_error *err)
{
    walk_list list = {0};
    double tw = pb_now();
    int rc = walk_pgdata_cluster(ctx->pgdata, ctx->tblspc_dir, &list, err);
    ctx->io.stages.walk_seconds = pb_now() - tw;
    bk_progress *pg = &ctx->progress;
    pg->files_total = list.count;
    uint64_t *plan = ctx->opts->progress && list.count ? calloc(list.count, sizeof(*plan)) : NULL;
    plan_progress(ctx, &list, plan);
    for (size_t i = 0; rc == 0 && i < list.count; i++) {
        uint64_t done0 = pg->bytes_done;
        rc = repo_lock_renew(ctx->lock, err);
        if (rc == 0)
            rc = name_next(ctx, &list, i, err);
        if (rc == 0)
            rc = bk_file(ctx, &list.items[i], err);
        /* Relation bytes were counted chunk by chunk; other files count whole. */
        pg->files_done = i + 1;
        if (ctx->opts->progress && list.items[i].kind == WALK_FILE)
            pg->bytes_done += list.items[i].size;
        if (plan)
            correct_progress(ctx, &list.items[i], plan[i], pg->bytes_done - done0);
        bk_progress_note(ctx, 0);
    }
    /* Every file's record waits for its frames, here once, not at each file's end. */
    if (rc == 0)
        rc = bk_records_settle(ctx, true, err);
    free(plan);
    mf_backup *h = mf_header(ctx->m);
    h->files = list.count;
    for (size_t i = 0; i < list.count; i++)
        h->db_bytes += walk_bytes(&list.items[i]);
    walk_list_free(&list);
    return rc;
}

/* A failed backup never committed its manifest, so it is invisible already; removing
 * its packs just gives the space back. Its id is unique, so these are only its own
 * objects; its writers removed their temp files and uploads when they were freed. No
 * cleanup under the lock here: a backup that failed because it lost the lock must not
 * touch what the new holder is writing. */
static void drop_partial(repo *r, const char *id)
{
    pb_error err = PB_ERROR_INIT;
    if (chain_drop(r, id, &err) != 0)
        pb_warn("could not remove every object of the failed backup %s: %s", id, err.msg);
}

/* Rule: a backup never commits on top of a parent that is gone (expire takes the same
 * lock, so it cannot have run; this is the last line all the same). */
static int check_parent(repo *r, const mf_backup *h, pb_error *err)
{
    if (!h->parent[0])
        return 0;
    char key[MF_ID_LEN + 32];
    chain_backup_dir(key, sizeof(key), h->parent);
    strcat(key, "/manifest");
    int rc = repo_stat(r, key, NULL, err);
    if (rc == PB_ENOENT)
        return pb_fail(err, PB_ESTATE, "backup %s cannot be committed: its parent %s is no "
                       "longer in repository %s", h->id, h->parent, repo_location(r));
    return rc;
}

static int stop_and_finish(bk_ctx *ctx, pgc *conn, pb_error *err)
{
    mf_backup *h = mf_header(ctx->m);
    char *label = NULL, *spcmap = NULL;
    pgc_control ctl;
    int rc = pgc_backup_stop(conn, &h->stop_lsn, &label, &spcmap, err);
    if (rc == 0)
        rc = bk_standby_after_stop(ctx, conn, label, err);
    /* The stop point the next incremental must follow before it trusts WAL. */
    if (rc == 0 && (rc = pgc_control_get(conn, &ctl, err)) == 0) {
        bk_record_stop_control(h, &ctl);
        h->ctl_history_known = bk_history_hash(ctx->pgdata, ctl.timeline, &h->ctl_history_hash);
    }
    if (rc == 0)
        rc = bk_memory_file(ctx, "backup_label", label, strlen(label), err);
    if (rc == 0 && spcmap && spcmap[0])
        rc = bk_memory_file(ctx, "tablespace_map", spcmap, strlen(spcmap), err);
    free(label);
    free(spcmap);
    for (unsigned i = 0; rc == 0 && i < ctx->nwriters; i++)
        rc = pack_writer_finish(ctx->writers[i], err);
    if (rc)
        return rc;
    arch_walfile_name(h->start_wal, h->timeline, h->start_lsn, h->wal_segment_size);
    arch_walfile_name(h->stop_wal, h->timeline, bk_last_needed_lsn(h, ctx->standby),
                      h->wal_segment_size);
    double tw = pb_now();
    rc = bk_wait_for_wal(ctx->repo, ctx->lock, h, ctx->opts->wal_timeout_secs, ctx->standby, err);
    ctx->io.stages.wal_wait_seconds = pb_now() - tw;
    h->bytes_stored = 0;
    for (unsigned i = 0; i < ctx->nwriters; i++)
        h->bytes_stored += pack_writer_stored_bytes(ctx->writers[i]);
    h->stop_time = (int64_t)time(NULL);
    return rc;
}

static int init_manifest(bk_ctx *ctx, const bk_plan *plan, const pgc_info *info, pb_error *err)
{
    mf_backup hdr;
    memset(&hdr, 0, sizeof(hdr));
    /* After every backup in the repository, full or not: an id is never reused. */
    chain_new_id(hdr.id, plan->type, plan->latest[0] ? plan->latest : NULL);
    if (plan->parent)
        snprintf(hdr.parent, sizeof(hdr.parent), "%s", mf_header_c(plan->parent)->id);
    hdr.type = plan->type;
    hdr.system_id = info->system_id;
    hdr.pg_version = (uint32_t)info->server_version;
    hdr.wal_segment_size = info->wal_segment_size;
    hdr.data_checksums = info->data_checksums;
    hdr.start_time = (int64_t)time(NULL);
    if (ctx->opts->annotations) /* checked by the option (tools/options_ops.c) */
        snprintf(hdr.annotations, sizeof(hdr.annotations), "%s", ctx->opts->annotations);
    return mf_new(&ctx->m, &hdr, err);
}

/* The file-skip rule's horizon (engine/backup/backup_skip.c), read once from the server's
 * clock: no wait for its next second (bk_mtime_horizon says why one second back is as safe). */
static int mark_horizon(bk_ctx *ctx, pgc *conn, pb_error *err)
{
    int64_t s = 0;
    int rc = pgc_server_time(conn, &s, err);
    if (rc)
        return rc;
    mf_header(ctx->m)->mtime_horizon = bk_mtime_horizon(s);
    ctx->server_start = s;
    ctx->local_start = pb_now();
    return 0;
}

/* The catalog reflects the parent (chain_sync_catalog made it so): the skip rule's
 * "the previous backup is the chain head" check, made on what diffing will use. */
static bool parent_is_head(bk_ctx *ctx)
{
    char head[MF_ID_LEN];
    pb_error err = PB_ERROR_INIT;
    return ctx->parent && ctx->cat && mf_catalog_head(ctx->cat, head, &err) == 0 &&
           strcmp(head, mf_header_c(ctx->parent)->id) == 0;
}

/* A spread checkpoint holds the backup at zero bytes for up to checkpoint_timeout x
 * checkpoint_completion_target (minutes by default): said before the wait, so a DBA
 * watching does not take it for a hang. The estimate is only a courtesy: a server that
 * will not tell goes unannounced. */
static void announce_checkpoint(bk_ctx *ctx, pgc *conn)
{
    char timeout[32], target[32];
    double secs = 0;
    pb_error err = PB_ERROR_INIT;
    if (ctx->opts->checkpoint_fast ||
        pgc_checkpoint_spread(conn, timeout, sizeof(timeout), target, sizeof(target), &secs,
                              &err) != 0 || secs < 1)
        return;
    pb_info("waiting for a spread checkpoint: up to about %.0f s (checkpoint_timeout %s x "
            "checkpoint_completion_target %s); --checkpoint fast does not wait", secs, timeout,
            target);
}

static int run_backup(bk_ctx *ctx, pgc *conn, bk_plan *plan, const pgc_info *info,
                      pb_error *err)
{
    mf_backup *h = mf_header(ctx->m);
    char dir[128], label[96];
    snprintf(label, sizeof(label), "pageback %s", h->id);
    announce_checkpoint(ctx, conn);
    double tc = pb_now();
    int rc = bk_standby_before_start(ctx, conn, err);
    if (rc == 0)
        rc = pgc_backup_start(conn, label, ctx->opts->checkpoint_fast, &h->start_lsn,
                              &h->timeline, err);
    /* pg_control once the backup's own checkpoint (a standby: restartpoint) is in it, so a
     * standby's lagging restartpoints do not look like an older directory. */
    if (rc == 0)
        rc = pgc_control_get(conn, &ctx->ctl_now, err);
    if (rc)
        return rc;
    ctx->io.checkpoint_fast = ctx->opts->checkpoint_fast;
    ctx->io.checkpoint_wait_seconds = ctx->io.stages.start_seconds = pb_now() - tc;
    double tp = pb_now();
    pb_detail("checkpoint (%s) took %.2f s", ctx->opts->checkpoint_fast ? "fast" : "spread",
            ctx->io.checkpoint_wait_seconds);
    PB_FAULT_POINT("backup.after-start");
    if (plan->parent && mf_header_c(plan->parent)->timeline != h->timeline) {
        /* A promotion happened since the chain's head: start a new chain. */
        pb_info("timeline changed from %u to %u since %s: taking a full backup instead",
                mf_header_c(plan->parent)->timeline, h->timeline, h->parent);
        h->type = 'F';
        h->id[15] = 'F';
        h->parent[0] = '\0';
        ctx->cat = NULL;
        ctx->prev_stop_lsn = 0;
        ctx->parent = NULL;
        ctx->parent_copy = NULL;
    }
    if ((rc = mark_horizon(ctx, conn, err)))
        return rc;
    if ((rc = bk_choose_read(ctx, plan->parent ? &plan->chain : NULL, parent_is_head(ctx),
                             err)))
        return rc;
    chain_backup_dir(dir, sizeof(dir), h->id);
    /* Compression is the CPU cost of a full backup: one worker per vCPU on small
     * hosts, half of them elsewhere (the database keeps the rest). Each worker has its
     * own pack writer, numbered apart: worker k writes packs k*100000+1, ... */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned n = cpus <= 2 ? (cpus < 1 ? 1u : (unsigned)cpus) : (unsigned)cpus / 2;
    if (n > BK_PIPE_MAX_WORKERS)
        n = BK_PIPE_MAX_WORKERS;
    for (ctx->nwriters = 0; rc == 0 && ctx->nwriters < n; ctx->nwriters++) {
        rc = pack_writer_open(&ctx->writers[ctx->nwriters], ctx->repo, dir,
                              ctx->opts->pack_size, ctx->opts->zstd_level, err);
        if (rc == 0)
            pack_writer_set_first(ctx->writers[ctx->nwriters], ctx->nwriters * 100000u + 1);
    }
    ctx->packs = ctx->writers[0];
    /* The queue keeps the workers busy and no more (bk_pipe_jobs_for); --max-memory may
     * have made it smaller still. */
    unsigned busy = bk_pipe_jobs_for(ctx->nwriters);
    if (ctx->io.pipe_jobs > busy) {
        ctx->io.buffer_bytes -= (uint64_t)(ctx->io.pipe_jobs - busy) * PACK_MAX_FRAME_RAW;
        ctx->io.pipe_jobs = busy;
    }
    if (rc == 0)
        rc = bk_pipe_start_jobs(&ctx->pipe, ctx->writers, ctx->nwriters,
                                (int)ctx->opts->cpu_priority, ctx->io.pipe_jobs, err);
    if (rc)
        return rc;
    bk_pipe_set_adapt(ctx->pipe, ctx->opts->compress_adapt, ctx->opts->zstd_level);
    snprintf(ctx->io.cpu_priority_applied, sizeof(ctx->io.cpu_priority_applied), "%s",
             bk_pipe_cpu_applied(ctx->pipe));
    pb_detail("CPU priority: %s", ctx->io.cpu_priority_applied);
    ctx->start_lsn = h->start_lsn;
    char lsn[32];
    pb_lsn_format(h->start_lsn, lsn);
    pb_info("backup %s started at LSN %s on timeline %u (%s)", h->id, lsn, h->timeline,
            scan_method(ctx->scan));
    double t0 = pb_now(), cpu0 = bk_thread_cpu();
    ctx->io.stages.prepare_seconds = t0 - tp;
    rc = scan_all(ctx, err);
    double t1 = pb_now();
    ctx->io.stages.scan_seconds = t1 - t0;
    ctx->io.stages.reader_cpu_seconds = bk_thread_cpu() - cpu0;
    ctx->io.stages.bytes_read = h->bytes_read;
    if (rc == 0)
        rc = stop_and_finish(ctx, conn, err);
    if (rc == 0)
        rc = bk_put_databases(ctx, conn, err);
    h->seconds = pb_now() - t0;
    ctx->io.stages.stop_seconds = pb_now() - t1 - ctx->io.stages.wal_wait_seconds;
    if (rc == 0)
        pb_detail("scanned %.1f MiB in %.2f s (%.0f MB/s); stop and WAL archiving took %.2f s",
                h->bytes_read / 1048576.0, t1 - t0, h->bytes_read / 1e6 / (t1 - t0 + 1e-9),
                pb_now() - t1);
    if (rc == 0)
        bk_report_read(ctx);
    (void)info;
    return rc;
}

/* The plan's history with the committed backup appended, moved into res (the newest:
 * it is on the cluster's timeline, after every state before it). */
static void keep_history(bk_plan *plan, const mf_backup *h, bk_result *res)
{
    chain_history *hist = &plan->history;
    mf_backup *items = plan->history_known
                           ? realloc(hist->items, (hist->count + 1) * sizeof(*items)) : NULL;
    if (!items)
        return; /* unknown, or no memory: the metrics read the repository */
    items[hist->count++] = *h;
    hist->items = items;
    res->history = *hist;
    res->history_known = true;
    memset(hist, 0, sizeof(*hist));
    plan->history_known = false;
}

/* One backup at a time per catalog: a second one would race for the chain head. */
static int lock_state(const char *state_dir, int *fd_out, pb_error *err)
{
    char path[4200];
    /* The catalog steers which pages an incremental skips: a directory that someone
     * else owns or may write into could feed it lies (or be swapped for a link). */
    int rc = pb_state_dir_ready(state_dir, err);
    if (rc)
        return rc;
    snprintf(path, sizeof(path), "%s/backup.lock", state_dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return pb_fail_errno(err, PB_EIO, "cannot open lock file %s", path);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        return pb_fail(err, PB_ESTATE, "another backup is running (lock %s is held)", path);
    }
    *fd_out = fd;
    return 0;
}

int bk_run(repo *r, const bk_opts *opts, bk_result *res, pb_error *err)
{
    memset(res, 0, sizeof(*res));
    repo_requests q0, q1;
    repo_requests_get(r, &q0);
    pgc *conn = NULL;
    pgc_info info;
    bk_plan plan = {0};
    chain_ids listed = {0};
    bool have_list = false;
    int lock_fd = -1;
    bk_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    ctx.opts = opts;
    ctx.repo = r;
    ctx.report = &res->io;
    double t_begin = pb_now(), t_mark = t_begin; /* the steps' times (bk_stages) */
    /* Rule of politeness: a backup yields the CPU to the database it protects. */
    if (opts->nice && setpriority(PRIO_PROCESS, 0, opts->nice) != 0)
        pb_debug("could not lower the scheduling priority");
    bk_apply_cpu_weight(opts, &ctx.io);
    int rc = repo_lock_acquire(r, "backup", &ctx.lock, err);
    if (rc == 0)
        rc = pgc_connect(&conn, opts->conninfo, err);
    if (rc == 0)
        rc = pgc_info_get(conn, &info, err);
    bk_stage_mark(&t_mark, &ctx.io.stages.connect_seconds);
    if (rc)
        goto out;
    ctx.standby = info.in_recovery; /* a hot standby: engine/backup/backup_standby.c */
    ctx.conn = conn;
    ctx.facts = info.facts;
    if (ctx.standby)
        pb_info("the server is a standby: its WAL comes from the archive its primary feeds");
    ctx.pgdata = opts->pgdata ? opts->pgdata : info.data_directory;
    /* Before anything is read: the directory is the connected server's. */
    if ((rc = bk_check_pgdata(ctx.pgdata, &info, err)))
        goto out;
    ctx.tblspc_dir = info.tblspc_dir;
    ctx.checksums = info.data_checksums;
    ctx.wal_log_hints = info.wal_log_hints;
    ctx.wal_minimal = strcmp(info.wal_level, "minimal") == 0;
    /* Leftovers of interrupted earlier runs (temp files, unfinished multipart uploads,
     * backups without a manifest) go first; failing to remove them does not block a
     * backup. */
    pb_error clean_err = PB_ERROR_INIT;
    /* The cleanup's listing of backup/ is the plan's and the record's too: the lock keeps
     * every other writer out until this one commits. */
    have_list = chain_cleanup_listed(r, ctx.lock, &listed, &clean_err) == 0;
    if (!have_list)
        pb_warn("could not clean up after earlier interrupted runs: %s", clean_err.msg);
    rc = chain_check_identity(r, info.system_id, true, err);
    uint64_t now_lsn = 0; /* the cluster's timeline picks the parent's branch */
    uint32_t now_tli = 0;
    pb_error terr = PB_ERROR_INIT;
    if (rc == 0 && pgc_current_wal(conn, &now_lsn, &now_tli, &terr) != 0)
        now_tli = 0; /* unknown: the newest timeline in the archive decides */
    /* The state directory is checked, and the catalog open, before the plan copies the
     * parent's manifest into one and rebuilds the other when it is behind. */
    if (rc == 0)
        rc = lock_state(opts->state_dir, &lock_fd, err);
    if (rc == 0)
        rc = mf_catalog_open(&ctx.cat, opts->state_dir, err);
    if (rc == 0)
        rc = bk_plan_type(r, have_list ? &listed : NULL, ctx.cat, opts, info.system_id,
                          now_tli, &plan, err);
    if (rc)
        goto out;
    if (plan.type == 'I') {
        bool rebuilt = false; /* the plan rebuilt it already: this only confirms */
        rc = chain_sync_catalog(ctx.cat, r, &plan.chain, &rebuilt, err);
        if (rc)
            goto out;
        ctx.prev_stop_lsn = mf_header_c(plan.parent)->stop_lsn;
        ctx.parent = plan.parent;
        ctx.parent_copy = plan.parent_copy;
    }
    pb_info("taking %s backup: %s", plan.type == 'F' ? "a full" : "an incremental", plan.reason);
    mf_catalog *cat = ctx.cat;
    if (plan.type == 'F')
        ctx.cat = NULL; /* no diffing: every page is shipped */
    rc = bk_open_scanner(&ctx, opts, err);
    if (rc == 0)
        rc = init_manifest(&ctx, &plan, &info, err);
    if (rc == 0)
        rc = bk_records_open(&ctx, err);
    /* The packs' and the database list's names are made durable once, all together,
     * before the manifest commits (repo_defer_syncs, storage.h). */
    repo_defer_syncs(r);
    bk_stage_mark(&t_mark, &ctx.io.stages.plan_seconds);
    if (rc == 0)
        rc = run_backup(&ctx, conn, &plan, &info, err);
    t_mark = pb_now();
    if (rc == 0)
        rc = check_parent(r, mf_header(ctx.m), err);
    if (rc == 0)
        rc = repo_sync_deferred(r, err);
    if (rc == 0)
        rc = bk_records_commit(&ctx, err); /* fault point backup.before-manifest-commit */
    bk_stage_mark(&t_mark, &ctx.io.stages.commit_seconds);
    ctx.cat = cat;
    if (rc == 0) {
        PB_FAULT_POINT("backup.after-manifest-commit");
        pb_error cerr = PB_ERROR_INIT;
        /* committed already: a record not updated lists it at its next write */
        if (chain_record_update_listed(r, have_list ? &listed : NULL, mf_header(ctx.m)->id,
                                       NULL, 0, &cerr) != 0)
            pb_warn("%s", cerr.msg);
        if (bk_records_apply(&ctx, ctx.cat, &cerr) != 0)
            pb_warn("backup %s is committed but the local catalog was not updated (%s); "
                    "the next backup rebuilds it", mf_header(ctx.m)->id, cerr.msg);
        PB_FAULT_POINT("backup.after-catalog-update");
        keep_history(&plan, mf_header_c(ctx.m), res);
        res->manifest = ctx.m; /* the committed header and counters: the caller's now */
        ctx.m = NULL;
    }
out:
    bk_finish_report(&ctx);
    bk_pipe_free(ctx.pipe);
    for (unsigned i = 0; i < ctx.nwriters; i++)
        pack_writer_free(ctx.writers[i]);
    /* A failed backup ends the deferral too: what goes through r later is durable at
     * once again (this backup's own objects are dropped next). */
    pb_error derr = PB_ERROR_INIT;
    if (rc)
        (void)repo_sync_deferred(r, &derr);
    /* After the writers are gone (their unfinished uploads aborted), so nothing of this
     * backup is still being written while it is removed. */
    if (rc && ctx.m)
        drop_partial(r, mf_header(ctx.m)->id);
    bk_records_free(ctx.rec);
    scan_free(ctx.scan);
    wg_set_free(ctx.wal);
    mf_free(ctx.m);
    bk_plan_free(&plan);
    chain_ids_free(&listed);
    mf_catalog_close(ctx.cat);
    pgc_free(conn);
    if (lock_fd >= 0)
        close(lock_fd);
    repo_lock_release(ctx.lock);
    bk_release_cpu_weight(&ctx.io);
    /* After the report was taken (bk_finish_report): the steps' last two go in apart. */
    bk_stage_mark(&t_mark, &ctx.io.stages.exit_seconds);
    ctx.io.stages.total_seconds = t_mark - t_begin;
    res->io.stages.exit_seconds = ctx.io.stages.exit_seconds;
    res->io.stages.total_seconds = ctx.io.stages.total_seconds;
    bk_log_fixed_costs(&ctx.io.stages);
    repo_requests_get(r, &q1);
    res->requests = repo_requests_since(&q1, &q0);
    return rc;
}
