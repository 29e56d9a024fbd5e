/*
 * engine/backup/walguide.c — the block set of a WAL-guided incremental (walguide_internal.h).
 *
 * Block references arrive in WAL order, any relation at any time; the backup asks for
 * them in path order, one segment at a time. So they are collected in an array of at
 * most mem_entries; when it fills, it is sorted and deduplicated, and if still more than
 * half full it is written as a sorted run to the state directory (memory stays bounded
 * whatever the WAL volume: docs/DESIGN.md, "How the cost follows the change"). At the
 * end the runs are merged into one sorted file, and a small index (one row per relation
 * segment named) says where each segment's blocks are; the blocks themselves are read
 * from the file on demand.
 */
#include "engine/backup/walguide_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The default bound of the array in bytes (docs/DESIGN.md, "Polite I/O": Memory):
 * sorting it takes as much again (glibc's qsort merges through a copy), so the set holds
 * 8 MiB at most whatever the WAL volume. Duplicates go at each compaction, so a window that names
 * fewer distinct blocks than fit here never spills. */
#define WG_DEFAULT_BYTES (4u << 20)
#define RELSEG_PAGES 131072u

typedef struct wg_ent {
    wg_key k;
    uint32_t blk;
} wg_ent;

typedef struct wg_idx {
    wg_key k;
    uint64_t first; /* entry index in mem or in the merged file */
    uint32_t count;
} wg_idx;

typedef struct wg_rel {
    uint32_t spc, db, rel;
} wg_rel;

struct wg_set {
    char *dir;
    wg_ent *mem;
    size_t n, limit, cap;
    char **runs;
    size_t nruns, runs_cap;
    uint64_t spilled, count;
    int merged_fd; /* -1: the blocks are in mem */
    char merged_path[4200];
    wg_idx *idx;
    size_t nidx, idx_cap;
    wg_rel *rels;
    size_t nrels, rels_cap;
    wg_rel *dbs; /* rel unused */
    size_t ndbs, dbs_cap;
};

static int cmp_key(const wg_key *a, const wg_key *b)
{
    const uint32_t x[5] = {a->spc, a->db, a->rel, a->fork, a->seg};
    const uint32_t y[5] = {b->spc, b->db, b->rel, b->fork, b->seg};
    for (int i = 0; i < 5; i++)
        if (x[i] != y[i])
            return x[i] < y[i] ? -1 : 1;
    return 0;
}

static int cmp_ent(const void *va, const void *vb)
{
    const wg_ent *a = va, *b = vb;
    int c = cmp_key(&a->k, &b->k);
    return c ? c : a->blk < b->blk ? -1 : a->blk > b->blk;
}

static int cmp_rel(const void *va, const void *vb)
{
    const wg_rel *a = va, *b = vb;
    const uint32_t x[3] = {a->spc, a->db, a->rel}, y[3] = {b->spc, b->db, b->rel};
    for (int i = 0; i < 3; i++)
        if (x[i] != y[i])
            return x[i] < y[i] ? -1 : 1;
    return 0;
}

int wg_set_open(wg_set **out, const char *spill_dir, size_t mem_entries, pb_error *err)
{
    *out = NULL;
    wg_set *s = calloc(1, sizeof(*s));
    if (!s || !(s->dir = strdup(spill_dir))) {
        free(s);
        return pb_fail(err, PB_ENOMEM, "out of memory for the WAL block set");
    }
    s->limit = mem_entries ? mem_entries : WG_DEFAULT_BYTES / sizeof(wg_ent);
    if (s->limit < 16)
        s->limit = 16;
    s->merged_fd = -1;
    *out = s;
    return 0;
}

void wg_set_free(wg_set *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nruns; i++) {
        unlink(s->runs[i]);
        free(s->runs[i]);
    }
    if (s->merged_fd >= 0) {
        close(s->merged_fd);
        unlink(s->merged_path);
    }
    free(s->runs);
    free(s->mem);
    free(s->idx);
    free(s->rels);
    free(s->dbs);
    free(s->dir);
    free(s);
}

