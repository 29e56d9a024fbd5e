/*
 * engine/chain/chain_stream.c — manifests read in pieces from the repository: the header alone
 * (history order, "latest") and a stream of file records in path order (planning), so
 * neither holds a whole manifest (docs/MANIFEST.md, "Streaming"). A version 2 manifest
 * is stored outside the compressed envelope (its chunks compressed one by one) and read
 * with range reads; an older manifest (version 1, in the envelope) is read whole.
 */
#include "engine/chain/chain.h"
#include "engine/pack/pack.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SNIFF_BYTES 20u /* manifest v2 prefix: magic, version, header and index lengths */
/* What the first read takes of a manifest: its header and index, and all of a small
 * manifest (an incremental's is ~25 KiB), so opening a stream costs one request where it
 * cost three or four on object storage (sniff, stat, header and index, first chunk). */
#define PREFIX_BYTES (64u << 10)

typedef struct repo_src {
    repo *r;
    char key[256];
    uint8_t *prefix; /* the first bytes, read once; dropped once reads pass them */
    size_t prefix_len;
    uint64_t size; /* of the object, from the first read */
} repo_src;

static void src_free(void *ctx)
{
    repo_src *s = ctx;
    if (s)
        free(s->prefix);
    free(s);
}

/* Reads within the prefix come from it; the stream reads forward, so the first read
 * past it frees it. */
static int repo_read(void *ctx, uint64_t off, size_t len, void *dst, pb_error *err)
{
    repo_src *s = ctx;
    if (s->prefix && off <= s->prefix_len && len <= s->prefix_len - off) {
        memcpy(dst, s->prefix + off, len);
        return 0;
    }
    free(s->prefix);
    s->prefix = NULL;
    s->prefix_len = 0;
    return repo_get_range(s->r, s->key, off, len, dst, err);
}

/* Reads the first bytes of backup/<id>/manifest into a new *out; *raw_v2 tells whether
 * it is a version 2 object (else the compressed envelope of an older writer, or an object
 * too short to be either, which the whole read names). */
static int sniff(repo *r, const char *id, repo_src **out, bool *raw_v2, pb_error *err)
{
    *raw_v2 = false;
    repo_src *s = *out = calloc(1, sizeof(*s));
    if (s)
        s->prefix = malloc(PREFIX_BYTES);
    if (!s || !s->prefix)
        return pb_fail(err, PB_ENOMEM, "opening the manifest of %s", id);
    s->r = r;
    snprintf(s->key, sizeof(s->key), "backup/%s/manifest", id);
    int rc = repo_get_range_upto(r, s->key, 0, PREFIX_BYTES, s->prefix, &s->prefix_len,
                                 &s->size, err);
    if (rc == PB_ENOENT)
        return pb_fail(err, rc, "backup set %s not found in repository %s", id,
                       repo_location(r));
    *raw_v2 = rc == 0 && s->prefix_len >= SNIFF_BYTES && memcmp(s->prefix, "PBMANIF1", 8) == 0 &&
              pb_get_u32(s->prefix + 8) == 2;
    return rc;
}

static int check_id(const mf_backup *h, repo *r, const char *key, const char *id,
                    pb_error *err)
{
    if (strcmp(h->id, id) == 0)
        return 0;
    return pb_fail(err, PB_ECORRUPT, "manifest %s/%s names backup %s, not %s",
                   repo_location(r), key, h->id, id);
}

int chain_load_header(repo *r, const char *id, mf_backup *out, pb_error *err)
{
    repo_src *s = NULL;
    bool v2 = false;
    int rc = sniff(r, id, &s, &v2, err);
    if (rc == 0 && v2) {
        char what[300];
        snprintf(what, sizeof(what), "%s/%s", repo_location(r), s->key);
        mf_source src = {repo_read, NULL, s, s->size, NULL};
        rc = mf_read_header(&src, what, out, err);
        if (rc == 0)
            rc = check_id(out, r, s->key, id, err);
        src_free(s);
        return rc;
    }
    src_free(s);
    mf_manifest *m = NULL;
    if (rc == 0 || rc == PB_ECORRUPT) /* a short object: let the whole read name it */
        rc = chain_load(r, id, &m, err);
    if (rc == 0)
        *out = *mf_header(m);
    mf_free(m);
    return rc;
}

