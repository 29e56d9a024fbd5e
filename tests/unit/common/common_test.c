/* tests/unit/common/common_test.c — common/: errors, buffers, growable arrays, LSN text. */
#include "common/pb.h"
#include "common/fault.h"
#include "tests/unit/pbtest.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_lsn(void)
{
    uint64_t lsn = 0;
    char text[32];
    PBT_CHECK(pb_lsn_parse("16/B374D848", &lsn) == 0);
    PBT_CHECK(lsn == 0x16B374D848ull);
    pb_lsn_format(lsn, text);
    PBT_CHECK(strcmp(text, "16/B374D848") == 0);
    PBT_CHECK(pb_lsn_parse("nonsense", &lsn) == PB_EINVAL);
    PBT_CHECK(pb_lsn_parse("1/2x", &lsn) == PB_EINVAL);
}

static void test_buf_reader(void)
{
    pb_buf b = {0};
    PBT_CHECK(pb_buf_u32(&b, 0xdeadbeef) == 0);
    PBT_CHECK(pb_buf_u64(&b, 0x0102030405060708ull) == 0);
    PBT_CHECK(pb_buf_str(&b, "base/1/1259") == 0);
    PBT_CHECK(b.data[0] == 0xef); /* little-endian on every host */
    pb_reader r = {b.data, b.len, 0};
    PBT_CHECK(pb_rd_u32(&r) == 0xdeadbeef);
    PBT_CHECK(pb_rd_u64(&r) == 0x0102030405060708ull);
    char *s = pb_rd_str(&r);
    PBT_CHECK(s && strcmp(s, "base/1/1259") == 0);
    free(s);
    PBT_CHECK(!r.bad && r.left == 0);
    pb_rd_u32(&r); /* past the end: sticky failure, no read */
    PBT_CHECK(r.bad);
    pb_buf_free(&b);
}

/* pb_grow: room for need elements, doubling; a size that would overflow is refused and
 * leaves the array as it was. */
static void test_grow(void)
{
    uint64_t *a = NULL;
    size_t cap = 0;
    PBT_CHECK(PB_GROW(a, &cap, 0) == 0 && a == NULL && cap == 0);
    for (size_t n = 0; n < 1000; n++) {
        if (PB_GROW(a, &cap, n + 1) != 0)
            break;
        a[n] = n;
    }
    PBT_CHECK(a != NULL && cap >= 1000 && cap < 2048);
    size_t sum = 0;
    for (size_t n = 0; n < 1000; n++)
        sum += a[n];
    PBT_CHECK(sum == 999 * 1000 / 2); /* every element kept across the reallocations */
    size_t before = cap;
    PBT_CHECK(PB_GROW(a, &cap, 10) == 0 && cap == before); /* already room: no change */
    uint64_t *kept = a;
    PBT_CHECK(PB_GROW(a, &cap, SIZE_MAX / 4) == PB_ENOMEM); /* need * 8 overflows */
    PBT_CHECK(a == kept && cap == before && a[999] == 999);
    PBT_CHECK(pb_grow(&a, &cap, SIZE_MAX / 2 + 2, 2) == PB_ENOMEM && a == kept &&
              cap == before);
    free(a);
    char (*names)[25] = NULL; /* arrays of arrays, as the WAL listing keeps names */
    cap = 0;
    PBT_CHECK(PB_GROW(names, &cap, 3) == 0 && cap >= 3);
    memcpy(names[2], "000000010000000000000003", 25);
    PBT_CHECK(strcmp(names[2], "000000010000000000000003") == 0);
    free(names);
}

static void test_error(void)
{
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(pb_fail(&err, PB_ECORRUPT, "page %u of %s", 7u, "base/1/2") == PB_ECORRUPT);
    PBT_CHECK(strcmp(err.msg, "page 7 of base/1/2") == 0);
    pb_error_wrap(&err, "restoring %s", "set X");
    PBT_CHECK(strcmp(err.msg, "restoring set X: page 7 of base/1/2") == 0);
    PBT_CHECK(pb_fail(NULL, PB_EIO, "x") == PB_EIO);
    PBT_CHECK(pb_hash64("abc", 3) != pb_hash64("abd", 3));
    pb_hasher *h = pb_hasher_new();
    PBT_CHECK(h != NULL);
    pb_hasher_update(h, "ab", 2);
    pb_hasher_update(h, "c", 1);
    PBT_CHECK(pb_hasher_digest(h) == pb_hash64("abc", 3)); /* streaming == one-shot */
    pb_hasher_free(h);
    pb_hasher_free(NULL);
}

/* The test-only crash switch: only listed points, a positive hit number; nothing armed
 * means the points are no-ops (this process survives passing one). */
static void test_fault_spec(void)
{
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(pb_fault_init(NULL, &err) == 0);
    PBT_CHECK(pb_fault_init("", &err) == 0);
    PBT_CHECK(pb_fault_init("no.such-point", &err) == PB_EINVAL);
    PBT_CHECK(strstr(err.msg, "no.such-point") != NULL);
    PBT_CHECK(pb_fault_init("backup.after-start:0", &err) == PB_EINVAL);
    PBT_CHECK(pb_fault_init("backup.after-start:", &err) == PB_EINVAL);
    PBT_CHECK(pb_fault_init("backup.after-start:2x", &err) == PB_EINVAL);
    PBT_CHECK(pb_fault_init("backup.after-sta", &err) == PB_EINVAL); /* no prefix match */
    PBT_CHECK(pb_fault_init("expire.mid-wal:3", &err) == 0);
    pb_fault_point("expire.mid-wal"); /* hits 1 and 2 of 3: no crash */
    pb_fault_point("expire.mid-wal");
    pb_fault_point("backup.after-start"); /* not the armed point */
    PBT_CHECK(pb_fault_init(NULL, &err) == 0);
    pb_fault_point("expire.mid-wal");
    for (size_t i = 0; i < pb_fault_npoints; i++) {
        PBT_CHECK(pb_fault_init(pb_fault_points[i].name, &err) == 0);
        PBT_CHECK(pb_fault_points[i].where && pb_fault_points[i].where[0]);
    }
    PBT_CHECK(pb_fault_init(NULL, &err) == 0);
}

