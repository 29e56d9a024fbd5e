/*
 * engine/wal/archive.c — the WAL archive (format: docs/FORMAT.md).
 *
 * Each WAL file is one object: a 32-byte header (magic, raw size, hash of the raw
 * bytes, hash of the compressed payload) and one zstd frame. The raw hash makes
 * archive-push idempotent: PostgreSQL retries archive_command after a crash, and a
 * second push of identical bytes must succeed, while a different file under the same
 * name (two clusters archiving into one repository, a promoted standby on the wrong
 * timeline) must be refused loudly and never overwrite what is there.
 *
 * The object is the envelope of engine/pack/pack.h under its own magic: one codec (and one
 * set of bounds against a hostile repository) for manifests and WAL. WAL files are at
 * most 1 GiB and usually 16 MiB: a push reads and compresses one in pieces and holds the
 * compressed object (repo_put_new takes it whole); a get holds one decoded whole.
 */
#include "engine/wal/wal.h"
#include "engine/wal/wal_internal.h"
#include "engine/pack/pack.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WAL_MAGIC "PBWAL001"
#define WAL_LEVEL 1 /* fast: archive_command latency holds back WAL recycling */

/* ---- the object: envelope and segment check ------------------------------------- */

/* A plain segment's first page has PostgreSQL's long page header (xlogdefs.h,
 * XLogLongPageHeaderData): u16 magic, u16 info, u32 tli, u64 pageaddr, u32 rem_len,
 * 4 bytes of padding, u64 sysid, u32 seg_size, u32 blcksz. The envelope carries no name,
 * so this is what tells segment 5 from segment 6 put under its name: the page address
 * must be where the name puts the segment, and the sizes must be the segment's own. The
 * timeline may be older than the name's (a new timeline's first segment is a copy of
 * its parent's up to the switch point, page headers included). Checked on the way in
 * (archive-push: a recycled segment has an old page address) and on the way out. */
#define XLP_LONG_HEADER 0x0002u
int arch_check_first_page(const uint8_t *page, uint64_t len, const char *name,
                          const char *what, pb_error *err)
{
    uint32_t tli = 0;
    uint64_t segno = 0;
    if (!arch_valid_seg_size(len) || !arch_parse_segment(name, (uint32_t)len, &tli, &segno))
        return pb_fail(err, PB_ECORRUPT, "%s: %" PRIu64 " bytes is not a WAL segment size",
                       what, len);
    uint16_t info = pb_get_u16(page + 2);
    uint32_t page_tli = pb_get_u32(page + 4);
    uint64_t addr = pb_get_u64(page + 8), want = segno * len;
    if (!(info & XLP_LONG_HEADER) || pb_get_u32(page + 32) != len ||
        pb_get_u32(page + 36) != PB_PAGE_SIZE)
        return pb_fail(err, PB_ECORRUPT, "%s does not start with a long page header for "
                       "%" PRIu64 "-byte segments of %u-byte pages", what, len, PB_PAGE_SIZE);
    if (addr != want || page_tli == 0 || page_tli > tli)
        return pb_fail(err, PB_ECORRUPT, "%s holds another segment than %s: its first page "
                       "is at LSN %X/%X of timeline %u, expected %X/%X of timeline %u (or "
                       "an earlier one)%s", what, name, (unsigned)(addr >> 32),
                       (unsigned)addr, page_tli, (unsigned)(want >> 32), (unsigned)want, tli,
                       addr < want ? ": a recycled segment, left over from older WAL" : "");
    return 0;
}

static int check_segment(const uint8_t *raw, size_t len, const char *name, const char *key,
                         pb_error *err)
{
    char what[300];
    snprintf(what, sizeof(what), "archived WAL object %s", key);
    return arch_check_first_page(raw, len, name, what, err);
}

/* The largest raw size an archived object of this name can have: a segment (plain or
 * .partial) is at most the largest wal_segment_size; a history or .backup file is a few
 * lines of text. */
#define WAL_MAX_SMALL (1u << 20)
static uint64_t max_raw_for(const char *name)
{
    return strlen(name) == 24 || strstr(name, ".partial") ? WAL_MAX_RAW : WAL_MAX_SMALL;
}

