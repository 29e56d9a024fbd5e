/*
 * manifest/manifest.h — backup manifests and the RocksDB catalog (prefix mf_).
 * manifest/ depends on no other pageback module except common/: it turns manifests
 * into bytes and back, and keeps the chain head's page hashes in RocksDB; engine/
 * stores the bytes in the repository. The only files including <rocksdb/c.h> are the
 * catalog's (manifest/catalog*.c, catalog_internal.h). Format and key schema:
 * docs/MANIFEST.md (repository layout: docs/FORMAT.md).
 */
#ifndef PB_MANIFEST_H
#define PB_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pb.h"

#define MF_ID_LEN 32
/* Largest relation segment file a manifest or the catalog may describe: 32 GiB, four
 * times PostgreSQL's largest common --with-segsize; a count read from a repository or
 * the catalog above it is corruption, never an allocation. */
#define MF_REL_MAX_PAGES (1u << 22)

typedef enum mf_kind { MF_DIR = 0, MF_REL = 1, MF_FILE = 2, MF_LINK = 3 } mf_kind;

/* One stored frame. REL: pages [first, first + count) of the file. FILE: the frames
 * of a whole file in order (first = frame index, count = 1). */
typedef struct mf_run {
    uint32_t first;
    uint32_t count;
    uint32_t pack_no;
    uint32_t clen;
    uint64_t offset;
    uint32_t rlen;
    uint32_t frame_page; /* index of page `first` inside the decompressed frame: 0 unless
                          * several runs share one frame (format v2 only) */
} mf_run;

typedef struct mf_file {
    char *path;          /* relative to PGDATA; validated on parse (no "..", not absolute) */
    mf_kind kind;
    uint32_t mode;
    uint64_t size;       /* bytes */
    int64_t mtime;
    uint64_t inode;      /* source inode; 0 = unknown (format v1 does not carry it) */
    char *link_target;   /* MF_LINK: tablespace directory on the source */
    uint64_t hash;       /* MF_FILE: hash of the whole content */
    char stored_in[MF_ID_LEN]; /* MF_FILE: backup whose runs hold the content */
    uint32_t npages;     /* MF_REL: ceil(size / 8192) */
    uint32_t nruns;
    mf_run *runs;        /* frames shipped by THIS backup (MF_FILE: by stored_in) */
    uint64_t *page_hashes; /* MF_REL: one per shipped page, in run order */
} mf_file;

#define MF_ANNOTATIONS_LEN 512 /* all of a backup's annotations, with the final NUL */

typedef struct mf_backup {
    char id[MF_ID_LEN];     /* e.g. "20261130-101500F" */
    char parent[MF_ID_LEN]; /* "" for a full backup */
    char type;              /* 'F' full, 'I' incremental, 'S' synthetic full (rebase) */
    uint64_t start_lsn, stop_lsn;
    uint32_t timeline;
    uint64_t system_id;
    uint32_t pg_version;
    uint32_t wal_segment_size;
    bool data_checksums;
    int64_t start_time, stop_time; /* unix seconds */
    char start_wal[25], stop_wal[25];
    /* statistics */
    uint64_t files, pages_scanned, pages_changed, pages_in_window, bytes_read,
        bytes_stored, checksum_errors, collisions;
    double seconds;
    /* How this backup read the data directory (reading less), in the header's extension
     * block (docs/MANIFEST.md): absent in older manifests, which read as 0. */
    char read_mode;          /* MF_READ_SCAN, _FILE, _WAL, _SUMMARY; 0 = unknown (older) */
    bool verify_scan;        /* an incremental that read every page to check a cheaper method */
    int64_t mtime_horizon;   /* server clock, unix s: a file changed after this backup walked
                              * it has an mtime >= this; 0 = unknown (no skip against it) */
    uint64_t files_skipped, bytes_skipped; /* relation segments not read (file-level skip) */
    uint64_t pages_missed;   /* verify scan: changed pages the cheaper method missed (a bug) */
    /* pg_control's latest checkpoint and data checksum version right after pg_backup_stop
     * (the stop point an incremental on top of this one must follow before it trusts WAL,
     * engine/backup/backup_identity.c). ctl_recorded false: an older manifest without them. */
    bool ctl_recorded;
    uint32_t ctl_checksum_version, ctl_timeline;
    uint64_t ctl_redo_lsn, ctl_checkpoint_lsn;
    /* pb_hash64 of the timeline's history file in pg_wal (of nothing on timeline 1), when
     * it could be read: the same timeline number on another branch differs here */
    bool ctl_history_known;
    uint64_t ctl_history_hash;
    char read_why[240];      /* why the backup read less than it might, or more ("" = none) */
    /* backup --annotation key=value: "key=value" lines, each ended by '\n' ("" = none);
     * version 2 header tag 36 (docs/MANIFEST.md), absent in older manifests */
    char annotations[MF_ANNOTATIONS_LEN];
    /* The data directory's files as the backup's walk found them, in bytes (tag 37; 0 = not
     * recorded): the database's size even where an incremental read a few blocks only */
    uint64_t db_bytes;
} mf_backup;

