/* tests/unit/engine/pg/walk_test.c — exclusion and relation rules, and a walk over a synthetic
 * PGDATA with a tablespace, an unlogged relation and the usual excluded files. */
#include "engine/pg/pg.h"
#include "tests/unit/pbtest.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------- rule tables */

typedef struct excl_case {
    const char *rel;
    bool is_dir;
    bool excluded;
} excl_case;

static const excl_case excl_cases[] = {
    /* excludeFiles, in any directory */
    {"postmaster.pid", false, true},
    {"postmaster.opts", false, true},
    {"backup_label", false, true},
    {"backup_label.old", false, false},
    {"tablespace_map", false, true},
    {"tablespace_map.old", false, false},
    {"backup_manifest", false, true},
    {"postgresql.auto.conf.tmp", false, true},
    {"postgresql.auto.conf", false, false},
    {"postgresql.conf", false, false},
    {"pg_hba.conf", false, false},
    {"current_logfiles.tmp", false, true},
    {"current_logfiles", false, false},
    {"global/pg_internal.init", false, true},
    {"base/5/pg_internal.init", false, true},
    {"base/5/pg_internal.init.12345", false, true},
    {"pg_tblspc/16400/PG_15_202209061/5/pg_internal.init", false, true},
    {"base/5/postmaster.pid", false, true},
    /* excludeDirContents: the directory stays, its contents go */
    {"pg_stat_tmp", true, false},
    {"pg_stat_tmp/global.stat", false, true},
    {"pg_replslot", true, false},
    {"pg_replslot/slot1", true, true},
    {"pg_replslot/slot1/state", false, true},
    {"pg_dynshmem", true, false},
    {"pg_dynshmem/mmap.12345", false, true},
    {"pg_notify", true, false},
    {"pg_notify/0000", false, true},
    {"pg_serial", true, false},
    {"pg_serial/0000", false, true},
    {"pg_snapshots", true, false},
    {"pg_snapshots/00000003-0000001B-1", false, true},
    {"pg_subtrans", true, false},
    {"pg_subtrans/0000", false, true},
    {"pg_stat", true, false},
    {"pg_stat/pgstat.stat", false, false},
    {"pg_logical/snapshots/0-16B3D30.snap", false, false},
    {"pg_xact/0000", false, false},
    {"pg_multixact/offsets/0000", false, false},
    /* pg_wal: keep the directory and archive_status, nothing else */
    {"pg_wal", true, false},
    {"pg_wal/000000010000000000000001", false, true},
    {"pg_wal/00000002.history", false, true},
    {"pg_wal/archive_status", true, false},
    {"pg_wal/archive_status", false, true},
    {"pg_wal/archive_status/000000010000000000000001.ready", false, true},
    {"pg_wal/summaries", true, true},
    /* pgsql_tmp anywhere */
    {"base/pgsql_tmp", true, true},
    {"base/pgsql_tmp/pgsql_tmp1234.0", false, true},
    {"base/5/pgsql_tmp_x", false, true},
    {"pg_tblspc/16400/PG_15_202209061/pgsql_tmp", true, true},
    {"pg_tblspc/16400/PG_15_202209061/pgsql_tmp/pgsql_tmp77.3", false, true},
    {"pgsql_tmp", true, true},
    {"base/5/my_pgsql_tmp", false, false},
    /* temporary relations, only in database directories */
    {"base/5/t3_16384", false, true},
    {"base/5/t3_16384_fsm", false, true},
    {"base/5/t3_16384_vm", false, true},
    {"base/5/t3_16384_init", false, true},
    {"base/5/t3_16384.2", false, true},
    {"base/5/t3_16384_fsm.2", false, true},
    {"pg_tblspc/16400/PG_15_202209061/5/t12_99", false, true},
    {"base/5/t3_", false, false},
    {"base/5/t_16384", false, false},
    {"base/5/t3_16384x", false, false},
    {"base/5/t3_16384.", false, false},
    {"global/t3_16384", false, false},
    {"t3_16384", false, false},
    {"base/t3_16384", false, false},
    /* ordinary content */
    {"base/5/16384", false, false},
    {"base/5/16384_init", false, false},
    {"base/5", true, false},
    {"global/pg_control", false, false},
    {"global/1262", false, false},
    {"PG_VERSION", false, false},
    {"pg_tblspc/16400", true, false},
    {"pg_tblspc/16400/PG_15_202209061/5/16385", false, false},
    {"", true, false},
};

typedef struct rel_case {
    const char *rel;
    bool is_rel;
    uint32_t segno;
} rel_case;