/* Verifies an archived object and decompresses it into a new buffer (*raw, caller
 * frees). Every failure but PB_ENOMEM is PB_ECORRUPT naming the key; the envelope (and
 * its bounds on the header's raw size) is the one manifests use, pack_envelope_decode. */
static int decode(const uint8_t *obj, size_t len, const char *key, uint8_t **raw,
                  size_t *raw_len, pb_error *err)
{
    char what[300], name[64];
    const char *base = strrchr(key, '/');
    snprintf(name, sizeof(name), "%s", base ? base + 1 : key);
    if (strlen(name) > 4 && !strcmp(name + strlen(name) - 4, ".zst"))
        name[strlen(name) - 4] = '\0';
    snprintf(what, sizeof(what), "archived WAL object %s", key);
    void *buf = NULL;
    int rc = pack_envelope_decode(obj, len, WAL_MAGIC, max_raw_for(name), what, &buf, raw_len,
                                  err);
    if (rc == 0 && strlen(name) == 24)
        rc = check_segment(buf, *raw_len, name, key, err);
    if (rc) {
        free(buf);
        buf = NULL;
        *raw_len = 0;
    }
    *raw = buf;
    return rc;
}

/* The key exists already: succeed only when it holds exactly these bytes. */
static int compare_existing(repo *r, const char *key, const char *name, const uint8_t *raw,
                            size_t len, pb_error *err)
{
    void *obj = NULL;
    size_t olen = 0;
    uint8_t *old = NULL;
    size_t old_len = 0;
    int rc = repo_get(r, key, &obj, &olen, err);
    if (!rc && (rc = decode(obj, olen, key, &old, &old_len, err)))
        pb_error_wrap(err, "WAL file %s is already archived but the archived copy is unreadable "
                           "(remove it to archive again)", name);
    if (!rc && (old_len != len || pb_hash64(old, old_len) != pb_hash64(raw, len) ||
                memcmp(old, raw, len) != 0))
        rc = pb_fail(err, PB_EEXIST,
                     "WAL file %s is already archived at %s/%s with DIFFERENT content (%zu bytes "
                     "archived, %zu bytes now): refusing to overwrite; is another cluster "
                     "archiving into this repository?",
                     name, repo_location(r), key, old_len, len);
    if (!rc)
        pb_info("WAL file %s already archived with identical content", name);
    free(old);
    free(obj);
    return rc;
}

/* ---- push / get / exists -------------------------------------------------------- */

typedef struct piece_src {
    int fd;
    const char *path;
} piece_src;

static int read_piece(void *ctx, void *buf, size_t cap, size_t *got, pb_error *err)
{
    piece_src *s = ctx;
    ssize_t n;
    while ((n = read(s->fd, buf, cap)) < 0 && errno == EINTR)
        ;
    if (n < 0)
        return pb_fail_errno(err, PB_EIO, "cannot read %s", s->path);
    *got = (size_t)n;
    return 0;
}

/* The object of the WAL file at path, read and compressed piece by piece: a push holds
 * one piece and the compressed object, never the raw segment (memory bounds). */
