/* tools/options.c — command line, environment and config file parsing. */
#include "tools/options_internal.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
    O_REPO = 256, O_S3_ENDPOINT, O_S3_REGION, O_S3_INSECURE, O_S3_CA, O_S3_PARALLEL,
    O_S3_PART, O_S3_STYLE, O_STATE, O_CONFIG, O_LOG, O_PGDATA, O_DBNAME, O_TYPE, O_READ_SIZE,
    O_QD, O_NO_URING, O_NO_DIRECT, O_ON_CKSUM, O_LEVEL, O_FULL_EVERY, O_FULL_AFTER, O_WAL_TIMEOUT,
    O_TARGET_DIR, O_SET, O_DELTA, O_FORCE, O_T_TIME, O_T_LSN, O_T_XID, O_T_NAME, O_T_END,
    O_T_EXCL, O_T_ACTION, O_T_TLI, O_TS_MAP, O_JSON, O_RETAIN_FULL, O_S3_RETRIES, O_HELP,
    O_DB_INCLUDE,
    O_MAX_RATE, O_NICE, O_JOBS, O_RESTORE_POINTS,
    O_INCR_MODE, O_VERIFY_SCAN, O_ENC_KEY,
    O_CLUSTER, O_REPORT, O_METRICS, O_LOG_FILE, O_QUIET, O_PROGRESS, O_VERSION,
    O_IO_CLASS, O_CPU_PRIO, O_CPU_WEIGHT, O_CHECKPOINT, O_MAX_MEMORY,
    O_COMPRESS_ADAPT, O_ARCHIVE_MODE, O_DRY_RUN, O_ARCHIVE_TIMEOUT,
    O_LOG_LEVEL_FILE, O_LOG_PATH,
    O_END
};

static const struct option long_opts[] = {
    {"repo", 1, 0, O_REPO}, {"s3-endpoint", 1, 0, O_S3_ENDPOINT},
    {"s3-region", 1, 0, O_S3_REGION}, {"s3-insecure", 0, 0, O_S3_INSECURE},
    {"s3-ca-file", 1, 0, O_S3_CA}, {"s3-parallel", 1, 0, O_S3_PARALLEL},
    {"s3-part-size", 1, 0, O_S3_PART}, {"s3-uri-style", 1, 0, O_S3_STYLE},
    {"s3-retries", 1, 0, O_S3_RETRIES}, {"state-dir", 1, 0, O_STATE},
    {"config", 1, 0, O_CONFIG}, {"log-level", 1, 0, O_LOG}, {"pgdata", 1, 0, O_PGDATA},
    {"dbname", 1, 0, O_DBNAME}, {"type", 1, 0, O_TYPE}, {"read-size", 1, 0, O_READ_SIZE},
    {"queue-depth", 1, 0, O_QD}, {"no-uring", 0, 0, O_NO_URING},
    {"no-direct", 0, 0, O_NO_DIRECT}, {"on-checksum-error", 1, 0, O_ON_CKSUM},
    {"compress-level", 1, 0, O_LEVEL}, {"full-every", 1, 0, O_FULL_EVERY},
    {"full-after", 1, 0, O_FULL_AFTER}, {"wal-timeout", 1, 0, O_WAL_TIMEOUT},
    {"target-dir", 1, 0, O_TARGET_DIR}, {"set", 1, 0, O_SET}, {"delta", 0, 0, O_DELTA},
    {"force", 0, 0, O_FORCE}, {"target-time", 1, 0, O_T_TIME}, {"target-lsn", 1, 0, O_T_LSN},
    {"target-xid", 1, 0, O_T_XID}, {"target-name", 1, 0, O_T_NAME},
    {"target-end", 0, 0, O_T_END}, {"target-exclusive", 0, 0, O_T_EXCL},
    {"target-action", 1, 0, O_T_ACTION}, {"target-timeline", 1, 0, O_T_TLI},
    {"tablespace-map", 1, 0, O_TS_MAP}, {"json", 0, 0, O_JSON},
    {"db-include", 1, 0, O_DB_INCLUDE},
    {"retain-full", 1, 0, O_RETAIN_FULL}, {"help", 0, 0, O_HELP},
    {"max-rate", 1, 0, O_MAX_RATE}, {"jobs", 1, 0, O_JOBS}, {"nice", 1, 0, O_NICE},
    {"restore-points", 0, 0, O_RESTORE_POINTS},
    {"incremental-mode", 1, 0, O_INCR_MODE}, {"verify-scan", 1, 0, O_VERIFY_SCAN},
    {"encrypt-key-file", 1, 0, O_ENC_KEY},
    {"cluster", 1, 0, O_CLUSTER}, {"report", 1, 0, O_REPORT}, {"metrics-file", 1, 0, O_METRICS},
    {"log-file", 1, 0, O_LOG_FILE}, {"quiet", 0, 0, O_QUIET},
    {"progress-interval", 1, 0, O_PROGRESS}, {"version", 0, 0, O_VERSION},
    {"io-class", 1, 0, O_IO_CLASS}, {"cpu-priority", 1, 0, O_CPU_PRIO},
    {"cpu-weight", 1, 0, O_CPU_WEIGHT}, {"checkpoint", 1, 0, O_CHECKPOINT},
    {"max-memory", 1, 0, O_MAX_MEMORY},
    {"compress-adapt", 1, 0, O_COMPRESS_ADAPT},
    {"archive-mode", 1, 0, O_ARCHIVE_MODE},
    {"dry-run", 0, 0, O_DRY_RUN}, {"archive-timeout", 1, 0, O_ARCHIVE_TIMEOUT},
    {"retain-full-days", 1, 0, O_RETAIN_DAYS}, {"retain-archive", 1, 0, O_RETAIN_ARCHIVE},
    {"primary-conninfo", 1, 0, O_PRIMARY_CONNINFO},
    {"target-immediate", 0, 0, O_TARGET_IMMEDIATE}, {"annotation", 1, 0, O_ANNOTATION},
    {"log-level-console", 1, 0, O_LOG}, {"log-level-file", 1, 0, O_LOG_LEVEL_FILE},
    {"log-path", 1, 0, O_LOG_PATH},
    {0, 0, 0, 0},
};

