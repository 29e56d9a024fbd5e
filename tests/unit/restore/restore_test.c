/*
 * tests/unit/restore/restore_test.c — restore/ against a chain built in a temporary posix
 * repository: one-pass rebuild from a full + incremental, verify, delta restore,
 * corrupt page hashes, missing WAL (nothing written); the target's safety: links in
 * the target never written through, hostile manifest paths refused before writing,
 * a live postmaster.pid refused, every file and directory fsync'ed (fsync is
 * interposed below to record and fail calls).
 */
#include "engine/wal/wal.h"
#include "engine/chain/chain.h"
#include "engine/pack/pack.h"
#include "restore/restore.h"
#include "restore/verify/verify.h"
#include "manifest/v2_internal.h" /* mf_serialize_v1: the hostile object is version 1 */
#include "tests/unit/fixtures.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static char root[256], repodir[300];

/* fsync of this test binary (the restore library is linked in statically, so its
 * calls land here): records the paths synced under sync_watch and fails those
 * under sync_fail. Everything else goes to the kernel. */
static char sync_watch[300], sync_fail[300];
static char synced[64][512];
static int nsynced;

int fsync(int fd)
{
    char link[64], path[512];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof(path) - 1);
    path[n > 0 ? n : 0] = '\0';
    size_t wl = strlen(sync_watch), fl = strlen(sync_fail);
    if (wl && strncmp(path, sync_watch, wl) == 0 && nsynced < 64)
        snprintf(synced[nsynced++], sizeof(synced[0]), "%s", path);
    if (fl && strncmp(path, sync_fail, fl) == 0) {
        errno = EIO;
        return -1;
    }
    return (int)syscall(SYS_fsync, fd);
}

static bool was_synced(const char *path)
{
    for (int i = 0; i < nsynced; i++)
        if (strcmp(synced[i], path) == 0)
            return true;
    return false;
}

static mf_manifest *new_backup(const char *id, const char *parent, char type)
{
    mf_backup h = pbt_header(id, parent, type);
    h.start_lsn = PBT_SEG + 0x28;
    h.stop_lsn = PBT_SEG + 0x100;
    return pbt_manifest_new(&h);
}

static uint8_t expect[4][PB_PAGE_SIZE]; /* the newest state of base/1/100 */

/* The entry of PG_VERSION ("15\n", stored by the full); its runs are the caller's. */
static mf_file pg_version(void)
{
    mf_file ver = {0};
    ver.path = strdup("PG_VERSION");
    ver.kind = MF_FILE;
    ver.mode = 0600;
    ver.size = 3;
    ver.hash = pb_hash64("15\n", 3);
    snprintf(ver.stored_in, sizeof(ver.stored_in), "20260101-000000F");
    return ver;
}

/* Begin backup id (new_backup) with its pack writer in *pw and the directories base and
 * base/1. One check, and one per directory. */
static mf_manifest *begin_backup(repo *r, const char *id, const char *parent, char type,
                                 pack_writer **pw)
{
    pb_error err = PB_ERROR_INIT;
    char dir[128];
    snprintf(dir, sizeof(dir), "backup/%s", id);
    *pw = NULL;
    PBT_CHECK(pack_writer_open(pw, r, dir, 1 << 20, 1, &err) == 0);
    mf_manifest *m = new_backup(id, parent, type);
    pbt_add_entry(m, "base", MF_DIR, NULL);
    pbt_add_entry(m, "base/1", MF_DIR, NULL);
    return m;
}

