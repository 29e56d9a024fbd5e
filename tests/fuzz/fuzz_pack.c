/*
 * tests/fuzz/fuzz_pack.c — libFuzzer target for pack decoding (engine/pack/pack.c): whole
 * objects (pack_object_decode, the manifest envelope) and frames (pack_decode_frame and
 * the reusable pack_reader_decode that restore, verify and rebase use), plus the frame
 * location check. The first byte picks the mode; the payload checksum is resealed so the
 * fuzzer reaches decompression and the length checks behind it.
 */
#include "engine/pack/pack.h"

#include <stdlib.h>
#include <string.h>

static pack_reader *reader; /* one per process, as a restore worker keeps one */

static void object(const uint8_t *data, size_t size, int reseal)
{
    uint8_t *obj = malloc(size ? size : 1);
    if (!obj)
        return;
    memcpy(obj, data, size);
    if (reseal && size >= 32)
        pb_put_u64(obj + 24, pb_hash64(obj + 32, size - 32));
    void *out = NULL;
    size_t out_len = 0;
    pb_error err = PB_ERROR_INIT;
    if (pack_object_decode(obj, size, "fuzz object", &out, &out_len, &err) == 0 && !out)
        abort();
    free(out);
    free(obj);
}

static void frame(const uint8_t *data, size_t size, int reseal, size_t cap)
{
    uint8_t *f = malloc(size ? size : 1), *out = malloc(PACK_MAX_FRAME_RAW);
    if (!f || !out)
        goto done;
    memcpy(f, data, size);
    if (reseal && size >= PACK_FRAME_HEADER)
        pb_put_u64(f + 16, pb_hash64(f + PACK_FRAME_HEADER, size - PACK_FRAME_HEADER));
    size_t n = 0;
    pb_error err = PB_ERROR_INIT;
    if (pack_decode_frame(f, size, out, cap, &n, "fuzz frame", &err) == 0 && n > cap)
        abort();
    if (!reader && pack_reader_new(&reader, &err) != 0)
        goto done;
    if (pack_reader_decode(reader, f, size, out, cap, &n, "fuzz frame", &err) == 0 && n > cap)
        abort();
done:
    free(f);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned mode = data[0];
    data++, size--;
    size_t cap = (mode & 4) ? 8192 : PACK_MAX_FRAME_RAW;
    if (mode & 1) {
        object(data, size, mode & 2);
    } else {
        frame(data, size, mode & 2, cap);
        if (size >= 16) {
            pb_error err = PB_ERROR_INIT;
            pack_loc_check("fuzz", pb_get_u64(data), pb_get_u32(data + 8),
                           pb_get_u32(data + 12), &err);
        }
    }
    return 0;
}