/* mf_backup.read_mode. A full or scan-mode backup reads every page (MF_READ_SCAN). */
#define MF_READ_SCAN 's'
#define MF_READ_FILE 'f'
#define MF_READ_WAL 'w'
#define MF_READ_SUMMARY 'u' /* the blocks the server's WAL summaries name (PostgreSQL 17 on) */

typedef struct mf_manifest mf_manifest;

int mf_new(mf_manifest **out, const mf_backup *hdr, pb_error *err);
void mf_free(mf_manifest *m);
mf_backup *mf_header(mf_manifest *m);
const mf_backup *mf_header_c(const mf_manifest *m);
/* Append a file; the manifest takes ownership of f's pointers (f itself is copied). */
int mf_add_file(mf_manifest *m, mf_file *f, pb_error *err);
size_t mf_count(const mf_manifest *m);
const mf_file *mf_at(const mf_manifest *m, size_t i);
/* Sort by path (call once after adding), then mf_find is a binary search. */
void mf_sort(mf_manifest *m);
const mf_file *mf_find(const mf_manifest *m, const char *path);
void mf_file_clear(mf_file *f); /* frees the pointers of a file not handed to a manifest */

/* How version 2 chunks are compressed. manifest/ links no compression library, so the
 * caller brings one (engine/ brings zstd); NULL everywhere means chunks stored raw.
 * compress appends the compressed bytes to out; decompress must produce exactly raw_len
 * bytes into dst (anything else is PB_ECORRUPT). */
typedef struct mf_codec {
    int (*compress)(const void *data, size_t len, pb_buf *out, pb_error *err);
    int (*decompress)(const void *data, size_t len, void *dst, size_t raw_len, pb_error *err);
    /* the most bytes one stored byte can decompress to: a chunk claiming more is
     * corruption, refused before its buffer is allocated */
    uint32_t max_ratio;
} mf_codec;

/* Self-contained object, format version 2 (docs/MANIFEST.md): header, index, chunks of
 * file records in path order, each checksummed; chunks stored raw. */
int mf_serialize(const mf_manifest *m, pb_buf *out, pb_error *err);
/* The same with chunks compressed by codec (stored raw where that is not smaller). */
int mf_serialize_codec(const mf_manifest *m, const mf_codec *codec, pb_buf *out,
                       pb_error *err);
/* Either format version (1: existing repositories). what names the object in errors.
 * A compressed chunk without a codec is PB_EUNSUPPORTED. */
int mf_parse(const void *data, size_t len, const char *what, mf_manifest **out, pb_error *err);
int mf_parse_codec(const void *data, size_t len, const mf_codec *codec, const char *what,
                   mf_manifest **out, pb_error *err);

/* ---- writing version 2 chunk by chunk (bounded memory: one chunk plus the index) ----
 * Files are added in strictly ascending path order; each full chunk goes to sink as it
 * closes. mf_writer_finish flushes the last chunk and appends to *head the bytes that
 * precede the chunks in the object (prefix, header, index): the object is *head followed
 * by every chunk in the order sink got them. */
typedef int (*mf_chunk_sink)(void *ctx, const void *data, size_t len, pb_error *err);
typedef struct mf_writer mf_writer;
int mf_writer_new(mf_writer **out, const mf_backup *hdr, const mf_codec *codec,
                  mf_chunk_sink sink, void *ctx, pb_error *err);
/* Validates f (as mf_add_file) and encodes it; f stays the caller's. */
int mf_writer_add(mf_writer *w, const mf_file *f, pb_error *err);
int mf_writer_finish(mf_writer *w, pb_buf *head, pb_error *err);
/* High-water mark of the bytes the writer held (open chunk, its compressed copy, index
 * entries): bounded by a chunk, whatever the number of files. 0 for NULL. */
uint64_t mf_writer_peak(const mf_writer *w);
void mf_writer_free(mf_writer *w); /* accepts NULL */
/* Close chunks at bytes instead of the format's target (at most that): tests make a
 * small manifest many chunks long. Call before the first mf_writer_add. */
void mf_writer_set_chunk_target(mf_writer *w, size_t bytes);
/* The header mf_writer_finish will write: figures known only at the end go here. */
mf_backup *mf_writer_header(mf_writer *w);

/* ---- reading as a stream of file records in path order ----
 * The source reads len bytes at offset into dst (all of them, or fails); size is the
 * object's length, UINT64_MAX when unknown. A version 2 stream holds its index and one
 * chunk at a time; the file mf_stream_next fills is the caller's (mf_file_clear). */
typedef int (*mf_read_fn)(void *ctx, uint64_t offset, size_t len, void *dst, pb_error *err);
typedef struct mf_source {
    mf_read_fn read;
    void (*close)(void *ctx); /* may be NULL; mf_stream_close calls it once it owns ctx */
    void *ctx;
    uint64_t size;
    const mf_codec *codec;    /* for compressed chunks; NULL: raw chunks only */
} mf_source;
typedef struct mf_stream mf_stream;
/* Version 2 only (PB_EUNSUPPORTED for version 1: parse it and use the next call). On
 * success the stream owns src->ctx (closing it with src->close); on failure the caller
 * still does. */
