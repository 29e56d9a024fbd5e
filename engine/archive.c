/*
 * engine/archive.c — the WAL archive (format: docs/FORMAT.md).
 *
 * Each WAL file is one object: a 32-byte header (magic, raw size, hash of the raw
 * bytes, hash of the compressed payload) and one zstd frame. The raw hash makes
 * archive-push idempotent: PostgreSQL retries archive_command after a crash, and a
 * second push of identical bytes must succeed, while a different file under the same
 * name (two clusters archiving into one repository, a promoted standby on the wrong
 * timeline) must be refused loudly and never overwrite what is there.
 *
 * Compression goes through zstd's one-shot API: WAL files are at most 1 GiB and
 * usually 16 MiB, so holding one in memory is fine and keeps this file simple.
 */
#include "engine/archive.h"
#include "engine/pack.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#define WAL_MAGIC "PBWAL001"
#define WAL_HEADER 32u
#define WAL_MAX_RAW (1ull << 30) /* wal_segment_size is at most 1 GiB */
#define WAL_LEVEL 1 /* fast: archive_command latency holds back WAL recycling */

/* ---- names and keys ------------------------------------------------------------ */

static bool all_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'A' && s[i] <= 'F')))
            return false;
    return true;
}

/* Segment "TTTTTTTTXXXXXXXXYYYYYYYY", optionally ".partial" or ".OOOOOOOO.backup". */
static bool is_segment_name(const char *name)
{
    size_t n = strlen(name);
    if (n < 24 || !all_hex(name, 24))
        return false;
    const char *rest = name + 24;
    if (!rest[0] || !strcmp(rest, ".partial"))
        return true;
    return strlen(rest) == 16 && rest[0] == '.' && all_hex(rest + 1, 8) &&
           !strcmp(rest + 9, ".backup");
}

static bool is_history_name(const char *name)
{
    return strlen(name) == 16 && all_hex(name, 8) && !strcmp(name + 8, ".history");
}

/* Unknown names get an empty key, which every repo_* call refuses as invalid. */
void arch_key(char *out, size_t cap, const char *name)
{
    if (is_segment_name(name))
        snprintf(out, cap, "wal/%.8s/%s.zst", name, name);
    else if (is_history_name(name))
        snprintf(out, cap, "wal/history/%s.zst", name);
    else if (cap > 0)
        out[0] = '\0';
}

static int check_name(const char *name, pb_error *err)
{
    if (!is_segment_name(name) && !is_history_name(name))
        return pb_fail(err, PB_EINVAL,
                       "\"%s\" is not a WAL file name (segment, .partial, .backup or .history)",
                       name);
    return 0;
}

/* ---- object encoding -------------------------------------------------------------- */

static int encode(const uint8_t *raw, size_t len, uint8_t **out, size_t *out_len,
                  const char *name, pb_error *err)
{
    size_t cap = WAL_HEADER + ZSTD_compressBound(len);
    uint8_t *obj = malloc(cap);
    if (!obj)
        return pb_fail(err, PB_ENOMEM, "out of memory compressing WAL file %s", name);
    size_t clen = ZSTD_compress(obj + WAL_HEADER, cap - WAL_HEADER, raw, len, WAL_LEVEL);
    if (ZSTD_isError(clen)) {
        free(obj);
        return pb_fail(err, PB_EIO, "cannot compress WAL file %s: %s", name,
                       ZSTD_getErrorName(clen));
    }
    memcpy(obj, WAL_MAGIC, 8);
    pb_put_u64(obj + 8, len);
    pb_put_u64(obj + 16, pb_hash64(raw, len));
    pb_put_u64(obj + 24, pb_hash64(obj + WAL_HEADER, clen));
    *out = obj;
    *out_len = WAL_HEADER + clen;
    return 0;
}

/* A plain segment's first page has PostgreSQL's long page header (xlogdefs.h,
 * XLogLongPageHeaderData): u16 magic, u16 info, u32 tli, u64 pageaddr, u32 rem_len,
 * 4 bytes of padding, u64 sysid, u32 seg_size, u32 blcksz. The envelope carries no name,
 * so this is what tells segment 5 from segment 6 put under its name: the page address
 * must be where the name puts the segment, and the sizes must be the segment's own. The
 * timeline may be older than the name's (a new timeline's first segment is a copy). */
