/*
 * engine/chain/chain_record.c — the repository's record of committed backups ("backup.info",
 * kept twice as pgBackRest keeps backup.info and backup.info.copy).
 *
 * A backup exists when its manifest does; the record is what says one existed, so a
 * manifest lost to damage (deleted, or an object store that dropped it) leaves a name
 * behind: verify reports a listed backup without a manifest, and cleanup, which removes
 * the objects of backups without a manifest (a writer killed before its commit), keeps
 * a listed one's. Text (docs/FORMAT.md): "PAGEBACK-BACKUPS 1", "count=N", one id per
 * line, then "xxh3=<16 hex>" over every byte before that line.
 */
#include "engine/chain/chain.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECORD_MAGIC "PAGEBACK-BACKUPS 1\n"

static int cmp_id(const void *a, const void *b)
{
    return strcmp(a, b);
}

void chain_record_free(chain_record *rec)
{
    if (!rec)
        return;
    free(rec->ids);
    rec->ids = NULL;
    rec->count = 0;
}

bool chain_record_has(const chain_record *rec, const char *id)
{
    return rec->count && bsearch(id, rec->ids, rec->count, sizeof(*rec->ids), cmp_id);
}

static int add_id(chain_record *rec, size_t *cap, const char *id)
{
    if (PB_GROW(rec->ids, cap, rec->count + 1))
        return PB_ENOMEM;
    snprintf(rec->ids[rec->count++], MF_ID_LEN, "%s", id);
    return 0;
}

/* The ids, one a line, between "count=N" and the checksum line. */
static int parse_ids(const char *p, const char *end, size_t count, const char *what,
                     chain_record *out, pb_error *err)
{
    size_t cap = 0;
    for (size_t i = 0; i < count; i++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : 0;
        if (!nl || len == 0 || len >= MF_ID_LEN || memchr(p, '/', len))
            return pb_fail(err, PB_ECORRUPT, "%s: backup id %zu of %zu is malformed", what,
                           i + 1, count);
        char id[MF_ID_LEN];
        snprintf(id, sizeof(id), "%.*s", (int)len, p);
        if (add_id(out, &cap, id))
            return pb_fail(err, PB_ENOMEM, "out of memory reading %s", what);
        p = nl + 1;
    }
    if (p != end)
        return pb_fail(err, PB_ECORRUPT, "%s: more lines than count=%zu", what, count);
    if (out->count)
        qsort(out->ids, out->count, sizeof(*out->ids), cmp_id);
    return 0;
}

int chain_record_parse(const char *text, size_t len, const char *what, chain_record *out,
                       pb_error *err)
{
    memset(out, 0, sizeof(*out));
    size_t ml = strlen(RECORD_MAGIC);
    if (len < ml || memcmp(text, RECORD_MAGIC, ml) != 0)
        return pb_fail(err, PB_ECORRUPT, "%s is not a pageback backup record (no %.18s)",
                       what, RECORD_MAGIC);
    /* the checksum line is the last: "xxh3=" and 16 hex digits (copied out before any
     * parsing: the object's bytes are not a C string) */
    const char *sum = len >= ml + 22 ? text + len - 22 : NULL;
    char hex[17] = "";
    if (sum)
        memcpy(hex, sum + 5, 16);
    if (!sum || memcmp(sum, "xxh3=", 5) != 0 || text[len - 1] != '\n' ||
        strspn(hex, "0123456789abcdef") != 16)
        return pb_fail(err, PB_ECORRUPT, "%s has no checksum line (truncated?)", what);
    uint64_t want = strtoull(hex, NULL, 16);
    uint64_t got = pb_hash64(text, (size_t)(sum - text));
    if (got != want)
        return pb_fail(err, PB_ECORRUPT, "%s: checksum mismatch (stored %016" PRIx64
                       ", computed %016" PRIx64 ")", what, want, got);
    const char *p = text + ml;
    const char *nl = memchr(p, '\n', (size_t)(sum - p));
    char line[32] = "";
    if (nl && (size_t)(nl - p) < sizeof(line))
        memcpy(line, p, (size_t)(nl - p));
    size_t count = 0;
    char *end = NULL;
    if (strncmp(line, "count=", 6) == 0 && line[6] >= '0' && line[6] <= '9')
        count = (size_t)strtoull(line + 6, &end, 10);
    if (!end || *end || count > (size_t)(sum - p))
        return pb_fail(err, PB_ECORRUPT, "%s: bad count line", what);
    int rc = parse_ids(nl + 1, sum, count, what, out, err);
    if (rc)
        chain_record_free(out);
    out->present = rc == 0;
    return rc;
}

int chain_record_format(const chain_record *rec, pb_buf *out, pb_error *err)
{
    char line[64];
    int rc = pb_buf_append(out, RECORD_MAGIC, strlen(RECORD_MAGIC));
    int n = snprintf(line, sizeof(line), "count=%zu\n", rec->count);
    if (rc == 0)
        rc = pb_buf_append(out, line, (size_t)n);
    for (size_t i = 0; rc == 0 && i < rec->count; i++) {
        n = snprintf(line, sizeof(line), "%s\n", rec->ids[i]);
        rc = pb_buf_append(out, line, (size_t)n);
    }
    if (rc == 0) {
        n = snprintf(line, sizeof(line), "xxh3=%016" PRIx64 "\n", pb_hash64(out->data, out->len));
        rc = pb_buf_append(out, line, (size_t)n);
    }
    return rc ? pb_fail(err, PB_ENOMEM, "out of memory writing %s", CHAIN_RECORD_KEY) : 0;
}

