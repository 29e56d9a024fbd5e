/* tests/unit/engine/pack/pack_test.c — pack writer/reader round trips, locations, corruption. */
#include "engine/pack/pack.h"
#include "tests/unit/fixtures.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NFRAMES 120
#define DIR_KEY "backup/20261130-101500F"

static char tmpdir[256];

/* Frame i: its length and content are a function of i, so they can be regenerated. */
static size_t frame_len(int i)
{
    static const size_t sizes[] = {8192, 16384, 100, 65536, 8192 * 7, 1, 300000,
                                   PACK_MAX_FRAME_RAW};
    return sizes[i % 8];
}

static void frame_data(int i, uint8_t *p, size_t n)
{
    uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
    bool random = i % 3 == 0;
    for (size_t k = 0; k < n; k++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        /* compressible frames: text-like with a small alphabet and long runs */
        p[k] = random ? (uint8_t)s : (uint8_t)("pageback "[(k / 64 + (size_t)i) % 9]);
    }
}

static char *full_path(const char *key)
{
    static char p[1024];
    snprintf(p, sizeof(p), "%s/%s", tmpdir, key);
    return p;
}

static pack_loc locs[NFRAMES];

static void test_round_trip(void)
{
    repo *r = pbt_repo_open(tmpdir);
    pb_error e = PB_ERROR_INIT;
    pack_writer *w = NULL;
    PBT_CHECK(pack_writer_open(&w, r, DIR_KEY, 1u << 20, 1, &e) == 0);
    uint8_t *buf = malloc(PACK_MAX_FRAME_RAW), *back = malloc(PACK_MAX_FRAME_RAW);
    uint64_t raw_total = 0;
    for (int i = 0; i < NFRAMES; i++) {
        size_t n = frame_len(i);
        frame_data(i, buf, n);
        raw_total += n;
        PBT_CHECK(pack_write_frame(w, buf, n, &locs[i], &e) == 0);
    }
    PBT_CHECK(pack_write_frame(w, buf, PACK_MAX_FRAME_RAW + 1, NULL, &e) == PB_EINVAL);
    PBT_CHECK(pack_writer_finish(w, &e) == 0);
    uint32_t packs = pack_writer_packs(w);
    uint64_t stored = pack_writer_stored_bytes(w);
    pack_writer_free(w);
    PBT_CHECK(packs > 3);
    PBT_CHECK(stored < raw_total); /* two thirds of the frames compress well */

    /* locations: contiguous within a pack, a new pack starts after the header */
    PBT_CHECK(locs[0].pack_no == 1 && locs[0].offset == 16);
    uint64_t sum = 0;
    for (int i = 0; i < NFRAMES; i++) {
        PBT_CHECK(locs[i].rlen == frame_len(i));
        PBT_CHECK(locs[i].clen >= PACK_FRAME_HEADER);
        if (i % 3 == 0) /* random data is stored as is */
            PBT_CHECK(locs[i].clen == locs[i].rlen + PACK_FRAME_HEADER);
        else if (locs[i].rlen > 1000)
            PBT_CHECK(locs[i].clen < locs[i].rlen / 4);
        if (i > 0 && locs[i].pack_no == locs[i - 1].pack_no)
            PBT_CHECK(locs[i].offset == locs[i - 1].offset + locs[i - 1].clen);
        else if (i > 0)
            PBT_CHECK(locs[i].pack_no == locs[i - 1].pack_no + 1 && locs[i].offset == 16);
        sum += locs[i].clen;
    }
    PBT_CHECK(locs[NFRAMES - 1].pack_no == packs);
    PBT_CHECK(sum + 16u * packs == stored);

    /* the stored objects add up to what the writer reports, and each has the header */
    uint64_t on_disk = 0;
    for (uint32_t p = 1; p <= packs; p++) {
        char key[256];
        uint64_t size = 0;
        pack_key(key, sizeof(key), DIR_KEY, p);
        PBT_CHECK(repo_stat(r, key, &size, &e) == 0);
        on_disk += size;
        uint8_t hdr[16];
        PBT_CHECK(repo_get_range(r, key, 0, 16, hdr, &e) == 0);
        PBT_CHECK(memcmp(hdr, "PBPACK01", 8) == 0 && pb_get_u32(hdr + 8) == 1);
    }
    PBT_CHECK(on_disk == stored);

    /* every frame reads back exactly, in any order, with and without a reader */
    pack_reader *rd = NULL;
    PBT_CHECK(pack_reader_new(&rd, &e) == 0);
    for (int k = 0; k < NFRAMES; k++) {
        int i = (k * 37) % NFRAMES;
        size_t n = frame_len(i);
        frame_data(i, buf, n);
        memset(back, 0xAA, n);
        int rc = pack_read_frame(r, DIR_KEY, &locs[i], back, PACK_MAX_FRAME_RAW, &e);
        PBT_CHECK(rc == 0);
        if (rc)
            fprintf(stderr, "frame %d: %s\n", i, e.msg);
        PBT_CHECK(memcmp(buf, back, n) == 0);
        memset(back, 0x55, n);
        PBT_CHECK(pack_reader_read(rd, r, DIR_KEY, &locs[i], back, PACK_MAX_FRAME_RAW, &e) == 0);
        PBT_CHECK(memcmp(buf, back, n) == 0);
    }
    PBT_CHECK(pack_reader_read(rd, r, DIR_KEY, &locs[1], back, locs[1].rlen - 1, &e) ==
              PB_EINVAL);
    pack_reader_free(rd);
    pack_reader_free(NULL);
    /* buffer too small for the frame */
    PBT_CHECK(pack_read_frame(r, DIR_KEY, &locs[1], back, locs[1].rlen - 1, &e) == PB_EINVAL);
    free(buf);
    free(back);
    repo_free(r);
}

