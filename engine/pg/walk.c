/*
 * engine/pg/walk.c — the data-directory walk and its exclusion rules.
 *
 * The rules follow pg_basebackup (src/backend/backup/basebackup.c, sendDir) so that
 * what we back up is what PostgreSQL itself considers a complete base backup:
 *
 *  - excludeDirContents: pg_stat_tmp, pg_replslot, pg_dynshmem, pg_notify, pg_serial,
 *    pg_snapshots, pg_subtrans. The directory is kept (so permissions survive a
 *    restore), its contents are dropped. pg_basebackup matches these names in any
 *    directory; we match them at the top of PGDATA only, where PostgreSQL creates
 *    them, so a user relation directory can never lose files to a name clash.
 *  - pg_wal: kept as a directory together with pg_wal/archive_status; everything else
 *    below it is dropped (WAL comes from the archive).
 *  - excludeFiles, matched by file name in every directory: postgresql.auto.conf.tmp,
 *    current_logfiles.tmp, pg_internal.init* (prefix, also catches its temp files),
 *    backup_label, tablespace_map, backup_manifest, postmaster.pid, postmaster.opts.
 *  - Anything whose name starts with "pgsql_tmp" (files and directories), anywhere.
 *  - In a database directory (base/<dboid> or pg_tblspc/<oid>/<PG_...>/<dboid>):
 *    temporary relations (t<backend>_<relfilenode>[_fork][.seg]) and every fork of an
 *    unlogged relation except its _init fork (an unlogged relation is one that has an
 *    _init fork; this rule needs the directory listing, so it lives in the walk).
 *
 * Symbolic links are followed only for pg_tblspc/<oid> (tablespaces): the link itself
 * is reported as WALK_LINK and the files behind it are reported with paths through
 * the link. pg_wal is reported as a directory even when it is a symlink. Any other
 * symlink, socket, fifo or device is skipped with a warning, as pg_basebackup does.
 */
#include "engine/pg/pg.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- name rules */

static const char *const exclude_dir_contents[] = {
    "pg_stat_tmp", "pg_replslot", "pg_dynshmem", "pg_notify",
    "pg_serial",   "pg_snapshots", "pg_subtrans", NULL,
};

typedef struct exclude_file {
    const char *name;
    bool prefix; /* match "name*" rather than exactly "name" */
} exclude_file;

static const exclude_file exclude_files[] = {
    {"postgresql.auto.conf.tmp", false},
    {"current_logfiles.tmp", false},
    {"pg_internal.init", true},
    {"backup_label", false},
    {"tablespace_map", false},
    {"backup_manifest", false},
    {"postmaster.pid", false},
    {"postmaster.opts", false},
    {NULL, false},
};

static const char *base_name(const char *rel)
{
    const char *s = strrchr(rel, '/');
    return s ? s + 1 : rel;
}

/* Length of the run of decimal digits at s. */
static size_t digits_at(const char *s)
{
    size_t n = 0;
    while (s[n] >= '0' && s[n] <= '9')
        n++;
    return n;
}

/* Does [s, s+len) consist of 1..max_len digits only? */
static bool all_digits(const char *s, size_t len, size_t max_len)
{
    return len > 0 && len <= max_len && digits_at(s) >= len;
}

/* Length of a fork suffix ("_fsm", "_vm", "_init") at s, or 0. *is_init is set. */
static size_t fork_suffix(const char *s, bool *is_init)
{
    static const char *const forks[] = {"_fsm", "_vm", "_init", NULL};
    for (int i = 0; forks[i]; i++) {
        size_t n = strlen(forks[i]);
        if (strncmp(s, forks[i], n) == 0) {
            if (is_init)
                *is_init = (i == 2);
            return n;
        }
    }
    return 0;
}

/*
 * Parse "<relfilenode>[_fork][.<segno>]" (PostgreSQL's
 * parse_filename_for_nontemp_relation). Sets *oid_len to the length of the leading
 * relfilenode, *is_init and *segno. Segment ".0" is never written by PostgreSQL, and
 * we refuse it so that a stray file of that name is stored whole rather than
 * misfiled as segment 0.
 */
