/*
 * tests/fuzz/gen_corpus.c — writes the binary seeds of tests/fuzz/corpus/ (manifest,
 * pack, wal) from pageback's own writers, so the seeds follow the formats. Built and run
 * by tests/fuzz/gen_corpus.sh; the text seeds (s3xml, options) are written there.
 */
#include "engine/pack/pack.h"
#include "manifest/manifest.h"
#include "manifest/v2_internal.h" /* mf_serialize_v1: the version 1 seeds */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put(const char *dir, const char *name, const void *a, size_t alen, const void *b,
                size_t blen)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(a, 1, alen, fp) != alen || (blen && fwrite(b, 1, blen, fp) != blen)) {
        perror(path);
        exit(1);
    }
    fclose(fp);
}

static void add(mf_manifest *m, const char *path, mf_kind kind, uint32_t npages, uint32_t nruns)
{
    mf_file f;
    memset(&f, 0, sizeof(f));
    f.path = strdup(path);
    f.kind = kind;
    f.mode = 0600;
    if (kind == MF_LINK)
        f.link_target = strdup("/srv/tblspc");
    if (kind == MF_REL) {
        f.npages = npages;
        f.size = (uint64_t)npages * PB_PAGE_SIZE;
    }
    if (kind == MF_FILE) {
        f.size = 3;
        snprintf(f.stored_in, sizeof(f.stored_in), "20261201-000000F");
    }
    f.nruns = nruns;
    f.runs = calloc(nruns ? nruns : 1, sizeof(mf_run));
    f.page_hashes = calloc(npages ? npages : 1, 8);
    for (uint32_t i = 0; i < nruns; i++)
        f.runs[i] = (mf_run){i * 2, kind == MF_REL ? 2 : 1, 1, 100, 16 + 100 * i, 16384, 0};
    pb_error err = PB_ERROR_INIT;
    if (mf_add_file(m, &f, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    mf_file_clear(&f);
}

static void manifests(const char *dir)
{
    mf_backup h;
    memset(&h, 0, sizeof(h));
    snprintf(h.id, sizeof(h.id), "20261201-000100I");
    snprintf(h.parent, sizeof(h.parent), "20261201-000000F");
    snprintf(h.start_wal, sizeof(h.start_wal), "000000010000000000000002");
    h.type = 'I';
    h.timeline = 1;
    h.wal_segment_size = 16u << 20;
    mf_manifest *m = NULL;
    pb_error err = PB_ERROR_INIT;
    mf_new(&m, &h, &err);
    add(m, "base", MF_DIR, 0, 0);
    add(m, "base/1/1259", MF_REL, 6, 3);
    add(m, "PG_VERSION", MF_FILE, 0, 1);
    add(m, "pg_tblspc/16384", MF_LINK, 0, 0);
    mf_sort(m);
    pb_buf b = {0};
    if (mf_serialize_v1(m, &b, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    put(dir, "incremental.body", b.data, b.len - 8, NULL, 0); /* the target reseals */
    put(dir, "incremental.sealed", b.data, b.len, NULL, 0);
    b.len = 0;
    /* version 2: a run inside a shared frame, an inode, and an all-zero page */
    ((mf_file *)mf_find(m, "base/1/1259"))->runs[1].frame_page = 1;
    ((mf_file *)mf_find(m, "base/1/1259"))->inode = 4242;
    ((mf_file *)mf_find(m, "base/1/1259"))->page_hashes[0] = mf_zero_page_hash();
    if (mf_serialize(m, &b, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    put(dir, "v2-incremental", b.data, b.len, NULL, 0);
    pb_buf_free(&b);
    mf_free(m);
}

/* A frame as pack.c writes it, uncompressed (flag 1) or compressed (flag 0). */
static size_t frame(uint8_t *out, const uint8_t *raw, size_t len, int compress)
{
    pb_buf obj = {0};
    pb_error err = PB_ERROR_INIT;
    size_t clen = len;
    const uint8_t *payload = raw;
    if (compress) { /* reuse the object encoder's zstd frame as the payload */
        pack_object_encode(raw, len, 1, &obj, &err);
        payload = obj.data + 32;
        clen = obj.len - 32;
    }
    memcpy(out, "PBFR", 4);
    pb_put_u32(out + 4, (uint32_t)len);
    pb_put_u32(out + 8, (uint32_t)clen);
    pb_put_u32(out + 12, compress ? 0 : 1);
    pb_put_u64(out + 16, pb_hash64(payload, clen));
    pb_put_u64(out + 24, pb_hash64(raw, len));
    memcpy(out + 32, payload, clen);
    pb_buf_free(&obj);
    return 32 + clen;
}

static void packs(const char *dir)
{
    static uint8_t page[PB_PAGE_SIZE], f[PB_PAGE_SIZE + 64];
    for (size_t i = 0; i < sizeof(page); i++)
        page[i] = (uint8_t)(i < 24 ? i : i % 7 == 0 ? i / 7 : 0);
    uint8_t mode = 0;
    put(dir, "frame-compressed", &mode, 1, f, frame(f, page, sizeof(page), 1));
    mode = 2;
    put(dir, "frame-stored", &mode, 1, f, frame(f, (const uint8_t *)"15\n", 3, 0));
    pb_buf obj = {0};
    pb_error err = PB_ERROR_INIT;
    pack_object_encode(page, sizeof(page), 3, &obj, &err);
    mode = 1;
    put(dir, "object", &mode, 1, obj.data, obj.len);
    pb_buf_free(&obj);
}

static void wal(const char *dir)
{
    size_t seg = 1u << 20;
    uint8_t *raw = calloc(1, seg);
    /* the long page header of segment 000000010000000000000001 (1 MiB segments) */
    pb_put_u16(raw, 0xD110);
    pb_put_u16(raw + 2, 0x0002);
    pb_put_u32(raw + 4, 1);
    pb_put_u64(raw + 8, seg);
    pb_put_u32(raw + 32, (uint32_t)seg);
    pb_put_u32(raw + 36, PB_PAGE_SIZE);
    const char *hist = "1\t0/3000000\tno recovery target specified\n";
    struct { uint8_t mode; const void *raw; size_t len; const char *name; } seeds[] = {
        {0, raw, seg, "segment"}, {1, raw, seg, "partial"},
        {3, hist, strlen(hist), "history"}};
    for (size_t i = 0; i < 3; i++) {
        pb_buf obj = {0};
        pb_error err = PB_ERROR_INIT;
        pack_object_encode(seeds[i].raw, seeds[i].len, 1, &obj, &err);
        memcpy(obj.data, "PBWAL001", 8);
        put(dir, seeds[i].name, &seeds[i].mode, 1, obj.data, obj.len);
        pb_buf_free(&obj);
    }
    free(raw);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_corpus CORPUS_DIR\n");
        return 2;
    }
    char d[1024];
    snprintf(d, sizeof(d), "%s/manifest", argv[1]);
    manifests(d);
    snprintf(d, sizeof(d), "%s/pack", argv[1]);
    packs(d);
    snprintf(d, sizeof(d), "%s/wal", argv[1]);
    wal(d);
    return 0;
}
