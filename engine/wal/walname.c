/*
 * engine/wal/walname.c — WAL file names and their keys in the repository, the one place
 * that knows them: the backup's start and stop segments, the WAL a backup waits for,
 * archive keys, restore's and verify's walk along a timeline, info's ranges and the
 * prefetcher's next segment all name segments here.
 *
 * Names follow PostgreSQL's access/xlog_internal.h: a segment is "TTTTTTTTXXXXXXXXYYYYYYYY"
 * (timeline, then the segment number split into 0x100000000 / wal_segment_size segments
 * per "log id"), upper-case hex; a history file is "TTTTTTTT.history".
 */
#include "engine/wal/wal.h"
#include "engine/wal/wal_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool arch_all_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'A' && s[i] <= 'F')))
            return false;
    return true;
}

bool arch_is_segment_name(const char *name)
{
    size_t n = strlen(name);
    if (n < 24 || !arch_all_hex(name, 24))
        return false;
    const char *rest = name + 24;
    if (!rest[0] || !strcmp(rest, ".partial"))
        return true;
    return strlen(rest) == 16 && rest[0] == '.' && arch_all_hex(rest + 1, 8) &&
           !strcmp(rest + 9, ".backup");
}

bool arch_is_history_name(const char *name)
{
    return strlen(name) == 16 && arch_all_hex(name, 8) && !strcmp(name + 8, ".history");
}

int arch_check_name(const char *name, pb_error *err)
{
    if (!arch_is_segment_name(name) && !arch_is_history_name(name))
        return pb_fail(err, PB_EINVAL,
                       "\"%s\" is not a WAL file name (segment, .partial, .backup or .history)",
                       name);
    return 0;
}

/* Unknown names get an empty key, which every repo_* call refuses as invalid. */
void arch_key(char *out, size_t cap, const char *name)
{
    if (arch_is_segment_name(name))
        snprintf(out, cap, "wal/%.8s/%s.zst", name, name);
    else if (arch_is_history_name(name))
        snprintf(out, cap, "wal/history/%s.zst", name);
    else if (cap > 0)
        out[0] = '\0';
}

bool arch_valid_seg_size(uint64_t size)
{
    return size >= (1u << 20) && size <= (1u << 30) && (size & (size - 1)) == 0;
}

/* Segments per "log id" (the middle eight hex digits count log ids). */
static uint64_t segs_per_id(uint32_t seg_size)
{
    return 0x100000000ull / seg_size;
}

bool arch_parse_segment(const char *name, uint32_t seg_size, uint32_t *tli, uint64_t *segno)
{
    if (strlen(name) != 24 || !arch_all_hex(name, 24) || !arch_valid_seg_size(seg_size))
        return false;
    char part[9] = {0};
    memcpy(part, name, 8);
    unsigned long t = strtoul(part, NULL, 16);
    memcpy(part, name + 8, 8);
    unsigned long log = strtoul(part, NULL, 16);
    memcpy(part, name + 16, 8);
    unsigned long seg = strtoul(part, NULL, 16);
    uint64_t per_id = segs_per_id(seg_size);
    if (t == 0 || seg >= per_id)
        return false;
    *tli = (uint32_t)t;
    *segno = (uint64_t)log * per_id + seg;
    return true;
}

void arch_segment_name(char out[25], uint32_t tli, uint64_t segno, uint32_t seg_size)
{
    uint64_t per_id = segs_per_id(seg_size);
    snprintf(out, 25, "%08X%08X%08X", tli, (uint32_t)(segno / per_id),
             (uint32_t)(segno % per_id));
}

void arch_walfile_name(char out[25], uint32_t tli, uint64_t lsn, uint32_t seg_size)
{
    if (seg_size == 0 || (seg_size & (seg_size - 1))) {
        out[0] = '\0';
        return;
    }
    arch_segment_name(out, tli, lsn / seg_size, seg_size);
}

void arch_history_name(char out[17], uint32_t tli)
{
    snprintf(out, 17, "%08X.history", tli);
}
