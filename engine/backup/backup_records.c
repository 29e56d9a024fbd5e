/*
 * engine/backup/backup_records.c — a backup's file records, written as it goes and committed
 * without ever holding the manifest (docs/MANIFEST.md, "Streaming").
 *
 * The walk yields paths in order except pg_control (copied last, docs/DESIGN.md rule 5),
 * and backup_label and tablespace_map come after pg_backup_stop. So records go through a
 * streaming writer (one chunk in memory) into an anonymous spool file in the local state
 * directory, the few that arrive out of order are held aside, and at the commit the
 * spool is read back as a stream, merged with those, and written once more, with the
 * final header, into a second spool: the object is the head (header and index, known
 * only at the end) followed by those chunks, uploaded with one streaming writer whose
 * commit makes it appear whole (rule 7: a backup is visible only when its manifest is
 * committed last). The catalog is then moved from the second spool, record by record.
 *
 * A file's record names its frames' locations, known only once a compression worker has
 * stored them; the reading thread does not wait for that at the file's end (the disk
 * would idle meanwhile). The record waits instead, in a small queue of pending records
 * (bounded by BK_PENDING_FILES and BK_PENDING_BYTES), and every record made after it
 * queues behind it, so they reach the writer in walk order; each is written once its
 * frames are all stored (bk_records_settle), so a written record names only stored
 * frames, and the commit refuses while any is pending (docs/DESIGN.md rule 7).
 *
 * The parent's records (size, mtime and inode, for the file-level skip) are read the
 * same way: a stream over its manifest, advanced in path order along the walk.
 */
#include "engine/backup/backup_internal.h"
#include "engine/backup/backup_records_internal.h"
#include "common/fault.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Records out of path order: pg_control, backup_label, tablespace_map. More is a walk
 * that lost its order: an error, never an unbounded list. */
#define BK_LATE_MAX 16u
#define BK_COPY_BLOCK (1u << 20)

/* A record waiting for its frames (f.runs come from them), or for an earlier one's. */
typedef struct pending {
    mf_file f;            /* f.path NULL: the file vanished, its frames land unrecorded */
    bk_pipe_file *frames; /* NULL: nothing to wait for but the records before it */
    uint64_t bytes;       /* what it holds (record_bytes once its runs are in) */
} pending;

typedef struct spool {
    int fd;
    uint64_t len;
    pb_buf head;          /* the bytes the object starts with (mf_writer_finish) */
    const char *what;
} spool;

struct bk_records {
    spool a, b;           /* a: records as they came; b: the object's chunks */
    mf_writer *wa;
    char *last;           /* last path handed to wa */
    mf_file late[BK_LATE_MAX];
    size_t nlate;
    uint64_t late_bytes;
    bk_parent_cursor prev;       /* the parent's records along the walk */
    uint64_t records_held, records_peak, bytes_peak;
    pending queue[BK_PENDING_FILES]; /* a ring: npending from qhead */
    size_t qhead, npending;
    uint64_t pending_bytes; /* what they hold (the peak: ctx->io.manifest_pending_peak) */
};

static int spool_open(spool *s, const char *dir, const char *id, const char *what,
                      pb_error *err)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/manifest-%s.%s.spool", dir, id, what);
    s->what = what;
    s->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (s->fd < 0)
        return pb_fail_errno(err, PB_EIO, "cannot create manifest spool %s", path);
    /* Anonymous from here on: a crash leaves nothing behind in the state directory. */
    unlink(path);
    return 0;
}

static void spool_close(spool *s)
{
    if (s->fd > 0)
        close(s->fd);
    s->fd = -1;
    pb_buf_free(&s->head);
}

