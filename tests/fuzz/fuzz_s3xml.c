/*
 * tests/fuzz/fuzz_s3xml.c — libFuzzer target for the S3 driver's XML reading
 * (s3_xml_get / s3_xml_block in engine/storage_s3.c), walked the way the driver reads a
 * ListObjectsV2 page, a ListMultipartUploads page, an error answer and an upload id.
 */
#include "engine/storage_internal.h"

#include <stdlib.h>
#include <string.h>

static void get_free(const char *p, const char *end, const char *tag)
{
    const char *next = NULL;
    char *v = s3_xml_get(p, end, tag, &next);
    if (v && (next < p || next > end))
        abort();
    free(v);
}

static void blocks(const char *xml, const char *end, const char *tag, const char *const *fields,
                   size_t nfields)
{
    const char *p = xml, *b, *be;
    unsigned guard = 0;
    while (s3_xml_block(p, end, tag, &b, &be) && guard++ < 100000) {
        if (b < p || be > end || be <= p)
            abort(); /* the walk must stay inside and move forward */
        for (size_t i = 0; i < nfields; i++)
            get_free(b, be, fields[i]);
        p = be;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* the driver's answers are not NUL-terminated: keep the copy exact-sized */
    char *xml = malloc(size ? size : 1);
    if (!xml)
        return 0;
    memcpy(xml, data, size);
    const char *end = xml + size;
    static const char *const contents[] = {"Key", "Size", "ETag"};
    static const char *const uploads[] = {"Key", "UploadId", "Initiated"};
    static const char *const errors[] = {"Code", "Message"};
    blocks(xml, end, "Contents", contents, 3);
    blocks(xml, end, "Upload", uploads, 3);
    blocks(xml, end, "Error", errors, 2);
    static const char *const tops[] = {"IsTruncated", "NextContinuationToken", "NextKeyMarker",
                                       "NextUploadIdMarker", "UploadId"};
    for (size_t i = 0; i < 5; i++)
        get_free(xml, end, tops[i]);
    free(xml);
    return 0;
}
