/*
 * manifest/merge.c — the manifests of a chain merged as sorted streams: for each path
 * in any of them, in path order, each manifest's record of it (or none). This is the
 * per-file source map restore, verify and rebase plan from (as pg_combinebackup builds
 * one), holding one record and one chunk per manifest instead of every manifest whole.
 */
#include "manifest/v2_internal.h"

#include <stdlib.h>
#include <string.h>

struct mf_merge {
    mf_stream **s;
    mf_file *head;         /* each stream's current record */
    bool *live;            /* head[i] holds a record */
    bool *used;            /* head[i] was handed out by the last mf_merge_next */
    const mf_file **out;
    size_t n;
    bool started;
};

void mf_merge_close(mf_merge *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++) {
        if (m->head && m->live[i])
            mf_file_clear(&m->head[i]);
        mf_stream_close(m->s[i]);
    }
    free(m->s);
    free(m->head);
    free(m->live);
    free(m->used);
    free(m->out);
    free(m);
}

int mf_merge_open(mf_merge **out, mf_stream **streams, size_t n, pb_error *err)
{
    *out = NULL;
    mf_merge *m = calloc(1, sizeof(*m));
    size_t k = n ? n : 1;
    if (m) {
        m->s = calloc(k, sizeof(*m->s));
        m->head = calloc(k, sizeof(*m->head));
        m->live = calloc(k, sizeof(*m->live));
        m->used = calloc(k, sizeof(*m->used));
        m->out = calloc(k, sizeof(*m->out));
    }
    if (!m || !m->s || !m->head || !m->live || !m->used || !m->out) {
        for (size_t i = 0; i < n; i++)
            mf_stream_close(streams[i]);
        mf_merge_close(m);
        return pb_fail(err, PB_ENOMEM, "merging %zu manifests", n);
    }
    m->n = n;
    for (size_t i = 0; i < n; i++) {
        m->s[i] = streams[i];
        m->used[i] = true; /* so the first call reads every stream's first record */
    }
    *out = m;
    return 0;
}

static int advance(mf_merge *m, size_t i, pb_error *err)
{
    if (m->live[i])
        mf_file_clear(&m->head[i]);
    m->live[i] = false;
    if (!m->s[i])
        return 0;
    int rc = mf_stream_next(m->s[i], &m->head[i], err);
    if (rc < 0)
        return rc;
    m->live[i] = rc == 1;
    return 0;
}

int mf_merge_next(mf_merge *m, const mf_file *const **files, pb_error *err)
{
    *files = NULL;
    for (size_t i = 0; i < m->n; i++) {
        if (!m->used[i])
            continue;
        int rc = advance(m, i, err);
        if (rc)
            return rc;
        m->used[i] = false;
    }
    const char *min = NULL;
    for (size_t i = 0; i < m->n; i++)
        if (m->live[i] && (!min || strcmp(m->head[i].path, min) < 0))
            min = m->head[i].path;
    if (!min)
        return 0;
    for (size_t i = 0; i < m->n; i++) {
        bool here = m->live[i] && strcmp(m->head[i].path, min) == 0;
        m->out[i] = here ? &m->head[i] : NULL;
        m->used[i] = here;
    }
    *files = m->out;
    return 1;
}

uint64_t mf_merge_peak(const mf_merge *m)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < m->n; i++)
        sum += mf_stream_peak(m->s[i]);
    return sum;
}