#define XLP_LONG_HEADER 0x0002u
static int check_segment(const uint8_t *raw, size_t len, const char *name, const char *key,
                         pb_error *err)
{
    uint32_t tli = 0;
    uint64_t segno = 0;
    if (!arch_valid_seg_size(len) || !arch_parse_segment(name, (uint32_t)len, &tli, &segno))
        return pb_fail(err, PB_ECORRUPT, "archived WAL object %s: %zu bytes is not a WAL "
                       "segment size", key, len);
    uint16_t info = pb_get_u16(raw + 2);
    uint32_t page_tli = pb_get_u32(raw + 4);
    uint64_t addr = pb_get_u64(raw + 8);
    if (!(info & XLP_LONG_HEADER) || pb_get_u32(raw + 32) != len ||
        pb_get_u32(raw + 36) != PB_PAGE_SIZE)
        return pb_fail(err, PB_ECORRUPT, "archived WAL object %s does not start with a long "
                       "page header for %zu-byte segments of %u-byte pages", key, len,
                       PB_PAGE_SIZE);
    if (addr != segno * len || page_tli == 0 || page_tli > tli)
        return pb_fail(err, PB_ECORRUPT, "archived WAL object %s holds another segment "
                       "(first page at LSN %X/%X of timeline %u, expected %X/%X)", key,
                       (unsigned)(addr >> 32), (unsigned)addr, page_tli,
                       (unsigned)((segno * len) >> 32), (unsigned)(segno * len));
    return 0;
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
 * frees). Every failure is PB_ECORRUPT naming the key; the envelope (and its bounds on
 * the header's raw size) is the one manifests use, see pack_envelope_decode. */
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

/* ---- local files ---------------------------------------------------------------- */

static int read_file(const char *path, uint8_t **out, size_t *out_len, pb_error *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return pb_fail_errno(err, errno == ENOENT ? PB_ENOENT : PB_EIO, "cannot open %s",
                             path);
    struct stat st;
    uint8_t *buf = NULL;
    int rc = 0;
    if (fstat(fd, &st) < 0) {
        rc = pb_fail_errno(err, PB_EIO, "cannot stat %s", path);
        goto out;
    }
    if ((uint64_t)st.st_size > WAL_MAX_RAW) {
        rc = pb_fail(err, PB_EINVAL, "%s is larger than any WAL file can be", path);
        goto out;
    }
    size_t size = (size_t)st.st_size, got = 0;
    if (!(buf = malloc(size ? size : 1))) {
        rc = pb_fail(err, PB_ENOMEM, "out of memory reading %s", path);
        goto out;
    }
    while (got < size) {
        ssize_t n = read(fd, buf + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? pb_fail_errno(err, PB_EIO, "cannot read %s", path)
                       : pb_fail(err, PB_EIO, "%s shrank while being read", path);
            goto out;
        }
        got += (size_t)n;
    }
    *out = buf;
    *out_len = size;
    buf = NULL;
out:
    free(buf);
    close(fd);
    return rc;
}

static int write_all(int fd, const uint8_t *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* PostgreSQL must never see a partial WAL file: temp file, fsync, rename, fsync dir.
 * durable == false (spool files, which are verified before use and cheap to fetch again)
 * skips the fsyncs. */
static int write_file_atomic(const char *dest, const uint8_t *data, size_t len, bool durable,
                             pb_error *err)
{
    char tmp[PATH_MAX], dir[PATH_MAX];
    if (snprintf(tmp, sizeof(tmp), "%s.pbtmp.%ld", dest, (long)getpid()) >= (int)sizeof(tmp))
        return pb_fail(err, PB_EINVAL, "destination path too long: %s", dest);
    const char *slash = strrchr(dest, '/');
    snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - dest) + (slash == dest) : 1,
             slash ? dest : ".");
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return pb_fail_errno(err, PB_EIO, "cannot create %s", tmp);
    int rc = 0;
    if (write_all(fd, data, len) < 0)
        rc = pb_fail_errno(err, PB_EIO, "cannot write %s", tmp);
    else if (durable && fsync(fd) < 0)
        rc = pb_fail_errno(err, PB_EIO, "fsync of %s failed", tmp);
    if (close(fd) < 0 && !rc)
        rc = pb_fail_errno(err, PB_EIO, "close of %s failed", tmp);
    if (!rc && rename(tmp, dest) < 0)
        rc = pb_fail_errno(err, PB_EIO, "cannot rename %s to %s", tmp, dest);
    if (rc) {
        unlink(tmp);
        return rc;
    }
    if (!durable)
        return 0;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return pb_fail_errno(err, PB_EIO, "cannot open directory %s to fsync it", dir);
    if (fsync(dfd) < 0 && errno != EINVAL)
        rc = pb_fail_errno(err, PB_EIO, "fsync of directory %s failed", dir);
    close(dfd);
    return rc;
}

