/*
 * tests/unit/restore/restore_tblspc_test.c — where a restore's links may point (the checks of
 * restore/restore.c before anything is written): on the source's host the manifest's
 * tablespace locations are the running source cluster's, so a delta restore writes
 * into a non-empty one only when the target's own link points there or the user
 * mapped it (and not to the source's location); two links never share a directory;
 * none lies inside the target or holds it. Each refusal leaves everything untouched.
 */
#include "engine/wal/wal.h"
#include "engine/chain/chain.h"
#include "restore/restore.h"
#include "tests/unit/fixtures.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PGDIR "PG_15_202209061"

static char root[256];

/* A full backup of directories only: base, pg_tblspc and the links given as
 * {path, target} pairs, each tablespace with its PG_15_<catversion> directory. */
static repo *backup_with_links(const char *name, const char *const links[][2], size_t n)
{
    char sub[300];
    repo *r = pbt_repo_open_in(root, name);
    pbt_repo_identity(r, 0); /* restore checks the chain against it */
    mf_backup h = pbt_header("20260101-000000F", "", 'F');
    h.start_lsn = PBT_SEG + 0x28;
    h.stop_lsn = PBT_SEG + 0x100;
    mf_manifest *m = pbt_manifest_new(&h);
    pbt_add_entry(m, "base", MF_DIR, NULL);
    pbt_add_entry(m, "pg_tblspc", MF_DIR, NULL);
    for (size_t i = 0; i < n; i++) {
        pbt_add_entry(m, links[i][0], MF_LINK, links[i][1]);
        bool wal = strcmp(links[i][0], "pg_wal") == 0;
        snprintf(sub, sizeof(sub), "%s/%s", links[i][0], wal ? "archive_status" : PGDIR);
        pbt_add_entry(m, sub, MF_DIR, NULL);
    }
    pbt_commit_manifest(r, m);
    pbt_push_segment(r, root, 1, 1);
    return r;
}

/* A directory standing for the running source's: PG_15_.../1/canary. */
static void make_live_dir(const char *dir)
{
    char path[400];
    mkdir(dir, 0700);
    snprintf(path, sizeof(path), "%s/%s", dir, PGDIR);
    mkdir(path, 0700);
    snprintf(path, sizeof(path), "%s/%s/1", dir, PGDIR);
    mkdir(path, 0700);
    snprintf(path, sizeof(path), "%s/%s/1/canary", dir, PGDIR);
    pbt_write_file(path, "live\n");
}

static bool live_dir_intact(const char *dir)
{
    char path[400];
    snprintf(path, sizeof(path), "%s/%s/1/canary", dir, PGDIR);
    return pbt_file_is(path, "live\n") && pbt_count_entries(dir) == 1;
}

/* restore into target; map: NULL or one OID=DIR entry. The message goes to stderr
 * when rc is not the one expected. */
static int restore(repo *r, const char *target, bool delta, const rs_tblspc_map *map,
                   size_t nmap, int expect, pb_error *err)
{
    rs_opts o = RS_OPTS_INIT;
    o.target_dir = target;
    o.delta = delta;
    o.tblspc = map;
    o.ntblspc = nmap;
    rs_stats st;
    *err = (pb_error)PB_ERROR_INIT;
    int rc = rs_restore(r, &o, &st, err);
    if (rc != expect)
        fprintf(stderr, "restore into %s: %d (expected %d): %s\n", target, rc, expect,
                err->msg);
    return rc;
}

static bool link_is(const char *path, const char *to)
{
    char buf[400];
    ssize_t n = readlink(path, buf, sizeof(buf) - 1);
    buf[n > 0 ? n : 0] = '\0';
    return n > 0 && strcmp(buf, to) == 0;
}

/* The defect: a delta restore into a fresh target without --tablespace-map linked
 * pg_tblspc/16400 to the source's location and pruned the live tablespace. Now it is
 * refused naming the OID, the directory and --tablespace-map; with the map it works,
 * and the next delta restore needs the map again (the link is the target's own). */
