/* tools/archive_commands.c — archive-push (archive_command) and archive-get (restore_command). */
#include "tools/commands.h"

#include "engine/archive.h"

#include <stdio.h>

static int report(const pb_error *err)
{
    pb_log(PB_LOG_ERROR, "%s", err->msg);
    return 1;
}

static int open_repo(pb_options *o, repo **r, pb_error *err)
{
    return repo_open(r, &o->repo, err);
}

int cmd_archive_push(pb_options *o)
{
    pb_error err = PB_ERROR_INIT;
    if (o->nargs != 1) {
        pb_log(PB_LOG_ERROR, "archive-push needs the WAL file path (%%p)");
        return 2;
    }
    repo *r = NULL;
    int rc = open_repo(o, &r, &err);
    if (rc == 0)
        rc = arch_push(r, o->args[0], &err);
    repo_free(r);
    return rc ? report(&err) : 0;
}

int cmd_archive_get(pb_options *o)
{
    pb_error err = PB_ERROR_INIT;
    if (o->nargs != 2) {
        pb_log(PB_LOG_ERROR, "archive-get needs the WAL file name (%%f) and destination (%%p)");
        return 2;
    }
    repo *r = NULL;
    int rc = open_repo(o, &r, &err);
    if (rc == 0)
        rc = arch_get(r, o->args[0], o->args[1], &err);
    repo_free(r);
    if (rc == PB_ENOENT) {
        /* Normal at the end of the archive: PostgreSQL ends recovery on a non-zero exit. */
        pb_log(PB_LOG_INFO, "%s is not in the archive", o->args[0]);
        return 1;
    }
    return rc ? report(&err) : 0;
}
