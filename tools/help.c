/*
 * tools/help.c — what each option means, which commands take it and its default: the
 * text of "pageback COMMAND --help", the rule that refuses an option given to a command
 * that does not use it, and the defaults "pageback config check" shows. One row per
 * option; an option without a row is accepted by every command and listed as
 * undocumented, so a new option is never silently refused.
 */
#include "tools/options.h"

#include <stdio.h>
#include <string.h>

/* commands: space-separated command names, "*" for every command. */
static const opts_help_row rows[] = {
    /* common */
    {"repo", "*", "DIR|s3://B/P", "", "the repository (PAGEBACK_REPO)"},
    {"config", "*", "FILE", "$PAGEBACK_CONFIG or /etc/pageback.conf",
     "the INI configuration file"},
    {"cluster", "*", "NAME", "", "use section [cluster:NAME] and the cluster's own place in the repo"},
    {"state-dir", "*", "DIR", "~/.local/state/pageback/HASH", "local catalog and counters"},
    {"s3-endpoint", "*", "URL", "AWS", "S3 endpoint, e.g. https://host:port"},
    {"s3-region", "*", "R", "us-east-1 ($AWS_REGION)", "S3 signing region"},
    {"s3-uri-style", "*", "path|host", "path", "S3 bucket addressing"},
    {"s3-ca-file", "*", "FILE", "system CAs", "CA bundle for TLS verification"},
    {"s3-insecure", "*", NULL, "off", "skip TLS verification (tests only)"},
    {"s3-parallel", "*", "N", "4", "S3 transfers in flight, 1..64"},
    {"s3-part-size", "*", "SIZE", "16M", "S3 multipart part size, at least 5M"},
    {"s3-retries", "*", "N", "5", "S3 attempts after the first, 0..50"},
    {"log-level", "*", "error|warn|info|detail|debug", "info",
     "what goes to the console (stderr)"},
    {"log-level-console", "*", "LEVEL", "info", "the same as --log-level"},
    {"log-level-file", "*", "off|LEVEL", "detail", "what goes to the log file (off: none)"},
    {"log-path", "*", "DIR", "STATE-DIR/log",
     "directory of the log file CLUSTER-COMMAND.log"},
    {"log-file", "*", "FILE", "DIR/CLUSTER-COMMAND.log", "append the log to FILE instead"},
    {"quiet", "*", NULL, "off",
     "errors only on the console: no progress or summary lines (the log file as usual)"},
    {"report", "*", "FILE", "none", "write a JSON report of the run (also on failure)"},
    {"metrics-file", "*", "FILE", "none", "write Prometheus text metrics after the run"},
    {"encrypt-key-file", "*", "FILE", "none (PAGEBACK_ENCRYPT_KEY)",
     "key of an encrypted repository, mode 0600; up to 4, the first seals new objects"},
    {"help", "*", NULL, "", "this help"},
    {"version", "*", NULL, "", "print the version"},
    /* backup */
    {"type", "backup restore", "full|incr|standby", "automatic (restore: default)",
     "backup type (incr needs a chain); restore --type standby stays in recovery"},
    {"pgdata", "backup tune check init", "DIR", "the server's data_directory", "data directory"},
    {"dbname", "backup info check init", "CONNINFO", "PG* environment", "libpq connection string"},
    {"read-size", "backup tune", "SIZE", "automatic (stripe; 512K on one disk)",
     "bytes per read, a multiple of 8K up to 64M"},
    {"queue-depth", "backup tune", "N", "automatic", "read requests in flight, 1..256"},
    {"no-uring", "backup", NULL, "io_uring on", "use pread instead of io_uring"},
    {"no-direct", "backup", NULL, "O_DIRECT on", "buffered reads with fadvise(DONTNEED)"},
    {"on-checksum-error", "backup", "warn|fail", "warn", "a page failing its checksum"},
    {"compress-level", "backup rebase", "N", "1", "zstd level, 1..19"},
    {"full-every", "backup", "N", "0 (never)", "take a full after N backups in a chain"},
    {"full-after", "backup", "DURATION", "0 (never)", "take a full when the full is older"},
    {"wal-timeout", "backup", "SECONDS", "300", "wait this long for the stop WAL"},
    {"max-rate", "backup", "BYTES/s", "unlimited", "read at most this fast"},
    {"nice", "backup", "0..19", "10", "scheduler niceness of the backup"},
    {"incremental-mode", "backup", "scan|file|wal", "wal when possible, else file",
     "how an incremental finds what changed"},
    {"verify-scan", "backup", "N|DURATION", "7 and 7d", "full hash scan every Nth incremental or after"},
    {"io-class", "backup", "idle|best-effort[:N]|default", "idle (else best-effort 7)",
     "I/O priority of every read request"},
    {"cpu-priority", "backup", "idle|nice|normal", "idle", "CPU priority of page checks and compression"},
    {"cpu-weight", "backup", "1..10000", "none", "run in a cgroup with this CPU weight"},
    {"checkpoint", "backup", "spread|fast", "spread", "how pg_backup_start checkpoints"},
    {"max-memory", "backup restore", "BYTES", "unbounded", "bound on read and compression buffers"},
    {"compress-adapt", "backup", "on|off", "on",
     "lower the zstd level while compression is behind the reads (--compress-level: the top)"},
    {"annotation", "backup", "KEY=VALUE", "", "a note kept with the backup, shown by info (repeat)"},
    {"progress-interval", "backup restore verify rebase", "SECONDS", "10",
     "progress line period off a terminal (0 = none)"},
    /* restore, verify, rebase */
    {"target-dir", "restore", "DIR", "", "where to restore (required)"},
    {"set", "restore verify rebase expire", "ID|latest", "latest",
     "which backup (expire: the one to remove, with its incrementals)"},
    {"delta", "restore", NULL, "off", "rewrite only what differs in a non-empty target"},
    {"force", "restore", NULL, "off", "restore over a non-empty target, removing extras"},
    {"target-time", "restore", "TIME", "", "recover to a time"},
    {"target-lsn", "restore", "LSN", "", "recover to an LSN"},
    {"target-xid", "restore", "XID", "", "recover to a transaction id"},
    {"target-name", "restore", "NAME", "", "recover to a restore point"},
    {"target-end", "restore", NULL, "", "recover to the end of the WAL archive"},
    {"target-exclusive", "restore", NULL, "off", "stop just before the target"},
    {"target-action", "restore", "promote|pause|shutdown", "promote", "at the target"},
    {"target-timeline", "restore", "latest|current|ID", "latest", "timeline to follow"},
    {"tablespace-map", "restore", "OID=DIR", "", "restore a tablespace elsewhere (repeat)"},
    {"archive-mode", "restore", "off|preserve", "off",
     "off: the restored copy does not archive into the source's repository"},
    {"jobs", "restore verify", "N", "4", "files rebuilt or checked in parallel, 1..64"},
    {"db-include", "restore", "NAME", "", "restore only this database in full (repeat)"},
    /* info, expire */
    {"json", "info", NULL, "off", "JSON output (docs/info.schema.json)"},
    {"restore-points", "info", NULL, "off", "list the restore points of the archived WAL"},
    {"retain-full", "expire", "N", "", "keep the newest N full backups"},
    {"dry-run", "expire", NULL, "off", "list what would be expired, remove nothing"},
    {"archive-timeout", "check", "SECONDS", "60", "wait this long for the switched WAL"},
    {"retain-full-days", "expire", "D", "",
     "keep fulls of the last D days and the newest older one"},
    {"retain-archive", "expire", "N", "all kept backups",
     "continuous WAL for the newest N fulls only"},
    {"primary-conninfo", "restore", "CONNINFO", "", "a standby streams from this primary"},
    {"target-immediate", "restore", NULL, "", "stop at the backup's consistency point"},
};