/* F: base/1/100 = pages A0 A1 A2, PG_VERSION "15\n"; I: page 1 -> B1, page 3 added. */
static void build_chain(repo *r, bool corrupt_hash)
{
    pb_error err = PB_ERROR_INIT;
    uint8_t pages[4][PB_PAGE_SIZE];
    for (int i = 0; i < 3; i++)
        pbt_fill_page(pages[i], i);
    pack_writer *pw;
    mf_manifest *f = begin_backup(r, "20260101-000000F", "", 'F', &pw);
    mf_file rel = pbt_rel_file("base/1/100", 3);
    pbt_ship(pw, &rel, 0, 3, pages[0]);
    PBT_CHECK(mf_add_file(f, &rel, &err) == 0);
    mf_file ver = pg_version();
    pack_loc loc;
    PBT_CHECK(pack_write_frame(pw, "15\n", 3, &loc, &err) == 0);
    ver.runs = calloc(1, sizeof(mf_run));
    ver.runs[0] = (mf_run){0, 1, loc.pack_no, loc.clen, loc.offset, loc.rlen, 0};
    ver.nruns = 1;
    PBT_CHECK(mf_add_file(f, &ver, &err) == 0);
    pbt_finish_commit(r, pw, f);

    pbt_fill_page(pages[1], 101);
    pbt_fill_page(pages[3], 103);
    mf_manifest *inc = begin_backup(r, "20260101-000100I", "20260101-000000F", 'I', &pw);
    mf_file rel2 = pbt_rel_file("base/1/100", 4);
    pbt_ship(pw, &rel2, 1, 1, pages[1]);
    pbt_ship(pw, &rel2, 3, 1, pages[3]);
    if (corrupt_hash)
        rel2.page_hashes[1] ^= 1;
    PBT_CHECK(mf_add_file(inc, &rel2, &err) == 0);
    mf_file ver2 = pg_version();
    PBT_CHECK(mf_add_file(inc, &ver2, &err) == 0);
    pbt_finish_commit(r, pw, inc);
    memcpy(expect, pages, sizeof(expect));
}

/* A restore that should succeed: one check; its error, if any, on stderr. */
static void restore_ok(repo *r, const rs_opts *o, rs_stats *st, pb_error *err)
{
    int rc = rs_restore(r, o, st, err);
    PBT_CHECK(rc == 0);
    if (rc)
        fprintf(stderr, "restore: %s\n", err->msg);
}

static repo *open_repo(const char *dir)
{
    repo *r = pbt_repo_open(dir);
    pbt_repo_identity(r, 0); /* restore and verify check the chain against it */
    return r;
}

/* rs_opts.progress: counts the calls and keeps the last report. */
typedef struct progress_seen {
    unsigned calls;
    rs_progress last;
} progress_seen;

static void count_progress(void *ctx, const rs_progress *p)
{
    progress_seen *s = ctx;
    s->calls++;
    s->last = *p;
}

static void test_restore_chain(void)
{
    snprintf(repodir, sizeof(repodir), "%s/repo", root);
    repo *r = open_repo(repodir);
    build_chain(r, false);
    pbt_push_segment(r, root, 1, 1);
    char target[300], path[400];
    snprintf(target, sizeof(target), "%s/target", root);
    rs_opts o = RS_OPTS_INIT;
    o.target_dir = target;
    progress_seen seen = {0, {0, 0, 0, 0}};
    o.progress = count_progress;
    o.progress_ctx = &seen;
    rs_stats st;
    pb_error err = PB_ERROR_INIT;
    restore_ok(r, &o, &st, &err);
    /* one progress call per regular file, the last one at the totals */
    PBT_CHECK(seen.calls > 0 && seen.calls == seen.last.files_total);
    PBT_CHECK(seen.last.files_done == seen.last.files_total);
    PBT_CHECK(seen.last.bytes_done == seen.last.bytes_total && seen.last.bytes_total > 0);
    o.progress = NULL;
    snprintf(path, sizeof(path), "%s/base/1/100", target);
    PBT_CHECK(pbt_file_equals(path, expect, sizeof(expect)));
    snprintf(path, sizeof(path), "%s/PG_VERSION", target);
    PBT_CHECK(pbt_file_equals(path, "15\n", 3));
    PBT_CHECK(st.chain_length == 2);
    PBT_CHECK(st.pages_written == 4); /* each page written once */
    snprintf(path, sizeof(path), "%s/recovery.signal", target);
    PBT_CHECK(access(path, F_OK) == 0);
    PBT_CHECK(rs_verify(r, "latest", 2, &st, &err) == 0);

    /* Delta: one damaged page is the only one rewritten. */
    snprintf(path, sizeof(path), "%s/base/1/100", target);
    int fd = open(path, O_WRONLY);
    PBT_CHECK(fd >= 0 && pwrite(fd, "XXXX", 4, 2 * PB_PAGE_SIZE + 10) == 4);
    close(fd);
    o.delta = true;
    PBT_CHECK(rs_restore(r, &o, &st, &err) == 0);
    PBT_CHECK(pbt_file_equals(path, expect, sizeof(expect)));
    PBT_CHECK(st.pages_written == 1 && st.pages_skipped == 3);

    /* A non-empty target without --delta/--force is refused. */
    o.delta = false;
    PBT_CHECK(rs_restore(r, &o, &st, &err) == PB_EINVAL);
    PBT_CHECK(strstr(err.msg, "not empty") != NULL);
    repo_free(r);
}

