/*
 * tools/info_command.c — info: what the repository holds, per cluster. Text for people
 * (local times with their zone, sizes in binary units, durations, a backup that is
 * running now), --json for programs (raw numbers, docs/info.schema.json). Without
 * --cluster, every cluster the repository holds is listed (tools/cluster_ns.c).
 */
#include "tools/commands.h"
#include "tools/cluster_ns.h"
#include "tools/annotations.h"

#include "engine/wal/wal.h"
#include "engine/chain/chain.h"

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

/* The archive's segments (arch_list: no history, .partial or .backup files), in name
 * order, gathered into one range per timeline. */
static int collect_wal(void *vctx, const char *name)
{
    wal_ctx *ctx = vctx;
    uint32_t tli;
    uint64_t n;
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
         : mode == MF_READ_SUMMARY ? "summaries" : mode == MF_READ_SCAN ? "scan" : "unknown";
}

/* Bytes in binary units for people: "512 B", "3.2 MiB", "1.50 GiB". */
static void human_size(uint64_t bytes, char *out, size_t cap)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(out, cap, "%" PRIu64 " B", bytes);
    else
        snprintf(out, cap, v < 10 ? "%.2f %s" : "%.1f %s", v, units[u]);
}

/* A Unix time in the local time zone, with the zone's name ("2026-12-04 23:10:02 CET"). */
static void local_time(int64_t unix_s, char *out, size_t cap)
{
    time_t t = (time_t)unix_s;
    struct tm tm;
    if (!unix_s || !localtime_r(&t, &tm) || !strftime(out, cap, "%Y-%m-%d %H:%M:%S %Z", &tm))
        snprintf(out, cap, "unknown");
}

/* "0.4 s", "12 s", "3 min 05 s", "2 h 03 min". */
static void duration(double s, char *out, size_t cap)
{
    uint64_t w = (uint64_t)(s + 0.5);
    if (s < 10)
        snprintf(out, cap, "%.1f s", s);
    else if (w < 60)
        snprintf(out, cap, "%" PRIu64 " s", w);
    else if (w < 3600)
        snprintf(out, cap, "%" PRIu64 " min %02" PRIu64 " s", w / 60, w % 60);
    else
        snprintf(out, cap, "%" PRIu64 " h %02" PRIu64 " min", w / 3600, w / 60 % 60);
}

/* The data directory's size: as the walk found it, or, for a backup made before that was
 * recorded, where the backup saw all of it (a full, or an incremental that read or
 * skipped every file; a WAL-guided one only knows the blocks it read). */
static bool database_size(const mf_backup *h, uint64_t *out)
{
    if (h->db_bytes) {
        *out = h->db_bytes;
        return true;
    }
    if (h->type != 'F' && h->read_mode != MF_READ_SCAN && h->read_mode != MF_READ_FILE)
        return false;
    *out = h->bytes_read + h->bytes_skipped;
    return true;
}