int mf_stream_open(mf_stream **out, const mf_source *src, const char *what, pb_error *err);
/* A stream over a manifest in memory (version 1, or built here); takes m, even on failure. */
int mf_stream_from_manifest(mf_stream **out, mf_manifest *m, pb_error *err);
const mf_backup *mf_stream_header(const mf_stream *s);
/* 1 and *out filled, 0 at the end (after checking the count the index promised), < 0. */
int mf_stream_next(mf_stream *s, mf_file *out, pb_error *err);
/* High-water mark of the bytes the stream held (index, chunk buffer, file last returned);
 * an in-memory stream (version 1) holds its whole manifest, and says so. */
uint64_t mf_stream_peak(const mf_stream *s);
void mf_stream_close(mf_stream *s); /* accepts NULL */
/* The header of a version 2 object alone (two small reads: no index, no chunk). */
int mf_read_header(const mf_source *src, const char *what, mf_backup *out, pb_error *err);
/* Is a manifest path safe to join under a target directory? */
bool mf_path_is_safe(const char *path);

/* ---- the manifests of a chain merged as sorted streams (manifest/merge.c) ----
 * Takes the streams (closed by mf_merge_close, also when open fails). Each call yields
 * the next path found in any stream, in path order: (*files)[i] is stream i's record of
 * it, NULL when stream i has none; the records are the merge's, valid until the next
 * call. 1, 0 at the end, < 0 on the first stream error. */
typedef struct mf_merge mf_merge;
int mf_merge_open(mf_merge **out, mf_stream **streams, size_t n, pb_error *err);
int mf_merge_next(mf_merge *m, const mf_file *const **files, pb_error *err);
/* Sum of the streams' high-water marks (mf_stream_peak). */
uint64_t mf_merge_peak(const mf_merge *m);
void mf_merge_close(mf_merge *m); /* accepts NULL */

/* ---- RocksDB catalog: the chain head's hashes, a cache rebuilt from the repo ---- */
typedef struct mf_catalog mf_catalog;

int mf_catalog_open(mf_catalog **out, const char *dir, pb_error *err);
void mf_catalog_close(mf_catalog *c);
/* Id of the backup the head reflects; PB_ENOENT if empty. */
int mf_catalog_head(mf_catalog *c, char out[MF_ID_LEN], pb_error *err);
/* Remove everything (before a rebuild or a new chain). */
int mf_catalog_reset(mf_catalog *c, pb_error *err);

typedef struct mf_head_entry {
    mf_kind kind;
    uint32_t npages;   /* MF_REL */
    uint64_t *hashes;  /* MF_REL: npages hashes, malloc'd, caller frees */
    uint64_t hash;     /* MF_FILE */
    char stored_in[MF_ID_LEN]; /* MF_FILE */
} mf_head_entry;

/* Look up path in the head; PB_ENOENT if absent. Lookups in path order are sequential. */
int mf_catalog_lookup(mf_catalog *c, const char *path, mf_head_entry *out, pb_error *err);
/* Make m (whose parent must be the current head, or a full) the new head: shipped page
 * hashes replace old ones, unshipped pages keep theirs, files absent from m are
 * dropped. Atomic (batches of bounded size, the head pointer written last). */
int mf_catalog_apply(mf_catalog *c, const mf_manifest *m, pb_error *err);
/* The same from a stream of the manifest's records (path order, checked), holding one
 * record at a time; the stream stays the caller's. */
int mf_catalog_apply_stream(mf_catalog *c, mf_stream *s, pb_error *err);

/* ---- the database list of a backup (manifest/dblist.c), for restore --db-include ---- */
#define MF_DB_NAME_MAX 63u           /* NAMEDATALEN - 1 */
#define MF_DBLIST_MAGIC "PBDBLS01"   /* the envelope magic of backup/<id>/databases */
#define MF_DBLIST_MAX_RAW (1u << 24) /* 16 MiB: far more databases than a cluster holds */

typedef struct mf_db {
    uint32_t oid;
    char name[MF_DB_NAME_MAX + 1];
} mf_db;

typedef struct mf_dblist {
    mf_db *items;
    size_t count, cap;
} mf_dblist; /* {0} is empty */

/* name: 1..MF_DB_NAME_MAX bytes (PB_EINVAL otherwise). */
int mf_dblist_add(mf_dblist *l, uint32_t oid, const char *name, pb_error *err);
const mf_db *mf_dblist_find(const mf_dblist *l, const char *name); /* NULL: not there */
void mf_dblist_free(mf_dblist *l); /* accepts NULL; leaves it empty */
/* The body of the object (docs/FORMAT.md "Database list"), appended to out. */
int mf_dblist_encode(const mf_dblist *l, pb_buf *out, pb_error *err);
/* *out belongs to the caller (mf_dblist_free), empty on failure; PB_ECORRUPT names what. */
int mf_dblist_decode(const void *data, size_t len, const char *what, mf_dblist *out,
                     pb_error *err);

#endif
