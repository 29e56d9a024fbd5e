/*
 * tools/annotations.c — a backup's annotations (backup --annotation key=value, as
 * pgBackRest's) as info shows them. The manifest holds them as "key=value" lines; a
 * manifest from another writer is not trusted to be tidy, so JSON escapes every byte
 * that needs it and a line without '=' shows as a key with an empty value.
 */
#include "tools/annotations.h"

#include <stdio.h>
#include <string.h>

static void json_text(const char *s, size_t n)
{
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

void info_print_annotations(const char *text, bool json)
{
    if (!json && !text[0])
        return;
    printf(json ? ", \"annotations\": {" : "    annotations:");
    bool first = true;
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, "\n");
        const char *eq = memchr(p, '=', len);
        size_t klen = eq ? (size_t)(eq - p) : len;
        if (json) {
            printf("%s", first ? "" : ", ");
            json_text(p, klen);
            printf(": ");
            json_text(eq ? eq + 1 : "", eq ? len - klen - 1 : 0);
        } else {
            printf("%s %.*s", first ? "" : ",", (int)len, p);
        }
        first = false;
        p += len + (p[len] == '\n');
    }
    printf(json ? "}" : "\n");
}
