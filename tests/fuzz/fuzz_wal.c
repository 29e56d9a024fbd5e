/*
 * tests/fuzz/fuzz_wal.c — libFuzzer target for archived WAL objects (arch_decode, the
 * decoder behind archive-get, restore's WAL checks and the prefetcher). The first byte
 * picks the WAL file name (segment, .partial, .backup, history), which bounds the raw
 * size; the payload checksum is resealed unless bit 7 is set.
 */
#include "engine/wal/wal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *names[] = {"000000010000000000000001", "000000010000000000000002.partial",
                                  "000000010000000000000002.00000028.backup",
                                  "00000002.history"};
    if (size < 1)
        return 0;
    const char *name = names[data[0] & 3];
    int reseal = !(data[0] & 0x80);
    data++, size--;
    uint8_t *obj = malloc(size ? size : 1);
    if (!obj)
        return 0;
    memcpy(obj, data, size);
    if (reseal && size >= 32)
        pb_put_u64(obj + 24, pb_hash64(obj + 32, size - 32));
    uint8_t *out = NULL;
    size_t out_len = 0;
    pb_error err = PB_ERROR_INIT;
    if (arch_decode(obj, size, name, &out, &out_len, &err) == 0 &&
        pb_get_u64(obj + 8) != out_len)
        abort(); /* what decodes is exactly the size its header names */
    free(out);
    free(obj);
    return 0;
}
