/*
 * engine/wal/history.c — timeline history files, parsed as PostgreSQL's
 * readTimeLineHistory (access/transam/timeline.c) reads them: one line per ancestor,
 * "parentTLI <tab> switchpoint X/Y <tab> reason", oldest first; blank lines and lines
 * starting with '#' are skipped. A pure function: restore's WAL view reads the file from
 * the archive and hands the text in.
 */
#include "engine/wal/wal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int add_entry(arch_tl_entry **tl, size_t *n, uint32_t tli, uint64_t begin,
                     uint64_t end)
{
    arch_tl_entry *p = realloc(*tl, (*n + 1) * sizeof(*p));
    if (!p)
        return PB_ENOMEM;
    *tl = p;
    p[(*n)++] = (arch_tl_entry){tli, begin, end};
    return 0;
}

/* One line into the entries; prev is the previous switch point. */
static int parse_line(const char *s, uint32_t tli, uint64_t *prev, arch_tl_entry **tl,
                      size_t *n, pb_error *err)
{
    unsigned parent, hi, lo;
    if (sscanf(s, "%u\t%X/%X", &parent, &hi, &lo) != 3 &&
        sscanf(s, "%u %X/%X", &parent, &hi, &lo) != 3)
        return pb_fail(err, PB_ECORRUPT, "history file %08X.history: bad line '%s'", tli, s);
    uint64_t sw = ((uint64_t)hi << 32) | lo;
    if (parent >= tli || sw < *prev)
        return pb_fail(err, PB_ECORRUPT, "history file %08X.history: timeline %u at "
                       "%X/%X is out of order", tli, parent, hi, lo);
    if (add_entry(tl, n, parent, *prev, sw))
        return pb_fail(err, PB_ENOMEM, "out of memory reading timeline history");
    *prev = sw;
    return 0;
}

int arch_history_parse(const char *text, size_t len, uint32_t tli, arch_tl_entry **out,
                       size_t *n, pb_error *err)
{
    arch_tl_entry *tl = NULL;
    size_t count = 0;
    uint64_t prev = 0;
    int rc = 0;
    const char *p = text, *end = text + len;
    while (rc == 0 && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t ln = nl ? (size_t)(nl - p) : (size_t)(end - p);
        char line[256];
        snprintf(line, sizeof(line), "%.*s", (int)(ln < 255 ? ln : 255), p);
        p += ln + 1;
        char *s = line + strspn(line, " \t");
        if (*s && *s != '#')
            rc = parse_line(s, tli, &prev, &tl, &count, err);
    }
    if (rc == 0 && add_entry(&tl, &count, tli, prev, UINT64_MAX))
        rc = pb_fail(err, PB_ENOMEM, "out of memory reading timeline history");
    if (rc) {
        free(tl);
        tl = NULL;
        count = 0;
    }
    *out = tl;
    *n = count;
    return rc;
}
