/*
 * engine/backup/check.h — what `pageback check` proves before the first backup (prefix ck_):
 * the data directory is the connected server's, archiving is on and pushes into this
 * repository, the archiver is not failing, the repository is initialized for this
 * cluster, writable and private, and one forced WAL segment makes the round trip from
 * the server into the repository within a bound.
 *
 * Each finding goes to a callback as it is made (the program prints it); a failed
 * finding names the setting at fault and its fix.
 */
#ifndef PB_ENGINE_CHECK_H
#define PB_ENGINE_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "common/pb.h"
#include "engine/storage/storage.h"

typedef enum ck_status { CK_OK, CK_WARN, CK_FAIL, CK_SKIP } ck_status;

/* One finding: setting is what it is about ("archive_mode", "--pgdata", "repository"),
 * what says what was found, fix (NULL for CK_OK) what to do about it. */
typedef void (*ck_note_fn)(void *ctx, ck_status st, const char *setting, const char *what,
                           const char *fix);

/* What archive_command must name to archive into the checked repository. */
typedef struct ck_target {
    const char *repo;    /* the repository location (required) */
    const char *config;  /* --config of the check, or NULL */
    const char *cluster; /* --cluster of the check, or NULL */
} ck_target;

typedef struct ck_opts {
    const char *conninfo; /* libpq; NULL or "": the PG* environment */
    const char *pgdata;   /* NULL: the server's data_directory */
    ck_target target;
    unsigned archive_timeout_secs; /* the round trip's bound */
    ck_note_fn note;
    void *note_ctx;
} ck_opts;

/* Run every check that applies; r NULL when the repository could not be opened (the
 * caller noted why), then the checks that need it are skipped. *failures counts the
 * CK_FAIL findings. A non-zero return is a failure the checks could not go on after
 * (no connection): err says it, and it counts as one failure too. */
int ck_run(repo *r, const ck_opts *o, unsigned *failures, pb_error *err);

/* What archive_command does, as far as its text tells. */
typedef enum ck_cmd_verdict {
    CK_CMD_SAME,        /* pageback archive-push into the target */
    CK_CMD_ELSEWHERE,   /* pageback archive-push into another repository or cluster */
    CK_CMD_NOT_PAGEBACK,/* it does not run pageback archive-push at all */
    CK_CMD_UNKNOWN      /* it runs pageback archive-push, but where to cannot be told */
} ck_cmd_verdict;
/* Parse archive_command (PostgreSQL's %% read as %, then shell words). why: one line. */
ck_cmd_verdict ck_archive_command(const char *cmd, const ck_target *want, char *why,
                                  size_t cap);

/* Poll until WAL file name is in the archive or timeout_secs pass: *arrived says which;
 * a non-zero return is a repository failure. */
int ck_wait_archived(repo *r, const char *name, unsigned timeout_secs, bool *arrived,
                     pb_error *err);

/* The system identifier in pgdata's global/pg_control (its first field in every
 * version). */
int ck_pgdata_system_id(const char *pgdata, uint64_t *out, pb_error *err);

#endif
