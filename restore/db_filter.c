/*
 * restore/db_filter.c — restore --db-include NAME: only the chosen databases (and
 * template0, template1 and postgres, always) are restored in full; the relation files
 * of every other database are restored as zero-length stubs, as pgBackRest does, so that
 * the cluster starts (its catalogs still list those databases) and they can be dropped.
 * Replay extends a stub when WAL touches it: the first change of each page after the
 * backup's start carries its full-page image (docs/DESIGN.md rule 2).
 *
 * Names are mapped to OIDs with the chosen backup's database list (backup/<id>/databases,
 * docs/FORMAT.md), read from pg_database by the backup itself: reading pg_database's heap
 * file out of the backup would need its tuple visibility, which a backup cannot judge.
 * Everything here is decided before anything is written; an unknown name is refused.
 */
#include "restore/plan.h"
#include "restore/restore_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Always restored: without them the cluster does not start or cannot be connected to. */
static const char *const always_kept[] = {"template0", "template1", "postgres"};

static void dblist_key(char *out, size_t cap, const char *id)
{
    chain_backup_dir(out, cap, id);
    strncat(out, "/databases", cap - strlen(out) - 1);
}

static int load_dblist(repo *r, const char *id, mf_dblist *out, pb_error *err)
{
    char key[MF_ID_LEN + 64];
    void *obj = NULL, *raw = NULL;
    size_t len = 0, raw_len = 0;
    dblist_key(key, sizeof(key), id);
    int rc = repo_get(r, key, &obj, &len, err);
    if (rc == PB_ENOENT) /* PB_EINVAL only here: rs_db_list_check tells it apart */
        return pb_fail(err, PB_EINVAL, "backup %s has no database list (%s; it was taken by "
                       "an older pageback or made by rebase): --db-include cannot be used "
                       "with it", id, key);
    if (rc == 0)
        rc = pack_envelope_decode(obj, len, MF_DBLIST_MAGIC, MF_DBLIST_MAX_RAW, key, &raw,
                                  &raw_len, err);
    if (rc == 0)
        rc = mf_dblist_decode(raw, raw_len, key, out, err);
    free(obj);
    free(raw);
    return rc;
}

int rs_db_list_check(repo *r, const char *id, pb_error *err)
{
    mf_dblist dbs = {0};
    int rc = load_dblist(r, id, &dbs, err);
    mf_dblist_free(&dbs);
    return rc == PB_EINVAL ? 0 : rc; /* PB_EINVAL: there is none */
}

/* The object is immutable: the copy is its bytes, checked before they are written. */
int rs_db_list_copy(repo *r, const char *from, const char *to, pb_error *err)
{
    char src[MF_ID_LEN + 64], dst[MF_ID_LEN + 64];
    void *obj = NULL, *raw = NULL;
    size_t len = 0, raw_len = 0;
    dblist_key(src, sizeof(src), from);
    dblist_key(dst, sizeof(dst), to);
    int rc = repo_get(r, src, &obj, &len, err);
    if (rc == PB_ENOENT) {
        pb_debug("%s: none to copy", src);
        return 0;
    }
    if (rc == 0)
        rc = pack_envelope_decode(obj, len, MF_DBLIST_MAGIC, MF_DBLIST_MAX_RAW, src, &raw,
                                  &raw_len, err);
    if (rc == 0)
        rc = repo_put(r, dst, obj, len, err);
    free(obj);
    free(raw);
    return rc;
}

static int keep_oid(rs_db_filter *f, uint32_t oid, pb_error *err)
{
    for (size_t i = 0; i < f->nkeep; i++)
        if (f->keep[i] == oid)
            return 0;
    if (PB_GROW(f->keep, &f->cap, f->nkeep + 1))
        return pb_fail(err, PB_ENOMEM, "out of memory for --db-include");
    f->keep[f->nkeep++] = oid;
    return 0;
}