static void test_corrupt_hash_and_missing_wal(void)
{
    char dir[300], target[300];
    snprintf(dir, sizeof(dir), "%s/repo2", root);
    repo *r = open_repo(dir);
    build_chain(r, true);
    pb_error err = PB_ERROR_INIT;
    rs_stats st;
    rs_opts o = RS_OPTS_INIT;
    snprintf(target, sizeof(target), "%s/target2", root);
    o.target_dir = target;
    /* No WAL archived yet: refused before anything is written. */
    PBT_CHECK(rs_restore(r, &o, &st, &err) == PB_ENOENT);
    PBT_CHECK(strstr(err.msg, "000000010000000000000001") != NULL);
    PBT_CHECK(pbt_count_entries(target) <= 0);
    pbt_push_segment(r, root, 1, 1);
    PBT_CHECK(rs_restore(r, &o, &st, &err) == PB_ECORRUPT);
    PBT_CHECK(strstr(err.msg, "base/1/100 block 3") != NULL);
    PBT_CHECK(rs_verify(r, NULL, 1, &st, &err) == PB_ECORRUPT);
    repo_free(r);
}

/* Defect 10: a manifest whose run points at an impossible frame location (a stored length
 * of 4 GiB, an offset that wraps) is refused as corruption naming the pack, before any
 * allocation or read from it (old code: a 4 GiB buffer, or a negative pread offset). */
static void test_hostile_frame_locations(void)
{
    const mf_run evil[] = {{0, 1, 1, 0xFFFFFFF0u, 16, 8192, 0},
                           {0, 1, 1, 64, UINT64_MAX - 20, 8192, 0},
                           {0, 1, 1, 64, (uint64_t)INT64_MAX - 8, 8192, 0},
                           {0, 1, 1, 3, 16, 8192, 0}};
    for (size_t i = 0; i < sizeof(evil) / sizeof(evil[0]); i++) {
        char dir[300], target[300];
        snprintf(dir, sizeof(dir), "%s/repo-evil%zu", root, i);
        repo *r = open_repo(dir);
        pb_error err = PB_ERROR_INIT;
        uint8_t page[PB_PAGE_SIZE];
        pbt_fill_page(page, 5);
        pack_writer *pw = NULL;
        PBT_CHECK(pack_writer_open(&pw, r, "backup/20260101-000000F", 1 << 20, 1, &err) == 0);
        mf_manifest *f = new_backup("20260101-000000F", "", 'F');
        pbt_add_entry(f, "base", MF_DIR, NULL);
        mf_file rel = pbt_rel_file("base/100", 1);
        pbt_ship(pw, &rel, 0, 1, page);
        rel.runs[0] = evil[i];
        PBT_CHECK(mf_add_file(f, &rel, &err) == 0);
        pbt_finish_commit(r, pw, f);
        pbt_push_segment(r, root, 1, 1);
        rs_stats st;
        int rc = rs_verify(r, NULL, 1, &st, &err);
        PBT_CHECK(rc == PB_ECORRUPT);
        PBT_CHECK(strstr(err.msg, "backup/20260101-000000F/pack/000001") != NULL);
        if (rc != PB_ECORRUPT)
            fprintf(stderr, "evil location #%zu: rc %d: %s\n", i, rc, err.msg);
        rs_opts o = RS_OPTS_INIT;
        snprintf(target, sizeof(target), "%s/target-evil%zu", root, i);
        o.target_dir = target;
        PBT_CHECK(rs_restore(r, &o, &st, &err) == PB_ECORRUPT);
        repo_free(r);
    }
}