static bool parse_relfile(const char *name, size_t *oid_len, bool *is_init, uint32_t *segno)
{
    size_t n = digits_at(name);
    if (n == 0 || n > 10)
        return false;
    *oid_len = n;
    *is_init = false;
    *segno = 0;
    size_t pos = n;
    pos += fork_suffix(name + pos, is_init);
    if (name[pos] == '.') {
        size_t d = digits_at(name + pos + 1);
        if (d == 0 || d > 10)
            return false;
        unsigned long long v = strtoull(name + pos + 1, NULL, 10);
        if (v == 0 || v > UINT32_MAX)
            return false;
        *segno = (uint32_t)v;
        pos += 1 + d;
    }
    return name[pos] == '\0';
}

/* PostgreSQL's looks_like_temp_rel_name: t<digits>_<digits>[_fork][.<digits>]. */
static bool is_temp_relname(const char *name)
{
    if (name[0] != 't')
        return false;
    size_t pos = 1, n = digits_at(name + pos);
    if (n == 0)
        return false;
    pos += n;
    if (name[pos++] != '_')
        return false;
    n = digits_at(name + pos);
    if (n == 0)
        return false;
    pos += n;
    pos += fork_suffix(name + pos, NULL);
    if (name[pos] == '.') {
        n = digits_at(name + pos + 1);
        if (n == 0)
            return false;
        pos += 1 + n;
    }
    return name[pos] == '\0';
}

/* Number of '/'-separated components in rel, and pointers to the first few. */
static int split_path(const char *rel, const char *comp[], size_t len[], int max)
{
    int n = 0;
    const char *p = rel;
    while (*p) {
        const char *e = strchr(p, '/');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (n < max) {
            comp[n] = p;
            len[n] = l;
        }
        n++;
        if (!e)
            break;
        p = e + 1;
    }
    return n;
}

static bool comp_is(const char *c, size_t len, const char *word)
{
    return strlen(word) == len && strncmp(c, word, len) == 0;
}

/*
 * Is the directory of rel (everything before its last component) a database directory,
 * i.e. "base/<digits>" or "pg_tblspc/<digits>/PG_.../<digits>"? Mirrors sendDir's
 * isDbDir, which also accepts a tablespace version directory of any name prefix PG_.
 */
static bool parent_is_db_dir(const char *rel)
{
    const char *c[6];
    size_t l[6];
    int n = split_path(rel, c, l, 6);
    if (n == 3 && comp_is(c[0], l[0], "base") && all_digits(c[1], l[1], 10))
        return true;
    return n == 5 && comp_is(c[0], l[0], "pg_tblspc") && all_digits(c[1], l[1], 10) &&
           l[2] > 3 && strncmp(c[2], "PG_", 3) == 0 && all_digits(c[3], l[3], 10);
}

static bool is_excluded_file_name(const char *name)
{
    for (int i = 0; exclude_files[i].name; i++) {
        const char *x = exclude_files[i].name;
        if (exclude_files[i].prefix ? strncmp(name, x, strlen(x)) == 0 : strcmp(name, x) == 0)
            return true;
    }
    return false;
}

static bool has_tmp_component(const char *rel)
{
    for (const char *p = rel; p; p = strchr(p, '/')) {
        if (*p == '/')
            p++;
        if (strncmp(p, "pgsql_tmp", 9) == 0)
            return true;
    }
    return false;
}

/* Rules that look at where rel sits in PGDATA's top-level directories. */
static bool is_excluded_by_top_dir(const char *rel, bool is_dir)
{
    const char *slash = strchr(rel, '/');
    if (!slash)
        return false; /* top-level entries themselves are always kept */
    size_t top_len = (size_t)(slash - rel);
    if (comp_is(rel, top_len, "pg_wal"))
        return !(is_dir && strcmp(slash + 1, "archive_status") == 0);
    for (int i = 0; exclude_dir_contents[i]; i++)
        if (comp_is(rel, top_len, exclude_dir_contents[i]))
            return true;
    return false;
}