static void test_small_cases(void)
{
    repo *r = pbt_repo_open(tmpdir);
    pb_error e = PB_ERROR_INIT;
    char key[64];
    pack_key(key, sizeof(key), "backup/X", 3);
    PBT_CHECK(strcmp(key, "backup/X/pack/000003") == 0);

    /* empty frame, and a finish with nothing written creates no pack */
    pack_writer *w = NULL;
    pack_loc loc;
    PBT_CHECK(pack_writer_open(&w, r, "small", 1u << 20, 3, &e) == 0);
    PBT_CHECK(pack_writer_finish(w, &e) == 0 && pack_writer_packs(w) == 0);
    PBT_CHECK(pack_write_frame(w, "", 0, &loc, &e) == 0);
    PBT_CHECK(pack_writer_finish(w, &e) == 0 && pack_writer_packs(w) == 1);
    pack_writer_free(w);
    uint8_t out[8];
    PBT_CHECK(loc.rlen == 0 && loc.clen == PACK_FRAME_HEADER);
    PBT_CHECK(pack_read_frame(r, "small", &loc, out, sizeof(out), &e) == 0);

    /* a writer freed without finish leaves nothing visible */
    PBT_CHECK(pack_writer_open(&w, r, "abandoned", 1u << 20, 1, &e) == 0);
    PBT_CHECK(pack_write_frame(w, "hello", 5, &loc, &e) == 0);
    pack_writer_free(w);
    pack_writer_free(NULL);
    PBT_CHECK(repo_stat(r, "abandoned/pack/000001", NULL, &e) == PB_ENOENT);
    repo_free(r);
}

