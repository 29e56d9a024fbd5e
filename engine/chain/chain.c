/* engine/chain/chain.c — listing, loading and resolving backup chains in a repository. */
#include "engine/chain/chain.h"
#include "engine/pack/pack.h"
#include "common/fault.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define IDENTITY_KEY CHAIN_IDENTITY_KEY
#define IDENTITY_MAGIC "PAGEBACK-REPO 1"

void chain_backup_dir(char *out, size_t cap, const char *id)
{
    snprintf(out, cap, "backup/%s", id);
}

const mf_codec *chain_manifest_codec(void)
{
    static const mf_codec zstd = {pack_chunk_compress, pack_chunk_decompress,
                                  PACK_ZSTD_MAX_RATIO};
    return &zstd;
}

static void manifest_key(char *out, size_t cap, const char *id)
{
    snprintf(out, cap, "backup/%s/manifest", id);
}

typedef struct list_ctx {
    chain_ids *ids;
    size_t cap;
} list_ctx;

static int collect_manifest(void *vctx, const char *key, uint64_t size)
{
    list_ctx *ctx = vctx;
    const char *rest = key + strlen("backup/");
    const char *slash = strchr(rest, '/');
    if (!slash || strcmp(slash, "/manifest") != 0 || (size_t)(slash - rest) >= MF_ID_LEN)
        return 0;
    if (PB_GROW(ctx->ids->ids, &ctx->cap, ctx->ids->count + 1))
        return PB_ENOMEM;
    char *dst = ctx->ids->ids[ctx->ids->count++];
    memcpy(dst, rest, (size_t)(slash - rest));
    dst[slash - rest] = '\0';
    return 0;
}

static int cmp_id(const void *a, const void *b)
{
    return strcmp(a, b);
}

int chain_list(repo *r, chain_ids *out, pb_error *err)
{
    memset(out, 0, sizeof(*out));
    list_ctx ctx = {out, 0};
    int rc = repo_list(r, "backup/", collect_manifest, &ctx, err);
    if (rc == PB_ENOMEM)
        pb_fail(err, rc, "out of memory listing backups in %s", repo_location(r));
    if (rc) {
        chain_ids_free(out);
        return rc;
    }
    if (out->count) /* an empty repository has no array to sort */
        qsort(out->ids, out->count, sizeof(*out->ids), cmp_id);
    return 0;
}

void chain_ids_free(chain_ids *ids)
{
    if (!ids)
        return;
    free(ids->ids);
    ids->ids = NULL;
    ids->count = 0;
}

int chain_load(repo *r, const char *id, mf_manifest **out, pb_error *err)
{
    char key[256];
    manifest_key(key, sizeof(key), id);
    void *data = NULL;
    size_t len = 0;
    int rc = repo_get(r, key, &data, &len, err);
    if (rc == PB_ENOENT)
        return pb_fail(err, rc, "backup set %s not found in repository %s", id,
                       repo_location(r));
    if (rc)
        return rc;
    char what[300];
    snprintf(what, sizeof(what), "%s/%s", repo_location(r), key);
    void *raw = NULL;
    size_t raw_len = 0;
    /* Version 2 is stored as is (chunks compressed one by one, so range reads work);
     * older manifests are in the compressed envelope. */
    if (len >= 8 && memcmp(data, "PBMANIF1", 8) == 0) {
        raw = data;
        raw_len = len;
    } else {
        rc = pack_object_decode(data, len, what, &raw, &raw_len, err);
        free(data);
    }
    if (rc == 0)
        rc = mf_parse_codec(raw, raw_len, chain_manifest_codec(), what, out, err);
    free(raw);
    if (rc == 0 && strcmp(mf_header(*out)->id, id) != 0) {
        rc = pb_fail(err, PB_ECORRUPT, "manifest %s names backup %s, not %s", what,
                     mf_header(*out)->id, id);
        mf_free(*out);
        *out = NULL;
    }
    return rc;
}

