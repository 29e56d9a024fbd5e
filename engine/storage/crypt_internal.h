/*
 * engine/storage/crypt_internal.h — client-side encryption of every object of a
 * repository (docs/FORMAT.md, "Encrypted repositories"). crypt.c is the crypto (keys,
 * sealing and opening objects, chunks and ranges; the only file that includes
 * <sodium.h>); crypt_io.c puts it between the repo_* interface and the driver, so the
 * formats above the storage room never change. Private to engine/storage/.
 */
#ifndef PB_ENGINE_STORAGE_CRYPT_INTERNAL_H
#define PB_ENGINE_STORAGE_CRYPT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/storage/storage_internal.h"

#define CRYPT_MAGIC "PBENC001"
#define CRYPT_HEADER 32u
#define CRYPT_CHUNK 16384u
#define CRYPT_TAG 16u
#define CRYPT_MIN_KEY 32u
#define CRYPT_KEYCHECK_PREFIX "keycheck/"
#define CRYPT_KEYCHECK_TEXT "pageback-keycheck 1\n"

typedef struct repo_crypt repo_crypt;

/* Derive the data key and key id of each key (docs/FORMAT.md). n in 1..REPO_MAX_KEYS;
 * a key shorter than CRYPT_MIN_KEY bytes is PB_EINVAL. Free with crypt_free (NULL ok). */
int crypt_new(repo_crypt **out, const repo_key *keys, size_t n, pb_error *err);
void crypt_free(repo_crypt *c);
size_t crypt_nkeys(const repo_crypt *c);
uint64_t crypt_key_id(const repo_crypt *c, size_t i);

/* Sizes: stored bytes of an object of plain bytes, and back (PB_ECORRUPT: a stored size
 * no writer produces). */
uint64_t crypt_stored_size(uint64_t plain);
int crypt_plain_size(uint64_t stored, uint64_t *plain);

/* Seal len bytes as the object name with the first key into *out (malloc'd). */
int crypt_seal(const repo_crypt *c, const char *name, const void *data, size_t len,
               void **out, size_t *out_len, pb_error *err);
/* Open a whole sealed object into *out (malloc'd, one spare byte, NUL). PB_EAUTH when no
 * given key sealed it, PB_ECORRUPT when a chunk fails authentication. */
int crypt_open(const repo_crypt *c, const char *name, const void *obj, size_t len,
               void **out, size_t *out_len, pb_error *err);

/* A streaming sealer (pack objects): the header, then chunks as they fill. emit gets
 * each piece of stored bytes in order. */
typedef int (*crypt_emit_fn)(void *ctx, const void *data, size_t len, pb_error *err);
typedef struct crypt_sealer crypt_sealer;
int crypt_sealer_new(const repo_crypt *c, const char *name, crypt_sealer **out,
                     pb_error *err);
int crypt_sealer_write(crypt_sealer *s, const void *data, size_t len, crypt_emit_fn emit,
                       void *ctx, pb_error *err);
/* Seal the last chunk; call once, after which only crypt_sealer_free. */
int crypt_sealer_finish(crypt_sealer *s, crypt_emit_fn emit, void *ctx, pb_error *err);
void crypt_sealer_free(crypt_sealer *s);

/* Range reads: check a stored header and size, then which stored bytes cover
 * [off, off + len) of the content (PB_ECORRUPT when the content is shorter), then open
 * them into buf. */
int crypt_header_check(const repo_crypt *c, const char *name, const uint8_t *hdr,
                       uint64_t stored, pb_error *err);
int crypt_range_span(const char *name, uint64_t stored, uint64_t off, size_t len,
                     uint64_t *span_off, size_t *span_len, pb_error *err);
int crypt_open_range(const repo_crypt *c, const char *name, const uint8_t *hdr,
                     uint64_t stored, uint64_t off, size_t len, const uint8_t *span,
                     void *buf, pb_error *err);

/* The header cache of range reads: one stat and one header read per object. */
bool crypt_cache_get(repo_crypt *c, const char *name, uint8_t *hdr, uint64_t *stored);
void crypt_cache_put(repo_crypt *c, const char *name, const uint8_t *hdr, uint64_t stored);
void crypt_cache_drop(repo_crypt *c, const char *name);

/* Whether the first key still needs its key-check object; the mutex serialises writers
 * while it is written (crypt_io.c). */
void crypt_keycheck_lock(repo_crypt *c);
void crypt_keycheck_unlock(repo_crypt *c);
bool crypt_keycheck_pending(const repo_crypt *c);
void crypt_set_keycheck_pending(repo_crypt *c, bool pending);

/* crypt_io.c: the repo_* operations through the crypto (keys checked by the caller). */
int cio_open(const repo_driver *drv, void *impl, const char *loc, const repo_opts *opts,
             repo_crypt **out, pb_error *err);
/* Without a key: PB_EAUTH when the repository holds key checks (it is encrypted). */
int cio_refuse_encrypted(const repo_driver *drv, void *impl, const char *loc, pb_error *err);
int cio_ensure_keycheck(const repo_driver *drv, void *impl, repo_crypt *c, pb_error *err);
int cio_get(const repo_driver *drv, void *impl, repo_crypt *c, const char *key, void **out,
            size_t *out_len, pb_error *err);
/* Seal key's object again with the first key when another key sealed it (opened and
 * authenticated first; the driver's put replaces it whole). *resealed says whether. */
int cio_reseal(const repo_driver *drv, void *impl, repo_crypt *c, const char *key,
               bool *resealed, pb_error *err);
int cio_get_range(const repo_driver *drv, void *impl, repo_crypt *c, const char *key,
                  uint64_t off, size_t len, void *buf, pb_error *err);
int cio_stat(const repo_driver *drv, void *impl, const char *key, uint64_t *size,
             pb_error *err);
int cio_list(const repo_driver *drv, void *impl, const char *prefix, repo_list_cb cb,
             void *ctx, pb_error *err);
typedef struct cio_writer cio_writer;
int cio_writer_open(const repo_driver *drv, void *impl, repo_crypt *c, const char *key,
                    cio_writer **out, pb_error *err);
int cio_writer_write(cio_writer *w, const void *data, size_t len, pb_error *err);
int cio_writer_commit(cio_writer *w, pb_error *err); /* frees w */
void cio_writer_abort(cio_writer *w);                /* frees w; NULL ok */

#endif