static repo *chain_repo(const char *name)
{
    char dir[300];
    snprintf(dir, sizeof(dir), "%s/%s", root, name);
    repo *r = open_repo(dir);
    build_chain(r, false);
    pbt_push_segment(r, root, 1, 1);
    return r;
}

/* Delta restore into a target where base/1 is a link to a directory outside, holding
 * a canary and a stale base/1/100: the link is replaced by a directory, outside
 * nothing changes. */
static void test_delta_through_link(void)
{
    repo *r = chain_repo("repo-link");
    char target[300], outside[300], path[400];
    snprintf(target, sizeof(target), "%s/target-link", root);
    snprintf(outside, sizeof(outside), "%s/outside-link", root);
    PBT_CHECK(mkdir(target, 0700) == 0 && mkdir(outside, 0700) == 0);
    snprintf(path, sizeof(path), "%s/base", target);
    PBT_CHECK(mkdir(path, 0700) == 0);
    snprintf(path, sizeof(path), "%s/base/1", target);
    PBT_CHECK(symlink(outside, path) == 0);
    snprintf(path, sizeof(path), "%s/canary", outside);
    pbt_write_file(path, "canary\n");
    snprintf(path, sizeof(path), "%s/100", outside);
    pbt_write_file(path, "stale relation\n");
    char pgv[400];
    snprintf(pgv, sizeof(pgv), "%s/PG_VERSION", outside);
    pbt_write_file(pgv, "99\n");
    snprintf(path, sizeof(path), "%s/PG_VERSION", target);
    PBT_CHECK(symlink(pgv, path) == 0); /* a file's place taken by a link */
    rs_opts o = RS_OPTS_INIT;
    o.target_dir = target;
    o.delta = true;
    rs_stats st;
    pb_error err = PB_ERROR_INIT;
    restore_ok(r, &o, &st, &err);
    struct stat sb;
    snprintf(path, sizeof(path), "%s/canary", outside);
    PBT_CHECK(pbt_file_equals(path, "canary\n", 7));
    snprintf(path, sizeof(path), "%s/100", outside);
    PBT_CHECK(pbt_file_equals(path, "stale relation\n", 15));
    PBT_CHECK(pbt_file_equals(pgv, "99\n", 3));
    PBT_CHECK(pbt_count_entries(outside) == 3);
    snprintf(path, sizeof(path), "%s/PG_VERSION", target);
    PBT_CHECK(lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) && pbt_file_equals(path, "15\n", 3));
    snprintf(path, sizeof(path), "%s/base/1", target);
    PBT_CHECK(lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode));
    snprintf(path, sizeof(path), "%s/base/1/100", target);
    PBT_CHECK(pbt_file_equals(path, expect, sizeof(expect)));
    repo_free(r);
}

/* Store a full backup whose manifest holds base and one hostile entry: a link at
 * link_at, or a directory at the path bad. The manifest API refuses unsafe paths, a
 * hostile repository does not have to: that one is patched into the serialised bytes
 * (over a placeholder of the same length) and the checksum recomputed, in a version 1
 * object (one checksum; the restore's path checks are the same for both versions). */
static void commit_hostile(repo *r, const char *link_at, const char *link_to, const char *bad)
{
    pb_error err = PB_ERROR_INIT;
    mf_manifest *m = new_backup("20260101-000000F", "", 'F');
    pbt_add_entry(m, "base", MF_DIR, NULL);
    char placeholder[64] = "";
    if (link_at) {
        pbt_add_entry(m, link_at, MF_LINK, link_to);
    } else {
        memset(placeholder, 'z', strlen(bad));
        pbt_add_entry(m, placeholder, MF_DIR, NULL);
    }
    mf_sort(m);
    pb_buf raw = {0}, packed = {0};
    PBT_CHECK(mf_serialize_v1(m, &raw, &err) == 0);
    if (!link_at) {
        uint8_t *at = memmem(raw.data, raw.len, placeholder, strlen(placeholder));
        PBT_CHECK(at != NULL);
        if (at)
            memcpy(at, bad, strlen(bad));
        pb_put_u64(raw.data + raw.len - 8, pb_hash64(raw.data, raw.len - 8));
    }
    PBT_CHECK(pack_object_encode(raw.data, raw.len, 3, &packed, &err) == 0);
    PBT_CHECK(repo_put(r, "backup/20260101-000000F/manifest", packed.data, packed.len,
                       &err) == 0);
    pb_buf_free(&raw);
    pb_buf_free(&packed);
    mf_free(m);
    pbt_push_segment(r, root, 1, 1);
}