int chain_commit(repo *r, const mf_manifest *m, pb_error *err)
{
    pb_buf buf = {0};
    /* Version 2 is not in the compressed envelope: readers range-read its header, index
     * and one chunk at a time, so each chunk is compressed on its own instead. */
    int rc = mf_serialize_codec(m, chain_manifest_codec(), &buf, err);
    if (rc == 0) {
        char key[256];
        manifest_key(key, sizeof(key), mf_header_c(m)->id);
        rc = repo_put(r, key, buf.data, buf.len, err);
    }
    pb_buf_free(&buf);
    return rc;
}

void chain_free(chain *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->count; i++)
        mf_free(c->items[i]);
    free(c->items);
    c->items = NULL;
    c->count = 0;
}

const mf_manifest *chain_find(const chain *c, const char *id)
{
    for (size_t i = 0; i < c->count; i++)
        if (strcmp(mf_header_c(c->items[i])->id, id) == 0)
            return c->items[i];
    return NULL;
}

int chain_verify_identity(repo *r, uint64_t system_id, const char *id, pb_error *err)
{
    int rc = chain_check_identity(r, system_id, false, err);
    if (rc == 0 || rc == PB_ENOMEM || rc == PB_EIO || rc == PB_EREMOTE || rc == PB_EAUTH)
        return rc;
    if (err)
        err->code = PB_ECORRUPT;
    return pb_error_wrap(err, "repository identity %s (checked for backup %s)", IDENTITY_KEY,
                         id);
}

/* Every backup of a chain is of the cluster that the repository identity file names, so
 * a damaged, missing or foreign identity file (or a manifest of another cluster) stops a
 * restore or verify before anything is read from the chain. */
static int check_chain_identity(repo *r, const chain *c, const char *id, pb_error *err)
{
    uint64_t sys = mf_header_c(c->items[0])->system_id;
    for (size_t i = 1; i < c->count; i++)
        if (mf_header_c(c->items[i])->system_id != sys)
            return pb_fail(err, PB_ECORRUPT, "backup %s is of the cluster with system "
                           "identifier %" PRIu64 ", its chain's newest (%s) of %" PRIu64,
                           mf_header_c(c->items[i])->id, mf_header_c(c->items[i])->system_id,
                           id, sys);
    return chain_verify_identity(r, sys, id, err);
}

/* The manifest of id: moved out of pool when it is there, else read. */
static int take_or_load(repo *r, chain *pool, const char *id, mf_manifest **out,
                        pb_error *err)
{
    for (size_t i = 0; pool && i < pool->count; i++)
        if (pool->items[i] && strcmp(mf_header_c(pool->items[i])->id, id) == 0) {
            *out = pool->items[i];
            pool->items[i] = NULL;
            return 0;
        }
    return chain_load(r, id, out, err);
}

int chain_resolve(repo *r, const char *id, chain *out, pb_error *err)
{
    return chain_resolve_from(r, id, NULL, out, err);
}

/* Walk parents from id back to its full backup, then reverse into oldest-first order. */
int chain_resolve_from(repo *r, const char *id, chain *pool, chain *out, pb_error *err)
{
    memset(out, 0, sizeof(*out));
    char next[MF_ID_LEN];
    snprintf(next, sizeof(next), "%s", id);
    size_t cap = 0;
    int rc = 0;
    while (next[0]) {
        if (PB_GROW(out->items, &cap, out->count + 1)) {
            rc = pb_fail(err, PB_ENOMEM, "out of memory resolving chain of %s", id);
            goto out;
        }
        mf_manifest *m = NULL;
        rc = take_or_load(r, pool, next, &m, err);
        if (rc) {
            if (out->count)
                pb_error_wrap(err, "backup %s needs its parent %s", id, next);
            goto out;
        }
        out->items[out->count++] = m;
        if (out->count > 100000) {
            rc = pb_fail(err, PB_ECORRUPT, "backup chain of %s loops", id);
            goto out;
        }
        snprintf(next, sizeof(next), "%s", mf_header(m)->parent);
    }
    if ((rc = check_chain_identity(r, out, id, err)))
        goto out;
    for (size_t i = 0; i < out->count / 2; i++) {
        mf_manifest *t = out->items[i];
        out->items[i] = out->items[out->count - 1 - i];
        out->items[out->count - 1 - i] = t;
    }
out:
    if (rc)
        chain_free(out);
    return rc;
}