#define NLONG (sizeof(long_opts) / sizeof(long_opts[0]) - 1)
_Static_assert(NLONG <= PB_MAX_OPTIONS, "pb_options tracks each option's source");

/* Each command's usage, in the order the global usage lists them. */
static const struct {
    const char *command, *text;
} usages[] = {
    {"backup",
     "  backup   [--type full|incr] [--pgdata DIR] [--dbname CONNINFO] [--read-size N]\n"
     "           [--queue-depth N] [--on-checksum-error warn|fail] [--full-every N]\n"
     "           [--full-after DURATION] [--compress-level N] [--max-rate BYTES/s]\n"
     "           [--nice 0..19 (default 10)]\n"
     "           [--incremental-mode scan|file|wal (default: wal when possible, else file)]\n"
     "           [--verify-scan N|DURATION (full hash scan every Nth incremental or after\n"
     "            DURATION; default 7 or 7d; 0 = only full backups)]\n"
     "           [--io-class idle|best-effort[:N]|default] [--cpu-priority idle|nice|normal]\n"
     "           [--cpu-weight 1..10000] [--checkpoint spread|fast] [--max-memory BYTES]\n"
     "           [--compress-adapt on|off]\n"},
    {"restore",
     "  restore  --target-dir DIR [--set ID|latest] [--delta|--force]\n"
     "           [--target-time T | --target-lsn L | --target-xid X | --target-name N |\n"
     "            --target-end] [--target-exclusive] [--target-action promote|pause|shutdown]\n"
     "           [--target-timeline latest|current|ID] [--tablespace-map OID=DIR]\n"
     "           [--archive-mode off|preserve (default off: the copy does not archive)]\n"
     "           [--type standby [--primary-conninfo CONNINFO]] [--target-immediate]\n"
     "           [--jobs N (files rebuilt in parallel, default 4)]\n"
     "           [--max-memory BYTES (workers' read buffers + pack cache; fewer workers\n"
     "            when they do not fit)]\n"
     "           [--db-include NAME ... (only these databases, plus template0, template1\n"
     "            and postgres, always; the others' relation files are restored empty,\n"
     "            to be dropped)]\n"},
    {"archive-push",
     "  archive-push WAL_PATH            (archive_command = 'pageback archive-push %p')\n"},
    {"archive-get", "  archive-get  WAL_NAME DEST_PATH  (restore_command)\n"},
    {"info", "  info     [--json] [--restore-points (those in the archived WAL)]\n"},
    {"verify", "  verify   [--set ID] [--jobs N]\n"},
    {"expire", "  expire   --retain-full N | --retain-full-days D | --set ID\n"
               "           [--retain-archive N] [--dry-run]\n"},
    {"rebase", "  rebase   [--set ID] [--compress-level N]\n"},
    {"tune", "  tune     [--pgdata DIR] [--read-size N] [--queue-depth N]   (no --repo needed)\n"},
    {"config", "  config check  (the effective settings and their sources, secrets masked)\n"},
    {"init", "  init     [--pgdata DIR | --dbname CONNINFO]  (create the repository)\n"},
    {"check", "  check    [--pgdata DIR] [--dbname CONNINFO] [--archive-timeout SECONDS]\n"},
};

