/* common/util.c — hashing, buffers, growable arrays, LSN text. */
#include "pb.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#if defined(__x86_64__)
#include <xxh_x86dispatch.h> /* same results, AVX2/AVX-512 code paths at run time */
#endif

uint64_t pb_hash64(const void *data, size_t len)
{
    return XXH3_64bits(data, len);
}

struct pb_hasher {
    XXH3_state_t *state;
};

pb_hasher *pb_hasher_new(void)
{
    pb_hasher *h = malloc(sizeof(*h));
    if (!h)
        return NULL;
    h->state = XXH3_createState();
    if (!h->state) {
        free(h);
        return NULL;
    }
    XXH3_64bits_reset(h->state);
    return h;
}

void pb_hasher_update(pb_hasher *h, const void *data, size_t len)
{
    XXH3_64bits_update(h->state, data, len);
}

uint64_t pb_hasher_digest(const pb_hasher *h)
{
    return XXH3_64bits_digest(h->state);
}

void pb_hasher_free(pb_hasher *h)
{
    if (!h)
        return;
    XXH3_freeState(h->state);
    free(h);
}

/* The array pointer is copied in and out with memcpy, so any T * works without a cast
 * through void ** (which would read a T * object as a void * one). */
int pb_grow(void *array_ptr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    if (elem == 0 || need > SIZE_MAX / elem)
        return PB_ENOMEM;
    size_t n = *cap ? *cap : 16;
    while (n < need)
        n = n > SIZE_MAX / 2 ? need : n * 2;
    if (n > SIZE_MAX / elem)
        n = need;
    void *old;
    memcpy(&old, array_ptr, sizeof(old));
    void *p = realloc(old, n * elem);
    if (!p)
        return PB_ENOMEM;
    memcpy(array_ptr, &p, sizeof(p));
    *cap = n;
    return 0;
}

/* Serialisers append many small pieces: start at 256 bytes, not pb_grow's 16. */
int pb_buf_reserve(pb_buf *b, size_t extra)
{
    if (extra > SIZE_MAX - b->len)
        return PB_ENOMEM;
    size_t need = b->len + extra;
    if (need <= b->cap)
        return 0;
    return pb_grow(&b->data, &b->cap, need < 256 ? 256 : need, 1);
}

int pb_buf_append(pb_buf *b, const void *data, size_t len)
{
    if (pb_buf_reserve(b, len))
        return PB_ENOMEM;
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    return 0;
}

int pb_buf_u32(pb_buf *b, uint32_t v)
{
    uint8_t t[4];
    pb_put_u32(t, v);
    return pb_buf_append(b, t, 4);
}

int pb_buf_u64(pb_buf *b, uint64_t v)
{
    uint8_t t[8];
    pb_put_u64(t, v);
    return pb_buf_append(b, t, 8);
}

int pb_buf_str(pb_buf *b, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (pb_buf_u32(b, (uint32_t)n))
        return PB_ENOMEM;
    return pb_buf_append(b, s, n);
}

void pb_buf_free(pb_buf *b)
{
    if (!b)
        return;
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

const uint8_t *pb_rd_bytes(pb_reader *r, size_t n)
{
    if (r->bad || r->left < n) {
        r->bad = 1;
        return NULL;
    }
    const uint8_t *p = r->p;
    r->p += n;
    r->left -= n;
    return p;
}

uint32_t pb_rd_u32(pb_reader *r)
{
    const uint8_t *p = pb_rd_bytes(r, 4);
    return p ? pb_get_u32(p) : 0;
}

uint64_t pb_rd_u64(pb_reader *r)
{
    const uint8_t *p = pb_rd_bytes(r, 8);
    return p ? pb_get_u64(p) : 0;
}

char *pb_rd_str(pb_reader *r)
{
    uint32_t n = pb_rd_u32(r);
    const uint8_t *p = pb_rd_bytes(r, n);
    if (!p)
        return NULL;
    char *s = malloc((size_t)n + 1);
    if (!s) {
        r->bad = 1;
        return NULL;
    }
    memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

int pb_lsn_parse(const char *text, uint64_t *out)
{
    unsigned int hi, lo;
    char tail;
    if (!text || sscanf(text, "%X/%X%c", &hi, &lo, &tail) != 2)
        return PB_EINVAL;
    *out = ((uint64_t)hi << 32) | lo;
    return 0;
}

void pb_lsn_format(uint64_t lsn, char out[32])
{
    snprintf(out, 32, "%X/%X", (unsigned)(lsn >> 32), (unsigned)lsn);
}

int pb_mkdir_p(const char *path, unsigned mode, pb_error *err)
{
    char buf[4096];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return pb_fail(err, PB_EINVAL, "path too long: %.64s...", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return pb_fail_errno(err, PB_EIO, "cannot create directory %s", buf);
        *p = '/';
    }
    if (mkdir(buf, (mode_t)mode) != 0 && errno != EEXIST)
        return pb_fail_errno(err, PB_EIO, "cannot create directory %s", buf);
    return 0;
}

int pb_state_dir_check(const char *dir, pb_error *err)
{
    struct stat st;
    if (lstat(dir, &st) != 0)
        return pb_fail_errno(err, PB_EIO, "cannot stat state directory %s", dir);
    if (!S_ISDIR(st.st_mode))
        return pb_fail(err, PB_ESTATE, "state directory %s is not a directory", dir);
    if (st.st_uid != geteuid())
        return pb_fail(err, PB_ESTATE, "state directory %s belongs to uid %u, not to this "
                       "user (uid %u): refusing to use it", dir, (unsigned)st.st_uid,
                       (unsigned)geteuid());
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return pb_fail(err, PB_ESTATE, "state directory %s is writable by group or others "
                       "(mode %04o): refusing to use it (chmod go-w)", dir,
                       (unsigned)(st.st_mode & 07777));
    return 0;
}

int pb_state_dir_ready(const char *dir, pb_error *err)
{
    int rc = pb_mkdir_p(dir, 0700, err);
    return rc ? rc : pb_state_dir_check(dir, err);
}

int pb_temp_beside(const char *path, char *tmp, size_t cap, int *fd, pb_error *err)
{
    *fd = -1;
    if ((size_t)snprintf(tmp, cap, "%s.tmp.XXXXXX", path) >= cap)
        return pb_fail(err, PB_EINVAL, "path too long: %.64s...", path);
    int f = mkostemp(tmp, O_CLOEXEC);
    if (f < 0)
        return pb_fail_errno(err, PB_EIO, "cannot create a temporary file beside %s", path);
    if (fchmod(f, 0600) != 0) {
        int rc = pb_fail_errno(err, PB_EIO, "cannot set the mode of %s", tmp);
        close(f);
        unlink(tmp);
        return rc;
    }
    *fd = f;
    return 0;
}

double pb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}