static const rel_case rel_cases[] = {
    {"global/1260", true, 0},
    {"global/1260_fsm", true, 0},
    {"global/1260_vm", true, 0},
    {"global/1260_init", true, 0},
    {"global/1260.1", true, 1},
    {"global/pg_control", false, 0},
    {"global/pg_filenode.map", false, 0},
    {"global/pg_internal.init", false, 0},
    {"global/1260/x", false, 0},
    {"base/5/16384", true, 0},
    {"base/5/16384.1", true, 1},
    {"base/5/16384.123", true, 123},
    {"base/5/16384_fsm", true, 0},
    {"base/5/16384_fsm.2", true, 2},
    {"base/5/16384_vm", true, 0},
    {"base/5/16384_init", true, 0},
    {"base/5/16384_init.3", true, 3},
    {"base/5/4294967295.4294967295", true, 4294967295u},
    {"base/5/16384.4294967296", false, 0},
    {"base/5/16384.0", false, 0},
    {"base/5/16384.", false, 0},
    {"base/5/16384.1a", false, 0},
    {"base/5/16384_foo", false, 0},
    {"base/5/16384_fsm_vm", false, 0},
    {"base/5/12345678901", false, 0},
    {"base/5/PG_VERSION", false, 0},
    {"base/5/pg_filenode.map", false, 0},
    {"base/5/pg_internal.init", false, 0},
    {"base/5/t3_16384", false, 0},
    {"base/5", false, 0},
    {"base/16384", false, 0},
    {"base/x/16384", false, 0},
    {"base/5/6/7", false, 0},
    {"base/5/", false, 0},
    {"pg_tblspc/16400/PG_15_202209061/5/16385", true, 0},
    {"pg_tblspc/16400/PG_15_202209061/5/16385.7", true, 7},
    {"pg_tblspc/16400/PG_15_202209061/5/16385_vm", true, 0},
    {"pg_tblspc/16400/PG_15_202209061/16385", false, 0},
    {"pg_tblspc/16400/PG_15_202209061/5/PG_VERSION", false, 0},
    {"pg_tblspc/16400/XX_15_202209061/5/16385", false, 0},
    {"pg_tblspc/abc/PG_15_202209061/5/16385", false, 0},
    {"pg_tblspc/16400", false, 0},
    {"pg_xact/0000", false, 0},
    {"pg_multixact/offsets/0000", false, 0},
    {"pg_logical/replorigin_checkpoint", false, 0},
    {"postgresql.conf", false, 0},
    {"PG_VERSION", false, 0},
    {"16384", false, 0},
    {"", false, 0},
};

static void test_is_excluded(void)
{
    for (size_t i = 0; i < sizeof(excl_cases) / sizeof(excl_cases[0]); i++) {
        const excl_case *c = &excl_cases[i];
        bool got = walk_is_excluded(c->rel, c->is_dir);
        if (got != c->excluded)
            fprintf(stderr, "  walk_is_excluded(\"%s\", %d) = %d, want %d\n", c->rel, c->is_dir,
                    got, c->excluded);
        PBT_CHECK(got == c->excluded);
    }
}

static void test_is_relation(void)
{
    for (size_t i = 0; i < sizeof(rel_cases) / sizeof(rel_cases[0]); i++) {
        const rel_case *c = &rel_cases[i];
        uint32_t seg = 999;
        bool got = walk_is_relation(c->rel, &seg);
        if (got != c->is_rel || (got && seg != c->segno))
            fprintf(stderr, "  walk_is_relation(\"%s\") = %d seg %u, want %d seg %u\n", c->rel,
                    got, seg, c->is_rel, c->segno);
        PBT_CHECK(got == c->is_rel);
        if (c->is_rel)
            PBT_CHECK(seg == c->segno);
    }
    PBT_CHECK(walk_is_relation("base/1/1.2", NULL)); /* segno pointer is optional */
}

/* ------------------------------------------------------------ synthetic tree */

static char root[64];

static int mk_dir(const char *base, const char *rel)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", base, rel);
    return mkdir(p, 0700);
}

static int mk_file(const char *base, const char *rel, size_t size, mode_t mode)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", base, rel);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd < 0)
        return -1;
    int rc = ftruncate(fd, (off_t)size);
    close(fd);
    return rc;
}

typedef struct want {
    const char *path;
    walk_kind kind;
    uint64_t size;
    uint32_t segno;
} want;