/* Sort and drop duplicates in memory. */
static void compact(wg_set *s)
{
    if (s->n < 2)
        return;
    qsort(s->mem, s->n, sizeof(*s->mem), cmp_ent);
    size_t w = 1;
    for (size_t i = 1; i < s->n; i++)
        if (cmp_ent(&s->mem[i], &s->mem[w - 1]) != 0)
            s->mem[w++] = s->mem[i];
    s->n = w;
}

static int spill(wg_set *s, pb_error *err)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/walguide-%ld-%zu.run", s->dir, (long)getpid(), s->nruns);
    if (PB_GROW(s->runs, &s->runs_cap, s->nruns + 1))
        return pb_fail(err, PB_ENOMEM, "out of memory spilling the WAL block set");
    FILE *f = fopen(path, "wbx");
    if (!f)
        return pb_fail_errno(err, PB_EIO, "cannot create %s (WAL block set spill)", path);
    s->runs[s->nruns] = strdup(path);
    if (!s->runs[s->nruns]) {
        fclose(f);
        unlink(path);
        return pb_fail(err, PB_ENOMEM, "out of memory spilling the WAL block set");
    }
    s->nruns++;
    size_t put = fwrite(s->mem, sizeof(*s->mem), s->n, f);
    if (fclose(f) != 0 || put != s->n)
        return pb_fail_errno(err, PB_EIO, "cannot write %s (WAL block set spill)", path);
    s->spilled += (uint64_t)s->n * sizeof(*s->mem);
    s->n = 0;
    return 0;
}

int wg_set_add(wg_set *s, const wg_key *k, uint32_t blk, pb_error *err)
{
    if (s->n == s->limit) {
        compact(s);
        if (s->n > s->limit / 2) {
            int rc = spill(s, err);
            if (rc)
                return rc;
        }
    }
    /* The whole bound at once: growing it by realloc between the WAL segments' buffers
     * would leave holes the heap keeps resident. Pages are touched only as it fills. */
    if (!s->mem && !(s->mem = malloc(s->limit * sizeof(*s->mem))))
        return pb_fail(err, PB_ENOMEM, "out of memory for the WAL block set");
    s->cap = s->limit;
    s->mem[s->n].k = *k;
    s->mem[s->n].blk = blk;
    s->n++;
    return 0;
}

static int mark(wg_rel **arr, size_t *n, size_t *cap, wg_rel r, pb_error *err)
{
    if (PB_GROW(*arr, cap, *n + 1))
        return pb_fail(err, PB_ENOMEM, "out of memory for the WAL block set");
    (*arr)[(*n)++] = r;
    return 0;
}

int wg_set_mark_rel(wg_set *s, uint32_t spc, uint32_t db, uint32_t rel, pb_error *err)
{
    return mark(&s->rels, &s->nrels, &s->rels_cap, (wg_rel){spc, db, rel}, err);
}

int wg_set_mark_db(wg_set *s, uint32_t spc, uint32_t db, pb_error *err)
{
    return mark(&s->dbs, &s->ndbs, &s->dbs_cap, (wg_rel){spc, db, 0}, err);
}

/* One more entry in sorted order: extend the index. */
static int index_add(wg_set *s, const wg_ent *e, uint64_t pos, pb_error *err)
{
    if (s->nidx && cmp_key(&s->idx[s->nidx - 1].k, &e->k) == 0) {
        s->idx[s->nidx - 1].count++;
    } else {
        if (PB_GROW(s->idx, &s->idx_cap, s->nidx + 1))
            return pb_fail(err, PB_ENOMEM, "out of memory indexing the WAL block set");
        s->idx[s->nidx++] = (wg_idx){e->k, pos, 1};
    }
    s->count++;
    return 0;
}