bool walk_is_excluded(const char *rel, bool is_dir)
{
    if (!rel || !*rel)
        return false;
    if (has_tmp_component(rel) || is_excluded_by_top_dir(rel, is_dir))
        return true;
    /* pg_basebackup applies excludeFiles to every directory entry, even directories
     * (harmless: none of these names is ever a directory). */
    const char *name = base_name(rel);
    if (is_excluded_file_name(name))
        return true;
    return !is_dir && parent_is_db_dir(rel) && is_temp_relname(name);
}

bool walk_is_relation(const char *rel, uint32_t *segno)
{
    const char *c[6];
    size_t l[6];
    uint32_t seg = 0;
    size_t oid_len;
    bool is_init;
    if (!rel)
        return false;
    int n = split_path(rel, c, l, 6);
    bool located = (n == 2 && comp_is(c[0], l[0], "global")) || parent_is_db_dir(rel);
    if (!located || !parse_relfile(base_name(rel), &oid_len, &is_init, &seg))
        return false;
    if (segno)
        *segno = seg;
    return true;
}

/* -------------------------------------------------------------------- the walk */

typedef struct walk_ctx {
    walk_list *out;
    size_t cap;
    pb_error *err;
    const char *tblspc_dir; /* "PG_15_202209061", or NULL: every entry of a tablespace */
} walk_ctx;

/* Is rel "pg_tblspc/<oid>", the top of a tablespace seen through its link? */
static bool is_tblspc_top(const char *rel)
{
    const char *c[3];
    size_t l[3];
    return split_path(rel, c, l, 3) == 2 && comp_is(c[0], l[0], "pg_tblspc") &&
           all_digits(c[1], l[1], 10);
}

static char *join_path(const char *a, const char *b)
{
    char *s = NULL;
    if (!*a)
        return strdup(b);
    if (asprintf(&s, "%s/%s", a, b) < 0)
        return NULL;
    return s;
}

/* Append an entry; takes ownership of path and target (freed on failure). */
static int add_entry(walk_ctx *ctx, char *path, walk_kind kind, const struct stat *st,
                     char *target, uint32_t segno)
{
    walk_list *l = ctx->out;
    if (PB_GROW(l->items, &ctx->cap, l->count + 1)) {
        free(path);
        free(target);
        return pb_fail(ctx->err, PB_ENOMEM, "walk: out of memory at %zu entries", l->count);
    }
    walk_entry *e = &l->items[l->count++];
    e->path = path;
    e->kind = kind;
    e->mode = (uint32_t)(st->st_mode & 07777);
    e->size = (kind == WALK_DIR || kind == WALK_LINK) ? 0 : (uint64_t)st->st_size;
    e->mtime = (int64_t)st->st_mtime;
    e->inode = (uint64_t)st->st_ino;
    e->link_target = target;
    e->segno = segno;
    return 0;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* Read the names in dir (without "." and ".."), sorted. A directory that vanished
 * yields an empty list: a table or database dropped during the backup. */
static int read_names(const char *dir, char ***names_out, size_t *n_out, pb_error *err)
{
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    *names_out = NULL;
    *n_out = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) {
            pb_debug("walk: directory %s vanished during the walk", dir);
            return 0;
        }
        return pb_fail_errno(err, PB_EIO, "walk: cannot open directory %s", dir);
    }
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            if (errno)
                rc = pb_fail_errno(err, PB_EIO, "walk: cannot read directory %s", dir);
            break;
        }
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (PB_GROW(names, &cap, n + 1)) {
            rc = pb_fail(err, PB_ENOMEM, "walk: out of memory listing %s", dir);
            break;
        }
        if (!(names[n] = strdup(de->d_name))) {
            rc = pb_fail(err, PB_ENOMEM, "walk: out of memory listing %s", dir);
            break;
        }
        n++;
    }
    closedir(d);
    if (rc) {
        free_names(names, n);
        return rc;
    }
    if (n)
        qsort(names, n, sizeof(*names), cmp_name);
    *names_out = names;
    *n_out = n;
    return 0;
}

