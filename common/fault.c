/*
 * common/fault.c — the crash point table and the armed point (see common/fault.h).
 *
 * State: the armed point and its hit number are written once by pb_fault_init in main,
 * before any thread exists, and only read afterwards; the hit counter is the one
 * mutable word, atomic because pack writers pass points from worker threads. This is
 * the tree's single exception to "no mutable globals beyond program options": the
 * points sit deep in storage and engine code that never sees the options, and
 * threading a fault context through every layer for a test switch would cost more
 * than this word.
 */
#include "common/fault.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One row per PB_FAULT_POINT call site; docs/GUIDE.md lists the same points. */
const pb_fault_info pb_fault_points[] = {
    {"backup.after-start", "pg_backup_start returned; nothing written to the repository yet"},
    {"backup.mid-pack", "a relation file's frames are queued or stored in a pack not yet "
                        "committed (nth = after the nth relation file)"},
    {"backup.before-manifest-commit", "packs committed, WAL verified, manifest not written"},
    {"backup.after-manifest-commit", "manifest committed (backup visible), local catalog "
                                     "not yet updated"},
    {"backup.after-catalog-update", "local catalog moved to the new head, command not done"},
    {"writer.mid-object", "a streaming object (pack) has a buffer written to its temp file "
                          "(nth = after the nth MiB of any pack)"},
    {"writer.after-commit", "a streaming object (pack) was renamed into place and its "
                            "directory fsynced (nth = after the nth pack)"},
    {"put.after-temp-write", "an object (manifest, or a pack at its commit) is durable in "
                             "its temp file, not yet renamed"},
    {"put.after-rename", "an object was renamed into place; its directory is not yet "
                         "fsynced"},
    {"put-new.after-temp-write", "a create-if-absent object (a WAL file of archive-push, the "
                                 "writer lock) is durable in its temp file, not yet linked"},
    {"put-new.after-link", "a create-if-absent object was linked to its name; its temp name "
                           "is not yet removed, its directory not yet fsynced"},
    {"expire.after-backup", "expire dropped a backup (nth = after the nth one), more to go"},
    {"drop.after-manifest", "a backup's manifest is deleted, its packs are not "
                            "(expire, or a failed backup giving its space back)"},
    {"expire.mid-wal", "expire removed a WAL segment (nth = after the nth one), more to go"},
    {"rebase.mid-pack", "rebase rebuilt a file into its open pack (nth = after the nth file)"},
    {"rebase.before-manifest-commit", "rebase packs committed, manifest not written"},
    {"backup.skip-miss", "not a crash (pb_fault_fires): the file-level skip treats the nth "
                         "changed relation segment as unchanged, so a verify scan must "
                         "catch it"},
    {"backup.standby-replay-behind", "not a crash (pb_fault_fires): the nth end check of a "
                                     "backup from a standby sees replay stuck just before "
                                     "the end, so the backup waits and is refused"},
};
const size_t pb_fault_npoints = sizeof(pb_fault_points) / sizeof(pb_fault_points[0]);

static const char *armed;   /* a name from pb_fault_points, NULL = nothing armed */
static unsigned long armed_nth;
static atomic_ulong hits;

int pb_fault_init(const char *spec, pb_error *err)
{
    armed = NULL;
    if (!spec || !spec[0])
        return 0;
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    unsigned long nth = 1;
    if (colon) {
        char *end;
        nth = strtoul(colon + 1, &end, 10);
        if (!colon[1] || *end || nth == 0)
            return pb_fail(err, PB_EINVAL,
                           "PAGEBACK_TEST_FAULT='%s': the hit number after ':' must be a "
                           "positive integer", spec);
    }
    for (size_t i = 0; i < pb_fault_npoints; i++) {
        if (strlen(pb_fault_points[i].name) == len &&
            strncmp(pb_fault_points[i].name, spec, len) == 0) {
            armed = pb_fault_points[i].name;
            armed_nth = nth;
            atomic_store(&hits, 0);
            return 0;
        }
    }
    return pb_fail(err, PB_EINVAL, "PAGEBACK_TEST_FAULT='%s' names no fault point (see "
                   "docs/GUIDE.md, \"Fault injection (tests only)\")", spec);
}

bool pb_fault_fires(const char *name)
{
    if (!armed || strcmp(name, armed) != 0)
        return false;
    return atomic_fetch_add(&hits, 1) + 1 == armed_nth;
}

void pb_fault_point(const char *name)
{
    if (!armed || strcmp(name, armed) != 0)
        return;
    if (atomic_fetch_add(&hits, 1) + 1 == armed_nth)
        kill(getpid(), SIGKILL);
}