static const char usage_common[] =
    "common: --repo DIR|s3://bucket/prefix [--s3-endpoint URL] [--s3-region R]\n"
    "        [--s3-uri-style path|host] [--s3-ca-file F] [--s3-insecure] [--s3-parallel N]\n"
    "        [--state-dir DIR] [--config FILE] [--cluster NAME] [--log-level LEVEL]\n"
    "        [--log-level-file LEVEL|off] [--log-path DIR] [--log-file FILE] [--quiet]\n"
    "        [--report FILE] [--metrics-file FILE] [--help]\n"
    "        [--encrypt-key-file FILE (mode 0600; up to 4, the first seals new objects)]\n"
    "environment: PAGEBACK_<OPTION> for every option (PAGEBACK_REPO...), PAGEBACK_ENCRYPT_KEY,\n"
    "        PG* (libpq), AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION\n"
    "pageback --version; exit status 0 success, 1 failure, 2 usage or configuration error\n";

int opts_usage(FILE *out, const char *command)
{
    size_t n = sizeof(usages) / sizeof(usages[0]), i = 0;
    if (command) {
        while (i < n && strcmp(usages[i].command, command) != 0)
            i++;
        if (i == n)
            return PB_EINVAL;
        fprintf(out, "usage: pageback %s [options]\n%s", command, usages[i].text);
        opts_help_options(out, command, long_opts);
        return 0;
    } else {
        fputs("usage: pageback COMMAND [options]   (pageback COMMAND --help: one command)\n",
              out);
        for (i = 0; i < n; i++)
            fputs(usages[i].text, out);
    }
    fputs(usage_common, out);
    return 0;
}

static int parse_size(const char *text, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text)
        return PB_EINVAL;
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (v > (ULLONG_MAX >> shift) || v << shift > SIZE_MAX)
        return PB_EINVAL; /* "17179869184G" must not wrap to a small size */
    v <<= shift;
    if (*end == 'i' || *end == 'B')
        end += strspn(end, "iB");
    if (*end)
        return PB_EINVAL;
    *out = (size_t)v;
    return 0;
}

/* "90s", "30m", "12h", "7d" or plain seconds. */
static int parse_duration(const char *text, int64_t *out)
{
    char *end;
    long long v = strtoll(text, &end, 10);
    if (end == text || v < 0)
        return PB_EINVAL;
    int64_t mult = 1;
    if (*end == 'm') mult = 60;
    else if (*end == 'h') mult = 3600;
    else if (*end == 'd') mult = 86400;
    else if (*end == 's' || *end == '\0') mult = 1;
    else return PB_EINVAL;
    if (*end && end[1])
        return PB_EINVAL;
    *out = v * mult;
    return 0;
}

