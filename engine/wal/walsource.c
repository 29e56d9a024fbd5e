/*
 * engine/wal/walsource.c — the repository's archived WAL as a segment source for the
 * record reader (reader.c): which timeline a segment is read from follows the timeline
 * path recovery will take, and each object is verified and decompressed by arch_read.
 * Only one segment is held, so a scan over many segments stays at one segment of memory.
 */
#include "engine/wal/wal.h"

#include <stdlib.h>
#include <string.h>

struct arch_walsource {
    repo *r;
    uint32_t seg_size;
    arch_tl_entry *path;
    size_t n;
    uint8_t *data; /* the segment last given, or NULL */
    size_t len;
};

int arch_walsource_open(arch_walsource **out, repo *r, uint32_t seg_size,
                        const arch_tl_entry *path, size_t n, pb_error *err)
{
    *out = NULL;
    if (!arch_valid_seg_size(seg_size) || n == 0)
        return pb_fail(err, PB_EINVAL, "WAL source: segment size %u or empty timeline path",
                       seg_size);
    arch_walsource *s = calloc(1, sizeof(*s));
    if (s)
        s->path = malloc(n * sizeof(*path));
    if (!s || !s->path) {
        free(s);
        return pb_fail(err, PB_ENOMEM, "no memory for a WAL source");
    }
    memcpy(s->path, path, n * sizeof(*path));
    s->r = r;
    s->seg_size = seg_size;
    s->n = n;
    *out = s;
    return 0;
}

uint32_t arch_walsource_tli(const arch_walsource *s, uint64_t segno)
{
    /* The newest timeline whose first segment is at or before segno: the segment that
     * holds a switch point is read from the new timeline (its copy of the old WAL up to
     * the switch point, then the new timeline's). */
    for (size_t i = s->n; i-- > 0;)
        if (s->path[i].begin / s->seg_size <= segno)
            return s->path[i].tli;
    return 0;
}

int arch_walsource_get(void *ctx, uint64_t segno, const uint8_t **data, size_t *len,
                       pb_error *err)
{
    arch_walsource *s = ctx;
    free(s->data);
    s->data = NULL;
    s->len = 0;
    uint32_t tli = arch_walsource_tli(s, segno);
    if (tli == 0)
        return pb_fail(err, PB_ENOENT, "WAL segment %llu is before the timeline path",
                       (unsigned long long)segno);
    char name[25];
    arch_segment_name(name, tli, segno, s->seg_size);
    int rc = arch_read(s->r, name, &s->data, &s->len, err);
    if (rc)
        return rc;
    if (s->len != s->seg_size) {
        free(s->data);
        s->data = NULL;
        return pb_fail(err, PB_ECORRUPT, "WAL segment %s holds %zu bytes, not %u", name, s->len,
                       s->seg_size);
    }
    *data = s->data;
    *len = s->len;
    return 0;
}

void arch_walsource_close(arch_walsource *s)
{
    if (!s)
        return;
    free(s->data);
    free(s->path);
    free(s);
}
