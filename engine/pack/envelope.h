/*
 * engine/pack/envelope.h — the envelope of whole compressed objects (prefix pack_, the pack
 * module's second file): manifests ("PBZOBJ01") and archived WAL ("PBWAL001") are each
 * one object of a 32-byte header and one zstd frame:
 *
 *   8 bytes magic, u64 raw length, u64 XXH3-64 of the raw bytes,
 *   u64 XXH3-64 of the payload, then the payload (one zstd frame).
 *
 * Integers are little-endian (docs/FORMAT.md). The codec is parameterised by the magic
 * and by the largest raw length its kind of object can have; it lives apart from
 * pack.c (frames inside pack objects) so that the WAL room can use it without the pack
 * writer, in a library of its own below engine/wal/.
 */
#ifndef PB_ENGINE_ENVELOPE_H
#define PB_ENGINE_ENVELOPE_H

#include <stddef.h>
#include <stdint.h>

#include "common/pb.h"

#define PACK_ENVELOPE_HEADER 32u
#define PACK_OBJECT_MAGIC "PBZOBJ01"
#define PACK_OBJECT_MAX_RAW (1ull << 34) /* 16 GiB: a manifest of ~2 billion pages */
/* zstd cannot expand by more than this: a block yields at most 128 KiB and takes at
 * least 4 bytes (3-byte header + 1 RLE byte). */
#define PACK_ZSTD_MAX_RATIO 32768u

/* Compress len raw bytes at zstd level into one object with this 8-byte magic and
 * append it to out (out->len grows by the object's length; on failure out->len is
 * unchanged). what names the object in messages (NULL: "a <len>-byte object").
 * PB_ENOMEM, or PB_EIO when zstd fails. */
int pack_envelope_encode(const void *raw, size_t len, const char *magic, int level,
                         const char *what, pb_buf *out, pb_error *err);
/* The same for raw bytes that come in pieces (a WAL segment read in chunks): read fills
 * buf with up to cap bytes and sets *got (0 at the end). What is held is one piece and the
 * object being built, which grows with the compressed bytes, not to the raw length
 * (memory bounds). The raw length must be len exactly, else PB_EIO naming what (the source
 * changed while it was read). */
typedef int (*pack_piece_fn)(void *ctx, void *buf, size_t cap, size_t *got, pb_error *err);
#define PACK_ENVELOPE_PIECE (1u << 20)
int pack_envelope_encode_pieces(pack_piece_fn read, void *ctx, uint64_t len, const char *magic,
                                int level, const char *what, pb_buf *out, pb_error *err);
/* Verify an object with this magic and decompress it into *out (malloc'd, caller frees;
 * NULL on failure). The raw length in the header is bounded by max_raw, by SIZE_MAX and
 * by what the payload can expand to (PACK_ZSTD_MAX_RATIO), and memory grows with the
 * bytes actually decompressed, so a crafted header cannot make it allocate much more
 * than the real content. Every failure but PB_ENOMEM is PB_ECORRUPT naming what. */
int pack_envelope_decode(const void *obj, size_t len, const char *magic, uint64_t max_raw,
                         const char *what, void **out, size_t *out_len, pb_error *err);

/* The manifest envelope: magic PACK_OBJECT_MAGIC, raw length at most PACK_OBJECT_MAX_RAW. */
int pack_object_encode(const void *raw, size_t len, int level, pb_buf *out, pb_error *err);
int pack_object_decode(const void *obj, size_t len, const char *what, void **out,
                       size_t *out_len, pb_error *err);

/* Manifest version 2 chunks (one zstd frame each, level 3): the mf_codec engine/chain/chain.c
 * hands to manifest/. decompress fails with PB_ECORRUPT unless the frame yields exactly
 * raw_len bytes into dst. */
int pack_chunk_compress(const void *data, size_t len, pb_buf *out, pb_error *err);
int pack_chunk_decompress(const void *data, size_t len, void *dst, size_t raw_len,
                          pb_error *err);

#endif