/* Decode a copy of frame i after applying a mutation; returns the code. */
static int decode_mutated(repo *r, int i, size_t flip_at, size_t trunc, pb_error *e)
{
    char key[256], what[300];
    pack_key(key, sizeof(key), DIR_KEY, locs[i].pack_no);
    snprintf(what, sizeof(what), "%s frame at offset %llu", key,
             (unsigned long long)locs[i].offset);
    uint8_t *frame = malloc(locs[i].clen), *out = malloc(PACK_MAX_FRAME_RAW);
    PBT_CHECK(repo_get_range(r, key, locs[i].offset, locs[i].clen, frame, e) == 0);
    if (flip_at != (size_t)-1)
        frame[flip_at] ^= 0x10;
    size_t n = 0, n2 = 0;
    int rc = pack_decode_frame(frame, locs[i].clen - trunc, out, PACK_MAX_FRAME_RAW, &n, what,
                               e);
    if (rc)
        PBT_CHECK(strstr(e->msg, what) != NULL);
    else
        PBT_CHECK(n == locs[i].rlen);
    /* the reusable reader reaches the same verdict */
    pack_reader *rd = NULL;
    pb_error e2 = PB_ERROR_INIT;
    PBT_CHECK(pack_reader_new(&rd, &e2) == 0);
    PBT_CHECK(pack_reader_decode(rd, frame, locs[i].clen - trunc, out, PACK_MAX_FRAME_RAW, &n2,
                                 what, &e2) == rc);
    PBT_CHECK(n2 == n && e2.code == (rc ? rc : 0));
    pack_reader_free(rd);
    free(frame);
    free(out);
    return rc;
}

static void test_corruption(void)
{
    repo *r = pbt_repo_open(tmpdir);
    pb_error e = PB_ERROR_INIT;
    int comp = 1, raw = 3; /* frame 1 is compressed, frame 3 stored raw */
    PBT_CHECK(decode_mutated(r, comp, (size_t)-1, 0, &e) == 0);
    PBT_CHECK(decode_mutated(r, raw, (size_t)-1, 0, &e) == 0);
    /* payload bytes */
    PBT_CHECK(decode_mutated(r, comp, PACK_FRAME_HEADER + 5, 0, &e) == PB_ECORRUPT);
    PBT_CHECK(decode_mutated(r, raw, locs[raw].clen - 1, 0, &e) == PB_ECORRUPT);
    /* every header field */
    for (size_t at = 0; at < PACK_FRAME_HEADER; at += 2) {
        PBT_CHECK(decode_mutated(r, comp, at, 0, &e) == PB_ECORRUPT);
        PBT_CHECK(decode_mutated(r, raw, at, 0, &e) == PB_ECORRUPT);
    }
    /* truncation */
    PBT_CHECK(decode_mutated(r, comp, (size_t)-1, 1, &e) == PB_ECORRUPT);
    PBT_CHECK(decode_mutated(r, comp, (size_t)-1, locs[comp].clen - 10, &e) == PB_ECORRUPT);
    PBT_CHECK(strstr(e.msg, "truncated") != NULL);

    /* corruption on disk, seen through pack_read_frame */
    char key[256], what[300];
    pack_key(key, sizeof(key), DIR_KEY, locs[comp].pack_no);
    snprintf(what, sizeof(what), "%s frame at offset %llu", key,
             (unsigned long long)locs[comp].offset);
    int fd = open(full_path(key), O_RDWR);
    PBT_CHECK(fd >= 0);
    uint8_t b;
    off_t at = (off_t)locs[comp].offset + PACK_FRAME_HEADER + 3;
    PBT_CHECK(pread(fd, &b, 1, at) == 1);
    b ^= 0x01;
    PBT_CHECK(pwrite(fd, &b, 1, at) == 1);
    uint8_t *out = malloc(PACK_MAX_FRAME_RAW);
    PBT_CHECK(pack_read_frame(r, DIR_KEY, &locs[comp], out, PACK_MAX_FRAME_RAW, &e) ==
              PB_ECORRUPT);
    PBT_CHECK(strstr(e.msg, what) != NULL);
    pack_reader *rd = NULL;
    PBT_CHECK(pack_reader_new(&rd, &e) == 0);
    memset(&e, 0, sizeof(e));
    PBT_CHECK(pack_reader_read(rd, r, DIR_KEY, &locs[comp], out, PACK_MAX_FRAME_RAW, &e) ==
              PB_ECORRUPT);
    PBT_CHECK(strstr(e.msg, what) != NULL);
    pack_reader_free(rd);
    b ^= 0x01;
    PBT_CHECK(pwrite(fd, &b, 1, at) == 1);
    PBT_CHECK(pack_read_frame(r, DIR_KEY, &locs[comp], out, PACK_MAX_FRAME_RAW, &e) == 0);

    /* a truncated pack object: the range read comes up short */
    PBT_CHECK(ftruncate(fd, (off_t)(locs[comp].offset + locs[comp].clen - 1)) == 0);
    close(fd);
    PBT_CHECK(pack_read_frame(r, DIR_KEY, &locs[comp], out, PACK_MAX_FRAME_RAW, &e) ==
              PB_ECORRUPT);
    PBT_CHECK(strstr(e.msg, key) != NULL);

    /* a location that disagrees with the stored frame */
    pack_loc bad = locs[comp];
    bad.pack_no = locs[raw].pack_no;
    bad.offset = locs[raw].offset + 1;
    PBT_CHECK(pack_read_frame(r, DIR_KEY, &bad, out, PACK_MAX_FRAME_RAW, &e) == PB_ECORRUPT);
    bad = locs[raw];
    bad.clen = 3;
    PBT_CHECK(pack_read_frame(r, DIR_KEY, &bad, out, PACK_MAX_FRAME_RAW, &e) == PB_ECORRUPT);
    bad = locs[raw];
    bad.pack_no = 999;
    PBT_CHECK(pack_read_frame(r, DIR_KEY, &bad, out, PACK_MAX_FRAME_RAW, &e) == PB_ENOENT);
    free(out);
    repo_free(r);
}