static int load_key(repo *r, const char *key, chain_record *out, pb_error *err)
{
    void *data = NULL;
    size_t len = 0;
    int rc = repo_get(r, key, &data, &len, err);
    if (rc == 0) {
        char what[300];
        snprintf(what, sizeof(what), "%s/%s", repo_location(r), key);
        rc = chain_record_parse(data, len, what, out, err);
    }
    free(data);
    return rc;
}

int chain_record_load(repo *r, chain_record *out, pb_error *err)
{
    pb_error e1 = PB_ERROR_INIT;
    int rc = load_key(r, CHAIN_RECORD_KEY, out, &e1);
    if (rc == 0 || rc == PB_ENOMEM)
        return rc ? pb_fail(err, rc, "%s", e1.msg) : 0;
    int rc2 = load_key(r, CHAIN_RECORD_COPY_KEY, out, err);
    if (rc2 == 0 && rc != PB_ENOENT) {
        snprintf(out->damaged, sizeof(out->damaged), "%s", CHAIN_RECORD_KEY);
        pb_warn("%s; using %s", e1.msg, CHAIN_RECORD_COPY_KEY);
    }
    if (rc2 == 0 || (rc == PB_ENOENT && rc2 == PB_ENOENT)) {
        out->present = rc2 == 0;
        return 0;
    }
    if (rc2 == PB_ENOENT && rc != PB_ENOENT) /* the copy is not written yet (a kill) */
        return pb_fail(err, rc, "%s (and %s is missing)", e1.msg, CHAIN_RECORD_COPY_KEY);
    if (rc != PB_ENOENT)
        pb_error_wrap(err, "%s; and", e1.msg);
    return rc2;
}

static bool dropped(const char (*drop)[MF_ID_LEN], size_t ndrop, const char *id)
{
    for (size_t j = 0; j < ndrop; j++)
        if (strcmp(drop[j], id) == 0)
            return true;
    return false;
}

/* The record as it is (rebuilt from the manifests when neither copy reads: a record that
 * can never be written again would stop every backup), plus add and the manifests
 * present, minus drop. */
static int merged(repo *r, const chain_ids *listed, const char *add,
                  const char (*drop)[MF_ID_LEN], size_t ndrop, chain_record *out, pb_error *err)
{
    chain_ids ids = {0}, own = {0};
    int rc = chain_record_load(r, out, err);
    if (rc == PB_ECORRUPT) {
        pb_warn("%s: writing it again from the manifests present", err->msg);
        chain_record_free(out);
        rc = 0;
    }
    if (rc == 0 && !listed)
        rc = chain_list(r, &own, err);
    ids = listed ? *listed : own;
    chain_record old = *out; /* the recorded prefix, sorted, for lookups */
    size_t cap = out->count;
    for (size_t i = 0; rc == 0 && i <= ids.count; i++) {
        const char *id = i < ids.count ? ids.ids[i] : add;
        old.ids = out->ids;
        if (id && !chain_record_has(&old, id) && add_id(out, &cap, id))
            rc = pb_fail(err, PB_ENOMEM, "out of memory writing %s", CHAIN_RECORD_KEY);
    }
    chain_ids_free(&own);
    size_t k = 0;
    for (size_t i = 0; rc == 0 && i < out->count; i++)
        if (!dropped(drop, ndrop, out->ids[i]))
            memmove(out->ids[k++], out->ids[i], MF_ID_LEN);
    if (rc == 0)
        out->count = k;
    if (out->count > 1)
        qsort(out->ids, out->count, sizeof(*out->ids), cmp_id);
    /* add named twice (listed and given): the sorted duplicates collapse */
    k = 0;
    for (size_t i = 0; i < out->count; i++)
        if (k == 0 || strcmp(out->ids[k - 1], out->ids[i]) != 0)
            memmove(out->ids[k++], out->ids[i], MF_ID_LEN);
    out->count = k;
    return rc;
}

int chain_record_update(repo *r, const char *add, const char (*drop)[MF_ID_LEN],
                        size_t ndrop, pb_error *err)
{
    return chain_record_update_listed(r, NULL, add, drop, ndrop, err);
}

int chain_record_update_listed(repo *r, const chain_ids *listed, const char *add,
                               const char (*drop)[MF_ID_LEN], size_t ndrop, pb_error *err)
{
    chain_record rec = {0};
    pb_buf buf = {0};
    int rc = merged(r, listed, add, drop, ndrop, &rec, err);
    if (rc == 0)
        rc = chain_record_format(&rec, &buf, err);
    /* the primary first: a kill between leaves the copy one step behind, and the
     * primary (good) is what readers take. Each one's data is on disk when its put
     * returns; their names are made durable together (one directory sync). */
    if (rc == 0) {
        repo_defer_syncs(r);
        rc = repo_put(r, CHAIN_RECORD_KEY, buf.data, buf.len, err);
        if (rc == 0)
            rc = repo_put(r, CHAIN_RECORD_COPY_KEY, buf.data, buf.len, err);
        pb_error serr = PB_ERROR_INIT;
        int src = repo_sync_deferred(r, rc ? &serr : err);
        rc = rc ? rc : src;
    }
    if (rc)
        pb_error_wrap(err, "updating the backup record %s/%s", repo_location(r),
                      CHAIN_RECORD_KEY);
    pb_buf_free(&buf);
    chain_record_free(&rec);
    return rc;
}
