/* tools/repo_commands.c — info and expire: commands that read the repository as a whole. */
#include "tools/commands.h"

#include "engine/wal/wal.h"
#include "engine/chain.h"
#include "common/fault.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct wal_range {
    char first[25], last[25];
    uint32_t timeline;
    uint64_t count, gaps;
    uint64_t prev; /* last segment number seen */
    struct wal_range *next;
} wal_range;

typedef struct wal_ctx {
    wal_range *head;
    uint32_t seg_size;
} wal_ctx;

static int collect_wal(void *vctx, const char *key, uint64_t size)
{
    wal_ctx *ctx = vctx;
    const char *base = strrchr(key, '/');
    base = base ? base + 1 : key;
    if (strlen(base) != 28 || strcmp(base + 24, ".zst") != 0)
        return 0; /* history, .partial and .backup files are not segments */
    char name[25];
    uint32_t tli;
    uint64_t n;
    snprintf(name, sizeof(name), "%.24s", base);
    if (!arch_parse_segment(name, ctx->seg_size, &tli, &n))
        return 0;
    wal_range *w = ctx->head;
    while (w && w->timeline != tli)
        w = w->next;
    if (!w) {
        w = calloc(1, sizeof(*w));
        if (!w)
            return PB_ENOMEM;
        w->timeline = tli;
        memcpy(w->first, name, 24);
        w->next = ctx->head;
        ctx->head = w;
    } else if (n != w->prev + 1) {
        w->gaps++;
    }
    memcpy(w->last, name, 24);
    w->prev = n;
    w->count++;
    return 0;
}

/* What a restore of h needs, full first: its ancestors, from the loaded headers. */
static void print_needs(const chain_history *hist, const mf_backup *h, bool json)
{
    const mf_backup *path[64];
    size_t n = 0;
    for (const mf_backup *b = h; b && n < 64;) {
        path[n++] = b;
        b = b->parent[0] ? chain_history_find(hist, b->parent) : NULL;
    }
    for (size_t i = n; i-- > 0;)
        printf(json ? "%s\"%s\"" : "%s%s", json ? (i + 1 < n ? ", " : "") : " ", path[i]->id);
    if (n && path[n - 1]->parent[0])
        printf(json ? ", \"(missing %s)\"" : " (missing parent %s)", path[n - 1]->parent);
}

static const char *read_mode_name(char mode)
{
    return mode == MF_READ_FILE ? "file" : mode == MF_READ_WAL ? "wal"
         : mode == MF_READ_SCAN ? "scan" : "unknown";
}

static void print_backup_text(const mf_backup *h, const chain_history *hist)
{
    char a[32], b[32];
    pb_lsn_format(h->start_lsn, a);
    pb_lsn_format(h->stop_lsn, b);
    const char *type = h->type == 'F' ? "full" : h->type == 'S' ? "synthetic full" : "incr";
    printf("%s  %-14s  timeline %u  LSN %s..%s  WAL %s..%s\n", h->id, type, h->timeline, a, b,
           h->start_wal, h->stop_wal);
    double ratio = h->bytes_stored ? (double)h->pages_changed * 8192.0 / h->bytes_stored : 0;
    printf("    pages scanned %" PRIu64 ", changed %" PRIu64 ", in backup window %" PRIu64
           "; read %" PRIu64 " B, stored %" PRIu64 " B (%.1fx); %.1f s; WAL in window %" PRIu64
           " B; checksum errors %" PRIu64 "\n",
           h->pages_scanned, h->pages_changed, h->pages_in_window, h->bytes_read,
           h->bytes_stored, ratio, h->seconds, h->stop_lsn - h->start_lsn, h->checksum_errors);
    if (h->type == 'I' && h->read_mode)
        printf("    read mode %s%s; files skipped %" PRIu64 " (%" PRIu64 " B); missed pages %"
               PRIu64 "%s\n", read_mode_name(h->read_mode), h->verify_scan ? " + verify scan" : "",
               h->files_skipped, h->bytes_skipped, h->pages_missed,
               h->pages_missed ? " (BUG: the cheaper read method missed changed pages)" : "");
    printf("    restore needs:");
    print_needs(hist, h, false);
    printf("\n");
    if ((size_t)(h - hist->items) < hist->off_path)
        printf("    on a branch that timeline %u (the newest) left: not a candidate for "
               "\"latest\"\n", hist->timeline);
}

