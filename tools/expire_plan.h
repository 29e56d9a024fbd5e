/* tools/expire_plan.h — what expire keeps: backups by count, by time or one set, and
 * the WAL those backups need (tools/expire_plan.c). */
#ifndef PB_TOOLS_EXPIRE_PLAN_H
#define PB_TOOLS_EXPIRE_PLAN_H

#include "tools/options.h"
#include "engine/chain/chain.h"

/* A usage problem of expire's options in one line, or NULL when they are complete. */
const char *expire_usage(const pb_options *o);
/* keep[i] (h->count entries) for each backup that stays: --set ID drops that backup and
 * every incremental built on it (refused when that would drop the newest backup of the
 * newest timeline, or the newest of a competing branch), --retain-full-days keeps the
 * window, --retain-full the count (chain_retain either way). */
int expire_plan(const chain_history *h, const pb_options *o, bool *keep, pb_error *err);
/* The WAL no kept backup needs: before the oldest kept start, and with --retain-archive
 * N also before the start of the newest N fulls except each older kept backup's own. */
int expire_wal_plan(repo *r, const chain_history *h, const bool *keep, const pb_options *o,
                    pb_error *err);

#endif
