/*
 * manifest/dblist.c — a backup's database list (name -> OID), the body of the small
 * `backup/<id>/databases` object that `restore --db-include` reads (docs/FORMAT.md,
 * "Database list"). Bytes in, bytes out like the rest of manifest/; engine/ wraps it in
 * the object envelope (magic MF_DBLIST_MAGIC, checksums) and stores it.
 *
 * Body: u32 count, then per database u32 OID, u32 name length, the name's bytes (no
 * terminator). Little-endian. A name is at most MF_DB_NAME_MAX bytes (NAMEDATALEN - 1).
 */
#include "manifest/manifest.h"

#include <stdlib.h>
#include <string.h>

#define DB_ENTRY_MIN 8u /* OID + name length, an empty name */

void mf_dblist_free(mf_dblist *l)
{
    if (!l)
        return;
    free(l->items);
    memset(l, 0, sizeof(*l));
}

int mf_dblist_add(mf_dblist *l, uint32_t oid, const char *name, pb_error *err)
{
    size_t n = strlen(name);
    if (n == 0 || n > MF_DB_NAME_MAX)
        return pb_fail(err, PB_EINVAL, "database name \"%.80s\" (OID %u) is empty or longer "
                       "than %u bytes", name, oid, MF_DB_NAME_MAX);
    if (PB_GROW(l->items, &l->cap, l->count + 1))
        return pb_fail(err, PB_ENOMEM, "out of memory for the database list");
    l->items[l->count].oid = oid;
    memcpy(l->items[l->count].name, name, n + 1);
    l->count++;
    return 0;
}

const mf_db *mf_dblist_find(const mf_dblist *l, const char *name)
{
    for (size_t i = 0; i < l->count; i++)
        if (strcmp(l->items[i].name, name) == 0)
            return &l->items[i];
    return NULL;
}

int mf_dblist_encode(const mf_dblist *l, pb_buf *out, pb_error *err)
{
    int rc = l->count > UINT32_MAX ? PB_EINVAL : pb_buf_u32(out, (uint32_t)l->count);
    for (size_t i = 0; rc == 0 && i < l->count; i++) {
        size_t n = strlen(l->items[i].name);
        rc = pb_buf_u32(out, l->items[i].oid);
        if (rc == 0)
            rc = pb_buf_u32(out, (uint32_t)n);
        if (rc == 0)
            rc = pb_buf_append(out, l->items[i].name, n);
    }
    return rc ? pb_fail(err, PB_ENOMEM, "out of memory encoding the database list") : 0;
}

/* Every count and length is bounded by the bytes present before it is used. */
int mf_dblist_decode(const void *data, size_t len, const char *what, mf_dblist *out,
                     pb_error *err)
{
    memset(out, 0, sizeof(*out));
    pb_reader r = {data, len, 0};
    uint32_t count = pb_rd_u32(&r);
    if (r.bad || count > r.left / DB_ENTRY_MIN)
        return pb_fail(err, PB_ECORRUPT, "%s: database count %u does not fit in %zu bytes",
                       what, count, len);
    for (uint32_t i = 0; i < count; i++) {
        uint32_t oid = pb_rd_u32(&r), n = pb_rd_u32(&r);
        const uint8_t *name = r.bad || n > MF_DB_NAME_MAX ? NULL : pb_rd_bytes(&r, n);
        char buf[MF_DB_NAME_MAX + 1];
        if (!name || n == 0 || memchr(name, 0, n)) {
            mf_dblist_free(out);
            return pb_fail(err, PB_ECORRUPT, "%s: database entry %u of %u is damaged", what,
                           i, count);
        }
        memcpy(buf, name, n);
        buf[n] = '\0';
        int rc = mf_dblist_add(out, oid, buf, err);
        if (rc) {
            mf_dblist_free(out);
            return rc;
        }
    }
    if (r.left) {
        mf_dblist_free(out);
        return pb_fail(err, PB_ECORRUPT, "%s: %zu bytes after the last database", what, r.left);
    }
    return 0;
}