static int write_atomic(const char *dest, const uint8_t *data, size_t len, pb_error *err)
{
    return write_file_atomic(dest, data, len, true, err);
}

/* ---- push / get / exists -------------------------------------------------------- */

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

int arch_push(repo *r, const char *path, pb_error *err)
{
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    char key[256];
    int rc = check_name(name, err);
    if (rc)
        return rc;
    arch_key(key, sizeof(key), name);
    uint8_t *raw = NULL, *obj = NULL;
    size_t len = 0, olen = 0;
    /* PostgreSQL retries a push that was killed; what that push left (its temp file) goes
     * now, whether this push stores the segment or finds it stored. Not fatal. */
    pb_error cerr = PB_ERROR_INIT;
    if (repo_cleanup_key(r, key, &cerr) != 0)
        pb_warn("%s", cerr.msg);
    if ((rc = read_file(path, &raw, &len, err)))
        goto out;
    rc = repo_stat(r, key, NULL, err);
    if (rc == 0) {
        rc = compare_existing(r, key, name, raw, len, err);
        goto out;
    }
    if (rc != PB_ENOENT)
        goto out;
    /* Create-if-absent: of two pushes racing for one name exactly one stores its bytes;
     * the other then compares like any later push (identical: success; else refused). */
    if (!(rc = encode(raw, len, &obj, &olen, name, err)))
        rc = repo_put_new(r, key, obj, olen, err);
    if (rc == PB_EEXIST) {
        rc = compare_existing(r, key, name, raw, len, err);
        goto out;
    }
    if (rc)
        pb_error_wrap(err, "archiving WAL file %s", name);
out:
    free(obj);
    free(raw);
    return rc;
}

int arch_get(repo *r, const char *name, const char *dest_path, pb_error *err)
{
    char key[256];
    int rc = check_name(name, err);
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
        rc = write_atomic(dest_path, raw, len, err);
out:
    free(raw);
    free(obj);
    return rc;
}