static const want want_list[] = {
    {"PG_VERSION", WALK_FILE, 3, 0},
    {"base", WALK_DIR, 0, 0},
    {"base/1", WALK_DIR, 0, 0},
    {"base/1/1259", WALK_REL, 16384, 0},
    {"base/1/1259.1", WALK_REL, 8192, 1},
    {"base/1/1259_fsm", WALK_REL, 24576, 0},
    {"base/1/16384_init", WALK_REL, 8192, 0},
    {"base/1/PG_VERSION", WALK_FILE, 3, 0},
    {"base/1/pg_filenode.map", WALK_FILE, 512, 0},
    {"global", WALK_DIR, 0, 0},
    {"global/1260", WALK_REL, 8192, 0},
    {"global/pg_filenode.map", WALK_FILE, 512, 0},
    {"pg_replslot", WALK_DIR, 0, 0},
    {"pg_stat_tmp", WALK_DIR, 0, 0},
    {"pg_tblspc", WALK_DIR, 0, 0},
    {"pg_tblspc/16400", WALK_LINK, 0, 0},
    {"pg_tblspc/16400/PG_15_202209061", WALK_DIR, 0, 0},
    {"pg_tblspc/16400/PG_15_202209061/1", WALK_DIR, 0, 0},
    {"pg_tblspc/16400/PG_15_202209061/1/16500", WALK_REL, 8192, 0},
    {"pg_tblspc/16400/PG_15_202209061/1/16500.1", WALK_REL, 16384, 1},
    {"pg_tblspc/16400/PG_15_202209061/1/16501_init", WALK_REL, 0, 0},
    {"pg_wal", WALK_DIR, 0, 0},
    {"pg_wal/archive_status", WALK_DIR, 0, 0},
    {"pg_xact", WALK_DIR, 0, 0},
    {"pg_xact/0000", WALK_FILE, 8192, 0},
    {"postgresql.conf", WALK_FILE, 100, 0},
    {"global/pg_control", WALK_FILE, 8192, 0},
};