static void test_delta_source_tablespace(void)
{
    char src[300], target[300], mapped[300], path[400];
    snprintf(src, sizeof(src), "%s/src-ts", root);
    snprintf(target, sizeof(target), "%s/target", root);
    snprintf(mapped, sizeof(mapped), "%s/ts-r", root);
    make_live_dir(src);
    const char *const links[][2] = {{"pg_tblspc/16400", src}};
    repo *r = backup_with_links("repo", links, 1);
    pb_error err;
    for (int exists = 0; exists < 2; exists++) {
        if (exists)
            PBT_CHECK(mkdir(target, 0700) == 0);
        PBT_CHECK(restore(r, target, true, NULL, 0, PB_EINVAL, &err) == PB_EINVAL);
        PBT_CHECK(strstr(err.msg, "tablespace 16400") && strstr(err.msg, src) &&
                  strstr(err.msg, "--tablespace-map 16400=DIR"));
        PBT_CHECK(live_dir_intact(src));
        PBT_CHECK(pbt_count_entries(target) == (exists ? 0 : -1)); /* nothing written */
    }
    rs_tblspc_map map = {16400, mapped};
    PBT_CHECK(restore(r, target, true, &map, 1, 0, &err) == 0);
    snprintf(path, sizeof(path), "%s/pg_tblspc/16400", target);
    PBT_CHECK(link_is(path, mapped));
    snprintf(path, sizeof(path), "%s/%s", mapped, PGDIR);
    PBT_CHECK(access(path, F_OK) == 0);
    PBT_CHECK(live_dir_intact(src));
    PBT_CHECK(restore(r, target, true, &map, 1, 0, &err) == 0); /* ts-r is now in use */
    PBT_CHECK(restore(r, target, true, NULL, 0, PB_EINVAL, &err) == PB_EINVAL);
    PBT_CHECK(live_dir_intact(src));
    snprintf(path, sizeof(path), "%s/pg_tblspc/16400", target);
    PBT_CHECK(link_is(path, mapped));
    repo_free(r);
}

/* A target restored earlier at the manifest's location (another host, same layout):
 * its own link points there (spelled differently), so a delta restore goes ahead. A
 * map naming the source's location itself is no licence when the target's link does
 * not point there. */
static void test_own_link_and_mapped_source(void)
{
    char src[300], target[300], other[300], path[400], spelled[400];
    snprintf(src, sizeof(src), "%s/own-ts", root);
    snprintf(target, sizeof(target), "%s/target-own", root);
    snprintf(other, sizeof(other), "%s/target-other", root);
    make_live_dir(src);
    const char *const links[][2] = {{"pg_tblspc/16400", src}};
    repo *r = backup_with_links("repo-own", links, 1);
    pb_error err;
    rs_tblspc_map map = {16400, src};
    PBT_CHECK(restore(r, other, true, &map, 1, PB_EINVAL, &err) == PB_EINVAL);
    PBT_CHECK(strstr(err.msg, "tablespace 16400") && strstr(err.msg, "source's own location"));
    PBT_CHECK(live_dir_intact(src) && pbt_count_entries(other) == -1);
    PBT_CHECK(mkdir(target, 0700) == 0);
    snprintf(path, sizeof(path), "%s/pg_tblspc", target);
    PBT_CHECK(mkdir(path, 0700) == 0);
    snprintf(path, sizeof(path), "%s/pg_tblspc/16400", target);
    snprintf(spelled, sizeof(spelled), "%s//./", src);
    PBT_CHECK(symlink(spelled, path) == 0);
    PBT_CHECK(restore(r, target, true, NULL, 0, 0, &err) == 0);
    PBT_CHECK(link_is(path, src)); /* remade with the manifest's spelling */
    repo_free(r);
}

/* Two tablespaces in one directory, or one inside the other, are refused in every
 * mode before anything is written. */
