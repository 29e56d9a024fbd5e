/*
 * tools/config.h — the configuration file (prefix cfg_): an INI file with a global
 * section and one section per cluster. Lines before the first section header, and
 * those under [global], are global; [cluster:NAME] and [NAME] open the section of the
 * cluster NAME (selected with --cluster). "name = value" lines; # and ; start comment
 * lines; a value may be wrapped in double quotes. Names are the long options without
 * "--" (plus the config-only secrets); tools/options_sources.c checks them.
 */
#ifndef PB_TOOLS_CONFIG_H
#define PB_TOOLS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "common/pb.h"

typedef struct cfg_entry {
    const char *section; /* "" for the global section */
    const char *name, *value;
    unsigned line;       /* 1-based line number, for messages "file:line: ..." */
} cfg_entry;

typedef struct cfg_file {
    const char *path;    /* as given to cfg_load (not copied) */
    char *text;          /* the file's contents; every string above points into it */
    cfg_entry *items;
    size_t count, cap;
    unsigned mode;       /* the file's permission bits */
} cfg_file;

/* Read and parse path into *out (the caller's: cfg_free, also after a failure). A
 * group- or world-writable file is refused (PB_EINVAL): whoever may write it chooses
 * the repository and what restore_command runs. A malformed line is PB_EINVAL with
 * err naming "path:line". */
int cfg_load(cfg_file *out, const char *path, pb_error *err);
/* Parse text (taken over: freed by cfg_free) as the contents of path. */
int cfg_parse(cfg_file *out, const char *path, char *text, pb_error *err);
/* The key a configuration line starts with, as messages show it: its leading run of
 * letters, digits, '-', '_' and '.' (at most CFG_KEY_SHOWN - 1 bytes), never the value. */
#define CFG_KEY_SHOWN 48
void cfg_key_of(const char *line, char out[CFG_KEY_SHOWN]);
/* Does the file have a section for cluster? */
bool cfg_has_section(const cfg_file *c, const char *cluster);
void cfg_free(cfg_file *c);

#endif
