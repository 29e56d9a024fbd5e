/*
 * tools/cluster_ns.c — several clusters in one repository (docs/FORMAT.md, "Clusters in
 * one repository"). A named cluster (--cluster NAME) keeps its objects under
 * "cluster/NAME/" of the configured repository, as a repository of its own: its backups,
 * WAL, writer lock, record and key checks; the local state directory follows, since it
 * is named after the location. The repository root keeps the objects of a repository
 * written before namespaces, for the one cluster it belongs to. Root objects
 * "clusters/NAME" say where each named cluster lives, so info lists them with one short
 * listing. Resolved here, once, before a command opens the repository: the commands and
 * the engine only ever see one cluster's repository.
 */
#include "tools/cluster_ns.h"

#include "engine/chain/chain.h"
#include "engine/pg/pg.h"
#include "tools/options.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MARKER_MAGIC "pageback-cluster 1"

/* A cluster name is one key component on every store: letters, digits, '_', '-', '.',
 * not starting with '.', at most 63 characters. */
int cns_check_name(const char *name, pb_error *err)
{
    size_t n = strlen(name);
    if (n == 0 || n > 63 || name[0] == '.' || strspn(name, "abcdefghijklmnopqrstuvwxyz"
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") != n || strstr(name, ".tmp."))
        return pb_fail(err, PB_EINVAL, "cluster name '%s' cannot name a place in the "
                       "repository: use 1 to 63 letters, digits, '_', '-' or '.' (not "
                       "first)", name);
    return 0;
}

void cns_location(const char *root, const char *name, char *out, size_t cap)
{
    size_t n = strlen(root);
    while (n > 1 && root[n - 1] == '/')
        n--;
    snprintf(out, cap, "%.*s/" CNS_PREFIX "%s", (int)n, root, name);
}

int cns_read_marker(repo *root, const char *name, cns_layout *out, pb_error *err)
{
    char key[128];
    snprintf(key, sizeof(key), CNS_MARKERS "%s", name);
    void *data = NULL;
    size_t len = 0;
    int rc = repo_get(root, key, &data, &len, err);
    if (rc)
        return rc;
    char text[256];
    snprintf(text, sizeof(text), "%.*s", (int)(len < 255 ? len : 255), (char *)data);
    free(data);
    bool root_layout = strstr(text, "\nlayout=root\n") != NULL;
    if (strncmp(text, MARKER_MAGIC "\n", strlen(MARKER_MAGIC) + 1) != 0 ||
        (!root_layout && !strstr(text, "\nlayout=namespace\n")))
        return pb_fail(err, PB_ECORRUPT, "%s/%s is not a cluster entry (docs/FORMAT.md, "
                       "\"Clusters in one repository\")", repo_location(root), key);
    *out = root_layout ? CNS_ROOT : CNS_NAMESPACE;
    return 0;
}

/* A local namespace's directory, made before the entry that announces it: the posix
 * driver opens only an existing directory (a repository is initialised, not guessed). Mode
 * 0750 as the driver's own directories; each new directory's parent is fsynced. */
static int make_local_dir(const char *root, const char *name, pb_error *err)
{
    char path[PATH_MAX], parent[PATH_MAX];
    for (int step = 0; step < 2; step++) {
        snprintf(parent, sizeof(parent), "%s%s", root, step ? "/" CNS_PREFIX : "");
        if (step == 0)
            snprintf(path, sizeof(path), "%s/" CNS_PREFIX, root);
        else
            cns_location(root, name, path, sizeof(path));
        if (mkdir(path, 0750) != 0) {
            if (errno == EEXIST)
                continue;
            return pb_fail_errno(err, PB_EIO, "cannot create directory %s", path);
        }
        /* As root in a repository another user owns, the directory is given to that user
         * (as the driver does with what it creates): archive-push runs as the owner. */
        struct stat st;
        if (geteuid() == 0 && stat(root, &st) == 0 && st.st_uid != 0 &&
            chown(path, st.st_uid, st.st_gid) != 0)
            return pb_fail_errno(err, PB_EIO, "cannot give directory %s to the repository's "
                                 "owner", path);
        int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        bool ok = fd >= 0 && fsync(fd) == 0;
        if (fd >= 0)
            close(fd);
        if (!ok)
            return pb_fail_errno(err, PB_EIO, "cannot sync directory %s", parent);
    }
    return 0;
}

static int write_marker(repo *root, const char *name, cns_layout layout, pb_error *err)
{
    if (layout == CNS_NAMESPACE && repo_is_local(root)) {
        int rc = make_local_dir(repo_location(root), name, err);
        if (rc)
            return rc;
    }
    char key[128], text[160];
    snprintf(key, sizeof(key), CNS_MARKERS "%s", name);
    int n = snprintf(text, sizeof(text), MARKER_MAGIC "\nname=%s\nlayout=%s\n", name,
                     layout == CNS_ROOT ? "root" : "namespace");
    int rc = repo_put_new(root, key, text, (size_t)n, err);
    if (rc == PB_EEXIST) /* a concurrent first push of the same cluster */
        return 0;
    return rc;
}

typedef struct claim_ctx {
    repo *root;
    bool claimed; /* some named cluster lives at the root */
} claim_ctx;

static int find_root_claim(void *vctx, const char *key, uint64_t size)
{
    (void)size;
    claim_ctx *c = vctx;
    cns_layout l;
    pb_error e = PB_ERROR_INIT;
    if (cns_read_marker(c->root, key + strlen(CNS_MARKERS), &l, &e) == 0 && l == CNS_ROOT)
        c->claimed = true;
    return 0;
}

/* backup and init know their cluster from its data directory or its server. */
static bool writes_identity(const pb_options *o)
{
    return !strcmp(o->command, "backup") || !strcmp(o->command, "init");
}

/* The system identifier of the cluster a command works for, when it holds one: the
 * segment archive-push stores (xlp_sysid, offset 24 of its long header) or the backup's
 * global/pg_control (system_identifier, its first field; without --pgdata, the server
 * says). 0 = not known. */
static uint64_t known_system_id(const pb_options *o)
{
    char path[PATH_MAX];
    off_t at;
    if (!strcmp(o->command, "archive-push") && o->nargs == 1) {
        const char *base = strrchr(o->args[0], '/');
        base = base ? base + 1 : o->args[0];
        if (strspn(base, "0123456789ABCDEF") != 24)
            return 0;
        snprintf(path, sizeof(path), "%s", o->args[0]);
        at = 24;
    } else if (writes_identity(o) && o->backup.pgdata) {
        snprintf(path, sizeof(path), "%s/global/pg_control", o->backup.pgdata);
        at = 0;
    } else if (writes_identity(o)) { /* the server's own data directory */
        pgc *c = NULL;
        pgc_info info;
        pb_error e = PB_ERROR_INIT;
        uint64_t id = pgc_connect(&c, o->backup.conninfo, &e) == 0 &&
                      pgc_info_get(c, &info, &e) == 0 ? info.system_id : 0;
        pgc_free(c);
        return id;
    } else {
        return 0;
    }
    uint8_t b[8];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = pread(fd, b, sizeof(b), at);
    close(fd);
    return n == (ssize_t)sizeof(b) ? pb_get_u64(b) : 0;
}

/* No entry for the cluster yet. A root holding a repository written before namespaces
 * belongs to one cluster: the one whose system identifier it records, bound to its name
 * the first time a command that knows the identifier runs; until then a cluster not
 * known otherwise is taken for it, as before namespaces existed. */
static int decide(repo *root, const pb_options *o, bool writes, cns_layout *out,
                  pb_error *err)
{
    uint64_t size;
    int rc = repo_stat(root, CHAIN_IDENTITY_KEY, &size, err);
    if (rc == PB_ENOENT) {
        *out = CNS_NAMESPACE;
        return writes ? write_marker(root, o->cluster, CNS_NAMESPACE, err) : 0;
    }
    claim_ctx c = {root, false};
    if (rc == 0)
        rc = repo_list(root, CNS_MARKERS, find_root_claim, &c, err);
    if (rc)
        return rc;
    uint64_t sysid = known_system_id(o);
    pb_error e = PB_ERROR_INIT;
    if (c.claimed || (sysid && chain_check_identity(root, sysid, false, &e) == PB_ESTATE)) {
        *out = CNS_NAMESPACE;
        return writes ? write_marker(root, o->cluster, CNS_NAMESPACE, err) : 0;
    }
    *out = CNS_ROOT;
    return sysid && writes ? write_marker(root, o->cluster, CNS_ROOT, err) : 0;
}

int cns_resolve(pb_options *o, pb_error *err)
{
    if (!o->cluster || !o->repo.location || o->repo_root)
        return 0;
    int rc = cns_check_name(o->cluster, err);
    /* init makes a missing local repository directory (its parent must exist), before
     * the cluster's entry goes in it. */
    if (rc == 0 && !strcmp(o->command, "init") && strncmp(o->repo.location, "s3://", 5) &&
        mkdir(o->repo.location, 0750) != 0 && errno != EEXIST)
        rc = pb_fail_errno(err, PB_EIO, "cannot create repository directory %s",
                           o->repo.location);
    repo *root = NULL;
    if (rc == 0)
        rc = cmd_open_repo(&root, o, err);
    cns_layout layout = CNS_NAMESPACE;
    if (rc == 0)
        rc = cns_read_marker(root, o->cluster, &layout, err);
    /* A command that writes nothing finds a cluster without an entry empty: said once, by
     * name, rather than by a missing directory or an empty listing. */
    bool fresh = false;
    if (rc == PB_ENOENT) {
        bool writes = writes_identity(o) || !strcmp(o->command, "archive-push");
        rc = decide(root, o, writes, &layout, err);
        fresh = rc == 0 && layout == CNS_NAMESPACE && !writes;
    }
    repo_free(root);
    if (rc)
        return pb_error_wrap(err, "cluster %s", o->cluster);
    if (fresh)
        return pb_fail(err, PB_ESTATE, "cluster %s has nothing in repository %s yet (no %s%s "
                       "entry): pageback init --cluster %s makes its place there",
                       o->cluster, o->repo.location, CNS_MARKERS, o->cluster, o->cluster);
    if (layout == CNS_ROOT)
        return 0;
    /* One allocation holds the namespace's location and, when the global section names
     * one state directory for every cluster, this cluster's own directory in it (their
     * catalogs and counters must not mix). */
    bool own_state = o->state_dir && o->source[OPT_STATE_DIR] == OPTS_GLOBAL;
    size_t cap = strlen(o->repo.location) + strlen(CNS_PREFIX) + strlen(o->cluster) + 2;
    size_t scap = own_state ? strlen(o->state_dir) + strlen(o->cluster) + 2 : 0;
    if (!(o->cluster_location = malloc(cap + scap)))
        return pb_fail(err, PB_ENOMEM, "out of memory naming cluster %s", o->cluster);
    cns_location(o->repo.location, o->cluster, o->cluster_location, cap);
    o->repo_root = o->repo.location;
    o->repo.location = o->cluster_location;
    if (own_state) {
        snprintf(o->cluster_location + cap, scap, "%s/%s", o->state_dir, o->cluster);
        o->state_dir = o->cluster_location + cap;
    }
    return 0;
}
