/* tests/unit/engine/storage/storage_cleanup_test.c — what dead writers leave and who may
 * remove it: temp files judged by their flock (repo_cleanup, repo_cleanup_key), the writer
 * lock (a live holder, another host's lease, takeover), the locked cleanup under backup/
 * (chain_cleanup), backup ids unique within a second, and of racing create-if-absent
 * writers exactly one winning with no temp file left. The posix driver's objects,
 * keys and writers are in storage_test.c. */
#include "engine/chain/chain.h"
#include "engine/storage/storage.h"
#include "common/fault.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/engine/storage/storage_fixtures.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[256];

static void make_tmp(const char *name, long age)
{
    char p[600];
    snprintf(p, sizeof(p), "%s/C/%s", tmpdir, name);
    FILE *f = fopen(p, "w");
    fputs("partial", f);
    fclose(f);
    struct timespec ts[2];
    clock_gettime(CLOCK_REALTIME, &ts[0]);
    ts[0].tv_sec -= age;
    ts[1] = ts[0];
    utimensat(AT_FDCWD, p, ts, 0);
}

/* A live writer's temp file: open and flock'ed, as the driver's writers hold theirs. */
static int hold_tmp(const char *name)
{
    char p[600];
    snprintf(p, sizeof(p), "%s/C/%s", tmpdir, name);
    int fd = open(p, O_RDONLY);
    PBT_CHECK(fd >= 0 && flock(fd, LOCK_EX) == 0);
    return fd;
}

/* Leftovers: a temp file is a dead writer's exactly when its flock is free, whatever
 * the pid in its name or its age; a live writer's (flock held) is never touched. */
static void test_cleanup(void)
{
    repo *r = pbt_repo_open(tmpdir);
    pb_error e = PB_ERROR_INIT;
    PBT_CHECK(repo_put(r, "C/keep", "x", 1, &e) == 0);
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    waitpid(dead, NULL, 0);
    char name[128];
    snprintf(name, sizeof(name), "old-dead.tmp.%ld.0000abcd", (long)dead);
    make_tmp(name, 300);
    snprintf(name, sizeof(name), "new-dead.tmp.%ld.0000abcd", (long)dead);
    make_tmp(name, 0);
    snprintf(name, sizeof(name), "old-held.tmp.%ld.0000abcd", (long)dead);
    make_tmp(name, 300);
    int held = hold_tmp(name);
    repo_writer *w = NULL;
    PBT_CHECK(repo_writer_open(r, "C/live", &w, &e) == 0);
    PBT_CHECK(repo_writer_write(w, "abc", 3, &e) == 0);
    PBT_CHECK(pbt_count_files(tmpdir, ".tmp.") == 4);
    PBT_CHECK(repo_cleanup(r, NULL, &e) == 0);
    PBT_CHECK(pbt_count_files(tmpdir, ".tmp.") == 2);
    PBT_CHECK(pbt_count_files(tmpdir, "old-dead") == 0);
    PBT_CHECK(pbt_count_files(tmpdir, "new-dead") == 0); /* fresh, but provably dead */
    PBT_CHECK(pbt_count_files(tmpdir, "old-held") == 1); /* old, but its writer lives */
    PBT_CHECK(pbt_count_files(tmpdir, "live.tmp.") == 1);
    PBT_CHECK(repo_writer_commit(w, &e) == 0);
    PBT_CHECK(repo_stat(r, "C/live", NULL, &e) == 0);
    close(held); /* the writer "dies" */
    PBT_CHECK(repo_cleanup(r, NULL, &e) == 0);
    PBT_CHECK(pbt_count_files(tmpdir, ".tmp.") == 0);
    PBT_CHECK(repo_stat(r, "C/keep", NULL, &e) == 0);
    repo_free(r);
}