static int parse_uint(const char *text, unsigned *out)
{
    char *end;
    unsigned long v = strtoul(text, &end, 10);
    if (end == text || *end || v > UINT_MAX)
        return PB_EINVAL;
    *out = (unsigned)v;
    return 0;
}

static int add_tblspc(pb_options *o, const char *arg, pb_error *err)
{
    const char *eq = strchr(arg, '=');
    char *end;
    unsigned long oid = strtoul(arg, &end, 10);
    if (!eq || end != eq || eq[1] != '/' || o->restore.ntblspc >= PB_MAX_TBLSPC_MAP)
        return pb_fail(err, PB_EINVAL, "--tablespace-map expects OID=/absolute/dir, got '%s'",
                       arg);
    o->tblspc[o->restore.ntblspc].oid = (unsigned)oid;
    o->tblspc[o->restore.ntblspc].dir = eq + 1;
    o->restore.ntblspc++;
    o->restore.tblspc = o->tblspc;
    return 0;
}

static int add_db_include(pb_options *o, const char *arg, pb_error *err)
{
    if (!arg[0] || o->restore.ndb_include >= PB_MAX_DB_INCLUDE)
        return pb_fail(err, PB_EINVAL, "--db-include expects a database name (at most %d)",
                       PB_MAX_DB_INCLUDE);
    o->db_include[o->restore.ndb_include++] = arg;
    o->restore.db_include = o->db_include;
    return 0;
}

static int set_target(pb_options *o, rs_target_kind kind, const char *value, pb_error *err)
{
    if (o->restore.target != RS_TARGET_IMMEDIATE)
        return pb_fail(err, PB_EINVAL, "give only one of --target-time, --target-lsn, "
                       "--target-xid, --target-name, --target-end");
    o->restore.target = kind;
    o->restore.target_value = value;
    return 0;
}

