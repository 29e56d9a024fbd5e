/*
 * manifest/parse.c — mf_parse: a whole manifest object of either format version into
 * memory. Version 2 goes through the stream reader over the bytes in memory, so one
 * decoder serves both ways of reading it (docs/MANIFEST.md).
 */
#include "manifest/v2_internal.h"

#include <stdio.h>
#include <string.h>

typedef struct mem_src {
    const uint8_t *p;
    size_t len;
    const char *what;
} mem_src;

static int mem_read(void *ctx, uint64_t off, size_t len, void *dst, pb_error *err)
{
    const mem_src *m = ctx;
    if (off > m->len || len > m->len - off)
        return pb_fail(err, PB_ECORRUPT, "manifest %s: %zu bytes at %llu are past its end "
                       "(%zu bytes)", m->what, len, (unsigned long long)off, m->len);
    memcpy(dst, m->p + off, len);
    return 0;
}

static int parse_v2(const void *data, size_t len, const mf_codec *codec, const char *what,
                    mf_manifest **out, pb_error *err)
{
    mem_src ms = {data, len, what};
    mf_source src = {mem_read, NULL, &ms, len, codec};
    mf_stream *s = NULL;
    mf_manifest *m = NULL;
    int rc = mf_stream_open(&s, &src, what, err);
    if (rc == 0)
        rc = mf_new(&m, mf_stream_header(s), err);
    mf_file f;
    while (rc == 0 && (rc = mf_stream_next(s, &f, err)) == 1) {
        rc = mf_add_file(m, &f, err);
        mf_file_clear(&f);
    }
    mf_stream_close(s);
    if (rc) {
        mf_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

int mf_parse(const void *data, size_t len, const char *what, mf_manifest **out, pb_error *err)
{
    return mf_parse_codec(data, len, NULL, what, out, err);
}

int mf_parse_codec(const void *data, size_t len, const mf_codec *codec, const char *what,
                   mf_manifest **out, pb_error *err)
{
    *out = NULL;
    what = what ? what : "(unnamed)";
    if (len >= 12 && memcmp(data, MF_MAGIC, 8) == 0 &&
        pb_get_u32((const uint8_t *)data + 8) == MF_VERSION_2)
        return parse_v2(data, len, codec, what, out, err);
    return mf_parse_v1(data, len, what, out, err);
}
