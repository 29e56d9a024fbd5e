/*
 * tests/unit/restore/target_test.c — restore/target.c and guard.c: directories beneath a
 * target resolved without following links, with openat2 and with the component walk
 * that stands in for it on older kernels; link replacement; registered links; the
 * manifest entry check.
 */
#include "restore/plan.h"
#include "restore/restore_internal.h"
#include "tests/unit/pbtest.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[256];

static void path_of(char *out, size_t cap, const char *rel)
{
    snprintf(out, cap, "%s/%s", root, rel);
}

static void setup(void)
{
    char p[512];
    const char *dirs[] = {"t", "t/base", "t/base/1", "t/pg_tblspc", "outside", "ts"};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        path_of(p, sizeof(p), dirs[i]);
        PBT_CHECK(mkdir(p, 0700) == 0);
    }
    char to[512];
    path_of(to, sizeof(to), "outside");
    path_of(p, sizeof(p), "t/base/2");
    PBT_CHECK(symlink(to, p) == 0);
    path_of(p, sizeof(p), "t/pg_wal");
    PBT_CHECK(symlink(to, p) == 0);
}

static void check_resolution(bool openat2)
{
    char p[512];
    rs_target *t = NULL;
    pb_error err = PB_ERROR_INIT;
    path_of(p, sizeof(p), "t");
    PBT_CHECK(rs_target_open(&t, p, openat2, &err) == 0);
    if (!t)
        return;
    int fd = -1;
    PBT_CHECK(rs_target_dir(t, "base/1", 0, &fd, &err) == 0 && fd >= 0);
    if (fd >= 0)
        close(fd);
    PBT_CHECK(rs_target_dir(t, "", 0, &fd, &err) == 0 && fd >= 0);
    if (fd >= 0)
        close(fd);
    /* A link in the path is refused, named, and not followed. */
    PBT_CHECK(rs_target_dir(t, "base/2", 0, &fd, &err) == PB_EINVAL && fd == -1);
    PBT_CHECK(strstr(err.msg, "base/2") != NULL);
    PBT_CHECK(rs_target_dir(t, "pg_wal/archive_status", RS_DIR_CREATE, &fd, &err) == PB_EINVAL);
    path_of(p, sizeof(p), "outside/archive_status");
    PBT_CHECK(access(p, F_OK) != 0);
    PBT_CHECK(rs_target_dir(t, "base/3", 0, &fd, &err) == PB_ENOENT);
    PBT_CHECK(rs_target_dir(t, "base/3/x", RS_DIR_CREATE, &fd, &err) == 0 && fd >= 0);
    if (fd >= 0)
        close(fd);
    path_of(p, sizeof(p), "t/base/3/x");
    PBT_CHECK(access(p, F_OK) == 0);
    /* A registered link (one the restore made) resolves into its directory. */
    char ts[512];
    path_of(ts, sizeof(ts), "ts");
    path_of(p, sizeof(p), "t/pg_tblspc/16400");
    PBT_CHECK(symlink(ts, p) == 0);
    PBT_CHECK(rs_target_dir(t, "pg_tblspc/16400/PG_15", 0, &fd, &err) == PB_EINVAL);
    PBT_CHECK(rs_target_add_link(t, "pg_tblspc/16400", ts, &err) == 0);
    PBT_CHECK(rs_target_dir(t, "pg_tblspc/16400/PG_15", RS_DIR_CREATE, &fd, &err) == 0);
    if (fd >= 0)
        close(fd);
    path_of(p, sizeof(p), "ts/PG_15");
    PBT_CHECK(access(p, F_OK) == 0);
    rs_target_free(t);
    /* Undo for the next round. */
    path_of(p, sizeof(p), "t/pg_tblspc/16400");
    unlink(p);
    path_of(p, sizeof(p), "ts/PG_15");
    rmdir(p);
    path_of(p, sizeof(p), "t/base/3/x");
    rmdir(p);
    path_of(p, sizeof(p), "t/base/3");
    rmdir(p);
}

static void test_resolve_openat2(void) { check_resolution(true); }
static void test_resolve_walk(void) { check_resolution(false); }

/* RS_DIR_REPLACE removes the link (never what it points to) and makes a directory. */
static void test_replace_link(void)
{
    char p[512], canary[512];
    path_of(canary, sizeof(canary), "outside/canary");
    FILE *fp = fopen(canary, "w");
    PBT_CHECK(fp && fputs("x", fp) >= 0 && fclose(fp) == 0);
    rs_target *t = NULL;
    pb_error err = PB_ERROR_INIT;
    path_of(p, sizeof(p), "t");
    PBT_CHECK(rs_target_open(&t, p, true, &err) == 0);
    int fd = -1;
    PBT_CHECK(rs_target_dir(t, "base/2", RS_DIR_REPLACE, &fd, &err) == 0 && fd >= 0);
    if (fd >= 0)
        close(fd);
    struct stat st;
    path_of(p, sizeof(p), "t/base/2");
    PBT_CHECK(lstat(p, &st) == 0 && S_ISDIR(st.st_mode));
    PBT_CHECK(access(canary, F_OK) == 0);
    /* rm -r beneath the target removes a link inside, not its directory's files. */
    char to[512];
    path_of(to, sizeof(to), "outside");
    path_of(p, sizeof(p), "t/base/2/l");
    PBT_CHECK(symlink(to, p) == 0);
    fd = -1;
    PBT_CHECK(rs_target_dir(t, "base", 0, &fd, &err) == 0);
    PBT_CHECK(rs_remove_at(fd, "2", "t/base/2", &err) == 0);
    if (fd >= 0)
        close(fd);
    path_of(p, sizeof(p), "t/base/2");
    PBT_CHECK(access(p, F_OK) != 0);
    PBT_CHECK(access(canary, F_OK) == 0);
    rs_target_free(t);
    rs_target_free(NULL);
}