static int apply_backup_opt(pb_options *o, int c, const char *arg, pb_error *err)
{
    size_t sz;
    int64_t secs;
    unsigned u;
    switch (c) {
    case O_TYPE:
        if (o->command && !strcmp(o->command, "restore"))
            return opts_restore_type(o, arg, err);
        if (strcmp(arg, "full") && strcmp(arg, "incr"))
            return pb_fail(err, PB_EINVAL, "--type must be full or incr, not '%s'", arg);
        o->backup.type = arg[0] == 'f' ? 'F' : 'I';
        return 0;
    case O_READ_SIZE:
        /* whole 8 kB pages per request: the scanner asserts it, a backup needs it */
        if (parse_size(arg, &sz) || sz < PB_PAGE_SIZE || sz % PB_PAGE_SIZE || sz > (64u << 20))
            return pb_fail(err, PB_EINVAL, "--read-size must be a multiple of 8 KiB (the page "
                           "size) between 8 KiB and 64 MiB, not '%s'", arg);
        o->backup.read_size = sz;
        return 0;
    case O_QD:
        if (parse_uint(arg, &u) || u == 0 || u > 256)
            return pb_fail(err, PB_EINVAL, "--queue-depth must be 1..256, not '%s'", arg);
        o->backup.queue_depth = u;
        return 0;
    case O_ON_CKSUM:
        if (strcmp(arg, "warn") && strcmp(arg, "fail"))
            return pb_fail(err, PB_EINVAL, "--on-checksum-error must be warn or fail");
        o->backup.on_checksum_error = arg[0] == 'f' ? BK_CHECKSUM_FAIL : BK_CHECKSUM_WARN;
        return 0;
    case O_LEVEL:
        if (parse_uint(arg, &u) || u < 1 || u > 19)
            return pb_fail(err, PB_EINVAL, "--compress-level must be 1..19");
        o->backup.zstd_level = (int)u;
        return 0;
    case O_FULL_EVERY:
        if (parse_uint(arg, &u))
            return pb_fail(err, PB_EINVAL, "--full-every expects a number, not '%s'", arg);
        o->backup.full_every = u;
        return 0;
    case O_FULL_AFTER:
        if (parse_duration(arg, &secs))
            return pb_fail(err, PB_EINVAL, "--full-after expects a duration like 7d or 12h");
        o->backup.full_after_secs = secs;
        return 0;
    case O_MAX_RATE:
        if (parse_size(arg, &sz))
            return pb_fail(err, PB_EINVAL, "--max-rate expects bytes per second like 200M");
        o->backup.max_rate = sz;
        return 0;
    case O_NICE:
        if (parse_uint(arg, &u) || u > 19)
            return pb_fail(err, PB_EINVAL, "--nice must be 0..19");
        o->backup.nice = (int)u;
        return 0;
    case O_IO_CLASS:
        o->backup.io_level = 7;
        if (!strcmp(arg, "idle") || !strcmp(arg, "default") || !strcmp(arg, "best-effort")) {
            o->backup.io_class = arg[0] == 'i' ? SCAN_IO_IDLE : arg[0] == 'd' ? SCAN_IO_DEFAULT
                                                                              : SCAN_IO_BEST_EFFORT;
            return 0;
        }
        if (!strncmp(arg, "best-effort:", 12) && arg[12] >= '0' && arg[12] <= '7' && !arg[13]) {
            o->backup.io_class = SCAN_IO_BEST_EFFORT;
            o->backup.io_level = arg[12] - '0';
            return 0;
        }
        return pb_fail(err, PB_EINVAL, "--io-class must be idle, best-effort, best-effort:0..7 "
                       "or default, not '%s'", arg);
    case O_CPU_PRIO:
        if (strcmp(arg, "idle") && strcmp(arg, "nice") && strcmp(arg, "normal"))
            return pb_fail(err, PB_EINVAL, "--cpu-priority must be idle, nice or normal");
        o->backup.cpu_priority = arg[0] == 'i' ? BK_CPU_IDLE : arg[1] == 'i' ? BK_CPU_NICE
                                                                              : BK_CPU_NORMAL;
        return 0;
    case O_CPU_WEIGHT:
        if (parse_uint(arg, &u) || u < 1 || u > 10000)
            return pb_fail(err, PB_EINVAL, "--cpu-weight must be 1..10000 (100 = normal)");
        o->backup.cpu_weight = u;
        return 0;
    case O_CHECKPOINT:
        if (strcmp(arg, "spread") && strcmp(arg, "fast"))
            return pb_fail(err, PB_EINVAL, "--checkpoint must be spread or fast, not '%s'", arg);
        o->backup.checkpoint_fast = arg[0] == 'f';
        return 0;
    case O_MAX_MEMORY:
        if (parse_size(arg, &sz) || sz == 0)
            return pb_fail(err, PB_EINVAL, "--max-memory expects bytes like 64M, not '%s'", arg);
        o->backup.max_memory = sz;
        return 0;
    case O_COMPRESS_ADAPT:
        if (strcmp(arg, "on") && strcmp(arg, "off"))
            return pb_fail(err, PB_EINVAL, "--compress-adapt must be on or off, not '%s'", arg);
        o->backup.compress_adapt = arg[1] == 'n';
        return 0;
    case O_INCR_MODE:
        if (!strcmp(arg, "scan"))
            o->backup.incr_mode = BK_INCR_SCAN;
        else if (!strcmp(arg, "file"))
            o->backup.incr_mode = BK_INCR_FILE;
        else if (!strcmp(arg, "wal"))
            o->backup.incr_mode = BK_INCR_WAL;
        else
            return pb_fail(err, PB_EINVAL, "--incremental-mode must be scan, file or wal, not "
                           "'%s'", arg);
        return 0;
    case O_VERIFY_SCAN:
        /* A number counts incrementals, anything else is a duration; one replaces both
         * defaults. */
        if (parse_uint(arg, &u) == 0) {
            o->backup.verify_every = u;
            o->backup.verify_after_secs = 0;
        } else if (parse_duration(arg, &secs) == 0) {
            o->backup.verify_every = 0;
            o->backup.verify_after_secs = secs;
        } else {
            return pb_fail(err, PB_EINVAL, "--verify-scan expects a count (every Nth "
                           "incremental) or a duration like 7d, not '%s'", arg);
        }
        return 0;
    case O_WAL_TIMEOUT:
        if (parse_uint(arg, &u))
            return pb_fail(err, PB_EINVAL, "--wal-timeout expects seconds");
        o->backup.wal_timeout_secs = u;
        return 0;
    }
    return 1;
}