static void print_backup_text(const mf_backup *h, const chain_history *hist)
{
    char a[32], b[32], t0[64], t1[64], d[32], db[32], rd[32], st[32], wal[32];
    pb_lsn_format(h->start_lsn, a);
    pb_lsn_format(h->stop_lsn, b);
    const char *type = h->type == 'F' ? "full" : h->type == 'S' ? "synthetic full" : "incr";
    printf("%s  %-14s  timeline %u  LSN %s..%s  WAL %s..%s\n", h->id, type, h->timeline, a, b,
           h->start_wal, h->stop_wal);
    local_time(h->start_time, t0, sizeof(t0));
    local_time(h->stop_time, t1, sizeof(t1));
    duration(h->seconds, d, sizeof(d));
    uint64_t dbsize;
    if (database_size(h, &dbsize))
        human_size(dbsize, db, sizeof(db));
    else /* a WAL-guided read saw only the blocks it read; a rebase read no files */
        snprintf(db, sizeof(db), "size not recorded");
    human_size(h->bytes_read, rd, sizeof(rd));
    human_size(h->bytes_stored, st, sizeof(st));
    human_size(h->stop_lsn - h->start_lsn, wal, sizeof(wal));
    printf("    started %s, stopped %s, took %s\n", t0, t1, d);
    double ratio = h->bytes_stored ? (double)h->pages_changed * 8192.0 / h->bytes_stored : 0;
    printf("    database %s; read %s, stored %s (%.1fx); WAL in window %s\n", db, rd, st, ratio,
           wal);
    printf("    pages scanned %" PRIu64 ", changed %" PRIu64 ", in backup window %" PRIu64
           "; checksum errors %" PRIu64 "\n", h->pages_scanned, h->pages_changed,
           h->pages_in_window, h->checksum_errors);
    if (h->type == 'I' && h->read_mode) {
        human_size(h->bytes_skipped, rd, sizeof(rd));
        printf("    read mode %s%s; files skipped %" PRIu64 " (%s); missed pages %" PRIu64
               "%s\n", read_mode_name(h->read_mode), h->verify_scan ? " + verify scan" : "",
               h->files_skipped, rd, h->pages_missed,
               h->pages_missed ? " (BUG: the cheaper read method missed changed pages)" : "");
    }
    if (h->type == 'I' && h->read_why[0])
        printf("    read mode because: %s\n", h->read_why);
    printf("    restore needs:");
    print_needs(hist, h, false);
    printf("\n");
    info_print_annotations(h->annotations, false);
    if ((size_t)(h - hist->items) < hist->off_path)
        printf("    on a branch that timeline %u (the newest) left: not a candidate for "
               "\"latest\"\n", hist->timeline);
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
           ", \"bytes_skipped\": %" PRIu64 ", \"pages_missed\": %" PRIu64 ", \"read_why\": ",
           read_mode_name(h->read_mode), h->verify_scan ? "true" : "false", h->files_skipped,
           h->bytes_skipped, h->pages_missed);
    print_json_string(h->read_why);
    printf(", \"restore_needs\": [");
    print_needs(hist, h, true);
    printf("]");
    info_print_annotations(h->annotations, true);
    printf("}");
}