/* A state directory backup and restore may use: this user's, written by no one else. */
static void test_state_dir(void)
{
    char dir[128], sub[200], path[260], tmp[300], tmp2[300];
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(pbt_tmpdir(dir, sizeof(dir), "statedir") == 0);
    snprintf(sub, sizeof(sub), "%s/a/b", dir);
    PBT_CHECK(pb_state_dir_ready(sub, &err) == 0); /* created, 0700 */
    chmod(sub, 0777);
    PBT_CHECK(pb_state_dir_check(sub, &err) == PB_ESTATE);
    PBT_CHECK(strstr(err.msg, sub) && strstr(err.msg, "writable by group or others"));
    chmod(sub, 0720);
    PBT_CHECK(pb_state_dir_ready(sub, &err) == PB_ESTATE);
    chmod(sub, 0755);
    PBT_CHECK(pb_state_dir_check(sub, &err) == 0);
    snprintf(path, sizeof(path), "%s/link", dir);
    PBT_CHECK(symlink(sub, path) == 0);
    PBT_CHECK(pb_state_dir_check(path, &err) == PB_ESTATE); /* a link is not trusted */
    /* Temporaries: new names each time (mkstemp, O_EXCL), mode 0600. */
    snprintf(path, sizeof(path), "%s/report.json", sub);
    int fd = -1, fd2 = -1;
    mode_t old = umask(0);
    PBT_CHECK(pb_temp_beside(path, tmp, sizeof(tmp), &fd, &err) == 0);
    PBT_CHECK(pb_temp_beside(path, tmp2, sizeof(tmp2), &fd2, &err) == 0);
    umask(old);
    struct stat st;
    PBT_CHECK(fd >= 0 && fstat(fd, &st) == 0 && (st.st_mode & 0777) == 0600);
    PBT_CHECK(strncmp(tmp, path, strlen(path)) == 0 && strcmp(tmp, tmp2) != 0);
    close(fd);
    close(fd2);
    PBT_CHECK(pb_temp_beside(path, tmp, 10, &fd, &err) == PB_EINVAL && fd == -1);
    pbt_rmtree(dir);
}

/* The console and the file have their own levels; a log file that cannot be written
 * (a full disk: /dev/full) is warned about once and then left alone, the caller never
 * failing for it. */
static void test_log_levels_and_file(void)
{
    pb_log_level lv;
    PBT_CHECK(pb_log_level_parse("detail", 0, &lv) == 0 && lv == PB_LOG_DETAIL);
    PBT_CHECK(pb_log_level_parse("off", 0, &lv) == PB_EINVAL);
    PBT_CHECK(pb_log_level_parse("off", 1, &lv) == 0 && lv == PB_LOG_OFF);
    PBT_CHECK(pb_log_level_parse("loud", 1, &lv) == PB_EINVAL);
    PBT_CHECK(strcmp(pb_plural(1, "backup", "backups"), "backup") == 0);
    PBT_CHECK(strcmp(pb_plural(0, "backup", "backups"), "backups") == 0);

    FILE *cons = tmpfile();
    char path[] = "/tmp/pb-log-XXXXXX";
    int fd = mkstemp(path);
    int saved = dup(STDERR_FILENO);
    PBT_CHECK(cons && fd >= 0 && saved >= 0);
    if (!cons || fd < 0 || saved < 0)
        return;
    fflush(stderr);
    dup2(fileno(cons), STDERR_FILENO);
    pb_log_set_level(PB_LOG_WARN);
    pb_log_set_file_level(PB_LOG_DETAIL);
    pb_log_set_file(fd);
    pb_log(PB_LOG_DETAIL, "detail line");
    pb_log(PB_LOG_DEBUG, "debug line");
    pb_warn("warn line");
    pb_log_file_only("file only");
    int full = open("/dev/full", O_WRONLY);
    pb_log_set_file(full);
    pb_warn("lost 1");
    pb_warn("lost 2");
    pb_log_set_file(-1);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    pb_log_set_level(PB_LOG_INFO);
    static char text[4096], con[4096];
    ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    rewind(cons);
    size_t m = fread(con, 1, sizeof(con) - 1, cons);
    con[m] = '\0';
    PBT_CHECK(strstr(text, "] DETAIL: detail line\n") && strstr(text, "] WARNING: warn line\n") &&
              strstr(text, "] INFO: file only\n") && !strstr(text, "debug line"));
    PBT_CHECK(!strstr(con, "detail line") && strstr(con, "pageback: WARNING: warn line\n") &&
              !strstr(con, "file only"));
    if (full >= 0) { /* one warning for two lost lines, and both still on the console */
        const char *w = strstr(con, "cannot write the log file");
        PBT_CHECK(w && !strstr(w + 1, "cannot write the log file") && strstr(con, "lost 2"));
        close(full);
    }
    close(fd);
    unlink(path);
    fclose(cons);
}

int main(void)
{
    PBT_RUN(test_lsn);
    PBT_RUN(test_buf_reader);
    PBT_RUN(test_grow);
    PBT_RUN(test_error);
    PBT_RUN(test_fault_spec);
    PBT_RUN(test_state_dir);
    PBT_RUN(test_log_levels_and_file);
    return PBT_DONE();
}
