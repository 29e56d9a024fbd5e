/*
 * tests/fuzz/fuzz_manifest.c — libFuzzer target for mf_parse (manifest/, both format
 * versions). The input is tried as is; again as a version 1 body with a valid trailing
 * checksum appended; and, when it is a version 2 object, again with its header, index
 * and chunk checksums recomputed, so the fuzzer gets past the checksums into the
 * decoders. A manifest that parses must serialise and parse back to the same bytes.
 */
#include "manifest/manifest.h"
#include "manifest/v2_internal.h"

#include <stdlib.h>
#include <string.h>

static void round_trip(const mf_manifest *m)
{
    pb_buf b = {0}, b2 = {0};
    pb_error err = PB_ERROR_INIT;
    mf_manifest *back = NULL;
    if (mf_serialize(m, &b, &err) != 0 || mf_parse(b.data, b.len, "round trip", &back, &err) != 0 ||
        mf_serialize(back, &b2, &err) != 0 || b.len != b2.len || memcmp(b.data, b2.data, b.len))
        abort(); /* what parses must serialise and parse back identically */
    mf_free(back);
    pb_buf_free(&b);
    pb_buf_free(&b2);
}

/* Recompute a version 2 object's checksums in place; 0 when it is not one (or its
 * prefix or index cannot be read, which the plain attempt already fuzzes). */
static int reseal_v2(uint8_t *p, size_t len)
{
    if (len < MF_V2_PREFIX || memcmp(p, MF_MAGIC, 8) || pb_get_u32(p + 8) != MF_VERSION_2)
        return 0;
    uint64_t hlen = pb_get_u32(p + 12), xlen = pb_get_u32(p + 16);
    uint64_t data_start = MF_V2_PREFIX + hlen + 8 + xlen + 8;
    if (data_start > len)
        return 0;
    pb_put_u64(p + MF_V2_PREFIX + hlen, pb_hash64(p, MF_V2_PREFIX + hlen));
    uint8_t *x = p + MF_V2_PREFIX + hlen + 8;
    mf_chunk_ref *c = NULL;
    size_t n = 0;
    uint64_t nfiles = 0;
    pb_error err = PB_ERROR_INIT;
    if (mf_v2_rd_index(x, xlen, data_start, "fuzz", &c, &n, &nfiles, &err) == 0) {
        for (size_t i = 0; i < n; i++)
            if (c[i].offset <= len && c[i].len <= len - c[i].offset)
                c[i].hash = pb_hash64(p + c[i].offset, c[i].len);
        pb_buf b = {0};
        if (mf_v2_put_index(&b, c, n, nfiles) == 0 && b.len == xlen)
            memcpy(x, b.data, b.len); /* the same varints: only the hashes changed */
        pb_buf_free(&b);
    }
    mf_chunk_refs_free(c, n);
    pb_put_u64(x + xlen, pb_hash64(x, xlen));
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pb_error err = PB_ERROR_INIT;
    mf_manifest *m = NULL;
    if (mf_parse(data, size, "fuzz input", &m, &err) == 0)
        round_trip(m);
    mf_free(m);
    m = NULL;
    uint8_t *sealed = malloc(size + 8);
    if (!sealed)
        return 0;
    memcpy(sealed, data, size);
    pb_put_u64(sealed + size, pb_hash64(data, size));
    if (mf_parse(sealed, size + 8, "fuzz input (sealed)", &m, &err) == 0)
        round_trip(m);
    mf_free(m);
    m = NULL;
    memcpy(sealed, data, size);
    if (reseal_v2(sealed, size) && mf_parse(sealed, size, "fuzz input (v2 resealed)", &m,
                                            &err) == 0)
        round_trip(m);
    mf_free(m);
    free(sealed);
    return 0;
}