static int build_tree(const char *pg, const char *ts)
{
    static const char *const dirs[] = {
        "base", "base/1", "base/pgsql_tmp", "global", "pg_wal", "pg_wal/archive_status",
        "pg_stat_tmp", "pg_replslot", "pg_replslot/slot", "pg_tblspc", "pg_xact", NULL,
    };
    static const struct { const char *rel; size_t size; } files[] = {
        {"PG_VERSION", 3}, {"postgresql.conf", 100}, {"postmaster.pid", 80},
        {"postmaster.opts", 30}, {"backup_label", 200}, {"postgresql.auto.conf.tmp", 9},
        {"base/1/1259", 16384}, {"base/1/1259.1", 8192}, {"base/1/1259_fsm", 24576},
        {"base/1/16384", 8192}, {"base/1/16384.1", 8192}, {"base/1/16384_fsm", 24576},
        {"base/1/16384_init", 8192}, {"base/1/t3_555", 8192}, {"base/1/pg_internal.init", 10},
        {"base/1/PG_VERSION", 3}, {"base/1/pg_filenode.map", 512},
        {"base/pgsql_tmp/pgsql_tmp77.0", 10}, {"global/1260", 8192},
        {"global/pg_control", 8192}, {"global/pg_filenode.map", 512},
        {"global/pg_internal.init", 10}, {"pg_wal/000000010000000000000001", 4096},
        {"pg_wal/archive_status/000000010000000000000001.ready", 0},
        {"pg_stat_tmp/global.stat", 5}, {"pg_replslot/slot/state", 5}, {"pg_xact/0000", 8192},
        {NULL, 0},
    };
    static const char *const ts_dirs[] = {"PG_15_202209061", "PG_15_202209061/1", NULL};
    static const struct { const char *rel; size_t size; } ts_files[] = {
        {"PG_15_202209061/1/16500", 8192}, {"PG_15_202209061/1/16500.1", 16384},
        {"PG_15_202209061/1/16501", 8192}, {"PG_15_202209061/1/16501_init", 0},
        {"PG_15_202209061/1/t4_16502", 8192}, {NULL, 0},
    };
    char p[512], q[512];
    for (int i = 0; dirs[i]; i++)
        if (mk_dir(pg, dirs[i]))
            return -1;
    for (int i = 0; files[i].rel; i++)
        if (mk_file(pg, files[i].rel, files[i].size, 0600))
            return -1;
    for (int i = 0; ts_dirs[i]; i++)
        if (mk_dir(ts, ts_dirs[i]))
            return -1;
    for (int i = 0; ts_files[i].rel; i++)
        if (mk_file(ts, ts_files[i].rel, ts_files[i].size, 0640))
            return -1;
    snprintf(p, sizeof(p), "%s/pg_tblspc/16400", pg);
    if (symlink(ts, p))
        return -1;
    /* Things that are skipped: a symlink outside pg_tblspc and a fifo. */
    snprintf(p, sizeof(p), "%s/stray_link", pg);
    snprintf(q, sizeof(q), "%s", ts);
    if (symlink(q, p))
        return -1;
    snprintf(p, sizeof(p), "%s/a_fifo", pg);
    return mkfifo(p, 0600);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void test_walk_tree(void)
{
    char pg[128], ts[128];
    snprintf(pg, sizeof(pg), "%s/pgdata", root);
    snprintf(ts, sizeof(ts), "%s/ts", root);
    PBT_CHECK(mkdir(pg, 0700) == 0);
    PBT_CHECK(mkdir(ts, 0700) == 0);
    PBT_CHECK(build_tree(pg, ts) == 0);

    walk_list l = {0};
    pb_error err = PB_ERROR_INIT;
    int rc = walk_pgdata(pg, &l, &err);
    if (rc)
        fprintf(stderr, "  walk_pgdata: %s\n", err.msg);
    PBT_CHECK(rc == 0);
    size_t nwant = sizeof(want_list) / sizeof(want_list[0]);
    if (l.count != nwant)
        for (size_t i = 0; i < l.count; i++)
            fprintf(stderr, "  got %s kind %d\n", l.items[i].path, (int)l.items[i].kind);
    PBT_CHECK(l.count == nwant);
    for (size_t i = 0; i < nwant && i < l.count; i++) {
        const walk_entry *e = &l.items[i];
        bool same = strcmp(e->path, want_list[i].path) == 0 && e->kind == want_list[i].kind &&
                    e->size == want_list[i].size && e->segno == want_list[i].segno;
        if (!same)
            fprintf(stderr, "  entry %zu: got %s kind %d size %llu seg %u, want %s\n", i, e->path,
                    (int)e->kind, (unsigned long long)e->size, e->segno, want_list[i].path);
        PBT_CHECK(same);
        PBT_CHECK((e->kind == WALK_LINK) == (e->link_target != NULL));
        if (e->kind == WALK_LINK)
            PBT_CHECK(strcmp(e->link_target, ts) == 0);
        if (e->kind == WALK_DIR || e->kind == WALK_LINK)
            PBT_CHECK(e->mode == 0700);
        else if (strncmp(e->path, "pg_tblspc/", 10) == 0)
            PBT_CHECK(e->mode == 0640);
        else
            PBT_CHECK(e->mode == 0600);
        PBT_CHECK(e->mtime > 0);
    }
    walk_list_free(&l);
    PBT_CHECK(l.items == NULL && l.count == 0);
    walk_list_free(NULL);
}

/* Defect 12: a tablespace location shared with another cluster (an upgrade leaves
 * PG_16_... next to PG_15_...): only this cluster's directory is walked. */
static void test_walk_foreign_cluster(void)
{
    char pg[128], ts[128];
    snprintf(pg, sizeof(pg), "%s/pgdata-fc", root);
    snprintf(ts, sizeof(ts), "%s/ts-fc", root);
    PBT_CHECK(mkdir(pg, 0700) == 0);
    PBT_CHECK(mkdir(ts, 0700) == 0);
    PBT_CHECK(build_tree(pg, ts) == 0);
    PBT_CHECK(mk_dir(ts, "PG_16_202307071") == 0 && mk_dir(ts, "PG_16_202307071/5") == 0);
    PBT_CHECK(mk_file(ts, "PG_16_202307071/5/16600", 8192, 0600) == 0);
    walk_list l = {0};
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(walk_pgdata_cluster(pg, "PG_15_202209061", &l, &err) == 0);
    size_t nwant = sizeof(want_list) / sizeof(want_list[0]), foreign = 0;
    for (size_t i = 0; i < l.count; i++)
        foreign += strstr(l.items[i].path, "PG_16_") != NULL;
    PBT_CHECK(l.count == nwant && foreign == 0);
    walk_list_free(&l);
    /* without a cluster directory every entry is taken, as before */
    PBT_CHECK(walk_pgdata(pg, &l, &err) == 0);
    PBT_CHECK(l.count == nwant + 3);
    walk_list_free(&l);
}

static void test_walk_errors(void)
{
    char p[128];
    walk_list l = {0};
    pb_error err = PB_ERROR_INIT;
    snprintf(p, sizeof(p), "%s/does-not-exist", root);
    PBT_CHECK(walk_pgdata(p, &l, &err) == PB_ENOENT);
    PBT_CHECK(strstr(err.msg, "does-not-exist") != NULL);
    PBT_CHECK(l.count == 0 && l.items == NULL);

    /* A regular file is not a data directory. */
    snprintf(p, sizeof(p), "%s/plain", root);
    PBT_CHECK(mk_file(root, "plain", 1, 0600) == 0);
    PBT_CHECK(walk_pgdata(p, &l, &err) == PB_EINVAL);

    /* A dangling tablespace link fails loudly, naming the link. */
    PBT_CHECK(mk_dir(root, "broken") == 0 && mk_dir(root, "broken/pg_tblspc") == 0);
    snprintf(p, sizeof(p), "%s/broken/pg_tblspc/999", root);
    PBT_CHECK(symlink("/nonexistent/pageback/ts", p) == 0);
    snprintf(p, sizeof(p), "%s/broken", root);
    PBT_CHECK(walk_pgdata(p, &l, &err) == PB_EIO);
    PBT_CHECK(strstr(err.msg, "pg_tblspc/999") != NULL);
    PBT_CHECK(l.count == 0 && l.items == NULL);
}

/* pg_wal moved out with initdb -X is stored as a plain directory; an in-place
 * tablespace (a real directory under pg_tblspc) is walked like any directory. */
static void test_walk_wal_link_and_inplace_ts(void)
{
    static const char *const want_paths[] = {
        "pg_tblspc", "pg_tblspc/16401", "pg_tblspc/16401/PG_15_202209061",
        "pg_tblspc/16401/PG_15_202209061/5", "pg_tblspc/16401/PG_15_202209061/5/16600",
        "pg_wal", "pg_wal/archive_status",
    };
    static const walk_kind want_kinds[] = {WALK_DIR, WALK_DIR, WALK_DIR, WALK_DIR,
                                           WALK_REL, WALK_DIR, WALK_DIR};
    char pg[128], wal[128], p[256];
    snprintf(pg, sizeof(pg), "%s/pg2", root);
    snprintf(wal, sizeof(wal), "%s/wal2", root);
    PBT_CHECK(mkdir(pg, 0700) == 0 && mkdir(wal, 0750) == 0);
    PBT_CHECK(mk_dir(wal, "archive_status") == 0);
    PBT_CHECK(mk_file(wal, "000000010000000000000003", 100, 0600) == 0);
    PBT_CHECK(mk_file(wal, "archive_status/000000010000000000000003.ready", 0, 0600) == 0);
    snprintf(p, sizeof(p), "%s/pg_wal", pg);
    PBT_CHECK(symlink(wal, p) == 0);
    PBT_CHECK(mk_dir(pg, "pg_tblspc") == 0 && mk_dir(pg, "pg_tblspc/16401") == 0 &&
              mk_dir(pg, "pg_tblspc/16401/PG_15_202209061") == 0 &&
              mk_dir(pg, "pg_tblspc/16401/PG_15_202209061/5") == 0);
    PBT_CHECK(mk_file(pg, "pg_tblspc/16401/PG_15_202209061/5/16600", 8192, 0600) == 0);
    PBT_CHECK(mk_file(pg, "pg_tblspc/16401/PG_15_202209061/5/t2_16601", 8192, 0600) == 0);

    walk_list l = {0};
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(walk_pgdata(pg, &l, &err) == 0);
    size_t n = sizeof(want_paths) / sizeof(want_paths[0]);
    PBT_CHECK(l.count == n);
    for (size_t i = 0; i < n && i < l.count; i++) {
        PBT_CHECK(strcmp(l.items[i].path, want_paths[i]) == 0);
        PBT_CHECK(l.items[i].kind == want_kinds[i]);
    }
    if (l.count == n)
        PBT_CHECK(l.items[5].mode == 0750); /* pg_wal: the target directory's mode */
    walk_list_free(&l);
}

/* An empty data directory walks to an empty list. */
static void test_walk_empty(void)
{
    char p[128];
    walk_list l = {0};
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(mk_dir(root, "empty") == 0);
    snprintf(p, sizeof(p), "%s/empty", root);
    PBT_CHECK(walk_pgdata(p, &l, &err) == 0);
    PBT_CHECK(l.count == 0);
    walk_list_free(&l);
}

int main(void)
{
    snprintf(root, sizeof(root), "/tmp/walk_test.XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    pb_log_set_level(PB_LOG_ERROR); /* the fifo and stray link warnings are expected */
    PBT_RUN(test_is_excluded);
    PBT_RUN(test_is_relation);
    PBT_RUN(test_walk_tree);
    PBT_RUN(test_walk_foreign_cluster);
    PBT_RUN(test_walk_errors);
    PBT_RUN(test_walk_wal_link_and_inplace_ts);
    PBT_RUN(test_walk_empty);
    nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return PBT_DONE();
}