int chain_stream_open(repo *r, const char *id, mf_stream **out, pb_error *err)
{
    *out = NULL;
    repo_src *s = NULL;
    bool v2 = false;
    int rc = sniff(r, id, &s, &v2, err);
    if (rc == 0 && v2) {
        char what[300];
        snprintf(what, sizeof(what), "%s/%s", repo_location(r), s->key);
        mf_source src = {repo_read, src_free, s, s->size, chain_manifest_codec()};
        rc = mf_stream_open(out, &src, what, err);
        if (rc == 0) { /* the stream owns s now */
            rc = check_id(mf_stream_header(*out), r, s->key, id, err);
            if (rc) {
                mf_stream_close(*out);
                *out = NULL;
            }
            return rc;
        }
    } else if (rc == 0 || rc == PB_ECORRUPT) {
        mf_manifest *m = NULL;
        rc = chain_load(r, id, &m, err);
        if (rc == 0)
            rc = mf_stream_from_manifest(out, m, err);
    }
    src_free(s);
    return rc;
}

/* The header of id: from hist when there, else two small reads. */
static int header_of(repo *r, const chain_history *hist, const char *id, mf_backup *out,
                     pb_error *err)
{
    const mf_backup *h = hist ? chain_history_find(hist, id) : NULL;
    if (h) {
        *out = *h;
        return 0;
    }
    return chain_load_header(r, id, out, err);
}

/* Walk parents from id back to its full backup, then reverse into oldest-first order;
 * every backup is of the cluster the identity file names (as chain_resolve checks). */
int chain_resolve_headers(repo *r, const chain_history *hist, const char *id, chain *out,
                          pb_error *err)
{
    memset(out, 0, sizeof(*out));
    char next[MF_ID_LEN];
    snprintf(next, sizeof(next), "%s", id);
    size_t cap = 0;
    int rc = 0;
    while (rc == 0 && next[0]) {
        mf_backup h;
        mf_manifest *m = NULL;
        if (out->count >= 100000)
            rc = pb_fail(err, PB_ECORRUPT, "backup chain of %s loops", id);
        else if (PB_GROW(out->items, &cap, out->count + 1))
            rc = pb_fail(err, PB_ENOMEM, "out of memory resolving chain of %s", id);
        else if ((rc = header_of(r, hist, next, &h, err)) && out->count)
            pb_error_wrap(err, "backup %s needs its parent %s", id, next);
        else if (rc == 0 && out->count &&
                 h.system_id != mf_header_c(out->items[0])->system_id)
            rc = pb_fail(err, PB_ECORRUPT, "backup %s is of the cluster with system "
                         "identifier %llu, its chain's newest (%s) of %llu", h.id,
                         (unsigned long long)h.system_id, id,
                         (unsigned long long)mf_header_c(out->items[0])->system_id);
        else if (rc == 0 && (rc = mf_new(&m, &h, err)) == 0) {
            out->items[out->count++] = m;
            snprintf(next, sizeof(next), "%s", h.parent);
        }
    }
    if (rc == 0)
        rc = chain_verify_identity(r, mf_header_c(out->items[0])->system_id, id, err);
    for (size_t i = 0; rc == 0 && i < out->count / 2; i++) {
        mf_manifest *t = out->items[i];
        out->items[i] = out->items[out->count - 1 - i];
        out->items[out->count - 1 - i] = t;
    }
    if (rc)
        chain_free(out);
    return rc;
}

int chain_sync_catalog(mf_catalog *cat, repo *r, const chain *c, bool *rebuilt,
                       pb_error *err)
{
    const char *id = mf_header_c(c->items[c->count - 1])->id;
    char head[MF_ID_LEN] = "";
    *rebuilt = false;
    int rc = mf_catalog_head(cat, head, err);
    if (rc && rc != PB_ENOENT)
        return rc;
    if (rc == 0 && strcmp(head, id) == 0)
        return 0;
    pb_info("catalog head is %s, repository chain head is %s: rebuilding the catalog from "
            "the repository", rc == 0 ? head : "(empty)", id);
    rc = mf_catalog_reset(cat, err);
    for (size_t i = 0; rc == 0 && i < c->count; i++) {
        mf_stream *s = NULL;
        rc = chain_stream_open(r, mf_header_c(c->items[i])->id, &s, err);
        if (rc == 0)
            rc = mf_catalog_apply_stream(cat, s, err);
        mf_stream_close(s);
    }
    if (rc == 0)
        *rebuilt = true;
    return rc;
}

