/*
 * engine/chain.h — the backups a repository holds and how they chain (prefix chain_).
 * A backup exists only when its manifest object "backup/<id>/manifest" exists
 * (committed last). The local catalog is a cache of the chain head, rebuilt from
 * these manifests whenever it disagrees with the repository.
 */
#ifndef PB_ENGINE_CHAIN_H
#define PB_ENGINE_CHAIN_H

#include <stdbool.h>
#include <stddef.h>

#include "common/pb.h"
#include "engine/storage/storage.h"
#include "manifest/manifest.h"

/* Ids of committed backups in id order (the time each was made, not the state it holds:
 * use chain_history for anything that means "newer"). */
typedef struct chain_ids {
    char (*ids)[MF_ID_LEN];
    size_t count;
} chain_ids;

int chain_list(repo *r, chain_ids *out, pb_error *err);
void chain_ids_free(chain_ids *ids);

/* ---- history order (engine/chain_order.c) ----------------------------------------
 * Backups ordered by the state they hold, never by id (a rebase makes an id that sorts
 * last for an older state): stop LSN, then a synthetic full after a real backup with the
 * same stop point, then stop time, then id. Every "newest"/"latest"/"before the target"
 * and retention decision uses this order. */
typedef struct chain_history {
    mf_backup *items; /* manifest headers, oldest state first */
    size_t count;
} chain_history;

/* < 0, 0, > 0 as a's state comes before, is, or comes after b's. */
int chain_cmp_history(const mf_backup *a, const mf_backup *b);
/* Load every committed backup's header in history order. A damaged manifest fails the
 * load (PB_ECORRUPT naming it); one removed since the listing is skipped. Free with
 * chain_history_free (accepts NULL). */
int chain_history_load(repo *r, chain_history *out, pb_error *err);
void chain_history_sort(chain_history *h);
void chain_history_free(chain_history *h);
/* The entry with this id, or NULL. */
const mf_backup *chain_history_find(const chain_history *h, const char *id);
/* The chain head by stop LSN: the backup the next incremental builds on. PB_ENOENT
 * when the repository holds none. */
int chain_head(repo *r, char out[MF_ID_LEN], pb_error *err);
/* Retention: keep[i] (h->count entries) is set for the newest retain_full full or
 * synthetic backups in history order, every backup after the oldest of them, and every
 * ancestor any of those needs. Returns how many are kept. retain_full 0 keeps all. */
size_t chain_retain(const chain_history *h, unsigned retain_full, bool *keep);

/* Load and verify one backup's manifest. */
int chain_load(repo *r, const char *id, mf_manifest **out, pb_error *err);
/* The header of one backup's manifest without its files: a version 2 manifest is read
 * with two small range reads (engine/chain_stream.c), an older one whole. */
int chain_load_header(repo *r, const char *id, mf_backup *out, pb_error *err);
/* One backup's file records in path order, holding one chunk at a time (version 2; an
 * older manifest is parsed whole and streamed from memory). */
int chain_stream_open(repo *r, const char *id, mf_stream **out, pb_error *err);
/* The codec of manifest chunks (zstd, engine/envelope.c). */
const mf_codec *chain_manifest_codec(void);
/* Store a manifest as the backup's commit point (the last object written). */
int chain_commit(repo *r, const mf_manifest *m, pb_error *err);

/* The manifests needed to restore id: its full backup first, id last. */
typedef struct chain {
    mf_manifest **items;
    size_t count;
} chain;
int chain_resolve(repo *r, const char *id, chain *out, pb_error *err);
/* As chain_resolve, taking each manifest from pool when it is there (moved: its slot
 * becomes NULL, and chain_free skips it) and reading only the others. pool may be NULL. */
int chain_resolve_from(repo *r, const char *id, chain *pool, chain *out, pb_error *err);
/* As chain_history_load, and hands every manifest it read to *all (id order; the caller
 * frees it with chain_free), so a command that needs some in full reads each once. */
int chain_history_load_all(repo *r, chain_history *out, chain *all, pb_error *err);
void chain_free(chain *c); /* accepts NULL, and NULL slots (chain_resolve_from) */
/* Find the manifest with this id inside a resolved chain (NULL if absent). */
const mf_manifest *chain_find(const chain *c, const char *id);

/* As chain_resolve, with header-only manifests (mf_new: no file records): each taken
 * from hist when it is there (hist may be NULL), else read with chain_load_header. For a
 * command that needs the chain's shape and streams the records (engine/chain_stream.c). */
int chain_resolve_headers(repo *r, const chain_history *hist, const char *id, chain *out,
                          pb_error *err);
/* Make the catalog's head equal to the last backup of the resolved chain c (rebuilding it
 * when the catalog is empty or reflects another backup, from each backup's records
 * streamed from r one chunk at a time: c may hold headers alone). *rebuilt tells whether
 * it had to. */
int chain_sync_catalog(mf_catalog *cat, repo *r, const chain *c, bool *rebuilt,
                       pb_error *err);

/* Repository identity file "pageback.repo": the cluster's system identifier. A
 * repository holding another cluster's backups is refused. */
#define CHAIN_IDENTITY_KEY "pageback.repo"
int chain_check_identity(repo *r, uint64_t system_id, bool create, pb_error *err);
/* The identity file names the cluster of backup id (system_id from its manifest): any
 * other answer (missing, unreadable, another cluster) is PB_ECORRUPT naming the file;
 * restore, verify and rebase check it (chain_resolve does). */
int chain_verify_identity(repo *r, uint64_t system_id, const char *id, pb_error *err);

/* Remove a backup: its manifest first (it is invisible from then on), then every other
 * object under backup/<id>/ with chain_delete_object. */
int chain_drop(repo *r, const char *id, pb_error *err);
/* Remove one object (of a dropped backup, or expired WAL), best effort: a missing object
 * is fine (0); any other failure is logged as a warning naming the key and returned, and
 * the caller goes on with the next (a later expire retries what is left). */
int chain_delete_object(repo *r, const char *key);

/* Leftovers of writers that are gone (issue 8, item 9), for backup, rebase and expire to
 * call once they hold the writer lock (held, not NULL) and before they write anything:
 * temp objects and unfinished uploads (repo_cleanup), then every backup/<id>/ without a
 * manifest, which a writer killed before its commit (or an expire killed between a
 * manifest and its packs) left. Such a backup is kept, with a warning, when a committed
 * backup names it as its parent: then its manifest was lost to damage, and its packs are
 * what a repair needs. Errors are returned (the caller decides whether they block it). */
int chain_cleanup(repo *r, const repo_lock *held, pb_error *err);

/* A new backup id: the UTC time now, its type letter ('F', 'I', 'S') at index 15, and a
 * microsecond + random suffix that keeps ids unique within a second; it sorts after
 * `after` (waits for the next second when needed). after may be NULL. */
void chain_new_id(char out[MF_ID_LEN], char type, const char *after);

/* Key helpers. */
void chain_backup_dir(char *out, size_t cap, const char *id);

#endif
