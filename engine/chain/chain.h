/*
 * engine/chain/chain.h — the backups a repository holds and how they chain (prefix chain_).
 * A backup exists only when its manifest object "backup/<id>/manifest" exists
 * (committed last). The local catalog is a cache of the chain head, rebuilt from
 * these manifests whenever it disagrees with the repository.
 */
#ifndef PB_ENGINE_CHAIN_H
#define PB_ENGINE_CHAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

/* ---- history order (engine/chain/chain_order.c, loading: chain_history.c) ---------------
 * Backups ordered by the state they hold, never by id (a rebase makes an id that sorts
 * last for an older state): stop LSN, then a synthetic full after a real backup with the
 * same stop point, then stop time, then id. Every "newest"/"latest"/"before the target"
 * and retention decision uses this order. */
typedef struct chain_history {
    mf_backup *items; /* manifest headers, oldest state first */
    size_t count;
    /* Timelines (engine/chain/chain_timeline.c): the order is along the history of
     * `timeline` (the newest in the archive, or the one asked for). items[0..off_path) lie on
     * branches that history left (their stop is past the switch point), each branch
     * older than everything on the path; items[off_path..count) are on it. compete:
     * `timeline` holds no backup of its own while another branch has one past the
     * switch, so which branch the live cluster is on cannot be told. */
    size_t off_path;
    uint32_t timeline;
    bool compete;
} chain_history;

/* < 0, 0, > 0 as a's state comes before, is, or comes after b's. */
int chain_cmp_history(const mf_backup *a, const mf_backup *b);
/* Load every committed backup's header in history order (engine/chain/chain_history.c,
 * with chain_history_load_on and chain_head). A damaged manifest fails the
 * load (PB_ECORRUPT naming it); one removed since the listing is skipped. Free with
 * chain_history_free (accepts NULL). */
int chain_history_load(repo *r, chain_history *out, pb_error *err);
void chain_history_sort(chain_history *h);
void chain_history_free(chain_history *h);
/* As chain_history_load, ordered along the history of timeline tli (0: the newest
 * timeline in the archive, with compete set when branches compete). */
int chain_history_load_on(repo *r, uint32_t tli, chain_history *out, pb_error *err);
/* As chain_history_load_on, from ids already listed (chain_list, chain_cleanup_listed)
 * instead of a listing of its own. */
int chain_history_load_listed(repo *r, const chain_ids *ids, uint32_t tli,
                              chain_history *out, pb_error *err);
/* Order a loaded history along the history of tli (0: the newest in the archive): reads
 * the archive's history file list and the history file of that timeline. */
int chain_history_place(repo *r, uint32_t tli, chain_history *h, pb_error *err);
/* The newest backup on the path (the last entry), or NULL when none is (then compete). */
const mf_backup *chain_history_newest(const chain_history *h);
/* PB_ESTATE naming the competing branches (the newest backup of each) and the options
 * that choose (what is the command's verb: "restore", "expire"); 0 when none compete. */
int chain_history_check(const chain_history *h, const char *what, pb_error *err);
/* The entry with this id, or NULL. */
const mf_backup *chain_history_find(const chain_history *h, const char *id);
/* The chain head by stop LSN: the backup the next incremental builds on. PB_ENOENT
 * when the repository holds none. */
int chain_head(repo *r, char out[MF_ID_LEN], pb_error *err);
/* Retention: keep[i] (h->count entries) is set for the newest retain_full full or
 * synthetic backups in history order (fulls of one state, the same timeline and stop
 * LSN, count once), every backup after the oldest of them, and every ancestor any of
 * those needs; the newest backup on the path is always kept, and when branches compete
 * the newest of the competing branch too. Returns how many are kept. retain_full 0
 * keeps all. */
size_t chain_retain(const chain_history *h, unsigned retain_full, bool *keep);
/* Retention by time: the count of fulls for chain_retain that keeps every full that
 * stopped at or after cutoff (unix seconds) plus the newest one that stopped before it;
 * 0 (keep all) when none stopped before it (engine/chain/chain_retain.c). */
unsigned chain_retain_days_count(const chain_history *h, int64_t cutoff);
/* Archive retention: among the kept backups, the one whose start begins the continuous
 * WAL kept for the newest retain_archive fulls (the oldest of them); NULL when fewer
 * fulls are kept (then WAL is kept from the oldest kept backup, as without it). */
const mf_backup *chain_archive_start(const chain_history *h, const bool *keep,
                                     unsigned retain_archive);
/* Is WAL file name (24 hex digits first) one of b's own segments, start to stop? */
bool chain_wal_in_backup(const mf_backup *b, const char *name);
/* The mark expire --retain-archive leaves before it removes WAL: the archive is kept
 * continuous from segment seg (the start of backup id) on. Older marks are removed. */
#define CHAIN_ARCHIVE_MARKS "retention/"
int chain_archive_mark(repo *r, const char *seg, const char *id, pb_error *err);
/* The newest mark's segment into out ("" when there is none). */
int chain_archive_marked(repo *r, char out[25], pb_error *err);

/* Load and verify one backup's manifest. */
int chain_load(repo *r, const char *id, mf_manifest **out, pb_error *err);
/* The header of one backup's manifest without its files: a version 2 manifest is read
 * with two small range reads (engine/chain/chain_stream.c), an older one whole. */
int chain_load_header(repo *r, const char *id, mf_backup *out, pb_error *err);
/* One backup's file records in path order, holding one chunk at a time (version 2; an
 * older manifest is parsed whole and streamed from memory). */
