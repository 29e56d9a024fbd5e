/*
 * engine/backup/walguide_read.c — decode the WAL window of a WAL-guided incremental into a block
 * set (walguide_internal.h).
 *
 * The window is [parent's start LSN, this backup's start LSN). Every page that changed
 * after the parent's start is named there by a block reference (the same layout for
 * every resource manager), or it was changed by a hint-bit write that the caller rules
 * out (data checksums or wal_log_hints make the first one after a checkpoint log a
 * full-page image). What block references do not cover is marked for a whole read: a
 * relation created or truncated (smgr), a database created (either strategy: FILE_COPY
 * copies files without logging their blocks; WAL_LOG does log them, but a reused OID
 * would make the old files look known). An unknown resource manager stops the guidance.
 *
 * pg_backup_start switches WAL before its checkpoint, so the segment holding this
 * backup's start LSN is not archived until pg_backup_stop: it is read from pg_wal (every
 * byte before the start LSN is written out by the checkpoint). Decoding runs in a thread
 * at the lowest CPU priority, and reads the repository, not the database's files.
 */
#include "engine/backup/walguide_internal.h"
#include "engine/wal/wal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RELSEG_PAGES 131072u
#define RM_XLOG_ID 0
#define XLOG_PARAMETER_CHANGE 0x60
#define RM_SMGR_ID 2
#define RM_DBASE_ID 4
#define XLOG_SMGR_CREATE 0x10
#define XLOG_SMGR_TRUNCATE 0x20

typedef struct src_ctx {
    const wg_window *w;
    arch_walsource *arch;
    uint64_t local_segno; /* the segment read from pg_wal */
    uint8_t *local;
    size_t local_len;
    bool local_archived; /* that segment was gone from pg_wal: read from the archive */
} src_ctx;

/* The bytes of the window's last segment the reader can ask for: up to the end of the WAL
 * page holding end_lsn. The window ends at this backup's start, a record boundary, and
 * the reader stops there; the rest of the segment is WAL written after the start, or a
 * recycled segment's old bytes (read from the disk, and left in the page cache, for
 * nothing: 16 MiB per incremental, up to 1 GiB with large segments). A record that did
 * cross end_lsn would be read as a truncated segment: the window is then not trusted. */
size_t wg_local_len(uint32_t seg_size, uint64_t end_lsn)
{
    uint64_t want = (end_lsn % seg_size / ARCH_WAL_PAGE + 1) * ARCH_WAL_PAGE;
    return want < seg_size ? (size_t)want : seg_size;
}