int chain_check_identity(repo *r, uint64_t system_id, bool create, pb_error *err)
{
    void *data = NULL;
    size_t len = 0;
    int rc = repo_get(r, IDENTITY_KEY, &data, &len, err);
    chain_ids ids = {0};
    if (rc == PB_ENOENT && create && chain_list(r, &ids, err) == 0 && ids.count > 0) {
        size_t n = ids.count;
        chain_ids_free(&ids);
        return pb_fail(err, PB_ECORRUPT,
                       "%s/%s is missing but the repository holds %zu backups: refusing to "
                       "guess which cluster they belong to", repo_location(r), IDENTITY_KEY,
                       n);
    }
    chain_ids_free(&ids);
    if (rc == PB_ENOENT && create) {
        char text[128];
        int n = snprintf(text, sizeof(text), "%s\nsystem-identifier=%" PRIu64 "\n",
                         IDENTITY_MAGIC, system_id);
        return repo_put(r, IDENTITY_KEY, text, (size_t)n, err);
    }
    if (rc == PB_ENOENT)
        return pb_fail(err, PB_ESTATE,
                       "%s is not a pageback repository (no %s): run pageback init "
                       "--repo %s", repo_location(r), IDENTITY_KEY, repo_location(r));
    if (rc)
        return rc;
    char text[256];
    snprintf(text, sizeof(text), "%.*s", (int)(len < 255 ? len : 255), (char *)data);
    free(data);
    const char *p = strstr(text, "system-identifier=");
    uint64_t stored = 0;
    if (strncmp(text, IDENTITY_MAGIC, strlen(IDENTITY_MAGIC)) != 0 || !p ||
        sscanf(p, "system-identifier=%" SCNu64, &stored) != 1)
        return pb_fail(err, PB_ECORRUPT, "%s/%s is not a valid repository identity file",
                       repo_location(r), IDENTITY_KEY);
    if (system_id && stored != system_id)
        return pb_fail(err, PB_ESTATE,
                       "wrong repository: %s holds backups of the cluster with system "
                       "identifier %" PRIu64 ", but this cluster's is %" PRIu64,
                       repo_location(r), stored, system_id);
    return 0;
}

int chain_delete_object(repo *r, const char *key)
{
    pb_error err = PB_ERROR_INIT;
    int rc = repo_delete(r, key, &err);
    if (rc == PB_ENOENT)
        return 0;
    if (rc)
        pb_warn("%s", err.msg);
    return rc;
}

/* A listing callback: one object that cannot be removed does not stop the others. */
static int drop_object(void *vr, const char *key, uint64_t size)
{
    (void)size;
    chain_delete_object(vr, key);
    return 0;
}

int chain_drop(repo *r, const char *id, pb_error *err)
{
    char key[256];
    manifest_key(key, sizeof(key), id);
    int rc = repo_delete(r, key, err);
    if (rc && rc != PB_ENOENT)
        return rc;
    PB_FAULT_POINT("drop.after-manifest");
    snprintf(key, sizeof(key), "backup/%s/", id);
    return repo_list(r, key, drop_object, r, err);
}

/* "20261201-083310F-482913-7f3a": the second, the type letter at index 15 (read by
 * expire and backup), then the microsecond and 16 random bits, so two writers starting in
 * the same second (two hosts, or a lock takeover) never share an id or its objects. Ids
 * without the suffix (older versions) stay valid. A new id sorts after `after` as a whole
 * string, so the listing's order stays the order the backups were taken in: within one
 * second a later microsecond or a later type letter is enough, and only a full after an
 * incremental of the same second (F sorts before I) waits for the next second. */