/* As root: the tree and the registered tablespace go to the target's owner; a link's
 * own owner changes, never what a foreign link points to. */
static void test_fix_owner(void)
{
    if (geteuid() != 0) {
        printf("skip test_fix_owner: not root\n");
        return;
    }
    char p[512], to[512], ts[512];
    path_of(p, sizeof(p), "t");
    PBT_CHECK(chown(p, 4242, 4242) == 0);
    path_of(to, sizeof(to), "outside");
    path_of(p, sizeof(p), "t/base/foreign");
    PBT_CHECK(symlink(to, p) == 0);
    path_of(ts, sizeof(ts), "ts");
    path_of(p, sizeof(p), "t/pg_tblspc/16401");
    PBT_CHECK(symlink(ts, p) == 0);
    rs_target *t = NULL;
    pb_error err = PB_ERROR_INIT;
    path_of(p, sizeof(p), "t");
    PBT_CHECK(rs_target_open(&t, p, true, &err) == 0);
    PBT_CHECK(rs_target_add_link(t, "pg_tblspc/16401", ts, &err) == 0);
    PBT_CHECK(rs_target_fix_owner(t, &err) == 0);
    rs_target_free(t);
    struct stat st;
    PBT_CHECK(stat(to, &st) == 0 && st.st_uid == 0); /* not followed */
    path_of(p, sizeof(p), "outside/canary");
    PBT_CHECK(stat(p, &st) == 0 && st.st_uid == 0);
    path_of(p, sizeof(p), "t/base/foreign");
    PBT_CHECK(lstat(p, &st) == 0 && st.st_uid == 4242);
    path_of(p, sizeof(p), "t/base/1");
    PBT_CHECK(stat(p, &st) == 0 && st.st_uid == 4242);
    PBT_CHECK(stat(ts, &st) == 0 && st.st_uid == 4242); /* the restore's own link */
}

static void test_check_entry(void)
{
    const struct {
        const char *path;
        mf_kind kind;
        const char *target;
        bool ok;
    } cases[] = {
        {"base/1/1259", MF_REL, NULL, true},
        {"pg_tblspc/16400", MF_LINK, "/mnt/ts", true},
        {"pg_wal", MF_LINK, "/mnt/wal", true},
        {"../escape", MF_FILE, NULL, false},
        {"base/../../escape", MF_DIR, NULL, false},
        {"/abs", MF_FILE, NULL, false},
        {"", MF_DIR, NULL, false},
        {"base//1", MF_DIR, NULL, false},
        {"base/1/", MF_DIR, NULL, false},
        {"./x", MF_FILE, NULL, false},
        {"base/1", MF_LINK, "/elsewhere", false},
        {"x", MF_LINK, "/elsewhere", false}, /* shorter than "pg_tblspc/" */
        {"pg_tblspc/", MF_LINK, "/x", false},
        {"pg_tblspc/abc", MF_LINK, "/x", false},
        {"pg_tblspc/016400", MF_LINK, "/x", false},
        {"pg_tblspc/99999999999", MF_LINK, "/x", false},
        {"pg_tblspc/16400/x", MF_LINK, "/x", false},
        {"pg_wal/x", MF_LINK, "/x", false},
        {"pg_tblspc/16400", MF_LINK, "", false},
        {"pg_tblspc/16400", MF_LINK, NULL, false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        mf_file f;
        memset(&f, 0, sizeof(f));
        f.path = (char *)cases[i].path;
        f.kind = cases[i].kind;
        f.link_target = (char *)cases[i].target;
        pb_error err = PB_ERROR_INIT;
        int rc = rs_check_entry(&f, &err);
        PBT_CHECK((rc == 0) == cases[i].ok);
        if (!cases[i].ok)
            PBT_CHECK(rc == PB_ECORRUPT && strstr(err.msg, cases[i].path) != NULL);
        if ((rc == 0) != cases[i].ok)
            fprintf(stderr, "case %s: rc %d %s\n", cases[i].path, rc, err.msg);
    }
    unsigned oid = 0;
    PBT_CHECK(rs_link_oid("pg_tblspc/16400", &oid) && oid == 16400);
    PBT_CHECK(!rs_link_oid("pg_wal", &oid) && !rs_link_oid("x", &oid));
}

int main(void)
{
    if (pbt_tmpdir(root, sizeof(root), "target-test") != 0)
        return 1;
    setup();
    PBT_RUN(test_resolve_openat2);
    PBT_RUN(test_resolve_walk);
    PBT_RUN(test_replace_link);
    PBT_RUN(test_check_entry);
    PBT_RUN(test_fix_owner);
    pbt_rmtree(root);
    return PBT_DONE();
}