int arch_exists(repo *r, const char *name, bool *present, pb_error *err)
{
    char key[256];
    *present = false;
    int rc = check_name(name, err);
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
    int rc = check_name(name, err);
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

int arch_decode(const uint8_t *obj, size_t len, const char *name, uint8_t **out,
                size_t *out_len, pb_error *err)
{
    char key[256];
    *out = NULL;
    *out_len = 0;
    int rc = check_name(name, err);
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
    bool seg = strlen(name) == 24, hist = is_history_name(name);
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

/* ---- segment names ------------------------------------------------------------------ */

bool arch_valid_seg_size(uint64_t size)
{
    return size >= (1u << 20) && size <= (1u << 30) && (size & (size - 1)) == 0;
}

bool arch_parse_segment(const char *name, uint32_t seg_size, uint32_t *tli, uint64_t *segno)
{
    if (strlen(name) != 24 || !all_hex(name, 24) || !arch_valid_seg_size(seg_size))
        return false;
    char part[9] = {0};
    memcpy(part, name, 8);
    unsigned long t = strtoul(part, NULL, 16);
    memcpy(part, name + 8, 8);
    unsigned long log = strtoul(part, NULL, 16);
    memcpy(part, name + 16, 8);
    unsigned long seg = strtoul(part, NULL, 16);
    uint64_t per_id = 0x100000000ull / seg_size;
    if (t == 0 || seg >= per_id)
        return false;
    *tli = (uint32_t)t;
    *segno = (uint64_t)log * per_id + seg;
    return true;
}

void arch_segment_name(char out[25], uint32_t tli, uint64_t segno, uint32_t seg_size)
{
    uint64_t per_id = 0x100000000ull / seg_size;
    snprintf(out, 25, "%08X%08X%08X", tli, (uint32_t)(segno / per_id),
             (uint32_t)(segno % per_id));
}

/* ---- archive-get spool ------------------------------------------------------------- */

/*
 * Spool entries are verified raw segments named "<segment>.<hash>" (the 64-bit hash of
 * the content in hex), so that taking one is a read, a hash and a rename: the
 * decompression happened in the prefetcher, off the replay's critical path.
 */
#define SPOOL_REPO_FILE ".repository"
#define SPOOL_LOCK_FILE ".prefetch.lock"
#define SPOOL_ENTRY_LEN (24 + 1 + 16)

/* A temp file "<entry>.pbtmp.<pid>" whose writer is gone. */
static bool is_dead_temp(const char *entry)
{
    const char *t = strstr(entry, ".pbtmp.");
    if (!t)
        return false;
    long pid = strtol(t + 7, NULL, 10);
    return pid <= 0 || (kill((pid_t)pid, 0) != 0 && errno == ESRCH);
}

static bool is_spool_entry(const char *e)
{
    return strlen(e) == SPOOL_ENTRY_LEN && all_hex(e, 24) && e[24] == '.' &&
           strspn(e + 25, "0123456789abcdef") == 16;
}

static bool spool_entry_is_stale(const char *e, const char *name, bool all)
{
    if (strstr(e, ".pbtmp."))
        return all || is_dead_temp(e);
    if (all || !is_spool_entry(e))
        return true; /* nothing else belongs here */
    /* A position (log + seg) before the requested one, whatever the timeline. */
    return strlen(name) >= 24 && all_hex(name, 24) && strncmp(e + 8, name + 8, 16) < 0;
}

static int remove_spool_entries(const char *spool_dir, const char *name, bool all,
                                pb_error *err)
{
    DIR *d = opendir(spool_dir);
    if (!d)
        return pb_fail_errno(err, PB_EIO, "cannot open spool directory %s", spool_dir);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *e = de->d_name;
        if (e[0] == '.' || !spool_entry_is_stale(e, name, all))
            continue; /* ".", "..", the lock and the repository marker stay */
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", spool_dir, e);
        if (unlink(path) != 0 && errno != ENOENT)
            pb_warn("cannot remove stale spool file %s: %s", path, strerror(errno));
    }
    closedir(d);
    return 0;
}

/* The spooled entry of segment name, if any: entry gets "<name>.<hash>". */
static bool spool_find(const char *spool_dir, const char *name, char entry[64])
{
    DIR *d = opendir(spool_dir);
    if (!d)
        return false;
    struct dirent *de;
    bool found = false;
    while (!found && (de = readdir(d)) != NULL)
        if (is_spool_entry(de->d_name) && strncmp(de->d_name, name, 24) == 0 &&
            strlen(name) == 24) {
            memcpy(entry, de->d_name, SPOOL_ENTRY_LEN + 1);
            found = true;
        }
    closedir(d);
    return found;
}

int arch_spool_prepare(const char *spool_dir, const char *name, const char *repo_id,
                       pb_error *err)
{
    if (mkdir(spool_dir, 0700) != 0 && errno != EEXIST)
        return pb_fail_errno(err, PB_EIO, "cannot create spool directory %s", spool_dir);
    char path[PATH_MAX], cur[1024] = "";
    snprintf(path, sizeof(path), "%s/%s", spool_dir, SPOOL_REPO_FILE);
    FILE *fp = fopen(path, "r");
    if (fp) {
        if (!fgets(cur, sizeof(cur), fp))
            cur[0] = '\0';
        fclose(fp);
        cur[strcspn(cur, "\n")] = '\0';
    }
    bool same = strcmp(cur, repo_id) == 0;
    int rc = remove_spool_entries(spool_dir, name, !same, err);
    if (rc || same)
        return rc;
    fp = fopen(path, "w");
    if (!fp)
        return pb_fail_errno(err, PB_EIO, "cannot write %s", path);
    fprintf(fp, "%s\n", repo_id);
    if (fclose(fp) != 0)
        return pb_fail_errno(err, PB_EIO, "cannot write %s", path);
    return 0;
}

int arch_spool_take(const char *spool_dir, const char *name, const char *dest_path,
                    pb_error *err)
{
    char entry[64], path[PATH_MAX];
    if (!spool_find(spool_dir, name, entry))
        return pb_fail(err, PB_ENOENT, "%s is not in the spool %s", name, spool_dir);
    snprintf(path, sizeof(path), "%s/%s", spool_dir, entry);
    uint8_t *raw = NULL;
    size_t len = 0;
    int rc = read_file(path, &raw, &len, err);
    if (rc)
        return rc == PB_ENOENT ? PB_ENOENT : rc;
    char hash[17];
    snprintf(hash, sizeof(hash), "%016" PRIx64, pb_hash64(raw, len));
    free(raw);
    if (strcmp(hash, entry + 25) != 0) {
        pb_warn("discarding spooled %s: its content hash is %s", path, hash);
        unlink(path);
        return pb_fail(err, PB_ENOENT, "%s: spooled copy was damaged", name);
    }
    /* Same file system (both in pg_wal): the verified file becomes the destination. */
    if (rename(path, dest_path) != 0)
        return pb_fail_errno(err, PB_EIO, "cannot move %s to %s", path, dest_path);
    return 0;
}

/* The spool vanished (recovery ended and recovery_end_command removed it): stop. */
static bool spool_alive(const char *spool_dir)
{
    struct stat st;
    return stat(spool_dir, &st) == 0 && S_ISDIR(st.st_mode);
}

static int prefetch_one(repo *r, const char *spool_dir, const char *name, pb_error *err)
{
    uint8_t *raw = NULL;
    size_t len = 0;
    int rc = arch_read(r, name, &raw, &len, err);
    if (rc == 0 && spool_alive(spool_dir)) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s.%016" PRIx64, spool_dir, name,
                 pb_hash64(raw, len));
        rc = write_file_atomic(path, raw, len, false, err);
    }
    free(raw);
    return rc;
}