void chain_new_id(char out[MF_ID_LEN], char type, const char *after)
{
    for (;;) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        struct tm tm;
        gmtime_r(&now.tv_sec, &tm);
        char stamp[24];
        strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
        uint16_t rnd = 0;
        if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
            rnd = (uint16_t)(getpid() ^ now.tv_nsec);
        char id[64] = "";
        snprintf(id, sizeof(id), "%.15s%c-%06u-%04x", stamp, type,
                 (unsigned)(now.tv_nsec / 1000L) % 1000000u, (unsigned)rnd);
        memcpy(out, id, MF_ID_LEN - 1);
        out[MF_ID_LEN - 1] = '\0';
        if (!after || strcmp(out, after) > 0)
            return;
        /* Same second: a type letter not below `after`'s needs only a later microsecond
         * (two ids can come within one); a lower one the next second; a clock behind
         * `after`, a whole second. */
        struct timespec rest = {0, 1000000000L - now.tv_nsec};
        int second = strncmp(out, after, 15);
        if (second == 0 && out[15] >= after[15])
            rest = (struct timespec){0, 1000};
        else if (second < 0)
            rest = (struct timespec){1, 0};
        nanosleep(&rest, NULL);
    }
}

/* ---- leftovers of writers that are gone ------------------------------------------- */

typedef struct orphan_ctx {
    char (*ids)[MF_ID_LEN]; /* every id seen under backup/, in listing order */
    bool *committed;        /* its manifest exists */
    bool *needed;           /* a committed backup names it as its parent */
    size_t n, orphans;
    size_t ids_cap, committed_cap, needed_cap;
} orphan_ctx;

/* Room for one more id in each of the three parallel arrays. */
static int orphan_grow(orphan_ctx *o)
{
    size_t need = o->n + 1;
    if (PB_GROW(o->ids, &o->ids_cap, need) || PB_GROW(o->committed, &o->committed_cap, need) ||
        PB_GROW(o->needed, &o->needed_cap, need))
        return PB_ENOMEM;
    return 0;
}

/* The keys of one backup are contiguous in the (lexical) listing: a new id starts
 * whenever the id part differs from the previous key's. */
static int collect_orphan(void *vctx, const char *key, uint64_t size)
{
    (void)size;
    orphan_ctx *o = vctx;
    const char *id = key + strlen("backup/");
    size_t len = strcspn(id, "/");
    if (len == 0 || len >= MF_ID_LEN || !id[len])
        return 0;
    if (o->n == 0 || strncmp(o->ids[o->n - 1], id, len) != 0 || o->ids[o->n - 1][len]) {
        if (orphan_grow(o) != 0)
            return PB_ENOMEM;
        snprintf(o->ids[o->n], MF_ID_LEN, "%.*s", (int)len, id);
        o->committed[o->n] = o->needed[o->n] = false;
        o->n++;
    }
    if (strcmp(id + len, "/manifest") == 0)
        o->committed[o->n - 1] = true;
    return 0;
}

/* Marks the manifest-less backups that a committed backup names as its parent. Every
 * committed manifest is read once (only when there is an orphan at all); one that cannot
 * be read might name any of them, so then nothing is removed. */
static int mark_needed(repo *r, orphan_ctx *o, pb_error *err)
{
    for (size_t j = 0; j < o->n; j++) {
        if (!o->committed[j])
            continue;
        mf_manifest *m = NULL;
        int rc = chain_load(r, o->ids[j], &m, err);
        if (rc)
            return pb_error_wrap(err, "backups without a manifest are kept (backup %s, which "
                                 "may need one of them, is unreadable)", o->ids[j]);
        const char *parent = mf_header(m)->parent;
        for (size_t i = 0; parent[0] && i < o->n; i++)
            if (!o->committed[i] && strcmp(o->ids[i], parent) == 0 && !o->needed[i]) {
                o->needed[i] = true;
                pb_warn("backup %s has no manifest, but backup %s names it as its parent: "
                        "its objects are kept (restore the manifest, or expire the chain)",
                        o->ids[i], o->ids[j]);
            }
        mf_free(m);
    }
    return 0;
}

