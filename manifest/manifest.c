/* manifest/manifest.c — the in-memory manifest: files, ordering, validation. */
#include "manifest/manifest_internal.h"

#include <stdlib.h>
#include <string.h>

int mf_new(mf_manifest **out, const mf_backup *hdr, pb_error *err)
{
    *out = NULL;
    mf_manifest *m = calloc(1, sizeof(*m));
    if (!m)
        return pb_fail(err, PB_ENOMEM, "allocating a manifest");
    if (hdr)
        m->hdr = *hdr;
    m->sorted = true; /* an empty list is sorted */
    *out = m;
    return 0;
}

void mf_file_clear(mf_file *f)
{
    if (!f)
        return;
    free(f->path);
    free(f->link_target);
    free(f->runs);
    free(f->page_hashes);
    memset(f, 0, sizeof(*f));
}

void mf_free(mf_manifest *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->count; i++)
        mf_file_clear(&m->files[i]);
    free(m->files);
    free(m);
}

mf_backup *mf_header(mf_manifest *m)
{
    return &m->hdr;
}

const mf_backup *mf_header_c(const mf_manifest *m)
{
    return &m->hdr;
}

/* The file is validated here so that a manifest that serialises is one that parses:
 * a bad path must fail in the backup that produced it, not in a restore. On success
 * f's pointers are cleared (the manifest owns them now), so a caller that always
 * calls mf_file_clear(f) afterwards is correct either way. */
int mf_add_file(mf_manifest *m, mf_file *f, pb_error *err)
{
    int rc = mf_check_file(f, PB_EINVAL, "manifest", err);
    if (rc)
        return rc;
    if (PB_GROW(m->files, &m->cap, m->count + 1))
        return pb_fail(err, PB_ENOMEM, "adding %s to the manifest", f->path);
    if (m->count && strcmp(m->files[m->count - 1].path, f->path) >= 0)
        m->sorted = false;
    m->files[m->count++] = *f;
    memset(f, 0, sizeof(*f));
    return 0;
}

size_t mf_count(const mf_manifest *m)
{
    return m->count;
}

const mf_file *mf_at(const mf_manifest *m, size_t i)
{
    return i < m->count ? &m->files[i] : NULL;
}

static int cmp_file(const void *a, const void *b)
{
    return strcmp(((const mf_file *)a)->path, ((const mf_file *)b)->path);
}

static int cmp_file_ptr(const void *a, const void *b)
{
    return strcmp((*(const mf_file *const *)a)->path, (*(const mf_file *const *)b)->path);
}

/* Duplicates stay (adjacent) and make `sorted` false: mf_find then returns one of
 * them, and mf_serialize refuses the manifest. */
void mf_sort(mf_manifest *m)
{
    if (m->sorted)
        return;
    qsort(m->files, m->count, sizeof(*m->files), cmp_file);
    m->sorted = true;
    for (size_t i = 1; i < m->count; i++)
        if (strcmp(m->files[i - 1].path, m->files[i].path) == 0)
            m->sorted = false;
}

/* Binary search when sorted; a linear scan otherwise, so a caller that forgot
 * mf_sort gets a slow answer rather than a wrong one. */
const mf_file *mf_find(const mf_manifest *m, const char *path)
{
    if (!m->sorted) {
        for (size_t i = 0; i < m->count; i++)
            if (strcmp(m->files[i].path, path) == 0)
                return &m->files[i];
        return NULL;
    }
    size_t lo = 0, hi = m->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(m->files[mid].path, path);
        if (c == 0)
            return &m->files[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

int mf_sorted_view(const mf_manifest *m, const mf_file ***out, const mf_file ***owned,
                   const char *what, pb_error *err)
{
    *out = NULL;
    *owned = NULL;
    const mf_file **v = malloc((m->count ? m->count : 1) * sizeof(*v));
    if (!v)
        return pb_fail(err, PB_ENOMEM, "%s: sorting %zu files", what, m->count);
    for (size_t i = 0; i < m->count; i++)
        v[i] = &m->files[i];
    if (!m->sorted)
        qsort(v, m->count, sizeof(*v), cmp_file_ptr);
    for (size_t i = 1; i < m->count; i++) {
        if (strcmp(v[i - 1]->path, v[i]->path) == 0) {
            pb_fail(err, PB_EINVAL, "%s: file %s listed twice", what, v[i]->path);
            free(v);
            return PB_EINVAL;
        }
    }
    *out = v;
    *owned = v;
    return 0;
}

bool mf_path_is_safe(const char *path)
{
    if (!path || !*path || path[0] == '/')
        return false;
    size_t len = strnlen(path, MF_PATH_MAX);
    if (len >= MF_PATH_MAX)
        return false;
    const char *p = path;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 0) /* "a//b" or a trailing '/' */
            return false;
        if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        if (!slash)
            return true;
        p = slash + 1;
    }
}

