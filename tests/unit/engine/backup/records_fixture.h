/* tests/unit/engine/backup/records_fixture.h — what the runners that drive the backup's
 * record stream directly (backup_records_test.c, backup_pipe_test.c) share: a posix
 * repository and a state directory under the runner's root, and a bk_ctx with an open
 * manifest and record stream, as a backup has them before its files are read. */
#ifndef PB_TEST_RECORDS_FIXTURE_H
#define PB_TEST_RECORDS_FIXTURE_H

#include "engine/backup/backup_internal.h"
#include "engine/backup/backup_records_internal.h"
#include "tests/unit/pbtest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct fixture {
    char dir[400], state[400];
    bk_opts opts;
    repo *r;
    pack_writer *w; /* the runner's own, if it opens one; freed by fx_close */
    bk_ctx ctx;
} fixture;

/* <root>/<name>-repo and <name>-state, backup id (an incremental when parent is not "")
 * of system sys on timeline 1. Three checks. */
static inline void fx_open_records(fixture *fx, const char *root, const char *name,
                                   const char *id, const char *parent, uint64_t sys)
{
    memset(fx, 0, sizeof(*fx));
    snprintf(fx->dir, sizeof(fx->dir), "%s/%s-repo", root, name);
    snprintf(fx->state, sizeof(fx->state), "%s/%s-state", root, name);
    mkdir(fx->dir, 0700);
    mkdir(fx->state, 0700);
    repo_opts ro = REPO_OPTS_INIT;
    ro.location = fx->dir;
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(repo_open(&fx->r, &ro, &err) == 0);
    fx->opts = (bk_opts)BK_OPTS_INIT;
    fx->opts.state_dir = fx->state;
    mf_backup h;
    memset(&h, 0, sizeof(h));
    snprintf(h.id, sizeof(h.id), "%s", id);
    snprintf(h.parent, sizeof(h.parent), "%s", parent);
    h.type = parent[0] ? 'I' : 'F';
    h.system_id = sys;
    h.timeline = 1;
    h.wal_segment_size = 16u << 20;
    fx->ctx.opts = &fx->opts;
    fx->ctx.repo = fx->r;
    PBT_CHECK(mf_new(&fx->ctx.m, &h, &err) == 0);
    PBT_CHECK(bk_records_open(&fx->ctx, &err) == 0);
}

static inline void fx_close(fixture *fx)
{
    bk_pipe_free(fx->ctx.pipe);
    pack_writer_free(fx->w);
    bk_records_free(fx->ctx.rec);
    mf_free(fx->ctx.m);
    repo_free(fx->r);
}

/* A record of path (copied; NULL path when out of memory), kind and mode; the caller
 * fills in the rest. */
static inline mf_file fx_file(const char *path, mf_kind kind, uint32_t mode)
{
    mf_file f;
    memset(&f, 0, sizeof(f));
    f.path = strdup(path);
    f.kind = kind;
    f.mode = mode;
    return f;
}

/* Hand f to ctx's records, which own its allocations once it is added; what is left is
 * freed either way. */
static inline int fx_record_add(bk_ctx *ctx, mf_file *f, pb_error *err)
{
    int rc = bk_record_add(ctx, f, err);
    if (rc == 0)
        memset(f, 0, sizeof(*f));
    mf_file_clear(f);
    return rc;
}

#endif
