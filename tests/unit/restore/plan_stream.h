/*
 * tests/unit/restore/plan_stream.h — a model of restore and verify planning over
 * manifests read as streams, kept for the tests and the planning benchmark
 * (tools/bench/plan_synthetic.c) that measure what such planning holds; the restore
 * itself plans with restore/plan_merge.c and restore/srcmap.c.
 */
#ifndef PB_TESTS_PLAN_STREAM_H
#define PB_TESTS_PLAN_STREAM_H

#include "manifest/manifest.h"

/* Bounded memory: one chunk and one record per manifest plus one file's source map. */
typedef struct rs_stream_stats {
    uint64_t files, rel_files; /* files of the restored backup (verify: of the manifest) */
    uint64_t pages;            /* pages to restore (verify: shipped pages) */
    uint64_t frames, bytes;    /* frames to read and their stored bytes */
    uint64_t peak_held;        /* high-water of manifest bytes held (mf_stream_peak) */
} rs_stream_stats;
/* Restore planning: chain[] oldest first, the restored backup last (n < 65535), merged as
 * sorted streams; per file of the restored backup, each page from the newest backup that
 * shipped it. A page no backup holds is PB_ECORRUPT naming the file. Takes the streams. */
int rs_plan_chain_stream(mf_stream **chain, size_t n, rs_stream_stats *st, pb_error *err);
/* Verify planning of one manifest: the frames and bytes to read and check; adds to *st
 * (peak_held is the largest of the streams'). The stream stays the caller's. */
int rs_plan_verify_stream(mf_stream *s, rs_stream_stats *st, pb_error *err);

#endif
