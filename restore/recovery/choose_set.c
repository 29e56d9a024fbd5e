/*
 * restore/recovery/choose_set.c — which backup a restore starts from.
 *
 * A backup can reach a target when replay from it becomes consistent (at its stop LSN)
 * before the target: PostgreSQL refuses a stop point before the consistent point. For
 * time and LSN targets the manifest says where the backup ends, so the newest backup
 * (in history order: engine/chain/chain_order.c) ending before the target is chosen. A
 * transaction id or a restore point name is first placed by reading the archived WAL
 * (wal_target.c) and then chosen for as an LSN; only when it could not be placed (no
 * backup on the timeline path) is the newest backup named, with what to do if
 * PostgreSQL finds the target inside the backup's window. The timeline each backup would recover along
 * is rs_follow_timeline's (timeline.c).
 */
#include "restore/recovery/recovery.h"

#include "engine/wal/wal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* 1 when backup h can reach the target, 0 (with the reason in why) when not. *tl is the
 * timeline recovery from h follows when it had to be followed to tell (else untouched). */
static int can_reach(rs_wal_view *v, const rs_opts *opts, const rs_target_val *tv,
                     const mf_backup *h, rs_timeline *tl, char *why, size_t why_len,
                     pb_error *err)
{
    if (opts->target != RS_TARGET_IMMEDIATE || opts->target_timeline) {
        int rc = rs_follow_timeline(v, opts, tv, h, tl, err);
        if (rc)
            return rc;
        if (!rs_on_path(v, h, why, why_len))
            return 0;
    }
    char a[40], b[40];
    if (opts->target == RS_TARGET_TIME && !(h->stop_time < tv->time)) {
        rs_fmt_time(h->stop_time, a);
        snprintf(why, why_len, "it ended at %s, not before the target time %s", a,
                 tv->time_text);
        return 0;
    }
    if (opts->target == RS_TARGET_LSN && h->stop_lsn > tv->lsn) {
        pb_lsn_format(h->stop_lsn, a);
        pb_lsn_format(tv->lsn, b);
        snprintf(why, why_len, "it becomes consistent at LSN %s, after the target LSN %s", a,
                 b);
        return 0;
    }
    if (tv->placed && h->stop_lsn > tv->lsn) { /* an xid or name found in the WAL */
        pb_lsn_format(h->stop_lsn, a);
        snprintf(why, why_len, "it becomes consistent at LSN %s, after the %s", a,
                 tv->placed_desc);
        return 0;
    }
    return 1;
}

static void explain_choice(const rs_opts *opts, const rs_target_val *tv, const mf_backup *h,
                           const char *older, bool explicit, char *why, size_t why_len)
{
    char a[40], stop[32];
    pb_lsn_format(h->stop_lsn, stop);
    rs_fmt_time(h->stop_time, a);
    const char *how = explicit ? "requested with --set" : "the newest backup";
    switch (opts->target) {
    case RS_TARGET_TIME:
        snprintf(why, why_len, "%s that ended (at %s, LSN %s, timeline %u) before the target "
                 "time %s", how, a, stop, h->timeline, tv->time_text);
        break;
    case RS_TARGET_LSN:
        snprintf(why, why_len, "%s that becomes consistent (at LSN %s, timeline %u) before "
                 "the target LSN %s", how, stop, h->timeline, opts->target_value);
        break;
    case RS_TARGET_XID:
    case RS_TARGET_NAME:
        if (tv->placed) {
            snprintf(why, why_len, "%s that becomes consistent (at LSN %s, timeline %u) before "
                     "the %s", how, stop, h->timeline, tv->placed_desc);
            break;
        }
        snprintf(why, why_len, "%s (ends at LSN %s, %s); a %s cannot be placed before or after "
                 "a backup without reading WAL: if PostgreSQL stops with \"requested recovery "
                 "stop point is before consistent recovery point\", restore with --set %s",
                 how, stop, a, opts->target == RS_TARGET_XID ? "transaction id"
                                                             : "restore point name",
                 older && older[0] ? older : "<an older backup>");
        break;
    default:
        snprintf(why, why_len, "%s (ends at LSN %s, %s, timeline %u)", how, stop, a,
                 h->timeline);
    }
}

/* Name the newest backup and, when another, the oldest with their reasons: a time or LSN
 * before every backup shows in the oldest, a timeline mismatch in the newest. */
static int refuse(repo *r, const rs_opts *opts, const char *newest, const char *newest_why,
                  const char *oldest, const char *oldest_why, pb_error *err)
{
    char more[600] = "";
    if (strcmp(newest, oldest) != 0)
        snprintf(more, sizeof(more), "; the oldest, %s, because %s", oldest, oldest_why);
    return pb_fail(err, PB_ENOENT, "no backup in repository %s can reach the recovery target "
                   "%s%s%s: the newest, %s, cannot because %s%s", repo_location(r),
                   opts->target_value ? "'" : "", opts->target_value ? opts->target_value
                                                                     : "(end of backup)",
                   opts->target_value ? "'" : "", newest, newest_why, more);
}

