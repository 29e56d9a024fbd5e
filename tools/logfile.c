/*
 * tools/logfile.c — the log file of a run (tools/logfile.h). A cron job or a systemd
 * timer shows nobody its console, and archive-push's stderr lands in the PostgreSQL log:
 * the log file is where an operator looks afterwards, so every run has one by default,
 * per cluster and command. It is opened with O_NOFOLLOW and O_APPEND, 0600 from its
 * creation (it names hosts, paths and errors), and must be this user's regular file: a
 * link or another user's file planted at its name is refused, not written through.
 */
#include "tools/logfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A file-name-safe copy of a cluster or command name. */
static void name_part(const char *in, char *out, size_t cap)
{
    size_t i = 0;
    for (; in[i] && i + 1 < cap; i++)
        out[i] = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
                        in[i]) && !(i == 0 && in[i] == '.') ? in[i] : '_';
    out[i] = '\0';
}

/* The default file: --log-path, else "log" in the state directory (beside, not among,
 * the catalog's own files); none without either. */
static int default_path(const pb_options *o, char *out, size_t cap, pb_error *err)
{
    char sd[4096], dir[4100], cluster[128], command[64];
    int rc = 0;
    if (o->log_path) {
        snprintf(dir, sizeof(dir), "%s", o->log_path);
    } else {
        const char *state = o->state_dir || o->repo.location ? cmd_state_dir(o, sd, sizeof(sd))
                                                             : NULL;
        if (!state)
            return PB_ENOENT; /* tune, config: no repository, no state directory */
        rc = pb_state_dir_ready(state, err);
        snprintf(dir, sizeof(dir), "%s/log", state);
    }
    if (rc == 0)
        rc = pb_mkdir_p(dir, 0700, err);
    if (rc)
        return rc;
    name_part(o->cluster ? o->cluster : "default", cluster, sizeof(cluster));
    name_part(o->command, command, sizeof(command));
    if ((size_t)snprintf(out, cap, "%s/%s-%s.log", dir, cluster, command) >= cap)
        return pb_fail(err, PB_EINVAL, "log directory path too long: %.64s...", dir);
    return 0;
}

static int open_log(const char *path, int *fd, pb_error *err)
{
    int f = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (f < 0)
        return pb_fail_errno(err, PB_EIO, "cannot open the log file %s", path);
    struct stat st;
    int rc = 0;
    if (fstat(f, &st) != 0)
        rc = pb_fail_errno(err, PB_EIO, "cannot stat the log file %s", path);
    else if (!S_ISREG(st.st_mode) || st.st_uid != geteuid())
        rc = pb_fail(err, PB_ESTATE, "the log file %s is not a regular file of this user "
                     "(uid %u): refusing to write it", path, (unsigned)geteuid());
    if (rc) {
        close(f);
        return rc;
    }
    *fd = f;
    return 0;
}

static bool run_by_postgres(const pb_options *o)
{
    return !strcmp(o->command, "archive-push") || !strcmp(o->command, "archive-get");
}

int cmd_logfile_open(cmd_logfile *lf, const pb_options *o, cmd_outcome *res)
{
    lf->fd = -1;
    lf->path[0] = '\0';
    pb_log_set_file_level(o->log_level_file);
    if (o->log_level_file == PB_LOG_OFF)
        return 0;
    pb_error err = PB_ERROR_INIT;
    int rc;
    if (o->log_file)
        rc = (size_t)snprintf(lf->path, sizeof(lf->path), "%s", o->log_file) <
                     sizeof(lf->path) ? 0 : pb_fail(&err, PB_EINVAL, "--log-file too long");
    else if ((rc = default_path(o, lf->path, sizeof(lf->path), &err)) == PB_ENOENT)
        return 0;
    if (rc == 0)
        rc = open_log(lf->path, &lf->fd, &err);
    if (rc == 0) {
        pb_log_set_file(lf->fd);
        if (!run_by_postgres(o)) /* those stay at one line per segment */
            pb_log_file_only("%s begin", o->command);
        return 0;
    }
    if (o->log_file && !run_by_postgres(o))
        return cmd_usage_error(res, "%s", err.msg);
    pb_warn("%s: logging to the console only", err.msg);
    return 0;
}

static const char *status_word(int rc)
{
    return rc == CMD_EXIT_OK ? "success" : rc == CMD_EXIT_USAGE ? "usage error" : "failed";
}

void cmd_logfile_close(cmd_logfile *lf, const pb_options *o, int rc, double started)
{
    if (lf->fd < 0)
        return;
    double secs = pb_now() - started;
    if (run_by_postgres(o) && o->nargs > 0) {
        /* PostgreSQL runs these once per segment: the one line of the run names it. */
        const char *seg = strrchr(o->args[0], '/');
        pb_log_file_only("%s %s complete: exit %d (%s) in %.3f s", o->command,
                         seg ? seg + 1 : o->args[0], rc, status_word(rc), secs);
    } else {
        pb_log_file_only("%s complete: exit %d (%s) in %.1f s", o->command, rc,
                         status_word(rc), secs);
    }
    pb_log_set_file(-1);
    close(lf->fd);
    lf->fd = -1;
}