static void print_wal(const wal_ctx *w, bool json)
{
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

/* A writer at work (its lock): text "running" lines, or a JSON member. */
static int print_running(repo *r, bool json, pb_error *err)
{
    repo_lock_view v;
    int rc = repo_lock_peek(r, &v, err);
    if (rc == PB_ENOENT)
        return 0;
    if (rc)
        return rc;
    if (json) {
        printf(",\n  \"running\": {\"command\": ");
        print_json_string(v.owner);
        printf(", \"host\": ");
        print_json_string(v.host);
        printf(", \"pid\": %ld, \"started\": %" PRId64 ", \"renewed\": %" PRId64
               ", \"stale\": %s}", v.pid, v.started, v.renewed, v.gone ? "true" : "false");
        return 0;
    }
    char when[64], ago[32];
    local_time(v.started, when, sizeof(when));
    duration((double)((int64_t)time(NULL) - v.started), ago, sizeof(ago));
    if (v.gone)
        printf("stale writer lock: %s by %s, pid %ld on %s, since %s; its process is gone "
               "(the next writer takes the lock over)\n", v.owner, v.user, v.pid, v.host, when);
    else
        printf("running: %s since %s (%s ago), by %s, pid %ld on %s\n", v.owner, when, ago,
               v.user, v.pid, v.host);
    return 0;
}

static void free_wal(wal_ctx *w)
{
    while (w->head) {
        wal_range *n = w->head->next;
        free(w->head);
        w->head = n;
    }
}

/* One cluster's repository: its backups (history order, not id order), its WAL and a
 * writer at work. JSON: the members of one object, without its braces. points: the
 * restore points too (--restore-points), whose cache is o's state directory: only for the
 * cluster that directory belongs to. */
static int info_one(repo *r, pb_options *o, bool points, pb_error *err)
{
    chain_history hist = {0};
    wal_ctx w = {NULL, 16u << 20};
    int rc = chain_history_load(r, &hist, err);
    if (rc)
        return rc;
    if (o->json) {
        printf("  \"repository\": ");
        print_json_string(repo_location(r));
        printf(",\n  \"backups\": [");
    } else {
        printf("repository %s: %zu %s\n", repo_location(r), hist.count,
               pb_plural(hist.count, "backup", "backups"));
    }
    for (size_t i = 0; i < hist.count; i++) {
        const mf_backup *h = &hist.items[i];
        w.seg_size = h->wal_segment_size ? h->wal_segment_size : w.seg_size;
        if (o->json)
            print_backup_json(h, &hist, i == 0);
        else
            print_backup_text(h, &hist);
    }
    rc = arch_list(r, ARCH_LIST_SEGMENTS, collect_wal, &w, err);
    if (rc == 0 && o->json)
        printf("\n  ],\n  \"wal\": [");
    if (rc == 0)
        print_wal(&w, o->json);
    if (rc == 0 && o->json)
        printf("\n  ]");
    if (rc == 0)
        rc = print_running(r, o->json, err);
    if (rc == 0 && o->restore_points && !o->json && points)
        rc = print_restore_points(r, o, w.seg_size, err);
    else if (rc == 0 && o->restore_points && !o->json)
        printf("(restore points: info --cluster NAME --restore-points)\n");
    free_wal(&w);
    chain_history_free(&hist);
    return rc;
}

typedef struct names {
    char (*items)[64];
    size_t count, cap;
} names;

static int collect_name(void *vctx, const char *key, uint64_t size)
{
    (void)size;
    names *n = vctx;
    const char *name = key + strlen(CNS_MARKERS);
    pb_error e = PB_ERROR_INIT;
    if (cns_check_name(name, &e) != 0)
        return 0; /* not an entry this version wrote */
    if (n->count == n->cap) {
        size_t cap = n->cap ? n->cap * 2 : 8;
        void *p = realloc(n->items, cap * sizeof(*n->items));
        if (!p)
            return PB_ENOMEM;
        n->items = p;
        n->cap = cap;
    }
    snprintf(n->items[n->count++], 64, "%s", name);
    return 0;
}

/* One named cluster of the repository at root, opened where it lives. */
static int info_named(repo *root, pb_options *o, const char *name, bool first, bool after,
                      pb_error *err)
{
    cns_layout l;
    int rc = cns_read_marker(root, name, &l, err);
    char loc[4096];
    cns_location(o->repo.location, name, loc, sizeof(loc));
    repo_opts ro = o->repo;
    ro.location = l == CNS_ROOT ? o->repo.location : loc;
    repo *r = NULL;
    if (rc == 0)
        rc = repo_open(&r, &ro, err);
    if (o->json)
        printf("%s\n  {\"name\": \"%s\",\n", first ? "" : ",", name);
    else
        printf("%scluster %s: ", after ? "\n" : "", name);
    if (rc == 0)
        rc = info_one(r, o, false, err);
    if (o->json)
        printf("}");
    repo_free(r);
    return rc ? pb_error_wrap(err, "cluster %s", name) : 0;
}

/* info without --cluster: the root's own backups (those of a repository written before
 * clusters had namespaces, when no named cluster has claimed them yet), then every named
 * cluster. Nothing changes for a repository that holds no named cluster. */
static int info_all(repo *root, pb_options *o, pb_error *err)
{
    names n = {0};
    uint64_t size;
    int rc = repo_list(root, CNS_MARKERS, collect_name, &n, err);
    /* The root's own objects, unless a named cluster (listed below) lives there. */
    bool legacy = rc == 0 && (n.count == 0 ||
                              repo_stat(root, CHAIN_IDENTITY_KEY, &size, err) == 0);
    for (size_t i = 0; legacy && i < n.count; i++) {
        cns_layout l;
        legacy = cns_read_marker(root, n.items[i], &l, err) != 0 || l != CNS_ROOT;
    }
    if (rc == 0 && o->json)
        printf("{\n");
    if (rc == 0 && legacy) {
        rc = info_one(root, o, true, err);
    } else if (rc == 0 && o->json) {
        printf("  \"repository\": ");
        print_json_string(repo_location(root));
        printf(",\n  \"backups\": [],\n  \"wal\": []");
    }
    if (rc == 0 && n.count && o->json)
        printf(",\n  \"clusters\": [");
    for (size_t i = 0; rc == 0 && i < n.count; i++)
        rc = info_named(root, o, n.items[i], i == 0, legacy || i > 0, err);
    if (rc == 0 && n.count && o->json)
        printf("\n  ]");
    if (rc == 0 && o->json)
        printf("\n}\n");
    free(n.items);
    return rc;
}

int cmd_info(pb_options *o, cmd_outcome *res)
{
    pb_error err = PB_ERROR_INIT;
    repo *r = NULL;
    int rc = cmd_open_repo(&r, o, &err);
    if (rc == 0 && !o->cluster) {
        rc = info_all(r, o, &err);
    } else if (rc == 0) {
        if (o->json)
            printf("{\n  \"cluster\": \"%s\",\n", o->cluster);
        else
            printf("cluster %s: ", o->cluster);
        rc = info_one(r, o, true, &err);
        if (rc == 0 && o->json)
            printf("\n}\n");
    }
    repo_free(r);
    return rc ? cmd_report(res, &err) : 0;
}
