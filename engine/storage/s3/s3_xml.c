/*
 * engine/storage/s3/s3_xml.c — reading S3's XML answers (ListObjectsV2,
 * ListMultipartUploads, InitiateMultipartUpload, CompleteMultipartUpload, errors).
 *
 * Why not an XML library: the answers are flat, machine-written and small, and we need
 * a handful of element texts from them. What matters is that a hostile or damaged
 * answer cannot make us read outside [p, end): every search is bounded by end (the
 * answers are not NUL-terminated), which tests/fuzz/fuzz_s3xml.c checks.
 */
#include "engine/storage/s3/s3_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Decode the five predefined entities and numeric references in place. */
static void s3_xml_unescape(char *s)
{
    static const struct { const char *ent; char c; } ents[] = {
        {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    char *o = s;
    for (const char *p = s; *p;) {
        if (*p != '&') {
            *o++ = *p++;
            continue;
        }
        bool done = false;
        for (size_t i = 0; i < sizeof(ents) / sizeof(ents[0]) && !done; i++) {
            size_t l = strlen(ents[i].ent);
            if (strncmp(p, ents[i].ent, l) == 0) {
                *o++ = ents[i].c;
                p += l;
                done = true;
            }
        }
        if (!done && p[1] == '#') {
            char *end;
            bool hexa = p[2] == 'x' || p[2] == 'X';
            unsigned long cp = strtoul(p + (hexa ? 3 : 2), &end, hexa ? 16 : 10);
            if (*end == ';' && cp > 0 && cp < 0x110000) {
                /* UTF-8 encode the code point */
                if (cp < 0x80) {
                    *o++ = (char)cp;
                } else if (cp < 0x800) {
                    *o++ = (char)(0xC0 | (cp >> 6));
                    *o++ = (char)(0x80 | (cp & 0x3F));
                } else if (cp < 0x10000) {
                    *o++ = (char)(0xE0 | (cp >> 12));
                    *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
                    *o++ = (char)(0x80 | (cp & 0x3F));
                } else {
                    *o++ = (char)(0xF0 | (cp >> 18));
                    *o++ = (char)(0x80 | ((cp >> 12) & 0x3F));
                    *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
                    *o++ = (char)(0x80 | (cp & 0x3F));
                }
                p = end + 1;
                done = true;
            }
        }
        if (!done)
            *o++ = *p++;
    }
    *o = '\0';
}

/* Find <tag>...</tag> within [p, end); on success return a malloc'd, unescaped copy of
 * the text and set *next past the closing tag. NULL when absent (or out of memory, which
 * callers treat the same as a malformed answer). */
char *s3_xml_get(const char *p, const char *end, const char *tag, const char **next)
{
    char open[64], close[64];
    if (!p)
        return NULL;
    snprintf(open, sizeof(open), "<%s>", tag);
    snprintf(close, sizeof(close), "</%s>", tag);
    const char *a = memmem(p, (size_t)(end - p), open, strlen(open));
    if (!a)
        return NULL;
    a += strlen(open);
    const char *b = memmem(a, (size_t)(end - a), close, strlen(close));
    if (!b)
        return NULL;
    char *out = strndup(a, (size_t)(b - a));
    if (!out)
        return NULL;
    s3_xml_unescape(out);
    if (next)
        *next = b + strlen(close);
    return out;
}

/* Find the raw extent of the next <tag>...</tag> in [p, end): *b at its content, *be just
 * past the closing tag. */
bool s3_xml_block(const char *p, const char *end, const char *tag, const char **b,
                  const char **be)
{
    char open[64], close[64];
    int ol = snprintf(open, sizeof(open), "<%s>", tag);
    int cl = snprintf(close, sizeof(close), "</%s>", tag);
    const char *a = p ? memmem(p, (size_t)(end - p), open, (size_t)ol) : NULL;
    const char *z = a ? memmem(a, (size_t)(end - a), close, (size_t)cl) : NULL;
    if (!z)
        return false;
    *b = a + ol;
    *be = z + cl;
    return true;
}