static int apply_opt(pb_options *o, int c, const char *arg, pb_error *err)
{
    size_t sz;
    unsigned u;
    int rc = apply_backup_opt(o, c, arg, err);
    if (rc <= 0)
        return rc;
    switch (c) {
    case O_REPO: o->repo.location = arg; break;
    case O_S3_ENDPOINT: o->repo.s3_endpoint = arg; break;
    case O_S3_REGION: o->repo.s3_region = arg; break;
    case O_S3_INSECURE: o->repo.s3_insecure = true; o->s3_insecure_given = true; break;
    case O_S3_CA: o->repo.s3_ca_file = arg; break;
    case O_S3_PARALLEL:
        if (parse_uint(arg, &u) || u == 0 || u > 64)
            return pb_fail(err, PB_EINVAL, "--s3-parallel must be 1..64");
        o->repo.s3_parallel = u;
        break;
    case O_S3_RETRIES:
        if (parse_uint(arg, &u) || u > 50)
            return pb_fail(err, PB_EINVAL, "--s3-retries must be 0..50");
        o->repo.s3_retries = u;
        break;
    case O_S3_PART:
        if (parse_size(arg, &sz) || sz < (5u << 20))
            return pb_fail(err, PB_EINVAL, "--s3-part-size must be at least 5 MiB");
        o->repo.s3_part_size = sz;
        break;
    case O_S3_STYLE:
        if (strcmp(arg, "path") && strcmp(arg, "host"))
            return pb_fail(err, PB_EINVAL, "--s3-uri-style must be path or host");
        o->repo.s3_path_style = arg[0] == 'p';
        o->s3_uri_style = arg;
        break;
    case O_STATE: o->state_dir = arg; break;
    case O_ENC_KEY:
        if (o->n_key_files == REPO_MAX_KEYS)
            return pb_fail(err, PB_EINVAL, "at most %d --encrypt-key-file", REPO_MAX_KEYS);
        o->key_files[o->n_key_files++] = arg;
        break;
    case O_CONFIG: o->config_file = arg; break;
    case O_LOG: {
        pb_log_level lv;
        if (pb_log_level_parse(arg, 0, &lv))
            return pb_fail(err, PB_EINVAL, "--log-level must be error, warn, info, detail or "
                           "debug, not '%s'", arg);
        pb_log_set_level(lv);
        break;
    }
    case O_LOG_LEVEL_FILE:
        if (pb_log_level_parse(arg, 1, &o->log_level_file))
            return pb_fail(err, PB_EINVAL, "--log-level-file must be off, error, warn, info, "
                           "detail or debug, not '%s'", arg);
        break;
    case O_LOG_PATH: o->log_path = arg; break;
    case O_PGDATA: o->backup.pgdata = arg; break;
    case O_DBNAME: o->backup.conninfo = arg; break;
    case O_NO_URING: o->backup.use_uring = false; break;
    case O_NO_DIRECT: o->backup.direct = false; break;
    case O_TARGET_DIR: o->restore.target_dir = arg; break;
    case O_SET: o->restore.set = arg; break;
    case O_DELTA: o->restore.delta = true; break;
    case O_FORCE: o->restore.force = true; break;
    case O_T_TIME: return set_target(o, RS_TARGET_TIME, arg, err);
    case O_T_LSN: return set_target(o, RS_TARGET_LSN, arg, err);
    case O_T_XID: return set_target(o, RS_TARGET_XID, arg, err);
    case O_T_NAME: return set_target(o, RS_TARGET_NAME, arg, err);
    case O_T_END: return set_target(o, RS_TARGET_END, NULL, err);
    case O_T_EXCL: o->restore.target_exclusive = true; break;
    case O_T_ACTION:
        if (strcmp(arg, "promote") && strcmp(arg, "pause") && strcmp(arg, "shutdown"))
            return pb_fail(err, PB_EINVAL, "--target-action must be promote, pause or shutdown");
        o->restore.target_action = arg;
        break;
    case O_T_TLI: o->restore.target_timeline = arg; break;
    case O_ARCHIVE_MODE:
        if (strcmp(arg, "off") && strcmp(arg, "preserve"))
            return pb_fail(err, PB_EINVAL, "--archive-mode must be off or preserve");
        o->restore.archive_preserve = arg[0] == 'p';
        break;
    case O_TS_MAP: return add_tblspc(o, arg, err);
    case O_DB_INCLUDE: return add_db_include(o, arg, err);
    case O_JSON: o->json = true; break;
    case O_RESTORE_POINTS: o->restore_points = true; break;
    case O_CLUSTER: o->cluster = arg; break;
    case O_REPORT: o->report_file = arg; break;
    case O_METRICS: o->metrics_file = arg; break;
    case O_LOG_FILE: o->log_file = arg; break;
    case O_QUIET: o->quiet = true; break;
    case O_PROGRESS:
        if (parse_uint(arg, &u) || u > 86400)
            return pb_fail(err, PB_EINVAL, "--progress-interval must be 0..86400 seconds");
        o->progress_interval = u;
        break;
    case O_JOBS:
        if (parse_uint(arg, &u) || u == 0 || u > 64)
            return pb_fail(err, PB_EINVAL, "--jobs must be 1..64");
        o->restore.jobs = u;
        break;
    case O_DRY_RUN: o->dry_run = true; break;
    case O_ARCHIVE_TIMEOUT:
        if (parse_uint(arg, &u) || u == 0 || u > 86400)
            return pb_fail(err, PB_EINVAL, "--archive-timeout must be 1..86400 seconds, not "
                           "'%s'", arg);
        o->archive_timeout = u;
        break;
    case O_RETAIN_FULL:
        if (parse_uint(arg, &u) || u == 0)
            return pb_fail(err, PB_EINVAL, "--retain-full must be at least 1");
        o->retain_full = (int)u;
        break;
    default:
        if ((rc = opts_apply_ops(o, c, arg, err)) <= 0)
            return rc;
        return pb_fail(err, PB_EINVAL, "unknown option");
    }
    return 0;
}

