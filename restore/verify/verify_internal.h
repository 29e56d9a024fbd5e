/* restore/verify/verify_internal.h — the verify room's own: a run's state (notes.c),
 * each backup's own frames (verify_frames.c) and the WAL archive (verify_wal.c), which
 * verify.c puts together. */
#ifndef PB_RESTORE_VERIFY_INTERNAL_H
#define PB_RESTORE_VERIFY_INTERNAL_H

#include "engine/pack/pack.h"
#include "restore/recovery/recovery.h"
#include "restore/verify/verify.h"

/* Problems noted per backup before the rest are only counted. */
#define VFY_NOTES_PER_SUBJECT 10

/* A frame that failed (unreadable, corrupt, or a page hash mismatch). */
typedef struct vfy_bad {
    size_t b; /* the backup whose pack holds it: its index in the run's headers */
    uint32_t pack_no;
    uint64_t offset;
} vfy_bad;

typedef struct vfy_run {
    repo *r;
    rs_verify_note note;
    void *note_ctx;
    rs_verify_stats *stats;
    size_t subject_problems; /* problems of the backup (or archive part) being checked */
    vfy_bad *bad;            /* every failed frame, so chains that need one are named */
    size_t nbad, bad_cap;
    /* the repository pass's readers (verify.c makes them) */
    pack_reader *rd;         /* one zstd context for every frame */
    pack_source *src;        /* planned, coalesced range reads (engine/pack/pack_read.c) */
    uint8_t *frame;          /* PACK_MAX_FRAME_RAW */
    uint64_t manifest_peak;  /* most manifest bytes one step held (a stream, a window) */
    const rs_progress_hook *progress; /* NULL: none */
    rs_progress prog;                 /* backups and their own frames' stored bytes */
} vfy_run;

/* ---- the run's state (notes.c) ---- */
/* bytes more of stored frames were read and checked: tell the progress hook. */
void vfy_progress(vfy_run *v, uint64_t bytes);

/* Note a problem of subject id (NULL: the WAL archive): counted always, passed to the
 * note callback up to VFY_NOTES_PER_SUBJECT times per subject. */
void vfy_problem(vfy_run *v, const char *id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Remember a failed frame of backup b / ask whether one failed. */
int vfy_add_bad(vfy_run *v, size_t b, const mf_run *run);
bool vfy_is_bad(const vfy_run *v, size_t b, const mf_run *run);

/* Read every frame backup h (index b) stored (each once), its manifest read as a stream
 * and its frames checked a bounded window of records at a time; check every page and
 * whole-file hash; problems are noted and failed frames remembered. A manifest that
 * cannot be read to its end is a problem and sets *broken. Returns PB_ENOMEM or 0. */
int vfy_own_frames(vfy_run *v, const mf_backup *h, size_t b, bool *broken);

/* Backup h's own WAL (start to stop on its timeline, as the backup was completed by):
 * a missing segment is a problem of h, and so is one that does not decode (its
 * checksum, a page header, a record's CRC) or whose valid WAL ends before the stop. */
void vfy_backup_wal(vfy_run *v, const rs_wal_view *w, const mf_backup *h);

/* The whole WAL archive (w: one listing of it) against the backups hs[0..n): every
 * object's checksum, gaps on each timeline from the oldest backup's start on, history
 * files that parse and agree. Problems go through vfy_problem; the return value is for
 * failures to run at all. */
int vfy_wal_archive(vfy_run *v, rs_wal_view *w, const mf_backup *hs, size_t n,
                    pb_error *err);

#endif