/* Whole compressed objects (manifests): round trip, and every corruption detected. */
static void test_object_codec(void)
{
    size_t len = 3u << 20; /* larger than one frame */
    uint8_t *raw = malloc(len);
    for (size_t i = 0; i < len; i++)
        raw[i] = (uint8_t)((i * 7) % 251 + (i / 4096));
    pb_buf obj = {0};
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(pack_object_encode(raw, len, 3, &obj, &err) == 0);
    PBT_CHECK(obj.len < len / 4);
    void *back = NULL;
    size_t back_len = 0;
    PBT_CHECK(pack_object_decode(obj.data, obj.len, "m", &back, &back_len, &err) == 0);
    PBT_CHECK(back_len == len && back && memcmp(back, raw, len) == 0);
    free(back);
    size_t spots[] = {0, 9, 17, 25, 40, obj.len / 2, obj.len - 1};
    for (size_t i = 0; i < sizeof(spots) / sizeof(spots[0]); i++) {
        obj.data[spots[i]] ^= 0x40;
        back = NULL;
        PBT_CHECK(pack_object_decode(obj.data, obj.len, "backup/X/manifest", &back, &back_len,
                                     &err) == PB_ECORRUPT);
        PBT_CHECK(strstr(err.msg, "backup/X/manifest") != NULL);
        PBT_CHECK(back == NULL);
        obj.data[spots[i]] ^= 0x40;
    }
    PBT_CHECK(pack_object_decode(obj.data, 20, "m", &back, &back_len, &err) == PB_ECORRUPT);
    pb_buf_free(&obj);
    free(raw);
}

/* A crafted envelope: valid checksums, a zstd frame whose header claims content_size
 * bytes but whose one RLE block yields 128 KiB. */
static void crafted_object(pb_buf *obj, uint64_t raw_len, uint64_t content_size)
{
    uint8_t z[17] = {0x28, 0xB5, 0x2F, 0xFD, 0xE0};
    pb_put_u64(z + 5, content_size);
    z[13] = 0x03; /* last block, RLE, 131072 bytes */
    z[14] = 0x00;
    z[15] = 0x10;
    z[16] = 0x00;
    obj->len = 0;
    PBT_CHECK(pb_buf_append(obj, PACK_OBJECT_MAGIC, 8) == 0);
    PBT_CHECK(pb_buf_u64(obj, raw_len) == 0);
    PBT_CHECK(pb_buf_u64(obj, 0) == 0);
    PBT_CHECK(pb_buf_u64(obj, pb_hash64(z, sizeof(z))) == 0);
    PBT_CHECK(pb_buf_append(obj, z, sizeof(z)) == 0);
}

/* Defect 10: a header's raw length is bounded by the maximum and by what the payload can
 * expand to before anything is allocated; a lying one fails as corruption, never as a
 * 60 GiB allocation (old code: malloc(60 GiB) -> PB_ENOMEM, or an ASan abort). */
