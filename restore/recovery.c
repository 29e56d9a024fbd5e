/* restore/recovery.c — recovery settings for the restored cluster. */
#include "restore/restore_internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Single quotes inside a GUC value are doubled. */
static void put_setting(FILE *fp, const char *name, const char *value)
{
    fprintf(fp, "%s = '", name);
    for (const char *p = value; *p; p++) {
        if (*p == '\'')
            fputc('\'', fp);
        fputc(*p, fp);
    }
    fputs("'\n", fp);
}

static const char *target_setting(rs_target_kind kind)
{
    switch (kind) {
    case RS_TARGET_TIME: return "recovery_target_time";
    case RS_TARGET_LSN: return "recovery_target_lsn";
    case RS_TARGET_XID: return "recovery_target_xid";
    case RS_TARGET_NAME: return "recovery_target_name";
    default: return NULL;
    }
}

int rs_write_recovery(const char *target_dir, const rs_opts *opts, const mf_backup *h,
                      pb_error *err)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/postgresql.auto.conf", target_dir);
    FILE *fp = fopen(path, "a");
    if (!fp)
        return pb_fail_errno(err, PB_EIO, "cannot open %s", path);
    fprintf(fp, "\n# Recovery settings added by pageback restore of backup %s\n", h->id);
    if (opts->restore_command)
        put_setting(fp, "restore_command", opts->restore_command);
    const char *name = target_setting(opts->target);
    if (opts->target == RS_TARGET_IMMEDIATE)
        put_setting(fp, "recovery_target", "immediate");
    else if (name)
        put_setting(fp, name, opts->target_value);
    if (name)
        put_setting(fp, "recovery_target_inclusive", opts->target_exclusive ? "off" : "on");
    if (opts->target != RS_TARGET_END)
        put_setting(fp, "recovery_target_action",
                    opts->target_action ? opts->target_action : "promote");
    put_setting(fp, "recovery_target_timeline",
                opts->target_timeline ? opts->target_timeline : "latest");
    int rc = 0;
    if (fclose(fp) != 0)
        rc = pb_fail_errno(err, PB_EIO, "cannot write %s", path);
    snprintf(path, sizeof(path), "%s/recovery.signal", target_dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return pb_fail_errno(err, PB_EIO, "cannot create %s", path);
    close(fd);
    return rc;
}

/* "2026-11-30 10:15:00[.123][+01[:00]| UTC]" -> unix seconds (fraction dropped). */
static int parse_time(const char *text, int64_t *out)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *p = strptime(text, "%Y-%m-%d %H:%M:%S", &tm);
    if (!p)
        return PB_EINVAL;
    if (*p == '.')
        while (*++p >= '0' && *p <= '9')
            ;
    int64_t offset = 0;
    while (*p == ' ')
        p++;
    if (*p == '+' || *p == '-') {
        int sign = *p == '-' ? -1 : 1, hh = 0, mm = 0;
        if (sscanf(p + 1, "%2d:%2d", &hh, &mm) < 1 && sscanf(p + 1, "%2d%2d", &hh, &mm) < 1)
            return PB_EINVAL;
        offset = sign * (hh * 3600 + mm * 60);
    } else if (*p && strcmp(p, "UTC") != 0 && strcmp(p, "GMT") != 0) {
        return PB_EINVAL;
    }
    *out = (int64_t)timegm(&tm) - offset;
    return 0;
}

/* Does backup h end before the target, so replaying from it can reach the target? */
static int ends_before(const mf_backup *h, const rs_opts *opts, bool *yes)
{
    if (opts->target == RS_TARGET_TIME) {
        int64_t t;
        if (parse_time(opts->target_value, &t))
            return PB_EINVAL;
        *yes = h->stop_time < t;
    } else if (opts->target == RS_TARGET_LSN) {
        uint64_t lsn;
        if (pb_lsn_parse(opts->target_value, &lsn))
            return PB_EINVAL;
        *yes = h->stop_lsn <= lsn;
    } else {
        *yes = true;
    }
    return 0;
}

int rs_choose_set(repo *r, const rs_opts *opts, char out_id[MF_ID_LEN], char *why,
                  size_t why_len, pb_error *err)
{
    if (opts->set && strcmp(opts->set, "latest") != 0) {
        snprintf(out_id, MF_ID_LEN, "%s", opts->set);
        snprintf(why, why_len, "requested with --set");
        return 0;
    }
    chain_ids ids;
    int rc = chain_list(r, &ids, err);
    if (rc)
        return rc;
    if (ids.count == 0) {
        chain_ids_free(&ids);
        return pb_fail(err, PB_ENOENT, "repository %s holds no backup", repo_location(r));
    }
    bool pitr = opts->target == RS_TARGET_TIME || opts->target == RS_TARGET_LSN;
    rc = PB_ENOENT;
    for (size_t i = ids.count; i-- > 0 && rc == PB_ENOENT;) {
        mf_manifest *m = NULL;
        bool yes = true;
        if (pitr) {
            rc = chain_load(r, ids.ids[i], &m, err);
            if (rc == 0 && ends_before(mf_header(m), opts, &yes) != 0)
                rc = pb_fail(err, PB_EINVAL, "cannot parse recovery target '%s'",
                             opts->target_value);
            mf_free(m);
            if (rc)
                break;
        }
        if (yes) {
            snprintf(out_id, MF_ID_LEN, "%s", ids.ids[i]);
            snprintf(why, why_len, pitr ? "the newest backup that ends before the target %s"
                                        : "the newest backup%s",
                     pitr ? opts->target_value : "");
            rc = 0;
        } else {
            rc = PB_ENOENT;
        }
    }
    if (rc == PB_ENOENT)
        pb_fail(err, rc, "no backup in repository %s ends before the recovery target %s",
                repo_location(r), opts->target_value ? opts->target_value : "");
    chain_ids_free(&ids);
    return rc;
}