static int encode_file(const char *path, pb_buf *out, pb_error *err)
{
    char what[300];
    snprintf(what, sizeof(what), "WAL file %s", path);
    piece_src src = {open(path, O_RDONLY | O_CLOEXEC), path};
    if (src.fd < 0)
        return pb_fail_errno(err, errno == ENOENT ? PB_ENOENT : PB_EIO, "cannot open %s",
                             path);
    struct stat st;
    int rc = fstat(src.fd, &st) < 0 ? pb_fail_errno(err, PB_EIO, "cannot stat %s", path) : 0;
    if (rc == 0 && (uint64_t)st.st_size > WAL_MAX_RAW)
        rc = pb_fail(err, PB_EINVAL, "%s is larger than any WAL file can be", path);
    if (rc == 0)
        (void)posix_fadvise(src.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    if (rc == 0)
        rc = pack_envelope_encode_pieces(read_piece, &src, (uint64_t)st.st_size, WAL_MAGIC,
                                         WAL_LEVEL, what, out, err);
    close(src.fd);
    return rc;
}

/* Someone stored key first (a retry, or a racing push): compare with the whole file. */
static int compare_file(repo *r, const char *key, const char *name, const char *path,
                        pb_error *err)
{
    uint8_t *raw = NULL;
    size_t len = 0;
    int rc = arch_file_read(path, &raw, &len, err);
    if (rc == 0)
        rc = compare_existing(r, key, name, raw, len, err);
    free(raw);
    return rc;
}

int arch_push(repo *r, const char *path, pb_error *err)
{
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    char key[256];
    int rc = arch_check_name(name, err);
    if (rc)
        return rc;
    arch_key(key, sizeof(key), name);
    pb_buf obj = {0};
    /* PostgreSQL retries a push that was killed; what that push left (its temp file) goes
     * now, whether this push stores the segment or finds it stored. Not fatal. */
    pb_error cerr = PB_ERROR_INIT;
    if (repo_cleanup_key(r, key, &cerr) != 0)
        pb_warn("%s", cerr.msg);
    rc = repo_stat(r, key, NULL, err);
    if (rc == 0)
        return compare_file(r, key, name, path, err);
    if (rc != PB_ENOENT)
        return rc;
    /* Create-if-absent: of two pushes racing for one name exactly one stores its bytes;
     * the other then compares like any later push (identical: success; else refused). */
    if (!(rc = encode_file(path, &obj, err)))
        rc = repo_put_new(r, key, obj.data, obj.len, err);
    pb_buf_free(&obj);
    if (rc == PB_EEXIST)
        return compare_file(r, key, name, path, err);
    if (rc && rc != PB_ENOENT)
        pb_error_wrap(err, "archiving WAL file %s", name);
    return rc;
}

int arch_get(repo *r, const char *name, const char *dest_path, pb_error *err)
{
    char key[256];
    int rc = arch_check_name(name, err);
    if (rc)
        return rc;
    arch_key(key, sizeof(key), name);
    void *obj = NULL;
    size_t olen = 0, len = 0;
    uint8_t *raw = NULL;
    rc = repo_get(r, key, &obj, &olen, err);
    if (rc == PB_ENOENT) {
        rc = pb_fail(err, PB_ENOENT, "WAL file %s is not in the archive (%s/%s)", name,
                     repo_location(r), key);
        goto out;
    }
    if (!rc)
        rc = decode(obj, olen, key, &raw, &len, err);
    if (!rc)
        rc = arch_file_write_atomic(dest_path, raw, len, true, err);
out:
    free(raw);
    free(obj);
    return rc;
}

int arch_exists(repo *r, const char *name, bool *present, pb_error *err)
{
    char key[256];
    *present = false;
    int rc = arch_check_name(name, err);
    if (rc)
        return rc;
    arch_key(key, sizeof(key), name);
    rc = repo_stat(r, key, NULL, err);
    if (rc == PB_ENOENT)
        return 0;
    if (rc == 0)
        *present = true;
    return rc;
}

/* ---- reading into memory, listing --------------------------------------------------- */

int arch_read(repo *r, const char *name, uint8_t **out, size_t *out_len, pb_error *err)
{
    char key[256];
    *out = NULL;
    *out_len = 0;
    int rc = arch_check_name(name, err);
    if (rc)
        return rc;
    arch_key(key, sizeof(key), name);
    void *obj = NULL;
    size_t olen = 0;
    rc = repo_get(r, key, &obj, &olen, err);
    if (rc == PB_ENOENT)
        rc = pb_fail(err, PB_ENOENT, "WAL file %s is not in the archive (%s/%s)", name,
                     repo_location(r), key);
    if (!rc)
        rc = decode(obj, olen, key, out, out_len, err);
    free(obj);
    return rc;
}

int arch_object_hash(repo *r, const char *name, uint64_t *hash, pb_error *err)
{
    char key[256];
    uint8_t h[PACK_ENVELOPE_HEADER];
    *hash = 0;
    int rc = arch_check_name(name, err);
    if (rc)
        return rc;
    arch_key(key, sizeof(key), name);
    rc = repo_get_range(r, key, 0, sizeof(h), h, err);
    if (rc == PB_ENOENT)
        return pb_fail(err, PB_ENOENT, "WAL file %s is not in the archive (%s/%s)", name,
                       repo_location(r), key);
    if (rc)
        return rc;
    if (memcmp(h, WAL_MAGIC, 8) != 0)
        return pb_fail(err, PB_ECORRUPT, "archived WAL object %s/%s has no WAL envelope",
                       repo_location(r), key);
    *hash = pb_get_u64(h + 16);
    return 0;
}

int arch_decode(const uint8_t *obj, size_t len, const char *name, uint8_t **out,
                size_t *out_len, pb_error *err)
{
    char key[256];
    *out = NULL;
    *out_len = 0;
    int rc = arch_check_name(name, err);
    if (rc)
        return rc;
    arch_key(key, sizeof(key), name);
    return decode(obj, len, key, out, out_len, err);
}

typedef struct list_ctx {
    unsigned kinds;
    arch_list_cb cb;
    void *ctx;
} list_ctx;

static int list_one(void *vctx, const char *key, uint64_t size)
{
    (void)size;
    list_ctx *lc = vctx;
    const char *base = strrchr(key, '/');
    base = base ? base + 1 : key;
    size_t n = strlen(base);
    if (n < 5 || strcmp(base + n - 4, ".zst") != 0 || n - 4 >= 64)
        return 0;
    char name[64];
    memcpy(name, base, n - 4);
    name[n - 4] = '\0';
    /* The key must be exactly where arch_key puts this name: ignores strays. */
    char expect[256];
    arch_key(expect, sizeof(expect), name);
    if (strcmp(expect, key) != 0)
        return 0;
    bool seg = strlen(name) == 24, hist = arch_is_history_name(name);
    if ((seg && (lc->kinds & ARCH_LIST_SEGMENTS)) || (hist && (lc->kinds & ARCH_LIST_HISTORY)))
        return lc->cb(lc->ctx, name);
    return 0;
}

int arch_list(repo *r, unsigned kinds, arch_list_cb cb, void *ctx, pb_error *err)
{
    list_ctx lc = {kinds, cb, ctx};
    /* History files have their own prefix; listing only them is one small request. */
    const char *prefix = kinds == ARCH_LIST_HISTORY ? "wal/history/" : "wal/";
    return repo_list(r, prefix, list_one, &lc, err);
}

/* The segment name of a WAL file name: a plain segment, or one ending in ".partial"
 * (a promoted standby's last segment of the old timeline, its full size). History and
 * .backup files carry no long header: false. */
static bool segment_of(const char *name, char seg[25])
{
    size_t n = strlen(name);
    if (n != 24 && !(n == 32 && !strcmp(name + 24, ".partial")))
        return false;
    memcpy(seg, name, 24);
    seg[24] = '\0';
    return strspn(seg, "0123456789ABCDEF") == 24;
}

/* The page magic of PostgreSQL 9 and later, the page address where the name puts the
 * segment (a recycled segment left in pg_wal under a future name still holds older WAL;
 * stored, it would block archiving of the real one for good), the timeline and the sizes
 * (arch_check_first_page, which archive-get applies too). */
int arch_check_local_segment(const char *path, bool *segment, uint64_t *sysid, pb_error *err)
{
    const char *name = strrchr(path, '/');
    name = name ? name + 1 : path;
    char seg[25];
    *segment = segment_of(name, seg);
    if (!*segment)
        return 0;
    uint8_t head[ARCH_LONG_PHD];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int rc = pb_fail_errno(err, PB_EIO, "cannot read WAL file %s", path);
        if (fd >= 0)
            close(fd);
        return rc;
    }
    ssize_t n = pread(fd, head, sizeof(head), 0);
    close(fd);
    char what[PATH_MAX + 16];
    snprintf(what, sizeof(what), "WAL file %s", path);
    int rc = 0;
    if (n != (ssize_t)sizeof(head) || pb_get_u16(head) < 0xD000) /* PostgreSQL >= 9 */
        rc = pb_fail(err, PB_EINVAL, "%s does not look like a WAL segment (page magic "
                     "0x%04X, expected a PostgreSQL WAL page magic 0xD0xx or above)", what,
                     n >= 2 ? pb_get_u16(head) : 0);
    if (rc == 0 && arch_check_first_page(head, (uint64_t)st.st_size, seg, what, err))
        rc = PB_EINVAL;
    if (rc == 0)
        *sysid = pb_get_u64(head + 24); /* xlp_sysid */
    return rc;
}