/* "a, b, c" of the list, for the message that refuses an unknown name. */
static void list_names(const mf_dblist *l, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; i < l->count && n + 1 < cap; i++) {
        int w = snprintf(out + n, cap - n, "%s%s", i ? ", " : "", l->items[i].name);
        n += w > 0 ? (size_t)w : 0;
    }
}

int rs_db_filter_build(repo *r, const rs_opts *opts, const char *id, rs_db_filter *out,
                       pb_error *err)
{
    memset(out, 0, sizeof(*out));
    if (opts->ndb_include == 0)
        return 0;
    mf_dblist dbs = {0};
    int rc = load_dblist(r, id, &dbs, err);
    for (size_t i = 0; rc == 0 && i < sizeof(always_kept) / sizeof(always_kept[0]); i++) {
        const mf_db *d = mf_dblist_find(&dbs, always_kept[i]);
        if (d)
            rc = keep_oid(out, d->oid, err);
    }
    for (size_t i = 0; rc == 0 && i < opts->ndb_include; i++) {
        const mf_db *d = mf_dblist_find(&dbs, opts->db_include[i]);
        if (d) {
            rc = keep_oid(out, d->oid, err);
            continue;
        }
        char names[600];
        list_names(&dbs, names, sizeof(names));
        rc = pb_fail(err, PB_EINVAL, "--db-include %s: backup %s has no such database (it "
                     "has: %s); nothing was written", opts->db_include[i], id, names);
    }
    out->active = rc == 0;
    if (rc == 0)
        pb_info("restoring %zu of the %zu databases in full; the others' relation files as "
                "empty stubs (drop those databases after the restore)", out->nkeep,
                dbs.count);
    mf_dblist_free(&dbs);
    if (rc)
        rs_db_filter_free(out);
    return rc;
}

void rs_db_filter_free(rs_db_filter *f)
{
    if (!f)
        return;
    free(f->keep);
    memset(f, 0, sizeof(*f));
}

/* Skip n decimal digits at *p (at least one, no leading sign); false if there are none. */
static bool digits(const char **p, unsigned long *value)
{
    char *end = NULL;
    if (**p < '0' || **p > '9')
        return false;
    *value = strtoul(*p, &end, 10);
    *p = end;
    return true;
}

/* A relation file's name: <relfilenode>[_fsm|_vm|_init][.<segment>]. */
static bool relation_name(const char *p)
{
    unsigned long v;
    if (!digits(&p, &v))
        return false;
    if (*p == '_') {
        size_t n = strcspn(p + 1, ".");
        if (!((n == 3 && !strncmp(p + 1, "fsm", 3)) || (n == 2 && !strncmp(p + 1, "vm", 2)) ||
              (n == 4 && !strncmp(p + 1, "init", 4))))
            return false;
        p += 1 + n;
    }
    if (*p == '.') {
        p++;
        if (!digits(&p, &v))
            return false;
    }
    return *p == '\0';
}

/* The database OID of a relation file's path: base/<db>/<rel> or
 * pg_tblspc/<spc>/<version dir>/<db>/<rel>; false for any other path. */
static bool path_database(const char *path, uint32_t *db)
{
    const char *p = path;
    unsigned long v;
    if (!strncmp(p, "base/", 5)) {
        p += 5;
    } else if (!strncmp(p, "pg_tblspc/", 10)) {
        p += 10;
        if (!digits(&p, &v) || *p != '/' || !(p = strchr(p + 1, '/')))
            return false;
        p++;
    } else {
        return false;
    }
    if (!digits(&p, &v) || *p != '/' || v > UINT32_MAX)
        return false;
    *db = (uint32_t)v;
    return relation_name(p + 1);
}

bool rs_db_filter_stub(const rs_db_filter *f, const mf_file *file)
{
    uint32_t db;
    if (!f || !f->active || file->kind != MF_REL || !path_database(file->path, &db))
        return false;
    for (size_t i = 0; i < f->nkeep; i++)
        if (f->keep[i] == db)
            return false;
    return true;
}
