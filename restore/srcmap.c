/*
 * restore/srcmap.c — the per-page source map of a relation file in a chain, filled a
 * window at a time (restore/srcmap.h).
 */
#include "restore/srcmap.h"

uint32_t rs_srcmap_fill(rs_srcmap *m, const mf_file *const *recs, size_t n)
{
    rs_window w = m->w;
    uint32_t missing = w.end - w.first;
    for (uint32_t p = 0; p < missing; p++)
        m->src[p].backup = RS_NO_SOURCE;
    m->nsources = 0;
    for (size_t i = n; i-- > 0 && missing;) {
        const mf_file *fi = recs[i];
        if (!fi || fi->kind != MF_REL)
            break;
        uint32_t h = 0, before = missing;
        for (uint32_t r = 0; r < fi->nruns; r++) {
            const mf_run *run = &fi->runs[r];
            if (run->first >= w.end || (uint64_t)run->first + run->count <= w.first) {
                h += run->count;
                continue;
            }
            for (uint32_t k = 0; k < run->count; k++, h++) {
                uint32_t p = run->first + k;
                if (p >= w.first && p < w.end && m->src[p - w.first].backup == RS_NO_SOURCE) {
                    m->src[p - w.first].backup = (uint32_t)i;
                    m->src[p - w.first].hash_index = h;
                    missing--;
                }
            }
        }
        m->nsources += missing < before;
    }
    return missing;
}

bool rs_srcmap_needs(const rs_srcmap *m, const mf_run *run, const mf_file *f, uint32_t bidx)
{
    if (run->first >= m->w.end || (uint64_t)run->first + run->count <= m->w.first)
        return false;
    for (uint32_t k = 0; k < run->count; k++) {
        uint32_t p = run->first + k;
        if (p < f->npages && rs_src_of(m, p, bidx))
            return true;
    }
    return false;
}
