/*
 * restore/verify/notes.c — what one verify run keeps as it goes, for every part of it
 * (verify.c, verify_frames.c, verify_wal.c): its problems, counted and passed on to the
 * caller's note callback, its progress, and the frames that failed, so each chain that
 * needs one is named.
 */
#include "restore/verify/verify_internal.h"

#include <stdarg.h>
#include <stdio.h>

void vfy_progress(vfy_run *v, uint64_t bytes)
{
    if (!v->progress || !v->progress->fn)
        return;
    v->prog.bytes_done += bytes;
    v->progress->fn(v->progress->ctx, &v->prog);
}

void vfy_problem(vfy_run *v, const char *id, const char *fmt, ...)
{
    char msg[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    v->stats->problems++;
    if (++v->subject_problems <= VFY_NOTES_PER_SUBJECT)
        v->note(v->note_ctx, id, true, msg);
}

int vfy_add_bad(vfy_run *v, size_t b, const mf_run *run)
{
    if (PB_GROW(v->bad, &v->bad_cap, v->nbad + 1))
        return PB_ENOMEM;
    v->bad[v->nbad++] = (vfy_bad){b, run->pack_no, run->offset};
    return 0;
}

bool vfy_is_bad(const vfy_run *v, size_t b, const mf_run *run)
{
    for (size_t i = 0; i < v->nbad; i++)
        if (v->bad[i].b == b && v->bad[i].pack_no == run->pack_no &&
            v->bad[i].offset == run->offset)
            return true;
    return false;
}