/* A child that creates key create-if-absent and is killed at fault point `point`. */
static void put_new_killed(const char *key, const char *point)
{
    pid_t pid = fork();
    if (pid == 0) {
        pb_error ce = PB_ERROR_INIT;
        repo_opts o = REPO_OPTS_INIT;
        o.location = tmpdir;
        repo *cr = NULL;
        if (pb_fault_init(point, &ce) != 0 || repo_open(&cr, &o, &ce) != 0)
            _exit(3);
        repo_put_new(cr, key, "segment", 7, &ce);
        _exit(4); /* not reached: the point kills */
    }
    int st = 0;
    waitpid(pid, &st, 0);
    PBT_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

/* Leftovers for archive-push (no writer lock): repo_cleanup_key removes what killed
 * pushes of that key left (before or after the link), keeps a live writer's temp file of
 * the same key and every other key's. */
static void test_cleanup_key(void)
{
    repo *r = pbt_repo_open(tmpdir);
    pb_error e = PB_ERROR_INIT;
    const char *seg = "W/00000001/000000010000000000000001.zst";
    const char *other = "W/00000001/000000010000000000000002.zst";
    put_new_killed(seg, "put-new.after-temp-write");
    put_new_killed(other, "put-new.after-link");
    PBT_CHECK(pbt_count_files(tmpdir, "0001.zst.tmp.") == 1);
    PBT_CHECK(pbt_count_files(tmpdir, "0002.zst.tmp.") == 1);
    PBT_CHECK(repo_stat(r, seg, NULL, &e) == PB_ENOENT);
    PBT_CHECK(repo_stat(r, other, NULL, &e) == 0); /* linked before the kill */
    repo_writer *w = NULL; /* a concurrent, live writer of seg */
    PBT_CHECK(repo_writer_open(r, seg, &w, &e) == 0);
    PBT_CHECK(pbt_count_files(tmpdir, "0001.zst.tmp.") == 2);
    PBT_CHECK(repo_cleanup_key(r, seg, &e) == 0);
    PBT_CHECK(pbt_count_files(tmpdir, "0001.zst.tmp.") == 1); /* the live one */
    PBT_CHECK(pbt_count_files(tmpdir, "0002.zst.tmp.") == 1); /* another key: not ours */
    repo_writer_abort(w);
    PBT_CHECK(repo_put_new(r, seg, "segment", 7, &e) == 0);
    PBT_CHECK(repo_cleanup_key(r, other, &e) == 0);
    PBT_CHECK(pbt_count_files(tmpdir, ".zst.tmp.") == 0);
    void *got = NULL;
    size_t len = 0;
    PBT_CHECK(repo_get(r, other, &got, &len, &e) == 0 && len == 7 &&
              memcmp(got, "segment", 7) == 0);
    free(got);
    PBT_CHECK(repo_cleanup_key(r, "W/none/x.zst", &e) == 0); /* no directory: fine */
    repo_free(r);
}

/* Defect 3: the writer lock. A live holder (another process) makes the second acquirer
 * fail at once naming it; once the holder is killed -9, the lock is taken over. */
static void test_lock(void)
{
    int ready[2];
    PBT_CHECK(pipe(ready) == 0);
    pid_t kid = fork();
    if (kid == 0) {
        close(ready[0]);
        repo *r = pbt_repo_open(tmpdir);
        repo_lock *l = NULL;
        pb_error e = PB_ERROR_INIT;
        int rc = r ? repo_lock_acquire(r, "backup", &l, &e) : -1;
        if (write(ready[1], rc == 0 ? "1" : "0", 1) != 1)
            _exit(2);
        pause(); /* killed by the parent */
        _exit(0);
    }
    close(ready[1]);
    char c = 0;
    PBT_CHECK(read(ready[0], &c, 1) == 1 && c == '1');
    close(ready[0]);
    repo *r = pbt_repo_open(tmpdir);
    pb_error e = PB_ERROR_INIT;
    repo_lock *l = NULL;
    double t0 = pb_now();
    PBT_CHECK(repo_lock_acquire(r, "expire", &l, &e) == PB_ESTATE && !l);
    PBT_CHECK(pb_now() - t0 < 1.0); /* at once, no waiting */
    char pidtxt[64];
    snprintf(pidtxt, sizeof(pidtxt), "backup by user");
    PBT_CHECK(strstr(e.msg, pidtxt) != NULL);
    snprintf(pidtxt, sizeof(pidtxt), "pid %ld", (long)kid);
    PBT_CHECK(strstr(e.msg, pidtxt) != NULL);
    if (!strstr(e.msg, pidtxt))
        fprintf(stderr, "  %s\n", e.msg);
    /* What info shows: the live holder as it is, then the same lock once its holder died
     * (gone: the next writer takes it over), and no lock at all after a release. */
    repo_lock_view v;
    PBT_CHECK(repo_lock_peek(r, &v, &e) == 0 && !v.gone && v.pid == (long)kid &&
              !strcmp(v.owner, "backup") && v.started > 0 && v.renewed >= v.started);
    kill(kid, SIGKILL);
    waitpid(kid, NULL, 0);
    PBT_CHECK(repo_lock_peek(r, &v, &e) == 0 && v.gone && v.pid == (long)kid);
    PBT_CHECK(repo_lock_acquire(r, "expire", &l, &e) == 0 && l);
    PBT_CHECK(repo_lock_renew(l, &e) == 0);
    repo_lock_release(l);
    PBT_CHECK(repo_stat(r, REPO_LOCK_KEY, NULL, &e) == PB_ENOENT);
    PBT_CHECK(repo_lock_peek(r, &v, &e) == PB_ENOENT);
    repo_free(r);
}

/* A delete is durable (its directory fsynced) whatever the key, the lock's included;
 * only the lock's release and takeover, through the driver's lock_remove, skip the
 * fsync (the lock needs none: posix_excl.c). Old code: the posix delete skipped the
 * fsync for the lock's key by name, so a plain delete of it was not durable. */
static void test_lock_remove_unsynced(void)
{
    repo *r = pbt_repo_open(tmpdir);
    pb_error e = PB_ERROR_INIT;
    PBT_CHECK(repo_put(r, "wal/obj", "x", 1, &e) == 0);
    uint64_t f0 = pbt_repo_flushes(r);
    PBT_CHECK(repo_delete(r, "wal/obj", &e) == 0);
    PBT_CHECK(pbt_repo_flushes(r) == f0 + 1);
    repo_lock *l = NULL;
    PBT_CHECK(repo_lock_acquire(r, "backup", &l, &e) == 0 && l);
    f0 = pbt_repo_flushes(r);
    repo_lock_release(l);
    PBT_CHECK(pbt_repo_flushes(r) == f0); /* released: unlinked, nothing flushed */
    PBT_CHECK(repo_stat(r, REPO_LOCK_KEY, NULL, &e) == PB_ENOENT);
    PBT_CHECK(repo_put(r, REPO_LOCK_KEY, "not a lock", 10, &e) == 0);
    f0 = pbt_repo_flushes(r);
    PBT_CHECK(repo_delete(r, REPO_LOCK_KEY, &e) == 0);
    PBT_CHECK(pbt_repo_flushes(r) == f0 + 1); /* a plain delete of that key is durable too */
    repo_free(r);
}

/* Writes a lock as a writer on another host would have left it, renewed age s ago. */
static void plant_lock(const char *host, long age, bool damage)
{
    char body[512], text[600], path[700];
    int n = snprintf(body, sizeof(body),
                     "pageback-writer-lock 1\ntoken=0123456789abcdef0123456789abcdef\n"
                     "owner=backup\nuser=someone\nhost=%s\nboot=b\npid=1\npid_start=1\n"
                     "started=%ld\nrenewed=%ld\nlease=600\n",
                     host, (long)time(NULL) - age, (long)time(NULL) - age);
    n = snprintf(text, sizeof(text), "%scheck=%016llx\n", body,
                 (unsigned long long)pb_hash64(body, (size_t)n));
    if (damage)
        text[30] ^= 1;
    snprintf(path, sizeof(path), "%s/lock", tmpdir);
    mkdir(path, 0750);
    snprintf(path, sizeof(path), "%s/" REPO_LOCK_KEY, tmpdir);
    FILE *f = fopen(path, "w");
    if (f) {
        fwrite(text, 1, (size_t)n, f);
        fclose(f);
    }
}

/* Another host's lock is honoured while its lease runs, taken over once it ran out; a
 * damaged lock file that no process holds is the debris of a crash. */
static void test_lock_lease(void)
{
    repo *r = pbt_repo_open(tmpdir);
    pb_error e = PB_ERROR_INIT;
    repo_lock *l = NULL;
    plant_lock("otherhost", 10, false);
    PBT_CHECK(repo_lock_acquire(r, "backup", &l, &e) == PB_ESTATE && !l);
    PBT_CHECK(strstr(e.msg, "pid 1 on host otherhost") != NULL);
    plant_lock("otherhost", 700, false);
    PBT_CHECK(repo_lock_acquire(r, "backup", &l, &e) == 0 && l);
    repo_lock_release(l);
    l = NULL;
    plant_lock("otherhost", 10, true);
    PBT_CHECK(repo_lock_acquire(r, "backup", &l, &e) == 0 && l);
    repo_lock_release(l);
    repo_free(r);
}

/* Defect 9: with the lock held, a temp file under backup/ is a dead writer's whatever its
 * flock (only the lock holder writes there): removed, with its directories. Without the
 * lock it is kept while its flock is held; outside backup/ the flock decides either way. */
static void test_cleanup_locked(void)
{
    repo *r = pbt_repo_open(tmpdir);
    pb_error e = PB_ERROR_INIT;
    char name[700];
    snprintf(name, sizeof(name), "%s/backup", tmpdir);
    mkdir(name, 0750);
    snprintf(name, sizeof(name), "%s/backup/x1", tmpdir);
    PBT_CHECK(mkdir(name, 0750) == 0);
    snprintf(name, sizeof(name), "%s/backup/x1/pack.tmp.%ld.0000abcd", tmpdir, (long)getpid());
    FILE *f = fopen(name, "w");
    PBT_CHECK(f != NULL);
    int pack_fd = f ? dup(fileno(f)) : -1;
    PBT_CHECK(pack_fd >= 0 && flock(pack_fd, LOCK_EX) == 0);
    if (f)
        fclose(f);
    snprintf(name, sizeof(name), "wal-fresh.tmp.%ld.0000abcd", (long)getpid());
    make_tmp(name, 0);
    int wal_fd = hold_tmp(name);
    snprintf(name, sizeof(name), "wal-dead.tmp.%ld.0000abcd", (long)getpid());
    make_tmp(name, 0);
    PBT_CHECK(repo_cleanup(r, NULL, &e) == 0);
    PBT_CHECK(pbt_count_files(tmpdir, "pack.tmp.") == 1);
    PBT_CHECK(pbt_count_files(tmpdir, "wal-dead") == 0);
    repo_lock *l = NULL;
    PBT_CHECK(repo_lock_acquire(r, "backup", &l, &e) == 0);
    PBT_CHECK(repo_cleanup(r, l, &e) == 0);
    PBT_CHECK(pbt_count_files(tmpdir, "pack.tmp.") == 0);
    PBT_CHECK(pbt_count_files(tmpdir, "wal-fresh") == 1); /* not under backup/: its flock rules */
    close(pack_fd);
    close(wal_fd);
    struct stat st;
    snprintf(name, sizeof(name), "%s/backup/x1", tmpdir);
    PBT_CHECK(stat(name, &st) != 0); /* its empty directory went too */
    /* Empty directories a writer killed between its mkdir and its first file left (no
     * listing shows them): removed under the lock, backup/ itself stays. */
    snprintf(name, sizeof(name), "%s/backup/x2", tmpdir);
    PBT_CHECK(mkdir(name, 0750) == 0);
    snprintf(name, sizeof(name), "%s/backup/x2/pack", tmpdir);
    PBT_CHECK(mkdir(name, 0750) == 0);
    PBT_CHECK(repo_cleanup(r, NULL, &e) == 0);
    PBT_CHECK(stat(name, &st) == 0); /* without the lock: left alone */
    PBT_CHECK(repo_cleanup(r, l, &e) == 0);
    snprintf(name, sizeof(name), "%s/backup/x2", tmpdir);
    PBT_CHECK(stat(name, &st) != 0);
    snprintf(name, sizeof(name), "%s/backup", tmpdir);
    PBT_CHECK(stat(name, &st) == 0 && S_ISDIR(st.st_mode));
    repo_lock_release(l);
    repo_free(r);
}

static void commit_backup(repo *r, const char *id, const char *parent, char type)
{
    mf_backup h = pbt_header(id, parent, type);
    h.start_lsn = 0x1000000;
    h.stop_lsn = 0x1000100;
    pbt_commit_header(r, &h);
}

/* Leftovers: the one locked cleanup of backup, rebase and expire. A backup without
 * a manifest goes (with its temp files and emptied directories), unless a committed
 * backup names it as its parent; empty directories under backup/ go; committed backups
 * stay. */
static void test_chain_cleanup(void)
{
    char dir[700];
    snprintf(dir, sizeof(dir), "%s/cc", tmpdir);
    PBT_CHECK(mkdir(dir, 0750) == 0);
    repo_opts o = REPO_OPTS_INIT;
    o.location = dir;
    repo *r = NULL;
    pb_error e = PB_ERROR_INIT;
    PBT_CHECK(repo_open(&r, &o, &e) == 0);
    if (!r)
        return;
    commit_backup(r, "20260101-000000F", "", 'F');
    commit_backup(r, "20260101-000300I", "20260101-000200F", 'I'); /* its parent lost */
    PBT_CHECK(repo_put(r, "backup/20260101-000100F/pack/000001", "p", 1, &e) == 0);
    PBT_CHECK(repo_put(r, "backup/20260101-000200F/pack/000001", "p", 1, &e) == 0);
    char p[800];
    snprintf(p, sizeof(p), "%s/backup/20260101-000100F/pack/000002.tmp.1.0000abcd", dir);
    FILE *f = fopen(p, "w");
    PBT_CHECK(f != NULL);
    if (f)
        fclose(f);
    snprintf(p, sizeof(p), "%s/backup/20260101-000400I", dir);
    PBT_CHECK(mkdir(p, 0750) == 0);
    snprintf(p, sizeof(p), "%s/backup/20260101-000400I/pack", dir);
    PBT_CHECK(mkdir(p, 0750) == 0);
    repo_lock *l = NULL;
    PBT_CHECK(repo_lock_acquire(r, "expire", &l, &e) == 0);
    /* The committed ids come from the cleanup's own listing, as chain_list gives them. */
    chain_ids ids = {0};
    PBT_CHECK(chain_cleanup_listed(r, l, &ids, &e) == 0);
    PBT_CHECK(ids.count == 2 && !strcmp(ids.ids[0], "20260101-000000F") &&
              !strcmp(ids.ids[1], "20260101-000300I"));
    chain_ids_free(&ids);
    struct stat st;
    snprintf(p, sizeof(p), "%s/backup/20260101-000100F", dir);
    PBT_CHECK(stat(p, &st) != 0); /* interrupted writer: gone, temp file and dirs too */
    snprintf(p, sizeof(p), "%s/backup/20260101-000400I", dir);
    PBT_CHECK(stat(p, &st) != 0); /* empty directories: gone */
    PBT_CHECK(repo_stat(r, "backup/20260101-000200F/pack/000001", NULL, &e) == 0); /* a parent */
    PBT_CHECK(repo_stat(r, "backup/20260101-000000F/manifest", NULL, &e) == 0);
    PBT_CHECK(repo_stat(r, "backup/20260101-000300I/manifest", NULL, &e) == 0);
    repo_lock_release(l);
    repo_free(r);
}

/* Defect 3: ids unique within one second, type letter still at index 15, a new id
 * sorting after the latest. */
static void test_ids_same_second(void)
{
    enum { N = 200 };
    static char ids[N][MF_ID_LEN];
    for (int i = 0; i < N; i++)
        chain_new_id(ids[i], i % 2 ? 'I' : 'F', NULL);
    int dup = 0, same_second = 0;
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++) {
            dup += strcmp(ids[i], ids[j]) == 0;
            same_second += strncmp(ids[i], ids[j], 15) == 0;
        }
    PBT_CHECK(dup == 0);
    PBT_CHECK(same_second > 0); /* the case that matters did happen */
    PBT_CHECK(ids[0][15] == 'F' && ids[1][15] == 'I');
    char later[MF_ID_LEN];
    chain_new_id(later, 'I', ids[N - 1]);
    PBT_CHECK(strcmp(later, ids[N - 1]) > 0);
}