static void test_hostile_manifest(void)
{
    const struct {
        const char *link_at, *bad;
    } cases[] = {{"base/1", NULL}, {"x", NULL}, {NULL, "../escape"}, {NULL, "/abs"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char dir[300], target[300], outside[300];
        snprintf(dir, sizeof(dir), "%s/repo-hostile%zu", root, i);
        snprintf(target, sizeof(target), "%s/target-hostile%zu", root, i);
        snprintf(outside, sizeof(outside), "%s/outside-hostile%zu", root, i);
        repo *r = open_repo(dir);
        commit_hostile(r, cases[i].link_at, outside, cases[i].bad);
        rs_opts o = RS_OPTS_INIT;
        o.target_dir = target;
        rs_stats st;
        pb_error err = PB_ERROR_INIT;
        int rc = rs_restore(r, &o, &st, &err);
        PBT_CHECK(rc == PB_ECORRUPT);
        const char *named = cases[i].link_at ? cases[i].link_at : cases[i].bad;
        PBT_CHECK(strstr(err.msg, named) != NULL);
        if (rc != PB_ECORRUPT || !strstr(err.msg, named))
            fprintf(stderr, "case %zu: rc %d: %s\n", i, rc, err.msg);
        PBT_CHECK(access(target, F_OK) != 0); /* refused before anything was written */
        PBT_CHECK(access(outside, F_OK) != 0);
        repo_free(r);
    }
}

/* A backup that recorded pg_wal as a link (the one other place a link may be): the
 * restore makes the link and lays out pg_wal/archive_status through it. */
static void test_wal_link(void)
{
    char dir[300], target[300], walto[300], path[400];
    snprintf(dir, sizeof(dir), "%s/repo-wal", root);
    snprintf(target, sizeof(target), "%s/target-wal", root);
    snprintf(walto, sizeof(walto), "%s/wal-elsewhere", root);
    repo *r = open_repo(dir);
    pb_error err = PB_ERROR_INIT;
    mf_manifest *m = new_backup("20260101-000000F", "", 'F');
    pbt_add_entry(m, "base", MF_DIR, NULL);
    pbt_add_entry(m, "pg_wal", MF_LINK, walto);
    pbt_add_entry(m, "pg_wal/archive_status", MF_DIR, NULL);
    pbt_commit_manifest(r, m);
    pbt_push_segment(r, root, 1, 1);
    rs_opts o = RS_OPTS_INIT;
    o.target_dir = target;
    rs_stats st;
    restore_ok(r, &o, &st, &err);
    char to[400] = "";
    snprintf(path, sizeof(path), "%s/pg_wal", target);
    ssize_t n = readlink(path, to, sizeof(to) - 1);
    to[n > 0 ? n : 0] = '\0';
    PBT_CHECK(strcmp(to, walto) == 0);
    snprintf(path, sizeof(path), "%s/archive_status", walto);
    PBT_CHECK(access(path, F_OK) == 0);
    repo_free(r);
}

static pid_t dead_pid(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    waitpid(pid, NULL, 0);
    return pid;
}

/* A live postmaster.pid (this very process) refuses --delta and --force alike and
 * changes nothing; a stale one (a reaped child) is no obstacle. */
static void test_running_cluster(void)
{
    repo *r = chain_repo("repo-live");
    char target[300], path[400], pidtext[64], named[64];
    snprintf(target, sizeof(target), "%s/target-live", root);
    PBT_CHECK(mkdir(target, 0700) == 0);
    snprintf(path, sizeof(path), "%s/canary", target);
    pbt_write_file(path, "canary\n");
    snprintf(path, sizeof(path), "%s/postmaster.pid", target);
    snprintf(pidtext, sizeof(pidtext), "%ld\n/some/data/dir\n", (long)getpid());
    snprintf(named, sizeof(named), "PID %ld", (long)getpid());
    pbt_write_file(path, pidtext);
    for (int force = 0; force < 2; force++) {
        rs_opts o = RS_OPTS_INIT;
        o.target_dir = target;
        o.delta = !force;
        o.force = force;
        rs_stats st;
        pb_error err = PB_ERROR_INIT;
        PBT_CHECK(rs_restore(r, &o, &st, &err) == PB_ESTATE);
        PBT_CHECK(strstr(err.msg, "postmaster.pid") && strstr(err.msg, named) != NULL);
        PBT_CHECK(pbt_count_entries(target) == 2);
        snprintf(path, sizeof(path), "%s/canary", target);
        PBT_CHECK(pbt_file_equals(path, "canary\n", 7));
    }
    snprintf(path, sizeof(path), "%s/postmaster.pid", target);
    snprintf(pidtext, sizeof(pidtext), "%ld\n", (long)dead_pid());
    pbt_write_file(path, pidtext);
    rs_opts o = RS_OPTS_INIT;
    o.target_dir = target;
    o.delta = true;
    rs_stats st;
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(rs_restore(r, &o, &st, &err) == 0);
    snprintf(path, sizeof(path), "%s/base/1/100", target);
    PBT_CHECK(pbt_file_equals(path, expect, sizeof(expect)));
    snprintf(path, sizeof(path), "%s/postmaster.pid", target);
    PBT_CHECK(access(path, F_OK) != 0); /* pruned: not in the backup */
    repo_free(r);
}

/* Every written file and directory is fsync'ed; a failing fsync fails the restore
 * and names the path. */
static void test_durability(void)
{
    repo *r = chain_repo("repo-sync");
    char target[300], path[400];
    snprintf(target, sizeof(target), "%s/target-sync", root);
    rs_opts o = RS_OPTS_INIT;
    o.target_dir = target;
    rs_stats st;
    pb_error err = PB_ERROR_INIT;
    snprintf(sync_watch, sizeof(sync_watch), "%s", target);
    nsynced = 0;
    PBT_CHECK(rs_restore(r, &o, &st, &err) == 0);
    const char *must[] = {"", "/base", "/base/1", "/base/1/100", "/PG_VERSION",
                          "/postgresql.auto.conf", "/recovery.signal"};
    for (size_t i = 0; i < sizeof(must) / sizeof(must[0]); i++) {
        snprintf(path, sizeof(path), "%s%s", target, must[i]);
        PBT_CHECK(was_synced(path));
        if (!was_synced(path))
            fprintf(stderr, "not fsync'ed: %s\n", path);
    }
    const char *fail_at[] = {"/base/1/100", "/base/1", "/recovery.signal", ""};
    for (size_t i = 0; i < sizeof(fail_at) / sizeof(fail_at[0]); i++) {
        snprintf(sync_fail, sizeof(sync_fail), "%s%s", target, fail_at[i]);
        o.delta = true;
        int rc = rs_restore(r, &o, &st, &err);
        PBT_CHECK(rc == PB_EIO && strstr(err.msg, "fsync") && strstr(err.msg, sync_fail));
        if (rc != PB_EIO)
            fprintf(stderr, "fsync failing at %s: restore returned %d\n", sync_fail, rc);
    }
    sync_fail[0] = sync_watch[0] = '\0';
    repo_free(r);
}

int main(void)
{
    static const pbt_case cases[] = {
        PBT_CASE(test_restore_chain),           PBT_CASE(test_corrupt_hash_and_missing_wal),
        PBT_CASE(test_hostile_frame_locations), PBT_CASE(test_delta_through_link),
        PBT_CASE(test_hostile_manifest),        PBT_CASE(test_wal_link),
        PBT_CASE(test_running_cluster),         PBT_CASE(test_durability)};
    return pbt_main_in_tmpdir(root, sizeof(root), "restore-test", cases, PBT_COUNT(cases));
}
