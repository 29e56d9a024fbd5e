/* engine/backup/backup_identity_internal.h — what a backup proves before it reads or trusts
 * (backup_identity.c). */
#ifndef PB_ENGINE_BACKUP_IDENTITY_INTERNAL_H
#define PB_ENGINE_BACKUP_IDENTITY_INTERNAL_H

#include "engine/backup/backup_internal.h"

/* ---- what a backup proves before it reads or trusts (engine/backup/backup_identity.c) ---- */
/* pgdata is the connected server's data directory: its global/pg_control has the
 * server's system identifier and it is the server's data_directory (device and inode).
 * PB_ESTATE naming both values otherwise. */
int bk_check_pgdata(const char *pgdata, const pgc_info *info, pb_error *err);
/* Record c (read right after pg_backup_stop) as h's stop point. */
void bk_record_stop_control(mf_backup *h, const pgc_control *c);
/* pb_hash64 of pgdata/pg_wal/<tli>.history (of nothing for timeline 1); false when it
 * cannot be read. */
bool bk_history_hash(const char *pgdata, uint32_t tli, uint64_t *out);
/* Does pg_control now follow the parent ph's recorded stop point (same system, checksum
 * version, timeline and timeline history, latest checkpoint not before it)? history: the
 * current timeline's bk_history_hash, NULL when unreadable. false with why filled when
 * not, or when ph recorded none. */
bool bk_control_follows(const mf_backup *ph, const pgc_control *now, const uint64_t *history,
                        char *why, size_t len);
/* h->read_why = why, bounded, quotes and control characters replaced. */
void bk_set_read_why(mf_backup *h, const char *why);

#endif