static int spool_sink(void *ctx, const void *data, size_t len, pb_error *err)
{
    spool *s = ctx;
    for (size_t done = 0; done < len;) {
        ssize_t n = pwrite(s->fd, (const uint8_t *)data + done, len - done,
                           (off_t)(s->len + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return pb_fail_errno(err, PB_EIO, "writing the manifest spool (%s)", s->what);
        done += (size_t)n;
    }
    s->len += len;
    return 0;
}

static int spool_pread(spool *s, uint64_t off, size_t len, void *dst, pb_error *err)
{
    for (size_t done = 0; done < len;) {
        ssize_t n = pread(s->fd, (uint8_t *)dst + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return pb_fail_errno(err, n == 0 ? PB_ECORRUPT : PB_EIO,
                                 "reading the manifest spool (%s) at %llu", s->what,
                                 (unsigned long long)(off + done));
        done += (size_t)n;
    }
    return 0;
}

/* The object as mf_stream reads it: the head, then the spooled chunks. */
static int spool_read(void *ctx, uint64_t off, size_t len, void *dst, pb_error *err)
{
    spool *s = ctx;
    uint8_t *d = dst;
    if (off < s->head.len) {
        size_t n = s->head.len - off < len ? (size_t)(s->head.len - off) : len;
        memcpy(d, s->head.data + off, n);
        d += n;
        len -= n;
        off += n;
    }
    return len ? spool_pread(s, off - s->head.len, len, d, err) : 0;
}

static int spool_stream(spool *s, const char *what, mf_stream **out, pb_error *err)
{
    mf_source src = {spool_read, NULL, s, s->head.len + s->len, chain_manifest_codec()};
    return mf_stream_open(out, &src, what, err);
}

static void note_held(bk_records *rec, uint64_t extra)
{
    uint64_t bytes = mf_writer_peak(rec->wa) + rec->late_bytes + rec->pending_bytes + extra +
                     (rec->prev.s ? mf_stream_peak(rec->prev.s) : 0);
    if (bytes > rec->bytes_peak)
        rec->bytes_peak = bytes;
    if (rec->records_held > rec->records_peak)
        rec->records_peak = rec->records_held;
}

int bk_records_open(bk_ctx *ctx, pb_error *err)
{
    bk_records *rec = calloc(1, sizeof(*rec));
    if (!rec)
        return pb_fail(err, PB_ENOMEM, "out of memory for the manifest writer");
    rec->a.fd = rec->b.fd = -1;
    rec->prev = (bk_parent_cursor)BK_PARENT_CURSOR_INIT;
    ctx->rec = rec;
    const mf_backup *h = mf_header_c(ctx->m);
    int rc = spool_open(&rec->a, ctx->opts->state_dir, h->id, "records", err);
    if (rc == 0)
        rc = mf_writer_new(&rec->wa, h, chain_manifest_codec(), spool_sink, &rec->a, err);
    return rc;
}

void bk_records_free(bk_records *rec)
{
    if (!rec)
        return;
    spool_close(&rec->a);
    spool_close(&rec->b);
    mf_writer_free(rec->wa);
    free(rec->last);
    for (size_t i = 0; i < rec->nlate; i++)
        mf_file_clear(&rec->late[i]);
    for (size_t i = 0; i < rec->npending; i++)
        mf_file_clear(&rec->queue[(rec->qhead + i) % BK_PENDING_FILES].f);
    bk_parent_cursor_close(&rec->prev);
    free(rec);
}

/* What one record holds in memory: its strings, runs and shipped pages' hashes. */
static uint64_t record_bytes(const mf_file *f)
{
    uint64_t n = sizeof(*f) + strlen(f->path) + (f->link_target ? strlen(f->link_target) : 0) +
                 (uint64_t)f->nruns * sizeof(mf_run);
    for (uint32_t i = 0; f->kind == MF_REL && f->page_hashes && i < f->nruns; i++)
        n += 8ull * f->runs[i].count;
    return n;
}

/* Hand f to the writer (path order) or hold it aside (the few out of it). */
static int record_write(bk_ctx *ctx, mf_file *f, pb_error *err)
{
    bk_records *rec = ctx->rec;
    int c = rec->last ? strcmp(f->path, rec->last) : 1;
    if (c > 0) {
        char *copy = strdup(f->path);
        if (!copy)
            return pb_fail(err, PB_ENOMEM, "out of memory for %s", f->path);
        rec->records_held++;
        note_held(rec, record_bytes(f));
        int rc = mf_writer_add(rec->wa, f, err);
        rec->records_held--;
        if (rc) {
            free(copy);
            return rc;
        }
        free(rec->last);
        rec->last = copy;
        mf_file_clear(f); /* taken: as mf_add_file, the caller's f is done with */
        return 0;
    }
    if (c == 0 || rec->nlate == BK_LATE_MAX)
        return pb_fail(err, PB_ESTATE, "backup %s: file %s after %s (%s)",
                       mf_header_c(ctx->m)->id, f->path, rec->last,
                       c == 0 ? "recorded twice" : "the walk is out of path order");
    rec->late[rec->nlate++] = *f;
    rec->late_bytes += record_bytes(f);
    rec->records_held++;
    note_held(rec, 0);
    return 0;
}

/* The oldest pending record: when its frames are stored (wait: once they are), give it
 * its runs and write it. *done false when they are not stored yet. */
static int settle_one(bk_ctx *ctx, bool wait, bool *done, pb_error *err)
{
    bk_records *rec = ctx->rec;
    pending *q = &rec->queue[rec->qhead];
    mf_run *runs = NULL;
    uint32_t n = 0;
    *done = true;
    int rc = q->frames ? bk_pipe_file_take(ctx->pipe, q->frames, wait, done, &runs, &n, err)
                       : 0;
    if (rc)
        return q->f.path ? pb_error_wrap(err, "storing %s", q->f.path) : rc;
    if (!*done)
        return 0;
    q->frames = NULL;
    rec->pending_bytes -= q->bytes;
    rec->qhead = (rec->qhead + 1) % BK_PENDING_FILES;
    rec->npending--;
    if (!q->f.path) {
        free(runs); /* frames of a file that vanished: stored, harmless, never named */
        return 0;
    }
    q->f.runs = runs;
    q->f.nruns = n;
    rc = record_write(ctx, &q->f, err);
    if (rc == 0)
        memset(&q->f, 0, sizeof(q->f)); /* taken */
    mf_file_clear(&q->f);
    return rc;
}

int bk_records_settle(bk_ctx *ctx, bool all, pb_error *err)
{
    bk_records *rec = ctx->rec;
    bool done = true;
    while (rec->npending && done) {
        bool over = rec->npending >= BK_PENDING_FILES || rec->pending_bytes > BK_PENDING_BYTES;
        int rc = settle_one(ctx, all || over, &done, err);
        if (rc)
            return rc;
    }
    return 0;
}

int bk_record_later(bk_ctx *ctx, mf_file *f, bk_pipe_file *frames, pb_error *err)
{
    bk_records *rec = ctx->rec;
    if (!f && !frames)
        return 0;
    if (!frames && !rec->npending)
        return record_write(ctx, f, err);
    /* Room: every call settles down to under BK_PENDING_FILES before it returns. */
    pending *q = &rec->queue[(rec->qhead + rec->npending) % BK_PENDING_FILES];
    memset(q, 0, sizeof(*q));
    if (f) {
        q->f = *f;
        memset(f, 0, sizeof(*f)); /* taken */
        q->bytes = record_bytes(&q->f);
    }
    q->frames = frames;
    q->bytes += bk_pipe_file_bytes(frames);
    rec->npending++;
    rec->pending_bytes += q->bytes;
    if (rec->npending > ctx->io.manifest_pending_peak)
        ctx->io.manifest_pending_peak = rec->npending;
    note_held(rec, 0);
    return bk_records_settle(ctx, false, err);
}

int bk_record_add(bk_ctx *ctx, mf_file *f, pb_error *err)
{
    return bk_record_later(ctx, f, NULL, err);
}

size_t bk_records_pending(const bk_ctx *ctx)
{
    return ctx->rec->npending;
}

static int cmp_late(const void *a, const void *b)
{
    return strcmp(((const mf_file *)a)->path, ((const mf_file *)b)->path);
}

/* The spooled records and the late ones, in path order, into w. */
static int merge_into(bk_records *rec, mf_writer *w, const char *id, pb_error *err)
{
    mf_stream *s = NULL;
    mf_file f = {0};
    pb_buf head = {0};
    int rc = mf_writer_finish(rec->wa, &head, err);
    rec->a.head = head;
    mf_writer_free(rec->wa); /* its chunk buffers go before the merge takes its own */
    rec->wa = NULL;
    if (rc == 0)
        rc = spool_stream(&rec->a, id, &s, err);
    qsort(rec->late, rec->nlate, sizeof(*rec->late), cmp_late);
    size_t j = 0;
    int more = rc == 0 ? mf_stream_next(s, &f, err) : 0;
    while (rc == 0 && (more == 1 || j < rec->nlate)) {
        if (more < 0) {
            rc = more;
            break;
        }
        bool late_first = j < rec->nlate &&
                          (more != 1 || strcmp(rec->late[j].path, f.path) < 0);
        rec->records_held = rec->nlate + 1; /* the late ones and the stream's */
        note_held(rec, mf_stream_peak(s) + mf_writer_peak(w) + rec->a.head.cap);
        if (late_first) {
            rc = mf_writer_add(w, &rec->late[j++], err);
            continue;
        }
        rc = mf_writer_add(w, &f, err);
        mf_file_clear(&f);
        if (rc == 0)
            more = mf_stream_next(s, &f, err);
    }
    mf_file_clear(&f);
    mf_stream_close(s);
    return rc;
}

/* The head, then spool b, under key: nothing is visible before the writer's commit. */
static int upload(repo *r, const char *key, spool *b, pb_error *err)
{
    repo_writer *w = NULL;
    uint8_t *block = malloc(BK_COPY_BLOCK);
    int rc = block ? repo_writer_open(r, key, &w, err)
                   : pb_fail(err, PB_ENOMEM, "uploading %s", key);
    if (rc == 0)
        rc = repo_writer_write(w, b->head.data, b->head.len, err);
    for (uint64_t off = 0; rc == 0 && off < b->len; off += BK_COPY_BLOCK) {
        size_t n = b->len - off < BK_COPY_BLOCK ? (size_t)(b->len - off) : BK_COPY_BLOCK;
        rc = spool_pread(b, off, n, block, err);
        if (rc == 0)
            rc = repo_writer_write(w, block, n, err);
    }
    if (rc == 0) {
        rc = repo_writer_commit(w, err);
        w = NULL;
    }
    if (w)
        repo_writer_abort(w);
    free(block);
    return rc;
}

int bk_records_commit(bk_ctx *ctx, pb_error *err)
{
    bk_records *rec = ctx->rec;
    const mf_backup *h = mf_header_c(ctx->m);
    mf_writer *w = NULL;
    char key[MF_ID_LEN + 32];
    chain_backup_dir(key, sizeof(key), h->id);
    strcat(key, "/manifest");
    /* The parent's stream is done with: the walk is over. */
    bk_parent_cursor_close(&rec->prev);
    if (rec->npending) /* the scan settles every record before the stop */
        return pb_fail(err, PB_ESTATE, "backup %s: %zu file records still wait for their "
                       "frames at the commit", h->id, rec->npending);
    int rc = spool_open(&rec->b, ctx->opts->state_dir, h->id, "object", err);
    if (rc == 0)
        rc = mf_writer_new(&w, h, chain_manifest_codec(), spool_sink, &rec->b, err);
    if (rc == 0)
        rc = merge_into(rec, w, h->id, err);
    if (rc == 0)
        rc = mf_writer_finish(w, &rec->b.head, err);
    mf_writer_free(w);
    spool_close(&rec->a);
    if (rc == 0) {
        pb_detail("manifest of %s: %llu bytes; records held at most %llu at once, %llu bytes",
                h->id, (unsigned long long)(rec->b.head.len + rec->b.len),
                (unsigned long long)rec->records_peak, (unsigned long long)rec->bytes_peak);
        ctx->io.manifest_records_peak = rec->records_peak;
        ctx->io.manifest_bytes_peak = rec->bytes_peak;
        PB_FAULT_POINT("backup.before-manifest-commit");
        rc = upload(ctx->repo, key, &rec->b, err);
    }
    return rc;
}

int bk_records_apply(bk_ctx *ctx, mf_catalog *cat, pb_error *err)
{
    mf_stream *s = NULL;
    int rc = spool_stream(&ctx->rec->b, mf_header_c(ctx->m)->id, &s, err);
    if (rc == 0)
        rc = mf_catalog_apply_stream(cat, s, err);
    mf_stream_close(s);
    return rc;
}

void bk_parent_cursor_close(bk_parent_cursor *c)
{
    mf_file_clear(&c->cur);
    mf_stream_close(c->s);
    c->s = NULL;
    c->state = 0;
}

int bk_parent_cursor_find(bk_ctx *ctx, bk_parent_cursor *c, const char *path, const mf_file **out,
                   pb_error *err)
{
    *out = NULL;
    if (!ctx->parent)
        return 0;
    int rc = 0;
    if (c->state < 0) {
        rc = ctx->parent_copy ? chain_copy_stream(ctx->parent_copy, &c->s, err)
                              : chain_stream_open(ctx->repo, mf_header_c(ctx->parent)->id,
                                                  &c->s, err);
        c->state = rc ? 0 : mf_stream_next(c->s, &c->cur, err);
        if (c->state < 0) {
            rc = c->state;
            c->state = 0; /* failed: finds nothing more */
        }
    }
    /* Forward only: a path before the cursor (out of walk order) finds nothing and is
     * read, which is always safe. */
    while (rc == 0 && c->state == 1 && strcmp(c->cur.path, path) < 0) {
        mf_file_clear(&c->cur);
        c->state = mf_stream_next(c->s, &c->cur, err);
        if (c->state < 0) {
            rc = c->state;
            c->state = 0;
        }
    }
    if (rc == 0 && c->state == 1 && strcmp(c->cur.path, path) == 0)
        *out = &c->cur;
    return rc;
}

int bk_parent_find(bk_ctx *ctx, const char *path, const mf_file **out, pb_error *err)
{
    int rc = bk_parent_cursor_find(ctx, &ctx->rec->prev, path, out, err);
    note_held(ctx->rec, 0);
    return rc;
}