static void print_backup_json(const mf_backup *h, const chain_history *hist, bool first)
{
    char a[32], b[32];
    pb_lsn_format(h->start_lsn, a);
    pb_lsn_format(h->stop_lsn, b);
    printf("%s\n    {\"id\": \"%s\", \"type\": \"%s\", \"parent\": \"%s\", \"timeline\": %u, "
           "\"start_lsn\": \"%s\", \"stop_lsn\": \"%s\", \"start_wal\": \"%s\", "
           "\"stop_wal\": \"%s\", \"start_time\": %" PRId64 ", \"stop_time\": %" PRId64 ", "
           "\"system_id\": \"%" PRIu64 "\", \"pg_version\": %u, \"data_checksums\": %s, "
           "\"files\": %" PRIu64 ", \"pages_scanned\": %" PRIu64 ", \"pages_changed\": %" PRIu64
           ", \"pages_in_window\": %" PRIu64 ", \"wal_bytes_in_window\": %" PRIu64
           ", \"bytes_read\": %" PRIu64 ", \"bytes_stored\": %" PRIu64
           ", \"compression_ratio\": %.2f, \"checksum_errors\": %"
           PRIu64 ", \"collisions\": %" PRIu64 ", \"seconds\": %.3f",
           first ? "" : ",", h->id,
           h->type == 'F' ? "full" : h->type == 'S' ? "synthetic-full" : "incr", h->parent,
           h->timeline, a, b, h->start_wal, h->stop_wal, h->start_time, h->stop_time,
           h->system_id, h->pg_version, h->data_checksums ? "true" : "false", h->files,
           h->pages_scanned, h->pages_changed, h->pages_in_window, h->stop_lsn - h->start_lsn,
           h->bytes_read, h->bytes_stored,
           h->bytes_stored ? (double)h->pages_changed * 8192.0 / (double)h->bytes_stored : 0.0,
           h->checksum_errors, h->collisions, h->seconds);
    printf(", \"read_mode\": \"%s\", \"verify_scan\": %s, \"files_skipped\": %" PRIu64
           ", \"bytes_skipped\": %" PRIu64 ", \"pages_missed\": %" PRIu64 ", \"restore_needs\": [",
           read_mode_name(h->read_mode), h->verify_scan ? "true" : "false", h->files_skipped,
           h->bytes_skipped, h->pages_missed);
    print_needs(hist, h, true);
    printf("]}");
}

static void print_wal(const wal_ctx *w, bool json)
{
    if (json)
        printf("\n  ],\n  \"wal\": [");
    bool first = true;
    for (const wal_range *r = w->head; r; r = r->next) {
        if (json)
            printf("%s\n    {\"timeline\": %u, \"first\": \"%s\", \"last\": \"%s\", "
                   "\"segments\": %" PRIu64 ", \"gaps\": %" PRIu64 "}",
                   first ? "" : ",", r->timeline, r->first, r->last, r->count, r->gaps);
        else
            printf("WAL timeline %u: %s .. %s, %" PRIu64 " %s, %" PRIu64 " %s\n",
                   r->timeline, r->first, r->last, r->count,
                   pb_plural(r->count, "segment", "segments"), r->gaps,
                   pb_plural(r->gaps, "gap", "gaps"));
        first = false;
    }
    if (json)
        printf("\n  ]\n}\n");
}