static void test_shared_or_nested(void)
{
    char a[300], b[300], target[300], nested[400];
    snprintf(a, sizeof(a), "%s/ts-a", root);
    snprintf(b, sizeof(b), "%s/ts-b", root);
    snprintf(target, sizeof(target), "%s/target-shared", root);
    snprintf(nested, sizeof(nested), "%s/ts-a/x/../" PGDIR "/1", root);
    const char *const links[][2] = {{"pg_tblspc/16400", a}, {"pg_tblspc/16401", b}};
    repo *r = backup_with_links("repo-shared", links, 2);
    pb_error err;
    rs_tblspc_map same[] = {{16400, b}, {16401, b}};
    rs_tblspc_map inside[] = {{16401, nested}};
    for (int delta = 0; delta < 2; delta++) {
        PBT_CHECK(restore(r, target, delta, same, 2, PB_EINVAL, &err) == PB_EINVAL);
        PBT_CHECK(strstr(err.msg, "pg_tblspc/16400") && strstr(err.msg, "pg_tblspc/16401") &&
                  strstr(err.msg, "its own directory"));
        PBT_CHECK(restore(r, target, delta, inside, 1, PB_EINVAL, &err) == PB_EINVAL);
        PBT_CHECK(strstr(err.msg, "its own directory") != NULL);
        PBT_CHECK(access(a, F_OK) != 0 && access(b, F_OK) != 0 && access(target, F_OK) != 0);
    }
    PBT_CHECK(restore(r, target, false, NULL, 0, 0, &err) == 0); /* a and b: fine */
    repo_free(r);
}

/* A tablespace directory inside the target, or one holding it, is refused. */
static void test_inside_target(void)
{
    char target[300], inside[400];
    snprintf(target, sizeof(target), "%s/target-in", root);
    snprintf(inside, sizeof(inside), "%s/ts", target);
    const char *const links[][2] = {{"pg_tblspc/16400", inside}};
    repo *r = backup_with_links("repo-in", links, 1);
    pb_error err;
    PBT_CHECK(restore(r, target, false, NULL, 0, PB_EINVAL, &err) == PB_EINVAL);
    PBT_CHECK(strstr(err.msg, "lies inside the target") &&
              strstr(err.msg, "--tablespace-map 16400=DIR"));
    PBT_CHECK(access(target, F_OK) != 0);
    rs_tblspc_map up = {16400, root};
    PBT_CHECK(restore(r, target, true, &up, 1, PB_EINVAL, &err) == PB_EINVAL);
    PBT_CHECK(strstr(err.msg, "contains the target") != NULL);
    PBT_CHECK(access(target, F_OK) != 0);
    /* A target named relative to the working directory is compared as the same. */
    char cwd[400], elsewhere[300];
    PBT_CHECK(getcwd(cwd, sizeof(cwd)) != NULL && chdir(root) == 0);
    PBT_CHECK(restore(r, "target-in", false, NULL, 0, PB_EINVAL, &err) == PB_EINVAL);
    PBT_CHECK(strstr(err.msg, "lies inside the target") != NULL);
    snprintf(elsewhere, sizeof(elsewhere), "%s/ts-elsewhere", root);
    rs_tblspc_map away = {16400, elsewhere};
    PBT_CHECK(restore(r, "target-in", false, &away, 1, 0, &err) == 0);
    PBT_CHECK(chdir(cwd) == 0);
    repo_free(r);
}

/* pg_wal recorded as a link to a non-empty directory (the source's WAL, initdb -X):
 * a delta restore into a target whose pg_wal does not point there is refused, and
 * the WAL directory keeps its files. */
static void test_wal_dir(void)
{
    char wal[300], target[300], path[400];
    snprintf(wal, sizeof(wal), "%s/src-wal", root);
    snprintf(target, sizeof(target), "%s/target-wal", root);
    PBT_CHECK(mkdir(wal, 0700) == 0);
    snprintf(path, sizeof(path), "%s/000000010000000000000002", wal);
    pbt_write_file(path, "live\n");
    const char *const links[][2] = {{"pg_wal", wal}};
    repo *r = backup_with_links("repo-wal", links, 1);
    pb_error err;
    PBT_CHECK(restore(r, target, true, NULL, 0, PB_EINVAL, &err) == PB_EINVAL);
    PBT_CHECK(strstr(err.msg, wal) && strstr(err.msg, "pg_wal does not point at it"));
    PBT_CHECK(pbt_file_is(path, "live\n") && pbt_count_entries(wal) == 1);
    PBT_CHECK(access(target, F_OK) != 0);
    repo_free(r);
}

int main(void)
{
    static const pbt_case cases[] = {
        PBT_CASE(test_delta_source_tablespace), PBT_CASE(test_own_link_and_mapped_source),
        PBT_CASE(test_shared_or_nested), PBT_CASE(test_inside_target), PBT_CASE(test_wal_dir)};
    return pbt_main_in_tmpdir(root, sizeof(root), "tblspc-test", cases, PBT_COUNT(cases));
}