static int read_local(src_ctx *c, uint64_t segno, pb_error *err)
{
    char name[25], path[4200];
    arch_segment_name(name, c->w->timeline, segno, c->w->seg_size);
    snprintf(path, sizeof(path), "%s/pg_wal/%s", c->w->pgdata, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return pb_fail_errno(err, errno == ENOENT ? PB_ENOENT : PB_EIO,
                             "cannot open WAL segment %s", path);
    size_t got = 0, want = wg_local_len(c->w->seg_size, c->w->end_lsn);
    if (!c->local && !(c->local = malloc(want))) {
        close(fd);
        return pb_fail(err, PB_ENOMEM, "out of memory reading %s", path);
    }
    while (got < want) {
        ssize_t n = pread(fd, c->local + got, want - got, (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    c->local_len = got;
    return 0;
}

/* The segment of this backup's start is gone from pg_wal (archived, then recycled by a
 * checkpoint since pg_backup_start): the archive's copy is the same bytes, whole. */
static int archived_instead(src_ctx *c, uint64_t segno, const uint8_t **data, size_t *len,
                            pb_error *err)
{
    char name[25];
    arch_segment_name(name, c->w->timeline, segno, c->w->seg_size);
    int rc = arch_walsource_get(c->arch, segno, data, len, err);
    if (rc == PB_ENOENT)
        return pb_fail(err, PB_ENOENT, "WAL segment %s (timeline %u), which holds this "
                       "backup's start, is neither in %s/pg_wal nor in repository %s",
                       name, c->w->timeline, c->w->pgdata, repo_location(c->w->repo));
    if (rc == 0) {
        c->local_archived = true;
        pb_info("WAL segment %s is no longer in %s/pg_wal: read from the repository's "
                "archive", name, c->w->pgdata);
    }
    return rc;
}

static int get_segment(void *vc, uint64_t segno, const uint8_t **data, size_t *len,
                       pb_error *err)
{
    src_ctx *c = vc;
    if (segno != c->local_segno || c->local_archived)
        return arch_walsource_get(c->arch, segno, data, len, err);
    if (!c->local_len) {
        int rc = read_local(c, segno, err);
        if (rc == PB_ENOENT)
            return archived_instead(c, segno, data, len, err);
        if (rc)
            return rc;
    }
    *data = c->local;
    *len = c->local_len;
    return 0;
}

static uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4); /* WAL is in the server's byte order: pageback reads it on that host */
    return v;
}

/* Records that make or remove files rather than change blocks. */
static int note_storage(wg_set *s, const arch_record *rec, const pgv_facts *v, pb_error *err)
{
    uint8_t info = rec->info & 0xF0;
    const uint8_t *d = rec->main_data;
    if (rec->rmid == RM_SMGR_ID && info == XLOG_SMGR_CREATE && rec->main_len >= 12)
        return wg_set_mark_rel(s, rd32(d), rd32(d + 4), rd32(d + 8), err);
    if (rec->rmid == RM_SMGR_ID && info == XLOG_SMGR_TRUNCATE && rec->main_len >= 16)
        return wg_set_mark_rel(s, rd32(d + 4), rd32(d + 8), rd32(d + 12), err);
    if (rec->rmid == RM_DBASE_ID && pgv_is_dbase_create(v, info) && rec->main_len >= 8)
        return wg_set_mark_db(s, rd32(d + 4), rd32(d), err); /* db_id, tablespace_id */
    return 0;
}

/* A server restarted with wal_level = minimal logs its new settings (xl_parameter_change:
 * five ints, then wal_level; WAL_LEVEL_MINIMAL is 0): from there on a relation created
 * in a transaction is written without WAL. */
static bool minimal_since(const arch_record *rec)
{
    if (rec->rmid != RM_XLOG_ID || (rec->info & 0xF0) != XLOG_PARAMETER_CHANGE ||
        rec->main_len < 24)
        return false;
    int32_t level;
    memcpy(&level, rec->main_data + 20, sizeof(level));
    return level == 0;
}

typedef struct job {
    const wg_window *w;
    wg_set *set;
    char *why;
    size_t why_len;
    pb_error err;
    int rc;
    uint64_t records;
    size_t local_bytes; /* read from pg_wal */
} job;

static int decode_window(job *j, src_ctx *c, arch_walreader *rd)
{
    const arch_record *rec;
    int rc;
    while ((rc = arch_walreader_next(rd, &rec, &j->err)) == 0) {
        j->records++;
        const pgv_facts *v = arch_walreader_facts(rd); /* set once a record was read */
        if (rec->rmid > v->rm_max_builtin) {
            char lsn[32];
            pb_lsn_format(rec->lsn, lsn);
            snprintf(j->why, j->why_len, "a record of unknown resource manager %u at %s",
                     rec->rmid, lsn);
            return 1;
        }
        if (minimal_since(rec)) {
            char lsn[32];
            pb_lsn_format(rec->lsn, lsn);
            snprintf(j->why, j->why_len, "wal_level was minimal from %s: WAL does not log "
                     "every change", lsn);
            return 1;
        }
        for (unsigned i = 0; i < rec->nblocks; i++) {
            const arch_blockref *b = &rec->blocks[i];
            wg_key k = {b->spc, b->db, b->rel, b->fork, b->block / RELSEG_PAGES};
            if ((rc = wg_set_add(j->set, &k, b->block % RELSEG_PAGES, &j->err)))
                return rc;
        }
        if ((rc = note_storage(j->set, rec, v, &j->err)))
            return rc;
    }
    if (rc == PB_ENOENT) {
        snprintf(j->why, j->why_len, "a gap in the WAL archive (%s)", j->err.msg);
        return 1;
    }
    if (rc < 0 && rc != PB_ENOMEM) {
        snprintf(j->why, j->why_len, "the WAL window could not be decoded (%s)", j->err.msg);
        return 1;
    }
    if (rc == 1 && arch_walreader_end_lsn(rd) < j->w->end_lsn) {
        snprintf(j->why, j->why_len, "the WAL window ends early (%s)",
                 arch_walreader_end_reason(rd));
        return 1;
    }
    (void)c;
    return rc == 1 ? 0 : rc;
}

static void *collect_thread(void *vj)
{
    job *j = vj;
    const wg_window *w = j->w;
    /* Lowest priority for this thread only (Linux: niceness is per thread). */
    if (w->nice && setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), w->nice) != 0)
        pb_debug("could not lower the WAL decoder's priority");
    arch_tl_entry path = {w->timeline, 0, UINT64_MAX};
    src_ctx c = {w, NULL, w->end_lsn / w->seg_size, NULL, 0, false};
    arch_walreader *rd = NULL;
    int rc = wg_set_open(&j->set, w->spill_dir, w->mem_entries, &j->err);
    if (rc == 0)
        rc = arch_walsource_open(&c.arch, w->repo, w->seg_size, &path, 1, &j->err);
    if (rc == 0)
        rc = arch_walreader_open(&rd, w->seg_size, w->start_lsn, w->end_lsn, get_segment, &c,
                                 &j->err);
    if (rc == 0)
        rc = decode_window(j, &c, rd);
    if (rc == 0)
        rc = wg_set_finish(j->set, &j->err);
    arch_walreader_close(rd);
    arch_walsource_close(c.arch);
    j->local_bytes = c.local_archived ? 0 : c.local_len;
    free(c.local);
    j->rc = rc;
    return NULL;
}

int wg_collect(const wg_window *w, wg_set **out, char *why, size_t why_len, pb_error *err)
{
    *out = NULL;
    why[0] = '\0';
    job j = {w, NULL, why, why_len, PB_ERROR_INIT, 0, 0, 0};
    pthread_t t;
    if (pthread_create(&t, NULL, collect_thread, &j) != 0)
        collect_thread(&j); /* no thread: decode here, at the process's priority */
    else
        pthread_join(t, NULL);
    if (j.rc < 0) {
        wg_set_free(j.set);
        *err = j.err;
        return j.rc;
    }
    if (j.rc > 0) {
        wg_set_free(j.set);
        return 0;
    }
    pb_detail("WAL window: %" PRIu64 " records, %" PRIu64 " distinct blocks named%s; %zu KiB "
              "of pg_wal read", j.records, wg_set_count(j.set),
              wg_set_spilled(j.set) ? " (block set spilled to disk)" : "", j.local_bytes / 1024);
    *out = j.set;
    return 0;
}