static const size_t nrows = sizeof(rows) / sizeof(rows[0]);

const opts_help_row *opts_help_find(const char *name)
{
    for (size_t i = 0; i < nrows; i++)
        if (!strcmp(rows[i].name, name))
            return &rows[i];
    return NULL;
}

bool opts_option_applies(const char *name, const char *command)
{
    const opts_help_row *r = opts_help_find(name);
    if (!r || !command || !*command || !strcmp(r->commands, "*") || !strcmp(command, "config"))
        return true;
    size_t n = strlen(command);
    for (const char *p = r->commands; (p = strstr(p, command)); p += n)
        if ((p == r->commands || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return true;
    return false;
}

/* "  --flag ARG   meaning [default: D]", wrapped to stay within 79 columns. */
static void print_row(FILE *out, const opts_help_row *r)
{
    char flag[64];
    snprintf(flag, sizeof(flag), "--%s%s%s", r->name, r->arg ? " " : "", r->arg ? r->arg : "");
    int col = fprintf(out, "  %-26s", flag);
    if (col > 28) {
        fprintf(out, "\n%28s", "");
        col = 28;
    }
    col += fprintf(out, " ");
    col += fprintf(out, "%s", r->meaning);
    if (r->default_text[0]) {
        if ((size_t)col + strlen(r->default_text) + 12 > 79)
            fprintf(out, "\n%29s", "");
        fprintf(out, " [default: %s]", r->default_text);
    }
    fputc('\n', out);
}

void opts_help_options(FILE *out, const char *command, const struct option *longopts)
{
    fputs("options:\n", out);
    for (size_t i = 0; i < nrows; i++)
        if (strcmp(rows[i].commands, "*") && opts_option_applies(rows[i].name, command))
            print_row(out, &rows[i]);
    fputs("common options:\n", out);
    for (size_t i = 0; i < nrows; i++)
        if (!strcmp(rows[i].commands, "*"))
            print_row(out, &rows[i]);
    for (size_t i = 0; longopts[i].name; i++)
        if (!opts_help_find(longopts[i].name))
            fprintf(out, "  --%s%s  (undocumented)\n", longopts[i].name,
                    longopts[i].has_arg ? " VALUE" : "");
    fputs("every option is also a PAGEBACK_<OPTION> environment variable (--read-size:\n"
          "PAGEBACK_READ_SIZE) and a setting of the configuration file (read-size = 1M);\n"
          "a flag wins over the environment, which wins over the [cluster:NAME] section,\n"
          "which wins over [global]. S3 credentials: AWS_ACCESS_KEY_ID,\n"
          "AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN or s3-key, s3-secret, s3-token in a\n"
          "mode 0600 configuration file.\n"
          "exit status: 0 success; 1 failure; 2 usage or configuration error\n"
          "(archive-get: 1 also when the WAL file is not in the archive; verify: 1 when\n"
          "it found problems).\n", out);
}