/* In a database directory: is name a non-init fork of a relation that has an _init
 * fork in the same (sorted) listing? */
static bool is_unlogged_non_init(const char *name, char **names, size_t n)
{
    size_t oid_len;
    bool is_init;
    uint32_t seg;
    if (!parse_relfile(name, &oid_len, &is_init, &seg) || is_init)
        return false;
    char key[32];
    snprintf(key, sizeof(key), "%.*s_init", (int)oid_len, name);
    const char *k = key;
    return bsearch(&k, names, n, sizeof(*names), cmp_name) != NULL;
}

static int walk_dir(walk_ctx *ctx, const char *abs, const char *rel);

/* pg_tblspc/<oid> as a symlink: record the link, then walk the tablespace behind it. */
static int walk_tablespace(walk_ctx *ctx, const char *abs, char *rel)
{
    char buf[PATH_MAX];
    struct stat st;
    char *target = NULL;
    ssize_t n = readlink(abs, buf, sizeof(buf) - 1);
    if (n < 0) {
        free(rel);
        return pb_fail_errno(ctx->err, PB_EIO, "walk: cannot read tablespace link %s", abs);
    }
    buf[n] = '\0';
    /* PostgreSQL writes absolute targets; resolve a hand-made relative one. */
    target = buf[0] == '/' ? strdup(buf) : realpath(abs, NULL);
    if (!target || stat(abs, &st) != 0 || !S_ISDIR(st.st_mode)) {
        int rc = pb_fail_errno(ctx->err, PB_EIO,
                               "walk: tablespace link %s -> %s does not lead to a directory",
                               abs, buf);
        free(target);
        free(rel);
        return rc;
    }
    /* The target directory's mode and mtime, not the link's: that is what a restore
     * must recreate. */
    int rc = add_entry(ctx, rel, WALK_LINK, &st, target, 0);
    return rc ? rc : walk_dir(ctx, abs, rel);
}

/* Handle one directory entry that survived the name rules. */
static int walk_one(walk_ctx *ctx, const char *abs_dir, const char *rel_dir, const char *name)
{
    struct stat st;
    int rc = 0;
    char *abs = join_path(abs_dir, name);
    char *rel = join_path(rel_dir, name);
    if (!abs || !rel) {
        rc = pb_fail(ctx->err, PB_ENOMEM, "walk: out of memory at %s/%s", rel_dir, name);
        goto out;
    }
    if (lstat(abs, &st) != 0) {
        if (errno == ENOENT) {
            pb_debug("walk: %s vanished during the walk", abs);
            goto out;
        }
        rc = pb_fail_errno(ctx->err, PB_EIO, "walk: cannot stat %s", abs);
        goto out;
    }
    if (S_ISLNK(st.st_mode) && strcmp(rel_dir, "pg_tblspc") == 0) {
        rc = walk_tablespace(ctx, abs, rel);
        rel = NULL;
    } else if (S_ISLNK(st.st_mode) && strcmp(rel, "pg_wal") == 0) {
        /* pg_wal moved elsewhere (initdb -X): store it as a plain directory. */
        if (stat(abs, &st) != 0) {
            rc = pb_fail_errno(ctx->err, PB_EIO, "walk: cannot stat pg_wal target %s", abs);
            goto out;
        }
        rc = add_entry(ctx, rel, WALK_DIR, &st, NULL, 0);
        rel = NULL;
        if (!rc)
            rc = walk_dir(ctx, abs, "pg_wal");
    } else if (S_ISDIR(st.st_mode)) {
        rc = add_entry(ctx, rel, WALK_DIR, &st, NULL, 0);
        char *r = rel;
        rel = NULL;
        if (!rc)
            rc = walk_dir(ctx, abs, r);
    } else if (S_ISREG(st.st_mode)) {
        uint32_t segno = 0;
        walk_kind kind = walk_is_relation(rel, &segno) ? WALK_REL : WALK_FILE;
        rc = add_entry(ctx, rel, kind, &st, NULL, segno);
        rel = NULL;
    } else {
        pb_warn("walk: skipping special file %s", abs);
    }
out:
    free(abs);
    free(rel);
    return rc;
}

