/*
 * tests/fuzz/fuzz_manifest.c — libFuzzer target for mf_parse (manifest/serialize.c).
 * The input is tried as is, and again as a body with a valid trailing checksum appended,
 * so the fuzzer gets past the checksum into the parser. A manifest that parses must
 * serialise and parse back to the same bytes.
 */
#include "manifest/manifest.h"

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
    free(sealed);
    return 0;
}