/* ---- a manifest read once into a local file -------------------------------------- */

struct chain_copy {
    int fd;
    uint64_t size;
    char id[MF_ID_LEN];
    char what[300]; /* the repository object, for messages */
};

#define COPY_BLOCK (1u << 20)

/* An unnamed file in dir (O_TMPFILE; else a named one, unlinked at once): nothing is
 * left behind whatever happens to the process. */
static int copy_file(const char *dir, const char *id, int *fd_out, pb_error *err)
{
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
        char path[4200];
        snprintf(path, sizeof(path), "%s/manifest-%s.copy.XXXXXX", dir, id);
        fd = mkostemp(path, O_CLOEXEC);
        if (fd >= 0)
            unlink(path);
    }
    if (fd < 0)
        return pb_fail_errno(err, PB_EIO, "cannot create a local copy of the manifest of %s "
                             "in %s", id, dir);
    *fd_out = fd;
    return 0;
}

/* The prefix sniff read, then the rest by range reads of COPY_BLOCK. */
static int copy_rest(chain_copy *c, repo_src *s, pb_error *err)
{
    uint8_t *buf = malloc(COPY_BLOCK);
    if (!buf)
        return pb_fail(err, PB_ENOMEM, "copying %s", c->what);
    int rc = 0;
    for (uint64_t off = 0; rc == 0 && off < c->size;) {
        size_t n = c->size - off < COPY_BLOCK ? (size_t)(c->size - off) : COPY_BLOCK;
        rc = repo_read(s, off, n, buf, err);
        if (rc == 0 && pwrite(c->fd, buf, n, (off_t)off) != (ssize_t)n)
            rc = pb_fail_errno(err, PB_EIO, "writing the local copy of %s", c->what);
        off += n;
    }
    free(buf);
    return rc;
}

int chain_copy_fetch(repo *r, const char *id, const char *dir, chain_copy **out,
                     pb_error *err)
{
    *out = NULL;
    repo_src *s = NULL;
    bool v2 = false;
    int rc = sniff(r, id, &s, &v2, err);
    chain_copy *c = rc == 0 && v2 ? calloc(1, sizeof(*c)) : NULL;
    if (rc == 0 && v2 && !c)
        rc = pb_fail(err, PB_ENOMEM, "copying the manifest of %s", id);
    if (c) {
        c->fd = -1;
        c->size = s->size;
        snprintf(c->id, sizeof(c->id), "%s", id);
        snprintf(c->what, sizeof(c->what), "%s/%s", repo_location(r), s->key);
        rc = copy_file(dir, id, &c->fd, err);
        if (rc == 0)
            rc = copy_rest(c, s, err);
    }
    src_free(s);
    if (rc)
        chain_copy_free(c);
    else
        *out = c;
    return rc;
}

static int copy_read(void *ctx, uint64_t off, size_t len, void *dst, pb_error *err)
{
    const chain_copy *c = ctx;
    ssize_t n = pread(c->fd, dst, len, (off_t)off);
    if (n != (ssize_t)len)
        return pb_fail_errno(err, PB_EIO, "reading the local copy of %s at %llu", c->what,
                             (unsigned long long)off);
    return 0;
}

int chain_copy_stream(const chain_copy *c, mf_stream **out, pb_error *err)
{
    *out = NULL;
    mf_source src = {copy_read, NULL, (void *)c, c->size, chain_manifest_codec()};
    int rc = mf_stream_open(out, &src, c->what, err);
    if (rc == 0 && strcmp(mf_stream_header(*out)->id, c->id) != 0) {
        rc = pb_fail(err, PB_ECORRUPT, "manifest %s names backup %s, not %s", c->what,
                     mf_stream_header(*out)->id, c->id);
        mf_stream_close(*out);
        *out = NULL;
    }
    return rc;
}

void chain_copy_free(chain_copy *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    free(c);
}