/* The option table and apply_opt, for the environment and configuration file
 * (tools/options_sources.c). */
const struct option *opts_long_table(void)
{
    return long_opts;
}

int opts_apply(pb_options *o, int idx, const char *arg, pb_error *err)
{
    return apply_opt(o, long_opts[idx].val, arg, err);
}

static void find_program(pb_options *o, const char *argv0)
{
    static char self[4096]; /* program option, set once */
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        o->program = self;
    } else {
        o->program = argv0;
    }
}

/* "--foo=bar" -> "--foo" in a one-line message. */
static int bad_option(const char *text, const char *command, bool missing, pb_error *err)
{
    size_t n = strcspn(text, "=");
    if (missing)
        return pb_fail(err, PB_EINVAL, "option %.*s for %s needs a value", (int)n, text,
                       command);
    return pb_fail(err, PB_EINVAL, "unknown option %.*s for %s (see pageback %s --help)",
                   (int)n, text, command, command);
}

static int parse_flags(pb_options *o, int argc, char **argv, pb_error *err)
{
    optind = 2;
    opterr = 0;
    int c, li;
    while (li = -1, (c = getopt_long(argc, argv, ":", long_opts, &li)) != -1) {
        if (c == '?' || c == ':' || li < 0)
            return bad_option(argv[optind - 1], o->command, c == ':', err);
        if (c == O_HELP || c == O_VERSION) {
            /* Nothing else is needed or checked: help works without a repository. */
            o->help_requested = c == O_HELP;
            o->version_requested = c == O_VERSION;
            return 1;
        }
        if (!opts_option_applies(long_opts[li].name, o->command))
            return pb_fail(err, PB_EINVAL, "option --%s is not for %s (see pageback %s --help)",
                           long_opts[li].name, o->command, o->command);
        int rc = apply_opt(o, c, optarg, err);
        if (rc)
            return rc;
        o->source[li] = OPTS_FLAG;
        o->given[li] = optarg ? optarg : "true";
    }
    for (; optind < argc && o->nargs < 4; optind++)
        o->args[o->nargs++] = argv[optind];
    if (optind < argc)
        return pb_fail(err, PB_EINVAL, "too many arguments for %s", o->command);
    return 0;
}