/* Marks the manifest-less backups the record lists: committed once, their manifest lost
 * since (verify names them). A record that cannot be read might list any of them, so
 * then nothing is removed. */
static int mark_recorded(repo *r, orphan_ctx *o, pb_error *err)
{
    chain_record rec = {0};
    int rc = chain_record_load(r, &rec, err);
    if (rc)
        return pb_error_wrap(err, "backups without a manifest are kept (the record of "
                             "committed backups is unreadable)");
    for (size_t i = 0; i < o->n; i++)
        if (!o->committed[i] && !o->needed[i] && chain_record_has(&rec, o->ids[i])) {
            o->needed[i] = true;
            pb_warn("backup %s has no manifest, but %s lists it as committed: its objects "
                    "are kept (put its manifest back; verify reports it until then)", o->ids[i],
                    CHAIN_RECORD_KEY);
        }
    chain_record_free(&rec);
    return 0;
}

/* The committed ids of the listing, sorted as chain_list sorts them: the listing cleanup
 * made is the one the caller plans from (a backup lists backup/ once). */
static int keep_committed(const orphan_ctx *o, chain_ids *out, pb_error *err)
{
    size_t n = 0;
    for (size_t i = 0; i < o->n; i++)
        n += o->committed[i];
    out->ids = n ? malloc(n * sizeof(*out->ids)) : NULL;
    if (n && !out->ids)
        return pb_fail(err, PB_ENOMEM, "out of memory listing backups");
    for (size_t i = 0; i < o->n; i++)
        if (o->committed[i])
            memcpy(out->ids[out->count++], o->ids[i], MF_ID_LEN);
    if (out->count)
        qsort(out->ids, out->count, sizeof(*out->ids), cmp_id);
    return 0;
}

/* Objects under backup/<id>/ without a manifest: with the writer lock held, none of them
 * belongs to a writer still running. committed (NULL: not wanted) gets the committed ids
 * of the same listing; only manifest-less backups are removed, so it stays true. */
static int drop_orphans(repo *r, chain_ids *committed, pb_error *err)
{
    orphan_ctx o = {0};
    int rc = repo_list(r, "backup/", collect_orphan, &o, err);
    if (rc == PB_ENOMEM)
        rc = pb_fail(err, rc, "out of memory listing %s/backup/", repo_location(r));
    for (size_t i = 0; rc == 0 && i < o.n; i++)
        o.orphans += !o.committed[i];
    if (rc == 0 && o.orphans)
        rc = mark_needed(r, &o, err);
    if (rc == 0 && o.orphans)
        rc = mark_recorded(r, &o, err);
    for (size_t i = 0; rc == 0 && i < o.n; i++) {
        if (o.committed[i] || o.needed[i])
            continue;
        pb_info("removing the objects of backup %s, which has no manifest (its writer was "
                "interrupted)", o.ids[i]);
        rc = chain_drop(r, o.ids[i], err);
    }
    if (rc == 0 && committed)
        rc = keep_committed(&o, committed, err);
    free(o.ids);
    free(o.committed);
    free(o.needed);
    return rc;
}

int chain_cleanup(repo *r, const repo_lock *held, pb_error *err)
{
    return chain_cleanup_listed(r, held, NULL, err);
}

int chain_cleanup_listed(repo *r, const repo_lock *held, chain_ids *committed, pb_error *err)
{
    assert(held);
    if (committed)
        memset(committed, 0, sizeof(*committed));
    int rc = repo_cleanup(r, held, err);
    rc = rc ? rc : drop_orphans(r, committed, err);
    if (rc && committed)
        chain_ids_free(committed);
    return rc;
}
