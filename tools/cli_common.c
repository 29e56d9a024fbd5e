/*
 * tools/cli_common.c — what every command does the same way: open the repository the
 * options name, find its local state directory, and turn a failure into its log line
 * and exit code. One copy here, so the commands cannot drift apart in how they report
 * (docs/pageback.1, EXIT STATUS).
 */
#include "tools/commands.h"

#include "engine/chain/chain.h"

#include <inttypes.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Without a key, an encrypted repository is refused here, before the command reads or
 * lists anything (decided by its key-check objects, not by a failed read). */
int cmd_open_repo(repo **out, const pb_options *o, pb_error *err)
{
    int rc = repo_open(out, &o->repo, err);
    if (rc == 0 && (rc = repo_refuse_encrypted(*out, err))) {
        repo_free(*out);
        *out = NULL;
    }
    return rc;
}

int cmd_report(cmd_outcome *res, const pb_error *err)
{
    pb_log(PB_LOG_ERROR, "%s", err->msg);
    res->failed = true;
    res->err = *err;
    return CMD_EXIT_FAILED;
}

int cmd_usage_error(cmd_outcome *res, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->err.msg, sizeof(res->err.msg), fmt, ap);
    va_end(ap);
    res->err.code = PB_EINVAL;
    res->failed = true;
    pb_log(PB_LOG_ERROR, "%s", res->err.msg);
    return CMD_EXIT_USAGE;
}

/* The repository location as one string per repository: "/srv/r", "/srv/r/" and
 * "/srv/./r" give one state directory (and a local path resolves through links). */
static void canonical_location(const char *loc, char *out, size_t cap)
{
    char real[PATH_MAX];
    if (strncmp(loc, "s3://", 5) != 0 && realpath(loc, real))
        loc = real;
    size_t n = strlen(loc);
    while (n > 1 && loc[n - 1] == '/')
        n--;
    snprintf(out, cap, "%.*s", (int)n, loc);
}

/* The local catalog cache: one directory per repository, under the user's own state
 * directory ($XDG_STATE_HOME, else ~/.local/state), never at a predictable path in a
 * shared directory such as /tmp where another user could plant it first. The backup
 * refuses a state directory that is not the user's own or that others may write. */
const char *cmd_state_dir(const pb_options *o, char *buf, size_t cap)
{
    if (o->state_dir)
        return o->state_dir;
    char loc[PATH_MAX + 8];
    canonical_location(o->repo.location, loc, sizeof(loc));
    uint64_t h = pb_hash64(loc, strlen(loc));
    const char *xdg = getenv("XDG_STATE_HOME");
    if (xdg && xdg[0] == '/') {
        snprintf(buf, cap, "%s/pageback/%016" PRIx64, xdg, h);
        return buf;
    }
    const char *home = getenv("HOME");
    struct passwd *pw = NULL;
    if (!home || home[0] != '/')
        home = (pw = getpwuid(geteuid())) && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir
                                                                                : NULL;
    if (!home)
        return NULL;
    snprintf(buf, cap, "%s/.local/state/pageback/%016" PRIx64, home, h);
    return buf; /* created by the backup when missing */
}


int cmd_write_atomic(const char *path, const void *data, size_t len, pb_error *err)
{
    /* Reports name hosts, paths and errors: 0600 from creation on (mkstemp), then
     * renamed over path. */
    char tmp[PATH_MAX];
    int fd = -1;
    int rc = pb_temp_beside(path, tmp, sizeof(tmp), &fd, err);
    if (rc)
        return rc;
    FILE *fp = fdopen(fd, "w");
    if (!fp) {
        rc = pb_fail_errno(err, PB_EIO, "cannot write %s", tmp);
        close(fd);
        unlink(tmp);
        return rc;
    }
    bool ok = fwrite(data, 1, len, fp) == len && fflush(fp) == 0 && fsync(fileno(fp)) == 0;
    ok = fclose(fp) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        rc = pb_fail_errno(err, PB_EIO, "cannot write %s", path);
        unlink(tmp);
        return rc;
    }
    return 0;
}

bool cmd_set_missing(repo *r, const char *set)
{
    if (!set || !strcmp(set, "latest"))
        return false;
    pb_error err = PB_ERROR_INIT;
    mf_backup h;
    return chain_load_header(r, set, &h, &err) == PB_ENOENT;
}
