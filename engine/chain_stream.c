/*
 * engine/chain_stream.c — manifests read in pieces from the repository: the header alone
 * (history order, "latest") and a stream of file records in path order (planning), so
 * neither holds a whole manifest (docs/MANIFEST.md, "Streaming"). A version 2 manifest
 * is stored outside the compressed envelope (its chunks compressed one by one) and read
 * with range reads; an older manifest (version 1, in the envelope) is read whole.
 */
#include "engine/chain.h"
#include "engine/envelope.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SNIFF_BYTES 20u /* manifest v2 prefix: magic, version, header and index lengths */

typedef struct repo_src {
    repo *r;
    char key[256];
    uint8_t sniff[SNIFF_BYTES]; /* the first bytes, read once */
} repo_src;

static int repo_read(void *ctx, uint64_t off, size_t len, void *dst, pb_error *err)
{
    repo_src *s = ctx;
    if (off == 0 && len <= SNIFF_BYTES) {
        memcpy(dst, s->sniff, len);
        return 0;
    }
    return repo_get_range(s->r, s->key, off, len, dst, err);
}

/* Reads the first bytes of backup/<id>/manifest; *raw_v2 tells whether it is a version 2
 * object (else the compressed envelope of an older writer). */
static int sniff(repo *r, const char *id, repo_src *s, bool *raw_v2, pb_error *err)
{
    s->r = r;
    snprintf(s->key, sizeof(s->key), "backup/%s/manifest", id);
    int rc = repo_get_range(r, s->key, 0, SNIFF_BYTES, s->sniff, err);
    if (rc == PB_ENOENT)
        return pb_fail(err, rc, "backup set %s not found in repository %s", id,
                       repo_location(r));
    *raw_v2 = rc == 0 && memcmp(s->sniff, "PBMANIF1", 8) == 0 && pb_get_u32(s->sniff + 8) == 2;
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
    repo_src s;
    bool v2 = false;
    int rc = sniff(r, id, &s, &v2, err);
    if (rc == 0 && v2) {
        char what[300];
        snprintf(what, sizeof(what), "%s/%s", repo_location(r), s.key);
        mf_source src = {repo_read, NULL, &s, UINT64_MAX, NULL};
        rc = mf_read_header(&src, what, out, err);
        return rc ? rc : check_id(out, r, s.key, id, err);
    }
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
    repo_src *s = calloc(1, sizeof(*s));
    if (!s)
        return pb_fail(err, PB_ENOMEM, "opening the manifest of %s", id);
    bool v2 = false;
    uint64_t size = 0;
    int rc = sniff(r, id, s, &v2, err);
    if (rc == 0 && v2)
        rc = repo_stat(r, s->key, &size, err);
    if (rc == 0 && v2) {
        char what[300];
        snprintf(what, sizeof(what), "%s/%s", repo_location(r), s->key);
        mf_source src = {repo_read, free, s, size, chain_manifest_codec()};
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
    free(s);
    return rc;
}