/* --report first, so a usage error anywhere on the line is reported too. */
static void find_report(pb_options *o, int argc, char **argv)
{
    o->report_file = getenv("PAGEBACK_REPORT");
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--"))
            break;
        if (!strcmp(argv[i], "--report") && i + 1 < argc)
            o->report_file = argv[i + 1];
        else if (!strncmp(argv[i], "--report=", 9))
            o->report_file = argv[i] + 9;
    }
}

static void opts_init(pb_options *o, const char *argv0)
{
    memset(o, 0, sizeof(*o));
    repo_opts ro = REPO_OPTS_INIT;
    bk_opts bo = BK_OPTS_INIT;
    rs_opts rso = RS_OPTS_INIT;
    o->repo = ro;
    o->backup = bo;
    o->restore = rso;
    o->progress_interval = 10;
    o->archive_timeout = 60;
    o->log_level_file = PB_LOG_DETAIL; /* the file keeps what the console leaves out */
    find_program(o, argv0);
}

int opts_parse(pb_options *o, int argc, char **argv, pb_error *err)
{
    opts_init(o, argv[0]);
    if (argc >= 2 && (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help"))) {
        o->help_requested = true; /* "pageback help [COMMAND]" */
        o->command = argc >= 3 ? argv[2] : NULL;
        return 0;
    }
    if (argc >= 2 && (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version"))) {
        o->version_requested = true;
        return 0;
    }
    if (argc < 2 || argv[1][0] == '-')
        return pb_fail(err, PB_EINVAL, "%s: the command comes first (pageback COMMAND "
                       "[options]; pageback --help lists the commands)",
                       argc < 2 ? "no command given" : "no command before the options");
    o->command = argv[1];
    find_report(o, argc, argv);
    int rc = parse_flags(o, argc, argv, err);
    if (rc)
        return rc > 0 ? 0 : rc;
    if ((rc = opts_apply_env(o, err)))
        return rc;
    const char *v;
    if (!o->config_file && (v = getenv("PAGEBACK_CONFIG")) && *v)
        o->config_file = v;
    if (!o->config_file && access("/etc/pageback.conf", F_OK) == 0)
        o->config_file = "/etc/pageback.conf";
    if (!o->cluster && (v = getenv("PAGEBACK_CLUSTER")) && *v)
        o->cluster = v;
    if (o->cluster && !o->config_file)
        return pb_fail(err, PB_EINVAL, "--cluster %s needs a configuration file (--config, "
                       "PAGEBACK_CONFIG or /etc/pageback.conf)", o->cluster);
    if (o->config_file && (rc = opts_apply_config(o, err)))
        return rc;
    if ((rc = opts_load_keys(o, err)) || (rc = opts_finish_ops(o, err)))
        return rc;
    if (!o->repo.location && strcmp(o->command, "tune") && strcmp(o->command, "config"))
        return pb_fail(err, PB_EINVAL, "no repository: give --repo DIR|s3://bucket/prefix or "
                       "set PAGEBACK_REPO");
    return 0;
}

void opts_free(pb_options *o)
{
    cfg_free(&o->cfg);
    free(o->cluster_location);
    o->cluster_location = NULL;
    for (size_t i = 0; i < REPO_MAX_KEYS; i++) {
        if (o->key_text[i]) /* key material: wiped, not just freed */
            memset(o->key_text[i], 0, o->keys[i].len);
        free(o->key_text[i]);
        o->key_text[i] = NULL;
    }
}