int chain_stream_open(repo *r, const char *id, mf_stream **out, pb_error *err);
/* A version 2 manifest read once from the repository into an unnamed local file in dir,
 * to be streamed from there as often as needed (a backup checks its parent's records
 * before it starts and reads them again for the file-level skip). *out NULL, 0: an older
 * manifest, not copied (stream it from the repository). */
typedef struct chain_copy chain_copy;
int chain_copy_fetch(repo *r, const char *id, const char *dir, chain_copy **out,
                     pb_error *err);
/* A stream of the copy's records (several may be open at once). */
int chain_copy_stream(const chain_copy *c, mf_stream **out, pb_error *err);
void chain_copy_free(chain_copy *c); /* accepts NULL */
/* The codec of manifest chunks (zstd, engine/pack/envelope.c). */
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
 * command that needs the chain's shape and streams the records (engine/chain/chain_stream.c). */
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

/* Leftovers of writers that are gone, for backup, rebase and expire to
 * call once they hold the writer lock (held, not NULL) and before they write anything:
 * temp objects and unfinished uploads (repo_cleanup), then every backup/<id>/ without a
 * manifest, which a writer killed before its commit (or an expire killed between a
 * manifest and its packs) left. Such a backup is kept, with a warning, when a committed
 * backup names it as its parent or the record of committed backups lists it: then its
 * manifest was lost to damage, and its packs are what a repair needs; when the record
 * cannot be read, none is removed. Errors are returned (the caller decides whether they
 * block it). */
int chain_cleanup(repo *r, const repo_lock *held, pb_error *err);
/* As chain_cleanup, and committed gets the ids of every committed backup from the same
 * listing of backup/, sorted as chain_list's (a backup plans from it instead of listing
 * again). On an error committed is empty. */
int chain_cleanup_listed(repo *r, const repo_lock *held, chain_ids *committed, pb_error *err);

/* ---- the record of committed backups (engine/chain/chain_record.c) ----------------------
 * "backup.info" and its copy "backup.info.copy" (docs/FORMAT.md): the ids of every
 * committed backup, written (both) after each commit and before expire drops any. A
 * listed backup whose manifest is missing was lost to damage: verify reports it, and
 * cleanup never removes its objects. Every write merges in the manifests present (so a
 * repository written before the record existed gets it on its first write, and a commit
 * killed before its record update is listed by the next). Writers hold the lock. */
#define CHAIN_RECORD_KEY "backup.info"
#define CHAIN_RECORD_COPY_KEY "backup.info.copy"
typedef struct chain_record {
    char (*ids)[MF_ID_LEN]; /* sorted */
    size_t count;
    bool present;      /* false: no record yet (an older repository) */
    char damaged[64];  /* the copy that failed its check, "" when both are good */
} chain_record;
/* The record: the primary, else the copy. Neither present: present false, 0. Neither
 * readable: PB_ECORRUPT naming both. */
int chain_record_load(repo *r, chain_record *out, pb_error *err);
void chain_record_free(chain_record *rec);
bool chain_record_has(const chain_record *rec, const char *id);
/* Rewrite both copies: the record, plus add (NULL: none) and every manifest present,
 * minus drop[0..ndrop). Not inside a repo_defer_syncs window (it makes its own). */
int chain_record_update(repo *r, const char *add, const char (*drop)[MF_ID_LEN],
                        size_t ndrop, pb_error *err);
/* As chain_record_update, with "every manifest present" taken from listed (the writer's
 * own listing under the lock: chain_cleanup_listed) instead of a listing of its own. */
int chain_record_update_listed(repo *r, const chain_ids *listed, const char *add,
                               const char (*drop)[MF_ID_LEN], size_t ndrop, pb_error *err);
/* Parse / format (pure; for tests): text -> sorted ids; ids -> text. */
int chain_record_parse(const char *text, size_t len, const char *what, chain_record *out,
                       pb_error *err);
int chain_record_format(const chain_record *rec, pb_buf *out, pb_error *err);

/* A new backup id: the UTC time now, its type letter ('F', 'I', 'S') at index 15, and a
 * microsecond + random suffix that keeps ids unique within a second; it sorts after
 * `after` (waits for the next second when needed). after may be NULL. */
void chain_new_id(char out[MF_ID_LEN], char type, const char *after);

/* Key helpers. */
void chain_backup_dir(char *out, size_t cap, const char *id);

/* ---- expire (engine/chain/chain_expire.c) ------------------------------------------------ */
/* What expire keeps: one of retain_full (a count of fulls), retain_full_days (a window
 * measured back from now, unix s) or set (that backup and every incremental built on it
 * go; refused when that would drop the newest backup of the newest timeline, or the
 * newest of a competing branch). retain_archive N: WAL before the start of the newest N
 * fulls goes too, except each older kept backup's own. out: where what goes is said
 * (NULL: quiet). */
typedef struct chain_expire_opts {
    unsigned retain_full;
    unsigned retain_full_days;
    unsigned retain_archive;
    const char *set;
    bool dry_run; /* say what would go, remove nothing */
    int64_t now;
    FILE *out;
} chain_expire_opts;
/* Remove what o no longer keeps, with the repository's writer lock held: the record
 * first, then the backups newest first (a kill leaves every listed backup with its whole
 * chain), then the WAL no kept backup needs. A backup the record lists without a
 * manifest stops it before anything is removed (PB_ESTATE naming it). */
int chain_expire(repo *r, const chain_expire_opts *o, pb_error *err);

#endif