int arch_prefetch(repo *r, const char *spool_dir, const char *name, uint32_t seg_size,
                  unsigned count, pb_error *err)
{
    uint32_t tli;
    uint64_t segno;
    if (!arch_parse_segment(name, seg_size, &tli, &segno))
        return pb_fail(err, PB_EINVAL, "cannot prefetch after %s: not a WAL segment name "
                       "(segment size %u)", name, seg_size);
    if (!spool_alive(spool_dir))
        return 0; /* recovery is over */
    char lock[PATH_MAX];
    snprintf(lock, sizeof(lock), "%s/%s", spool_dir, SPOOL_LOCK_FILE);
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return pb_fail_errno(err, PB_EIO, "cannot open %s", lock);
    int rc = 0;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0)
        goto out; /* another prefetcher is at work; it fetches ahead too */
    for (unsigned i = 1; i <= count && rc == 0 && spool_alive(spool_dir); i++) {
        char next[25], entry[64];
        arch_segment_name(next, tli, segno + i, seg_size);
        if (spool_find(spool_dir, next, entry))
            continue;
        rc = prefetch_one(r, spool_dir, next, err);
        if (rc == PB_ENOENT) {
            rc = 0; /* the end of the archive (for now) */
            break;
        }
    }
out:
    close(fd);
    return rc;
}