/* PostgreSQL ends with "recovery ended before configured recovery target was reached"
 * when the target lies beyond the archived WAL; a target in the future always does. The
 * margin allows for a database host whose clock runs ahead of this one. */
int rs_check_future(const rs_opts *opts, const rs_target_val *tv, pb_error *err)
{
    int64_t now = (int64_t)time(NULL);
    if (opts->target != RS_TARGET_TIME || tv->time <= now)
        return 0;
    if (tv->time > now + 300)
        return pb_fail(err, PB_EINVAL, "the target time %s is in the future: recovery could "
                       "never reach it (PostgreSQL would stop with \"recovery ended before "
                       "configured recovery target was reached\"); use --target-end to replay "
                       "all archived WAL", tv->time_text);
    pb_warn("the target time %s is later than this host's clock: recovery reaches it only "
            "if WAL up to then is archived", tv->time_text);
    return 0;
}

bool rs_names_set(const rs_opts *opts)
{
    return opts->set && strcmp(opts->set, "latest") != 0;
}

static bool latest_timeline(const rs_opts *opts)
{
    return !opts->target_timeline || strcmp(opts->target_timeline, "latest") == 0;
}

/* The history comes ordered along the newest timeline. --target-timeline N orders it
 * along N; a time, LSN, xid or name target is placed per backup by rs_follow_timeline,
 * which tries every branch, so there the order is by stop point alone (the backup
 * closest before the target, whichever branch it is on). */
int rs_order_history(repo *r, const rs_opts *opts, chain_history *hist, pb_error *err)
{
    char *end = NULL;
    unsigned long tli = opts->target_timeline ? strtoul(opts->target_timeline, &end, 10) : 0;
    if (tli > 0 && tli <= UINT32_MAX && end && !*end)
        return chain_history_place(r, (uint32_t)tli, hist, err);
    if (opts->target != RS_TARGET_IMMEDIATE || !latest_timeline(opts)) {
        chain_history_sort(hist);
        hist->off_path = 0;
        hist->compete = false;
    }
    return 0;
}

/* Backups are tried newest state first (history order, never id order: a rebase's
 * synthetic full of an older state has the last id). */
int rs_choose_in(repo *r, const rs_opts *opts, const rs_target_val *tv, rs_wal_view *v,
                 const chain_history *hist, char out_id[MF_ID_LEN], rs_timeline *tl,
                 char *why, size_t why_len, pb_error *err)
{
    memset(tl, 0, sizeof(*tl));
    bool explicit = rs_names_set(opts);
    if (hist->count == 0)
        return pb_fail(err, PB_ENOENT, "repository %s holds no backup", repo_location(r));
    /* The end of the newest backup: the newest on the newest timeline's history, unless
     * another branch competes with it (engine/chain/chain_timeline.c). */
    int crc = explicit || opts->target != RS_TARGET_IMMEDIATE || !latest_timeline(opts)
                  ? 0 : chain_history_check(hist, "the newest backup", err);
    if (crc)
        return crc;
    char first_why[400] = "", newest[MF_ID_LEN] = "", last_why[400] = "",
         oldest[MF_ID_LEN] = "";
    int rc = PB_ENOENT;
    for (size_t i = hist->count; i-- > 0 && rc == PB_ENOENT;) {
        const mf_backup *h = &hist->items[i];
        if (explicit && strcmp(h->id, opts->set) != 0)
            continue;
        char skip[400] = "";
        rs_timeline htl = {0};
        int ok = can_reach(v, opts, tv, h, &htl, skip, sizeof(skip), err);
        if (ok == 1) {
            snprintf(out_id, MF_ID_LEN, "%s", h->id);
            *tl = htl;
            explain_choice(opts, tv, h, i > 0 ? hist->items[i - 1].id : NULL, explicit, why,
                           why_len);
            rc = 0;
        } else if (ok == 0) {
            pb_debug("backup %s cannot reach the target: %s", h->id, skip);
            if (!newest[0]) {
                snprintf(newest, sizeof(newest), "%s", h->id);
                snprintf(first_why, sizeof(first_why), "%s", skip);
            }
            snprintf(oldest, sizeof(oldest), "%s", h->id);
            snprintf(last_why, sizeof(last_why), "%s", skip);
            rc = PB_ENOENT;
        } else {
            rc = ok;
        }
    }
    if (rc == PB_ENOENT && explicit && !newest[0])
        rc = pb_fail(err, PB_ENOENT, "backup set %s not found in repository %s", opts->set,
                     repo_location(r));
    else if (rc == PB_ENOENT && explicit)
        rc = pb_fail(err, PB_ENOENT, "backup %s cannot reach the recovery target '%s': %s",
                     opts->set, opts->target_value ? opts->target_value : "", first_why);
    else if (rc == PB_ENOENT)
        rc = refuse(r, opts, newest, first_why, oldest, last_why, err);
    return rc;
}
