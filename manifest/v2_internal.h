/*
 * manifest/v2_internal.h — private to manifest/: the pieces of manifest format version 2
 * (docs/MANIFEST.md, "Object format, version 2") shared by its writer (v2_write.c), its
 * record codec (v2_codec.c) and its stream reader (stream.c).
 */
#ifndef PB_MANIFEST_V2_INTERNAL_H
#define PB_MANIFEST_V2_INTERNAL_H

#include "manifest/manifest_internal.h"

#define MF_VERSION_2 2u
#define MF_V2_PREFIX 20u                 /* magic, version, header length, index length */
#define MF_V2_CHUNK_TARGET (1u << 20)    /* a chunk is closed once it holds this much */
#define MF_V2_HEADER_MAX (1u << 20)      /* bounds read before the header is trusted */
#define MF_V2_INDEX_MAX (64u << 20)
/* One record may exceed the target (a 32 GiB segment: 32 MiB of hashes and its runs), so
 * the hard bound on a chunk is the target plus the largest record a writer can make. */
#define MF_V2_CHUNK_MAX (MF_V2_CHUNK_TARGET + 80u * MF_REL_MAX_PAGES)

/* Header field tags (TLV; an unknown tag is skipped, so adding one is additive). */
enum {
    MF_T_ID = 1, MF_T_PARENT, MF_T_TYPE, MF_T_START_LSN, MF_T_STOP_LSN, MF_T_TIMELINE,
    MF_T_SYSTEM_ID, MF_T_PG_VERSION, MF_T_WAL_SEG, MF_T_CHECKSUMS, MF_T_START_TIME,
    MF_T_STOP_TIME, MF_T_START_WAL, MF_T_STOP_WAL, MF_T_FILES, MF_T_SCANNED, MF_T_CHANGED,
    MF_T_IN_WINDOW, MF_T_BYTES_READ, MF_T_BYTES_STORED, MF_T_CSUM_ERRORS, MF_T_COLLISIONS,
    MF_T_SECONDS,
    /* how the backup read (engine/backup/backup_skip.c) */
    MF_T_READ_MODE, MF_T_VERIFY_SCAN, MF_T_MTIME_HORIZON, MF_T_FILES_SKIPPED,
    MF_T_BYTES_SKIPPED, MF_T_PAGES_MISSED,
    /* pg_control at the stop point, and why the backup read as it did (engine/
     * backup_identity.c): absent in older manifests */
    MF_T_CTL_CHECKSUM_VERSION, MF_T_CTL_REDO, MF_T_CTL_CHECKPOINT, MF_T_CTL_TIMELINE,
    MF_T_CTL_HISTORY, MF_T_READ_WHY,
    MF_T_ANNOTATIONS, /* written only when there are some */
    MF_T_DB_BYTES,
    MF_T_LAST_KNOWN = MF_T_DB_BYTES
};

/* One index entry: chunk i covers paths [first, last], at `offset` from the object start. */
typedef struct mf_chunk_ref {
    uint64_t offset;
    uint32_t len;       /* bytes stored */
    uint32_t raw_len;   /* 0: stored raw; else the length the stored bytes decompress to */
    uint32_t nfiles;
    uint64_t hash;
    char *first;
    char *last;
} mf_chunk_ref;

/* ---- varints and the record codec (v2_codec.c) ---- */
int mf_put_varint(pb_buf *b, uint64_t v);
uint64_t mf_rd_varint(pb_reader *r); /* sets r->bad on truncation or > 10 bytes */
int mf_v2_put_header(pb_buf *b, const mf_backup *h);
/* Parses the header TLV in [p, p + len); `what` names the object. */
int mf_v2_rd_header(const uint8_t *p, size_t len, const char *what, mf_backup *h,
                    pb_error *err);
/* Appends f's record, front-coded against prev (NULL: first of its chunk). */
int mf_v2_put_file(pb_buf *b, const mf_file *f, const char *prev, uint64_t zero_hash);
/* The most bytes mf_v2_put_file writes for f, whatever prev: the writer sizes its chunk
 * with it before the record is encoded (manifest/v2_write.c). */
size_t mf_v2_file_bound(const mf_file *f, uint64_t zero_hash);
/* Decodes one record; prev is the previous path of the chunk ("" for the first). The
 * file is validated (mf_check_file) before it is returned; on failure f is cleared. */
int mf_v2_rd_file(pb_reader *r, const char *prev, uint64_t zero_hash, const char *what,
                  mf_file *f, pb_error *err);
/* pb_hash64 of an all-zero page: the hash all-zero pages are recorded by. */
uint64_t mf_zero_page_hash(void);

/* ---- index (v2_write.c) ---- */
int mf_v2_put_index(pb_buf *b, const mf_chunk_ref *chunks, size_t n, uint64_t nfiles);
int mf_v2_rd_index(const uint8_t *p, size_t len, uint64_t data_start, const char *what,
                   mf_chunk_ref **out, size_t *n, uint64_t *nfiles, pb_error *err);
void mf_chunk_refs_free(mf_chunk_ref *c, size_t n);
/* Appends the bytes before the chunks: prefix, header, its checksum, index, its checksum
 * (chunk offsets in chunks[] are not written: they follow from the lengths). */
int mf_v2_put_head(pb_buf *head, const mf_backup *h, const mf_chunk_ref *chunks, size_t n,
                   uint64_t nfiles, pb_error *err);

/* Writes m as version 1 (tests: the v1 reader's fixture). Refuses frame_page != 0,
 * which version 1 cannot express. */
int mf_serialize_v1(const mf_manifest *m, pb_buf *out, pb_error *err);
/* The version 1 parser (serialize.c). */
int mf_parse_v1(const void *data, size_t len, const char *what, mf_manifest **out,
                pb_error *err);

#endif
