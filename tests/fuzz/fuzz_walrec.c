/*
 * tests/fuzz/fuzz_walrec.c — libFuzzer target for the WAL record decoder (engine/wal/
 * decode.c, reader.c). The first byte chooses: bit 0 set, the rest is one record whose
 * CRC is resealed (so the layout checks behind it are reached) for arch_record_decode;
 * clear, the rest is the beginning of a 1 MiB segment 0 handed to the reader, which must
 * refuse or stop at whatever it holds without reading past it. The seed is the first
 * 16 kB of a real segment (tests/fixtures/wal).
 */
#include "engine/wal/wal.h"

#include <stdlib.h>
#include <string.h>

/* CRC-32C bit by bit, to reseal a record. */
static uint32_t crc32c(uint32_t crc, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    }
    return crc;
}

typedef struct src {
    const uint8_t *data;
    size_t len;
} src;

static int get(void *ctx, uint64_t segno, const uint8_t **data, size_t *len, pb_error *err)
{
    src *s = ctx;
    if (segno != 0)
        return pb_fail(err, PB_ENOENT, "segment %llu not there", (unsigned long long)segno);
    *data = s->data;
    *len = s->len;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool one = data[0] & 1;
    /* The version whose full-page-image flags the record is read with (14 .. 18). */
    const pgv_facts *v = pgv_by_major(14 + (data[0] >> 1) % 5);
    data++, size--;
    pb_error err = PB_ERROR_INIT;
    if (one) {
        if (size < 24 || size > (1u << 20))
            return 0;
        uint8_t *rec = malloc(size);
        if (!rec)
            return 0;
        memcpy(rec, data, size);
        pb_put_u32(rec, (uint32_t)size);
        uint32_t crc = crc32c(0xFFFFFFFFu, rec + 24, size - 24);
        pb_put_u32(rec + 20, crc32c(crc, rec, 20) ^ 0xFFFFFFFFu);
        arch_record out;
        if (arch_record_decode(rec, (uint32_t)size, 0x1000028, v, &out, &err) == 0 &&
            (out.nblocks > 33 || (out.main_len && out.main_data + out.main_len != rec + size)))
            abort(); /* what decodes stays inside the record */
        free(rec);
        return 0;
    }
    src s = {data, size};
    arch_walreader *r = NULL;
    if (arch_walreader_open(&r, 1u << 20, 0, UINT64_MAX, get, &s, &err) != 0)
        return 0;
    const arch_record *rec;
    for (int i = 0; i < 100000 && arch_walreader_next(r, &rec, &err) == 0; i++)
        if (rec->end_lsn <= rec->lsn)
            abort();
    arch_walreader_close(r);
    return 0;
}