/* Walk the directory abs, whose path relative to PGDATA is rel ("" for PGDATA). */
static int walk_dir(walk_ctx *ctx, const char *abs, const char *rel)
{
    char **names = NULL;
    size_t n = 0;
    int rc = read_names(abs, &names, &n, ctx->err);
    if (rc)
        return rc;
    /* parent_is_db_dir() classifies a child path, so ask it about a stand-in child. */
    char *child = join_path(rel, "x");
    if (!child) {
        free_names(names, n);
        return pb_fail(ctx->err, PB_ENOMEM, "walk: out of memory at %s", rel);
    }
    bool db_dir = parent_is_db_dir(child);
    free(child);
    /* A tablespace location may be shared by several clusters (an upgrade leaves the old
     * PG_<version>_<catversion> directory behind); like pg_basebackup, take only ours. */
    const char *only = ctx->tblspc_dir && is_tblspc_top(rel) ? ctx->tblspc_dir : NULL;
    for (size_t i = 0; i < n && !rc; i++) {
        char *r = join_path(rel, names[i]);
        if (!r) {
            rc = pb_fail(ctx->err, PB_ENOMEM, "walk: out of memory at %s", rel);
            break;
        }
        /* is_dir is not known before lstat; the only rule that depends on it keeps
         * pg_wal/archive_status, which is a directory whenever it exists. */
        bool keep_dir = strcmp(r, "pg_wal/archive_status") == 0;
        bool skip = walk_is_excluded(r, keep_dir) ||
                    (db_dir && is_unlogged_non_init(names[i], names, n)) ||
                    (only && strcmp(names[i], only) != 0);
        if (only && strcmp(names[i], only) != 0)
            pb_info("walk: %s belongs to another cluster (this one is %s): not backed up", r,
                    only);
        else if (skip)
            pb_debug("walk: %s excluded", r);
        free(r);
        if (!skip)
            rc = walk_one(ctx, abs, rel, names[i]);
    }
    free_names(names, n);
    return rc;
}

static int cmp_entry(const void *a, const void *b)
{
    const walk_entry *x = a, *y = b;
    bool xl = strcmp(x->path, "global/pg_control") == 0;
    bool yl = strcmp(y->path, "global/pg_control") == 0;
    if (xl != yl)
        return xl ? 1 : -1;
    return strcmp(x->path, y->path);
}

int walk_pgdata(const char *pgdata, walk_list *out, pb_error *err)
{
    return walk_pgdata_cluster(pgdata, NULL, out, err);
}

int walk_pgdata_cluster(const char *pgdata, const char *tblspc_dir, walk_list *out,
                        pb_error *err)
{
    struct stat st;
    walk_ctx ctx = {out, 0, err, tblspc_dir && *tblspc_dir ? tblspc_dir : NULL};
    out->items = NULL;
    out->count = 0;
    if (!pgdata || stat(pgdata, &st) != 0)
        return pb_fail_errno(err, PB_ENOENT, "walk: data directory %s not found",
                             pgdata ? pgdata : "(null)");
    if (!S_ISDIR(st.st_mode))
        return pb_fail(err, PB_EINVAL, "walk: %s is not a directory", pgdata);
    int rc = walk_dir(&ctx, pgdata, "");
    if (rc) {
        walk_list_free(out);
        return rc;
    }
    if (out->count)
        qsort(out->items, out->count, sizeof(*out->items), cmp_entry);
    return 0;
}

void walk_list_free(walk_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->count; i++) {
        free(l->items[i].path);
        free(l->items[i].link_target);
    }
    free(l->items);
    l->items = NULL;
    l->count = 0;
}