/* Defect 11 (storage level): of racing create-if-absent writers exactly one wins and
 * the object holds the winner's bytes. */
static void test_put_new_race(void)
{
    enum { N = 8 };
    pid_t kids[N];
    int go[2];
    PBT_CHECK(pipe(go) == 0);
    for (int i = 0; i < N; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            char c;
            close(go[1]);
            if (read(go[0], &c, 1) != 0)
                _exit(3);
            repo *r = pbt_repo_open(tmpdir);
            pb_error e = PB_ERROR_INIT;
            char body[32];
            int n = snprintf(body, sizeof(body), "writer %d", i);
            int rc = r ? repo_put_new(r, "race/obj", body, (size_t)n, &e) : -100;
            repo_free(r);
            _exit(rc == 0 ? 0 : rc == PB_EEXIST ? 1 : 2);
        }
    }
    close(go[0]);
    close(go[1]); /* all start at once */
    int winners = 0, losers = 0, winner = -1;
    for (int i = 0; i < N; i++) {
        int st = 0;
        waitpid(kids[i], &st, 0);
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 9;
        if (code == 0) {
            winners++;
            winner = i;
        } else if (code == 1) {
            losers++;
        }
    }
    PBT_CHECK(winners == 1 && losers == N - 1);
    repo *r = pbt_repo_open(tmpdir);
    pb_error e = PB_ERROR_INIT;
    void *data = NULL;
    size_t len = 0;
    char want[32];
    snprintf(want, sizeof(want), "writer %d", winner);
    PBT_CHECK(r && repo_get(r, "race/obj", &data, &len, &e) == 0);
    PBT_CHECK(data && len == strlen(want) && memcmp(data, want, len) == 0);
    free(data);
    char dir[600];
    snprintf(dir, sizeof(dir), "%s/race", tmpdir);
    PBT_CHECK(pbt_count_files(dir, ".tmp.") == 0);
    repo_free(r);
}

int main(void)
{
    static const pbt_case cases[] = {PBT_CASE(test_cleanup),
                                     PBT_CASE(test_cleanup_key),
                                     PBT_CASE(test_lock),
                                     PBT_CASE(test_lock_lease),
                                     PBT_CASE(test_lock_remove_unsynced),
                                     PBT_CASE(test_cleanup_locked),
                                     PBT_CASE(test_chain_cleanup),
                                     PBT_CASE(test_ids_same_second),
                                     PBT_CASE(test_put_new_race)};
    return pbt_main_in_tmpdir(tmpdir, sizeof(tmpdir), "storage-cleanup-test", cases,
                              PBT_COUNT(cases));
}