/* A string as JSON: a repository path may hold quotes, backslashes or controls. */
static void print_json_string(const char *v)
{
    putchar('"');
    for (; *v; v++) {
        unsigned char c = (unsigned char)*v;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void print_restore_point(void *ctx, const rs_restore_point *p)
{
    (void)ctx;
    char lsn[32], when[40];
    pb_lsn_format(p->lsn, lsn);
    time_t t = (time_t)p->time;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S+00", &tm);
    printf("%s %s %u %s\n", p->name, lsn, p->tli, when);
}

/* info --restore-points: the restore points of the archived WAL, decoded once and then
 * answered from the state directory's cache. */
static int print_restore_points(repo *r, pb_options *o, uint32_t seg_size, pb_error *err)
{
    char sd[4096];
    uint32_t tli = 0;
    printf("restore points in the archived WAL (name, LSN, timeline, time):\n");
    int rc = rs_list_restore_points(r, seg_size, cmd_state_dir(o, sd, sizeof(sd)),
                                    print_restore_point, NULL, &tli, err);
    if (rc == 0)
        printf("(along the timeline path of timeline %u)\n", tli);
    return rc;
}

/* Backups are listed in history order (the state each holds), not id order. */
int cmd_info(pb_options *o, cmd_outcome *res)
{
    pb_error err = PB_ERROR_INIT;
    repo *r = NULL;
    chain_history hist = {0};
    wal_ctx w = {NULL, 16u << 20};
    int rc = cmd_open_repo(&r, o, &err);
    if (rc == 0)
        rc = chain_history_load(r, &hist, &err);
    if (rc)
        goto out;
    if (o->json) {
        printf("{\n  \"repository\": ");
        print_json_string(repo_location(r));
        printf(",\n  \"backups\": [");
    }
    else
        printf("repository %s: %zu %s\n", repo_location(r), hist.count,
               pb_plural(hist.count, "backup", "backups"));
    for (size_t i = 0; i < hist.count; i++) {
        const mf_backup *h = &hist.items[i];
        w.seg_size = h->wal_segment_size ? h->wal_segment_size : w.seg_size;
        if (o->json)
            print_backup_json(h, &hist, i == 0);
        else
            print_backup_text(h, &hist);
    }
    rc = repo_list(r, "wal/", collect_wal, &w, &err);
    if (rc == 0)
        print_wal(&w, o->json);
    if (rc == 0 && o->restore_points && !o->json)
        rc = print_restore_points(r, o, w.seg_size, &err);
out:
    while (w.head) {
        wal_range *n = w.head->next;
        free(w.head);
        w.head = n;
    }
    chain_history_free(&hist);
    repo_free(r);
    return rc ? cmd_report(res, &err) : 0;
}

/* ---- expire ---- */

typedef struct wal_expire {
    repo *r;
    char oldest[25]; /* oldest start segment still needed */
    uint64_t removed;
    bool dry_run;    /* count, remove nothing */
} wal_expire;

static int expire_wal(void *vctx, const char *key, uint64_t size)
{
    wal_expire *ctx = vctx;
    const char *name = strrchr(key, '/');
    name = name ? name + 1 : key;
    if (strlen(name) < 24 || strstr(name, ".history"))
        return 0;
    /* Same or older timeline, and a position before the oldest retained start. */
    if (strncmp(name, ctx->oldest, 8) <= 0 && strncmp(name + 8, ctx->oldest + 8, 16) < 0) {
        if (!ctx->dry_run)
            chain_delete_object(ctx->r, key);
        ctx->removed++;
        PB_FAULT_POINT("expire.mid-wal");
    }
    return 0;
}

/* WAL older than the oldest start among the kept backups (by LSN, not by id). */
static int expire_wal_before(repo *r, const chain_history *hist, const bool *keep,
                             const pb_options *o, pb_error *err)
{
    const mf_backup *oldest = NULL;
    for (size_t i = 0; i < hist->count; i++)
        if (keep[i] && (!oldest || hist->items[i].start_lsn < oldest->start_lsn))
            oldest = &hist->items[i];
    if (!oldest)
        return 0;
    wal_expire we = {r, "", 0, o->dry_run};
    snprintf(we.oldest, sizeof(we.oldest), "%s", oldest->start_wal);
    int rc = repo_list(r, "wal/", expire_wal, &we, err);
    if (rc == 0 && !o->quiet)
        printf("%s %" PRIu64 " WAL %s older than %s (start of backup %s)\n",
               o->dry_run ? "would expire" : "expired", we.removed,
               pb_plural(we.removed, "segment", "segments"), we.oldest, oldest->id);
    return rc;
}

static int expire_locked(repo *r, const pb_options *o, pb_error *err);

/* Expire removes backups: it holds the repository's writer lock (storage.h) so that no
 * backup builds on a parent it is removing, and no rebase reads one. */
int cmd_expire(pb_options *o, cmd_outcome *res)
{
    if (o->retain_full <= 0) {
        return cmd_usage_error(res, "expire needs --retain-full N");
    }
    pb_error err = PB_ERROR_INIT;
    repo *r = NULL;
    repo_lock *lock = NULL;
    int rc = cmd_open_repo(&r, o, &err);
    if (rc == 0)
        rc = repo_lock_acquire(r, "expire", &lock, &err);
    /* What a killed backup, rebase or expire left goes first (as backup does it), so an
     * expire killed between a manifest and its packs is finished by the next one; that
     * failing does not block the expire. */
    pb_error cerr = PB_ERROR_INIT;
    if (rc == 0 && !o->dry_run && chain_cleanup(r, lock, &cerr) != 0)
        pb_warn("could not clean up after earlier interrupted runs: %s", cerr.msg);
    if (rc == 0)
        rc = expire_locked(r, o, &err);
    repo_lock_release(lock);
    repo_free(r);
    return rc ? cmd_report(res, &err) : 0;
}

/* The backups that go leave the record first (docs/FORMAT.md): a kill after that
 * leaves a backup whose manifest is still there, which the next record write lists
 * again and the next expire removes; never a listed backup without a manifest. */
static int unrecord(repo *r, const chain_history *hist, const bool *keep, pb_error *err)
{
    size_t n = 0;
    for (size_t i = 0; i < hist->count; i++)
        n += !keep[i];
    if (n == 0)
        return 0;
    char (*ids)[MF_ID_LEN] = calloc(n, sizeof(*ids));
    if (!ids)
        return pb_fail(err, PB_ENOMEM, "out of memory planning expire");
    n = 0;
    for (size_t i = 0; i < hist->count; i++)
        if (!keep[i])
            memcpy(ids[n++], hist->items[i].id, MF_ID_LEN);
    int rc = chain_record_update(r, NULL, (const char (*)[MF_ID_LEN])ids, n, err);
    free(ids);
    return rc;
}

/* A backup the record lists without a manifest lost it to damage: which backups it needs
 * (its parents) and which WAL is unknown, so nothing is removed until it is resolved. */
static int check_lost(repo *r, const chain_history *hist, pb_error *err)
{
    chain_record rec = {0};
    int rc = chain_record_load(r, &rec, err);
    for (size_t i = 0; rc == 0 && i < rec.count; i++)
        if (!chain_history_find(hist, rec.ids[i]))
            rc = pb_fail(err, PB_ESTATE, "backup %s is listed in %s/%s but its manifest "
                         "backup/%s/manifest is missing: expire removes nothing until it is "
                         "put back (verify reports it; to give the backup up, remove its "
                         "objects and both %s copies, which the next backup rebuilds from "
                         "the manifests present)", rec.ids[i], repo_location(r),
                         CHAIN_RECORD_KEY, rec.ids[i], CHAIN_RECORD_KEY);
    chain_record_free(&rec);
    return rc;
}

/* Retention follows history order and parentage (chain_retain): the newest N full or
 * synthetic backups (one state counted once), everything after the oldest of them, and
 * every ancestor a kept backup needs; a backup whose descendant is kept is never
 * removed, nor the newest backup of the newest timeline. When timeline branches
 * compete (which one the cluster lives on is not known), the newest of each stays. */
static int expire_locked(repo *r, const pb_options *o, pb_error *err)
{
    chain_history hist = {0};
    bool *keep = NULL;
    int rc = chain_history_load(r, &hist, err);
    pb_error cerr = PB_ERROR_INIT;
    if (rc == 0 && chain_history_check(&hist, "retention", &cerr) != 0)
        pb_warn("%s; expire keeps the newest backup of both", cerr.msg);
    if (rc == 0)
        rc = check_lost(r, &hist, err);
    if (rc == 0 && !(keep = calloc(hist.count ? hist.count : 1, sizeof(*keep))))
        rc = pb_fail(err, PB_ENOMEM, "out of memory planning expire");
    if (rc == 0)
        chain_retain(&hist, (unsigned)o->retain_full, keep);
    if (rc == 0 && !o->dry_run)
        rc = unrecord(r, &hist, keep, err);
    /* Newest first: an incremental goes before the backups it needs, so a kill at any
     * moment leaves every listed backup with its whole chain. */
    for (size_t i = hist.count; rc == 0 && i-- > 0;) {
        if (keep[i])
            continue;
        if (!o->dry_run)
            rc = chain_drop(r, hist.items[i].id, err);
        if (rc == 0 && !o->quiet)
            printf("%s backup %s\n", o->dry_run ? "would expire" : "expired",
                   hist.items[i].id);
        PB_FAULT_POINT("expire.after-backup");
    }
    if (rc == 0)
        rc = expire_wal_before(r, &hist, keep, o, err);
    free(keep);
    chain_history_free(&hist);
    return rc;
}
