/* tools/annotations.h — a backup's annotations as info shows them (tools/annotations.c). */
#ifndef PB_TOOLS_ANNOTATIONS_H
#define PB_TOOLS_ANNOTATIONS_H

#include <stdbool.h>

/* text: the manifest's "key=value\n" lines. JSON: `, "annotations": {...}` (always, {}
 * when none); text: an indented "annotations:" line, nothing when none. */
void info_print_annotations(const char *text, bool json);

#endif
