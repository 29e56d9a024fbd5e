/*
 * tests/unit/restore/chain_decode_test.c — what a restore decodes to rebuild a file that
 * is not a relation (stored whole, one or more frames): a file of one frame is checked
 * and written from one decode of its frame; a longer file is checked whole before any
 * of it is written (docs/DESIGN.md rule 8) and decoded again to be written; a file whose
 * content fails its hash gives nothing to its writer.
 */
#include "restore/plan.h"
#include "restore/restore_internal.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/restore/rebuild_fixtures.h"

#include <stdlib.h>
#include <string.h>

#define FULL "20260101-000000F"
#define MAX_BYTES (3u << 20)

static char root[256];
static uint8_t image[MAX_BYTES]; /* what the sink received */
static uint64_t bytes_in;        /* bytes the sink received */

static int sink(void *ctx, const mf_file *f, uint64_t off, const uint8_t *data, size_t len,
                pb_error *err)
{
    (void)ctx;
    (void)f;
    (void)err;
    if (off + len > MAX_BYTES)
        return PB_EINVAL;
    memcpy(image + off, data, len);
    bytes_in += len;
    return 0;
}

/* A whole file of nframes frames of frame_len bytes each, stored in backup FULL of r;
 * content is its bytes. bad_hash: the record's content hash is wrong. */
static mf_file whole_file(repo *r, const uint8_t *content, uint32_t nframes, size_t frame_len,
                          bool bad_hash)
{
    pb_error e = PB_ERROR_INIT;
    char dir[128];
    chain_backup_dir(dir, sizeof(dir), FULL);
    pack_writer *w = NULL;
    PBT_CHECK(pack_writer_open(&w, r, dir, 1u << 20, 1, &e) == 0);
    mf_file f;
    memset(&f, 0, sizeof(f));
    f.path = strdup("global/pg_filenode.map");
    f.kind = MF_FILE;
    f.mode = 0600;
    f.size = (uint64_t)nframes * frame_len;
    f.hash = pb_hash64(content, (size_t)f.size) ^ (bad_hash ? 1u : 0u);
    snprintf(f.stored_in, sizeof(f.stored_in), "%s", FULL);
    f.runs = calloc(nframes, sizeof(mf_run));
    f.nruns = nframes;
    for (uint32_t i = 0; i < nframes; i++) {
        pack_loc loc;
        PBT_CHECK(pack_write_frame(w, content + (size_t)i * frame_len, frame_len, &loc, &e) ==
                  0);
        f.runs[i] = (mf_run){0, 1, loc.pack_no, loc.clen, loc.offset, loc.rlen, 0};
    }
    PBT_CHECK(pack_writer_finish(w, &e) == 0);
    pack_writer_free(w);
    return f;
}

/* Rebuild a whole file of nframes frames; with_sink false verifies only. */
static int rebuild(const char *name, uint32_t nframes, bool with_sink, bool bad_hash,
                   rs_stats *st, pb_error *e)
{
    repo *r = pbt_repo_open_in(root, name);
    if (!r)
        return PB_EIO;
    size_t frame_len = 200000;
    uint8_t *content = pbt_random_bytes((size_t)nframes * frame_len, nframes);
    mf_file f = whole_file(r, content, nframes, frame_len, bad_hash);
    mf_backup hdr = pbt_header(FULL, "", 'F');
    const mf_file *recs[1] = {&f};
    memset(image, 0, sizeof(image));
    bytes_in = 0;
    int rc = pbt_rebuild_one(r, &hdr, 1, recs, with_sink ? sink : NULL, NULL, st, e);
    if (rc == 0 && with_sink)
        PBT_CHECK(bytes_in == f.size && memcmp(image, content, (size_t)f.size) == 0);
    mf_file_clear(&f);
    free(content);
    repo_free(r);
    return rc;
}

static void test_one_frame_decoded_once(void)
{
    rs_stats st;
    pb_error e = PB_ERROR_INIT;
    PBT_CHECK(rebuild("one", 1, true, false, &st, &e) == 0);
    PBT_CHECK(st.frames_read == 1); /* checked and written from one decode */
}

static void test_frames_checked_before_written(void)
{
    rs_stats st;
    pb_error e = PB_ERROR_INIT;
    PBT_CHECK(rebuild("three", 3, true, false, &st, &e) == 0);
    PBT_CHECK(st.frames_read == 6); /* checked whole, then decoded again to be written */
    PBT_CHECK(rebuild("verify", 3, false, false, &st, &e) == 0);
    PBT_CHECK(st.frames_read == 3); /* verifying only: decoded once */
}

static void test_bad_content_writes_nothing(void)
{
    rs_stats st;
    pb_error e = PB_ERROR_INIT;
    PBT_CHECK(rebuild("bad1", 1, true, true, &st, &e) == PB_ECORRUPT);
    PBT_CHECK(bytes_in == 0 && strstr(e.msg, "global/pg_filenode.map") != NULL);
    PBT_CHECK(rebuild("bad3", 3, true, true, &st, &e) == PB_ECORRUPT);
    PBT_CHECK(bytes_in == 0 && strstr(e.msg, FULL) != NULL);
}

int main(void)
{
    static const pbt_case cases[] = {PBT_CASE(test_one_frame_decoded_once),
                                     PBT_CASE(test_frames_checked_before_written),
                                     PBT_CASE(test_bad_content_writes_nothing)};
    return pbt_main_in_tmpdir(root, sizeof(root), "chain-decode-test", cases, PBT_COUNT(cases));
}