uint64_t mf_shipped_pages(const mf_file *f)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < f->nruns; i++)
        n += f->runs[i].count;
    return n;
}

static int cmp_run_ref(const void *a, const void *b)
{
    const mf_run_ref *x = a, *y = b;
    return x->first < y->first ? -1 : x->first > y->first;
}

int mf_runs_sorted(const mf_file *f, mf_run_ref **out, int code, const char *what,
                   pb_error *err)
{
    *out = NULL;
    if (f->nruns == 0)
        return 0;
    mf_run_ref *v = malloc((size_t)f->nruns * sizeof(*v));
    if (!v)
        return pb_fail(err, PB_ENOMEM, "%s: file %s: %u runs", what, f->path, f->nruns);
    uint64_t at = 0;
    bool ascending = true;
    for (uint32_t i = 0; i < f->nruns; i++) {
        v[i] = (mf_run_ref){f->runs[i].first, f->runs[i].count, at};
        at += f->runs[i].count;
        if (i && v[i].first < v[i - 1].first)
            ascending = false;
    }
    if (!ascending)
        qsort(v, f->nruns, sizeof(*v), cmp_run_ref);
    for (uint32_t i = 1; i < f->nruns; i++) {
        if ((uint64_t)v[i - 1].first + v[i - 1].count > v[i].first) {
            pb_fail(err, code, "%s: file %s: runs at pages %u and %u overlap", what, f->path,
                    v[i - 1].first, v[i].first);
            free(v);
            return code;
        }
    }
    *out = v;
    return 0;
}

/* Ascending, non-overlapping runs are checked in place; anything else goes through
 * mf_runs_sorted, which allocates. */
static int check_runs(const mf_file *f, int code, const char *what, pb_error *err)
{
    bool ascending = true;
    for (uint32_t i = 0; i < f->nruns; i++) {
        const mf_run *r = &f->runs[i];
        if (r->count == 0 || (uint64_t)r->first + r->count > f->npages)
            return pb_fail(err, code, "%s: file %s: run %u pages [%u, +%u) outside %u pages",
                           what, f->path, i, r->first, r->count, f->npages);
        if (i && (uint64_t)f->runs[i - 1].first + f->runs[i - 1].count > r->first)
            ascending = false;
    }
    if (f->nruns && !f->page_hashes)
        return pb_fail(err, code, "%s: file %s: runs without page hashes", what, f->path);
    if (ascending)
        return 0;
    mf_run_ref *v;
    int rc = mf_runs_sorted(f, &v, code, what, err);
    free(v);
    return rc;
}

int mf_check_file(const mf_file *f, int code, const char *what, pb_error *err)
{
    if (!mf_path_is_safe(f->path))
        return pb_fail(err, code, "%s: unsafe path \"%.300s\"", what,
                       f->path ? f->path : "(null)");
    if (strnlen(f->stored_in, MF_ID_LEN) == MF_ID_LEN)
        return pb_fail(err, code, "%s: file %s: stored_in not terminated", what, f->path);
    switch (f->kind) {
    case MF_REL:
        /* npages sizes restore's per-page plan: it must be what size says, and bounded */
        if (f->npages > MF_REL_MAX_PAGES ||
            f->npages != (f->size + PB_PAGE_SIZE - 1) / PB_PAGE_SIZE)
            return pb_fail(err, code, "%s: file %s: %u pages for %llu bytes (at most %u pages)",
                           what, f->path, f->npages, (unsigned long long)f->size,
                           MF_REL_MAX_PAGES);
        return check_runs(f, code, what, err);
    case MF_FILE:
        if (f->nruns && !f->runs)
            return pb_fail(err, code, "%s: file %s: %u runs missing", what, f->path, f->nruns);
        return 0;
    case MF_LINK:
        if (!f->link_target || !*f->link_target || strlen(f->link_target) >= MF_PATH_MAX)
            return pb_fail(err, code, "%s: link %s: bad target", what, f->path);
        /* fall through */
    case MF_DIR:
        if (f->nruns)
            return pb_fail(err, code, "%s: %s %s has %u runs", what,
                           f->kind == MF_DIR ? "directory" : "link", f->path, f->nruns);
        return 0;
    }
    return pb_fail(err, code, "%s: file %s: unknown kind %d", what, f->path, (int)f->kind);
}