/* Merge the runs (each sorted) into one file, dropping duplicates across runs. */
static int merge_runs(wg_set *s, pb_error *err)
{
    FILE **in = calloc(s->nruns, sizeof(*in));
    wg_ent *head = calloc(s->nruns, sizeof(*head));
    bool *live = calloc(s->nruns, sizeof(*live));
    FILE *out = NULL;
    int rc = 0;
    if (!in || !head || !live) {
        rc = pb_fail(err, PB_ENOMEM, "out of memory merging the WAL block set");
        goto out;
    }
    snprintf(s->merged_path, sizeof(s->merged_path), "%s/walguide-%ld.merged", s->dir,
             (long)getpid());
    if (!(out = fopen(s->merged_path, "wbx"))) {
        rc = pb_fail_errno(err, PB_EIO, "cannot create %s", s->merged_path);
        s->merged_path[0] = '\0';
        goto out;
    }
    for (size_t i = 0; i < s->nruns; i++) {
        if (!(in[i] = fopen(s->runs[i], "rb"))) {
            rc = pb_fail_errno(err, PB_EIO, "cannot open %s", s->runs[i]);
            goto out;
        }
        live[i] = fread(&head[i], sizeof(head[i]), 1, in[i]) == 1;
    }
    uint64_t pos = 0;
    wg_ent last;
    for (;;) {
        size_t m = s->nruns;
        for (size_t i = 0; i < s->nruns; i++)
            if (live[i] && (m == s->nruns || cmp_ent(&head[i], &head[m]) < 0))
                m = i;
        if (m == s->nruns)
            break;
        wg_ent e = head[m];
        live[m] = fread(&head[m], sizeof(head[m]), 1, in[m]) == 1;
        if (pos && cmp_ent(&e, &last) == 0)
            continue;
        if (fwrite(&e, sizeof(e), 1, out) != 1) {
            rc = pb_fail_errno(err, PB_EIO, "cannot write %s", s->merged_path);
            goto out;
        }
        if ((rc = index_add(s, &e, pos++, err)))
            goto out;
        last = e;
    }
out:
    for (size_t i = 0; in && i < s->nruns; i++)
        if (in[i])
            fclose(in[i]);
    if (out && fclose(out) != 0 && rc == 0)
        rc = pb_fail_errno(err, PB_EIO, "cannot write %s", s->merged_path);
    if (rc == 0 && (s->merged_fd = open(s->merged_path, O_RDONLY | O_CLOEXEC)) < 0)
        rc = pb_fail_errno(err, PB_EIO, "cannot open %s", s->merged_path);
    if (rc && s->merged_path[0] && s->merged_fd < 0)
        unlink(s->merged_path);
    free(in);
    free(head);
    free(live);
    return rc;
}

int wg_set_finish(wg_set *s, pb_error *err)
{
    int rc = 0;
    /* qsort's array must not be NULL, even for no elements (C11 7.22.5) */
    if (s->nrels)
        qsort(s->rels, s->nrels, sizeof(*s->rels), cmp_rel);
    if (s->ndbs)
        qsort(s->dbs, s->ndbs, sizeof(*s->dbs), cmp_rel);
    compact(s);
    if (s->nruns) {
        if ((rc = spill(s, err)) || (rc = merge_runs(s, err)))
            return rc;
        free(s->mem);
        s->mem = NULL;
        s->cap = 0;
        return 0;
    }
    for (size_t i = 0; rc == 0 && i < s->n; i++)
        rc = index_add(s, &s->mem[i], i, err);
    return rc;
}

static int cmp_idx_key(const void *vk, const void *vi)
{
    return cmp_key(vk, &((const wg_idx *)vi)->k);
}

