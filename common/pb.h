/*
 * common/pb.h — the few types every pageback module shares: error codes and the
 * pb_error carrier, logging, the page hash, and small byte-order helpers.
 * common/ depends on nothing else in the tree (xxHash is the only library it uses).
 */
#ifndef PB_COMMON_H
#define PB_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PB_PAGE_SIZE 8192u
#define PB_ALIGN 4096u

/* Error codes: 0 is success, every failure is one of these negative values. */
typedef enum pb_code {
    PB_OK = 0,
    PB_ENOENT = -1,      /* object, file or key does not exist */
    PB_EIO = -2,         /* local I/O failure */
    PB_ECORRUPT = -3,    /* checksum or format mismatch */
    PB_ENOMEM = -4,      /* allocation failed */
    PB_EREMOTE = -5,     /* remote server (S3, PostgreSQL) failed or unreachable */
    PB_EINVAL = -6,      /* invalid input or usage */
    PB_EEXIST = -7,      /* already exists with different content */
    PB_EPG = -8,         /* PostgreSQL refused or answered something unexpected */
    PB_EUNSUPPORTED = -9,/* not supported here (e.g. O_DIRECT on tmpfs) */
    PB_EAUTH = -10,      /* authentication / signature refused */
    PB_ESTATE = -11,     /* repository or catalog state does not allow this */
} pb_code;

typedef struct pb_error {
    int code;       /* a pb_code */
    int sys_errno;  /* errno when the failure came from a system call, else 0 */
    char msg[1024]; /* names the file, object, LSN or block concerned */
} pb_error;

#define PB_ERROR_INIT {0, 0, {0}}

/* Fill err (may be NULL) and return code, so callers can `return pb_fail(...)`. */
int pb_fail(pb_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Same, appending ": strerror(errno)" and recording errno. */
int pb_fail_errno(pb_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prefix context to an existing message ("restoring base/1/1259: <old msg>"). */
int pb_error_wrap(pb_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *pb_code_name(int code);

/* Logging (common/log.c): each line to stderr at or above the console level and, with a
 * UTC timestamp and the pid, to the log file at or above the file level. The levels and
 * the file are program options, set in main before the command runs. DETAIL is what an
 * operator tuning the I/O reads, not what a DBA needs every night. */
typedef enum pb_log_level {
    PB_LOG_OFF = -1, /* only as a file level: no log file */
    PB_LOG_ERROR, PB_LOG_WARN, PB_LOG_INFO, PB_LOG_DETAIL, PB_LOG_DEBUG
} pb_log_level;
void pb_log_set_level(pb_log_level level); /* the console's */
void pb_log_set_file_level(pb_log_level level);
/* "error", "warn", "info", "detail", "debug" (and "off" when allow_off); PB_EINVAL else. */
int pb_log_level_parse(const char *text, int allow_off, pb_log_level *out);
/* Also append each log line to fd (-1: stop); the caller owns fd and resets this before
 * closing it. A write that fails warns once on stderr and ends the file's logging: a
 * log that cannot be written never fails the command. */
void pb_log_set_file(int fd);
/* Called before a line goes to the console (NULL: none), so a live progress line can be
 * taken off the terminal first. */
void pb_log_set_console_hook(void (*before)(void *ctx), void *ctx);
void pb_log(pb_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same, to the log file only (the console has its own form of it, e.g. a summary
 * printed on stdout); written whatever the file level, unless the file is off. */
void pb_log_file_only(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define pb_debug(...) pb_log(PB_LOG_DEBUG, __VA_ARGS__)
#define pb_detail(...) pb_log(PB_LOG_DETAIL, __VA_ARGS__)
#define pb_info(...) pb_log(PB_LOG_INFO, __VA_ARGS__)
#define pb_warn(...) pb_log(PB_LOG_WARN, __VA_ARGS__)
/* one when n is 1, else many: "1 backup", "2 backups" (and "0 backups"). */
const char *pb_plural(uint64_t n, const char *one, const char *many);

/* 64-bit XXH3 of a buffer: the page hash and the object checksum everywhere. */
uint64_t pb_hash64(const void *data, size_t len);

/* Streaming form of the same hash, for whole files read in chunks. */
typedef struct pb_hasher pb_hasher;
pb_hasher *pb_hasher_new(void); /* NULL when out of memory */
void pb_hasher_update(pb_hasher *h, const void *data, size_t len);
uint64_t pb_hasher_digest(const pb_hasher *h);
void pb_hasher_free(pb_hasher *h);

/* Explicit little-endian encoding for every on-disk format. */
static inline void pb_put_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void pb_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void pb_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t pb_get_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t pb_get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static inline uint64_t pb_get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* A growable byte buffer used by serialisers. */
typedef struct pb_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
} pb_buf;
int pb_buf_reserve(pb_buf *b, size_t extra);
int pb_buf_append(pb_buf *b, const void *data, size_t len);
int pb_buf_u32(pb_buf *b, uint32_t v);
int pb_buf_u64(pb_buf *b, uint64_t v);
int pb_buf_str(pb_buf *b, const char *s); /* u32 length + bytes */
void pb_buf_free(pb_buf *b);

/* Growable arrays. array_ptr is the address of the caller's array pointer (T **, NULL
 * while empty) and *cap its capacity in elements. Makes room for at least need
 * elements of elem bytes, doubling so appends stay amortised O(1). On failure
 * (PB_ENOMEM, also when need * elem would overflow) the array and *cap are unchanged
 * and still the caller's to free. PB_GROW ties elem to the array's element type. */
int pb_grow(void *array_ptr, size_t *cap, size_t need, size_t elem);
#define PB_GROW(array, cap, need) pb_grow(&(array), (cap), (need), sizeof(*(array)))

/* Bounds-checked reader over a byte range; sticky failure flag. */
typedef struct pb_reader {
    const uint8_t *p;
    size_t left;
    int bad;
} pb_reader;
uint32_t pb_rd_u32(pb_reader *r);
uint64_t pb_rd_u64(pb_reader *r);
char *pb_rd_str(pb_reader *r); /* malloc'd copy, NULL on failure */
const uint8_t *pb_rd_bytes(pb_reader *r, size_t n);

/* LSN helpers: PostgreSQL's "X/Y" text form. */
int pb_lsn_parse(const char *text, uint64_t *out);
void pb_lsn_format(uint64_t lsn, char out[32]);

/* mkdir -p: missing parents are created 0700, the last component with mode; an
 * existing directory is fine. */
int pb_mkdir_p(const char *path, unsigned mode, pb_error *err);
/* A local state directory (catalog, caches) steers what backup and restore decide: it
 * must be a directory of this user that no one else may write into (PB_ESTATE naming
 * it otherwise). */
int pb_state_dir_check(const char *dir, pb_error *err);
/* The same, the directory created (0700, with its parents) when missing. */
int pb_state_dir_ready(const char *dir, pb_error *err);
/* A new file beside path for an atomic replace: "path.tmp.XXXXXX" made by mkstemp
 * (O_EXCL: never a file someone planted), mode 0600; tmp (cap bytes) gets its name. */
int pb_temp_beside(const char *path, char *tmp, size_t cap, int *fd, pb_error *err);

/* Monotonic seconds, for progress and summaries. */
double pb_now(void);

#endif
