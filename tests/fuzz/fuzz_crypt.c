/*
 * tests/fuzz/fuzz_crypt.c — libFuzzer target for sealed objects of encrypted repositories
 * (engine/storage/crypt.c, docs/FORMAT.md "Encrypted repositories"): whole-object opening
 * and range opening of hostile bytes and sizes. The first 8 bytes give a range (u32
 * offset, u32 length); the rest is the stored object. Nothing forged authenticates, so
 * what this explores is the size and bounds arithmetic before and around the AEAD.
 */
#include "engine/storage/crypt_internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static repo_crypt *c;
    static const char key[] = "fuzzing-key-material-0123456789abcdef";
    if (!c) {
        repo_key k = {key, sizeof(key) - 1};
        if (crypt_new(&c, &k, 1, NULL))
            abort();
    }
    if (size < 8)
        return 0;
    uint64_t off = pb_get_u32(data), len = pb_get_u32(data + 4) & 0xfffff;
    const uint8_t *obj = data + 8;
    size_t olen = size - 8;
    const char *name = "backup/x/pack/000001";
    void *out = NULL;
    size_t out_len = 0;
    pb_error err = PB_ERROR_INIT;
    uint64_t plain;
    if (crypt_open(c, name, obj, olen, &out, &out_len, &err) == 0 &&
        (crypt_plain_size(olen, &plain) || plain != out_len))
        abort(); /* what opens is exactly the size its stored length gives */
    free(out);
    uint64_t span_off;
    size_t span_len;
    if (olen >= CRYPT_HEADER && crypt_header_check(c, name, obj, olen, &err) == 0 &&
        crypt_range_span(name, olen, off, (size_t)len, &span_off, &span_len, &err) == 0) {
        if (span_off > olen || span_len > olen - span_off)
            abort(); /* a span never leaves the object */
        uint8_t *buf = malloc(len ? len : 1);
        if (buf)
            crypt_open_range(c, name, obj, olen, off, (size_t)len, obj + span_off, buf, &err);
        free(buf);
    }
    return 0;
}