int wg_set_blocks(const wg_set *s, const wg_key *k, uint32_t **out, size_t *n, pb_error *err)
{
    *out = NULL;
    *n = 0;
    wg_rel r = {k->spc, k->db, k->rel}, d = {k->spc, k->db, 0};
    if ((s->nrels && bsearch(&r, s->rels, s->nrels, sizeof(r), cmp_rel)) ||
        (s->ndbs && bsearch(&d, s->dbs, s->ndbs, sizeof(d), cmp_rel)))
        return PB_ENOENT;
    const wg_idx *ix = s->nidx ? bsearch(k, s->idx, s->nidx, sizeof(*s->idx), cmp_idx_key)
                               : NULL;
    if (!ix)
        return 0;
    uint32_t *blocks = malloc((size_t)ix->count * sizeof(*blocks));
    if (!blocks)
        return pb_fail(err, PB_ENOMEM, "out of memory for %u WAL-named blocks", ix->count);
    for (uint32_t i = 0; i < ix->count; i++) {
        wg_ent e;
        if (s->merged_fd < 0) {
            e = s->mem[ix->first + i];
        } else if (pread(s->merged_fd, &e, sizeof(e), (off_t)((ix->first + i) * sizeof(e))) !=
                   (ssize_t)sizeof(e)) {
            free(blocks);
            return pb_fail_errno(err, PB_EIO, "cannot read %s", s->merged_path);
        }
        blocks[i] = e.blk;
    }
    *out = blocks;
    *n = ix->count;
    return 0;
}

uint64_t wg_set_count(const wg_set *s) { return s->count; }
uint64_t wg_set_spilled(const wg_set *s) { return s->spilled; }

/* "<rel>[_fsm|_vm|_init][.<seg>]" */
static bool parse_relfile(const char *name, wg_key *k)
{
    char *end;
    errno = 0;
    unsigned long rel = strtoul(name, &end, 10);
    if (end == name || errno || rel == 0 || rel > UINT32_MAX)
        return false;
    k->rel = (uint32_t)rel;
    k->fork = 0;
    static const char *const forks[] = {"", "_fsm", "_vm", "_init"};
    for (unsigned f = 1; f < 4; f++) {
        size_t l = strlen(forks[f]);
        if (strncmp(end, forks[f], l) == 0 && (end[l] == '\0' || end[l] == '.')) {
            k->fork = f;
            end += l;
            break;
        }
    }
    k->seg = 0;
    if (*end == '.') {
        char *e2;
        unsigned long seg = strtoul(end + 1, &e2, 10);
        if (e2 == end + 1 || *e2 || seg >= UINT32_MAX / RELSEG_PAGES)
            return false;
        k->seg = (uint32_t)seg;
        return true;
    }
    return *end == '\0';
}

static bool parse_oid(const char **p, uint32_t *out)
{
    char *end;
    unsigned long v = strtoul(*p, &end, 10);
    if (end == *p || *end != '/' || v == 0 || v > UINT32_MAX)
        return false;
    *out = (uint32_t)v;
    *p = end + 1;
    return true;
}

bool wg_key_from_path(const char *path, const char *tblspc_dir, wg_key *out)
{
    memset(out, 0, sizeof(*out));
    const char *p = path;
    if (strncmp(p, "global/", 7) == 0) {
        out->spc = 1664; /* GLOBALTABLESPACE_OID */
        return parse_relfile(p + 7, out);
    }
    if (strncmp(p, "base/", 5) == 0) {
        p += 5;
        out->spc = 1663; /* DEFAULTTABLESPACE_OID */
        return parse_oid(&p, &out->db) && parse_relfile(p, out);
    }
    if (strncmp(p, "pg_tblspc/", 10) != 0 || !tblspc_dir || !tblspc_dir[0])
        return false;
    p += 10;
    size_t l = strlen(tblspc_dir);
    if (!parse_oid(&p, &out->spc) || strncmp(p, tblspc_dir, l) != 0 || p[l] != '/')
        return false;
    p += l + 1;
    return parse_oid(&p, &out->db) && parse_relfile(p, out);
}
