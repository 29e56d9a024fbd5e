/*
 * common/fault.h — named crash points for the crash trials (tests only).
 *
 * Every build carries the points; they do nothing unless the program was started with
 * PAGEBACK_TEST_FAULT=<point>[:<nth hit>] (test-only, documented in docs/GUIDE.md,
 * "Fault injection (tests only)"). Then the nth time (default 1) the process passes
 * that point it raises SIGKILL on itself: no cleanup handler, no atexit, no flush —
 * what a power cut or the OOM killer leaves behind. tests/integration/crash_trials.sh
 * uses this to prove that a repository survives a kill anywhere.
 *
 * The list of points is one table, pb_fault_points[] in common/fault.c; a name not in
 * it is refused by pb_fault_init, so a test cannot silently arm nothing.
 */
#ifndef PB_COMMON_FAULT_H
#define PB_COMMON_FAULT_H

#include <stdbool.h>
#include <stddef.h>

#include "common/pb.h"

typedef struct pb_fault_info {
    const char *name;  /* "<command or layer>.<moment>" */
    const char *where; /* what has happened when the point is reached */
} pb_fault_info;

extern const pb_fault_info pb_fault_points[];
extern const size_t pb_fault_npoints;

/* Arm the point named by spec ("<point>[:<nth>]", NULL or "" = none). Call once from
 * main, before any thread starts. PB_EINVAL naming the spec when the point is unknown
 * or nth is not a positive number. */
int pb_fault_init(const char *spec, pb_error *err);

/* Crash here if this is the armed point's nth hit. Thread-safe; costs one load when
 * nothing is armed. */
void pb_fault_point(const char *name);

#define PB_FAULT_POINT(name) pb_fault_point(name)

/* A behaviour fault instead of a crash: true on the armed point's nth hit (then the
 * caller misbehaves on purpose, as the table row says), false otherwise and always when
 * nothing is armed. Thread-safe. */
bool pb_fault_fires(const char *name);

#endif