static void test_object_hostile_lengths(void)
{
    pb_buf obj = {0};
    pb_error err = PB_ERROR_INIT;
    void *back = NULL;
    size_t back_len = 0;
    const uint64_t lies[] = {60ull << 30, PACK_OBJECT_MAX_RAW + 1, 1u << 30, 4u << 20};
    for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
        crafted_object(&obj, lies[i], lies[i]);
        PBT_CHECK(pack_object_decode(obj.data, obj.len, "backup/X/manifest", &back, &back_len,
                                     &err) == PB_ECORRUPT);
        PBT_CHECK(strstr(err.msg, "backup/X/manifest") != NULL);
        PBT_CHECK(back == NULL);
    }
    /* the header and the frame disagree; a frame that really holds 128 KiB but claims less */
    crafted_object(&obj, 131072, 131072 + 1);
    PBT_CHECK(pack_object_decode(obj.data, obj.len, "m", &back, &back_len, &err) == PB_ECORRUPT);
    crafted_object(&obj, 131072, 131072);
    PBT_CHECK(pack_object_decode(obj.data, obj.len, "m", &back, &back_len, &err) ==
              PB_ECORRUPT); /* raw hash 0 does not match 128 KiB of zeros */
    /* the same envelope under another magic is refused */
    PBT_CHECK(pack_envelope_decode(obj.data, obj.len, "PBWAL001", 1u << 30, "w", &back,
                                   &back_len, &err) == PB_ECORRUPT);
    pb_buf_free(&obj);
}

/* Defect 10: frame locations read from a manifest are bounded before use. */
static void test_loc_bounds(void)
{
    pb_error e = PB_ERROR_INIT;
    PBT_CHECK(pack_loc_check("k", 16, 40, 8192, &e) == 0);
    PBT_CHECK(pack_loc_check("k", 16, PACK_MAX_FRAME_STORED, PACK_MAX_FRAME_RAW, &e) == 0);
    PBT_CHECK(pack_loc_check("k", 16, PACK_MAX_FRAME_STORED + 1, 8192, &e) == PB_ECORRUPT);
    PBT_CHECK(pack_loc_check("k", 16, 31, 8192, &e) == PB_ECORRUPT);
    PBT_CHECK(pack_loc_check("k", 16, 40, PACK_MAX_FRAME_RAW + 1, &e) == PB_ECORRUPT);
    PBT_CHECK(pack_loc_check("k", 3, 40, 8192, &e) == PB_ECORRUPT);
    PBT_CHECK(pack_loc_check("k", UINT64_MAX - 10, 40, 8192, &e) == PB_ECORRUPT);
    PBT_CHECK(pack_loc_check("pack/000001", (uint64_t)INT64_MAX, 40, 8192, &e) == PB_ECORRUPT);
    PBT_CHECK(strstr(e.msg, "pack/000001") != NULL);
    repo *r = pbt_repo_open(tmpdir);
    uint8_t *out = malloc(PACK_MAX_FRAME_RAW);
    pack_loc huge = {1, 16, 0xFFFFFFF0u, 8192};
    PBT_CHECK(pack_read_frame(r, DIR_KEY, &huge, out, PACK_MAX_FRAME_RAW, &e) == PB_ECORRUPT);
    pack_loc wrap = {1, UINT64_MAX - 20, 64, 8192};
    PBT_CHECK(pack_read_frame(r, DIR_KEY, &wrap, out, PACK_MAX_FRAME_RAW, &e) == PB_ECORRUPT);
    free(out);
    repo_free(r);
}

int main(void)
{
    static const pbt_case cases[] = {PBT_CASE(test_round_trip),
                                     PBT_CASE(test_small_cases),
                                     PBT_CASE(test_corruption),
                                     PBT_CASE(test_object_codec),
                                     PBT_CASE(test_object_hostile_lengths),
                                     PBT_CASE(test_loc_bounds)};
    return pbt_main_in_tmpdir(tmpdir, sizeof(tmpdir), "pack-test", cases, PBT_COUNT(cases));
}
