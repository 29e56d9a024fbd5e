/* engine/backup/backup_plan_internal.h — full or incremental, decided before the server
 * is touched (backup_plan.c). */
#ifndef PB_ENGINE_BACKUP_PLAN_INTERNAL_H
#define PB_ENGINE_BACKUP_PLAN_INTERNAL_H

#include "engine/backup/backup_internal.h"

/* Full or incremental, decided before the server's backup state is touched
 * (backup_plan.c). */
typedef struct bk_plan {
    char type;              /* 'F' or 'I' */
    char reason[1400];      /* why, for the log */
    char latest[MF_ID_LEN]; /* the last id in the repository ("" if none): new ids sort after */
    chain chain;            /* 'I': the chain head's chain, headers only (no records) */
    const mf_manifest *parent; /* 'I': the chain head (the chain's last); else NULL */
    chain_copy *parent_copy;   /* 'I': its records, read once (chain_copy_fetch), or NULL */
    /* The repository's backups (headers) as the plan read them, kept for the command's
     * summary and metrics; history_known false when it read none (--type full). */
    chain_history history;
    bool history_known;
} bk_plan;

/* Decide for a backup of the cluster system_id, now on timeline tli (0: unknown). The
 * head is the newest backup along tli's history (engine/chain/chain_timeline.c; with tli 0,
 * the newest timeline's in the archive, and competing branches plan a full). A
 * repository that cannot be read well enough to build on (no backup, a damaged or
 * foreign head, a broken chain) plans a full backup with the reason; only a failed
 * listing is an error. listed: the committed ids (chain_cleanup_listed), so backup/ is
 * listed once per backup; NULL: listed here. cat (NULL: none): the local catalog, which
 * an incremental's plan brings to the chain head from the streams it checks (so the
 * chain's manifests are read once). Free with bk_plan_free. */
int bk_plan_type(repo *r, const chain_ids *listed, mf_catalog *cat, const bk_opts *opts,
                 uint64_t system_id, uint32_t tli, bk_plan *plan, pb_error *err);
void bk_plan_free(bk_plan *plan); /* accepts NULL */

#endif
