/*
 * engine/storage/storage_lock.c — the writer lock held in the repository (storage.h,
 * REPO_LOCK_KEY): one backup, expire or rebase at a time per repository, whichever
 * host, user or state directory it runs from.
 *
 * The lock object is a short text ("key=value" lines) naming its holder: a random
 * token (ours or not?), the command, user, host, boot id, pid and the pid's start time
 * (so a recycled pid is not taken for the holder), and when it was last renewed; a
 * last line "check=" carries the XXH3-64 of everything before it (docs/FORMAT.md).
 *
 * A lock that exists is taken over only when its holder is provably gone:
 * - on this host (same host name): another boot, a pid that is not alive or started at
 *   another time, or (posix) a flock that we obtain — the holder keeps it flock'ed for
 *   as long as it lives, so obtaining it proves the holder dead;
 * - anywhere: its lease ran out (not renewed for REPO_LOCK_LEASE_SECS).
 * Takeover removes the stale object and creates a new one exclusively; on posix the
 * stale file's flock is held meanwhile, so of two racing takers only one proceeds. On a
 * server without conditional PUT, two takers of the same expired lease could both
 * succeed in a narrow window; the read-back of the token after creation catches the
 * loser whose object was overwritten before it looked.
 */
#include "engine/storage/storage_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define LOCK_MAGIC "pageback-writer-lock 1"
#define LOCK_TEXT_MAX 1024
#define LOCK_ATTEMPTS 4

typedef struct lock_info {
    char token[33];
    char owner[64];
    char user[64];
    char host[256];
    char boot[64];
    long pid;
    unsigned long long pid_start; /* /proc/<pid>/stat field 22: clock ticks after boot */
    int64_t started;
    int64_t renewed;
    int64_t lease;
} lock_info;

struct repo_lock {
    repo *r;
    int fd; /* posix: keeps the lock file flock'ed; -1 elsewhere */
    lock_info me;
    double last_renew;
};

/* ---- who we are --------------------------------------------------------------- */

static void read_line_file(const char *path, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (!fgets(out, (int)cap, f))
        out[0] = '\0';
    fclose(f);
    out[strcspn(out, "\n")] = '\0';
}

/* Start time of pid in clock ticks since boot, 0 when it cannot be read (no such pid). */
static unsigned long long pid_start_time(long pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    read_line_file(path, buf, sizeof(buf));
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    if (!p)
        return 0;
    unsigned long long start = 0;
    /* After ")": state(3) ... starttime(22), i.e. 19 fields to skip. */
    for (int field = 3; *p && field <= 22; field++) {
        p = strchr(p + 1, ' ');
        if (!p)
            return 0;
        if (field == 22)
            start = strtoull(p + 1, NULL, 10);
    }
    return start;
}

static void self_info(lock_info *me, const char *owner)
{
    memset(me, 0, sizeof(*me));
    uint8_t rnd[16];
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
        uint64_t t = (uint64_t)(pb_now() * 1e9) ^ (uint64_t)getpid();
        memcpy(rnd, &t, 8);
        memcpy(rnd + 8, &t, 8);
    }
    for (int i = 0; i < 16; i++)
        snprintf(me->token + 2 * i, 3, "%02x", rnd[i]);
    snprintf(me->owner, sizeof(me->owner), "%s", owner ? owner : "writer");
    struct passwd *pw = getpwuid(geteuid());
    snprintf(me->user, sizeof(me->user), "%s", pw ? pw->pw_name : "?");
    if (gethostname(me->host, sizeof(me->host) - 1) != 0)
        snprintf(me->host, sizeof(me->host), "?");
    read_line_file("/proc/sys/kernel/random/boot_id", me->boot, sizeof(me->boot));
    me->pid = (long)getpid();
    me->pid_start = pid_start_time(me->pid);
    me->started = me->renewed = (int64_t)time(NULL);
    me->lease = REPO_LOCK_LEASE_SECS;
}

/* ---- the lock text ------------------------------------------------------------ */

static size_t lock_format(const lock_info *i, char *out, size_t cap)
{
    char body[LOCK_TEXT_MAX - 32];
    int n = snprintf(body, sizeof(body),
                     LOCK_MAGIC "\ntoken=%s\nowner=%s\nuser=%s\nhost=%s\nboot=%s\npid=%ld\n"
                     "pid_start=%llu\nstarted=%" PRId64 "\nrenewed=%" PRId64
                     "\nlease=%" PRId64 "\n",
                     i->token, i->owner, i->user, i->host, i->boot, i->pid, i->pid_start,
                     i->started, i->renewed, i->lease);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof(body) ? (size_t)n : sizeof(body) - 1;
    n = snprintf(out, cap, "%.*scheck=%016" PRIx64 "\n", (int)len, body,
                 pb_hash64(body, len));
    return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

static void field(const char *text, const char *name, char *out, size_t cap)
{
    char pat[32];
    snprintf(pat, sizeof(pat), "\n%s=", name);
    const char *p = strstr(text, pat);
    out[0] = '\0';
    if (p) {
        p += strlen(pat);
        size_t n = strcspn(p, "\n");
        snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), p);
    }
}

/* PB_ECORRUPT when the text is not a lock written by pageback. */
static int lock_parse(const char *text, lock_info *i)
{
    char num[32];
    memset(i, 0, sizeof(*i));
    if (strncmp(text, LOCK_MAGIC "\n", strlen(LOCK_MAGIC) + 1) != 0)
        return PB_ECORRUPT;
    const char *check = strstr(text, "\ncheck=");
    char *end = NULL;
    if (!check ||
        strtoull(check + 7, &end, 16) != pb_hash64(text, (size_t)(check + 1 - text)) ||
        strcmp(end, "\n") != 0)
        return PB_ECORRUPT;
    field(text, "token", i->token, sizeof(i->token));
    field(text, "owner", i->owner, sizeof(i->owner));
    field(text, "user", i->user, sizeof(i->user));
    field(text, "host", i->host, sizeof(i->host));
    field(text, "boot", i->boot, sizeof(i->boot));
    field(text, "pid", num, sizeof(num));
    i->pid = strtol(num, NULL, 10);
    field(text, "pid_start", num, sizeof(num));
    i->pid_start = strtoull(num, NULL, 10);
    field(text, "started", num, sizeof(num));
    i->started = strtoll(num, NULL, 10);
    field(text, "renewed", num, sizeof(num));
    i->renewed = strtoll(num, NULL, 10);
    field(text, "lease", num, sizeof(num));
    i->lease = strtoll(num, NULL, 10);
    return i->token[0] && i->lease > 0 ? 0 : PB_ECORRUPT;
}

/* Read the lock object: PB_ENOENT when absent, PB_ECORRUPT when unreadable. */
static int lock_read(repo *r, lock_info *i, pb_error *err)
{
    void *data = NULL;
    size_t len = 0;
    int rc = repo_get(r, REPO_LOCK_KEY, &data, &len, err);
    if (rc)
        return rc;
    char text[LOCK_TEXT_MAX];
    snprintf(text, sizeof(text), "%.*s", (int)(len < sizeof(text) ? len : sizeof(text) - 1),
             (const char *)data);
    free(data);
    if (lock_parse(text, i) != 0)
        return pb_fail(err, PB_ECORRUPT, "writer lock %s/%s is not a pageback lock: if no "
                       "backup, expire or rebase is running, remove it", repo_location(r),
                       REPO_LOCK_KEY);
    return 0;
}

/* ---- is the holder gone? -------------------------------------------------------- */

/* Sets why (for the log) and returns true when the holder is provably gone. flocked:
 * posix said no process on this host holds the file. */
static bool holder_gone(const lock_info *h, const lock_info *me, bool flocked, char *why,
                        size_t cap)
{
    int64_t now = (int64_t)time(NULL);
    if (now - h->renewed > h->lease) {
        snprintf(why, cap, "its lease ran out %" PRId64 " s ago", now - h->renewed - h->lease);
        return true;
    }
    if (strcmp(h->host, me->host) != 0)
        return false; /* another host: only the lease can tell */
    if (strcmp(h->boot, me->boot) != 0) {
        snprintf(why, cap, "host %s has rebooted since", h->host);
        return true;
    }
    if (flocked) {
        snprintf(why, cap, "no process holds the lock file");
        return true;
    }
    if (h->pid <= 0 || (kill((pid_t)h->pid, 0) != 0 && errno == ESRCH) ||
        (h->pid_start && pid_start_time(h->pid) != h->pid_start)) {
        snprintf(why, cap, "process %ld is gone", h->pid);
        return true;
    }
    return false;
}

static int held_by(repo *r, const lock_info *h, pb_error *err)
{
    char when[32];
    time_t t = (time_t)h->started;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
    return pb_fail(err, PB_ESTATE,
                   "repository %s is locked by another writer: %s by user %s, pid %ld on "
                   "host %s, since %s UTC (lock %s): wait for it to finish",
                   repo_location(r), h->owner, h->user, h->pid, h->host, when, REPO_LOCK_KEY);
}

int repo_lock_peek(repo *r, repo_lock_view *out, pb_error *err)
{
    lock_info h, me;
    memset(out, 0, sizeof(*out));
    int rc = lock_read(r, &h, err);
    if (rc)
        return rc;
    self_info(&me, "info");
    char why[128];
    out->gone = holder_gone(&h, &me, false, why, sizeof(why));
    snprintf(out->owner, sizeof(out->owner), "%s", h.owner);
    snprintf(out->user, sizeof(out->user), "%s", h.user);
    snprintf(out->host, sizeof(out->host), "%s", h.host);
    out->pid = h.pid;
    out->started = h.started;
    out->renewed = h.renewed;
    return 0;
}

/* ---- acquire / renew / release ------------------------------------------------- */

/* The lock exists: PB_ESTATE naming a live holder, or remove a dead holder's lock (0:
 * try to create it again). *stale_fd keeps the stale file flock'ed until then. */
static int judge_existing(repo_lock *l, int *stale_fd, pb_error *err)
{
    repo *r = l->r;
    int rc = repo_drv_lock_probe(r, REPO_LOCK_KEY, stale_fd, err);
    if (rc == PB_ENOENT)
        return 0; /* gone or replaced meanwhile: try again */
    if (rc)
        return rc;
    lock_info h;
    rc = lock_read(r, &h, err);
    if (rc == PB_ENOENT)
        return 0;
    if (rc == PB_ECORRUPT && *stale_fd >= 0) {
        /* Unreadable but nobody holds it: debris of a crash; take it over. */
        memset(&h, 0, sizeof(h));
        snprintf(h.host, sizeof(h.host), "%s", l->me.host);
        snprintf(h.boot, sizeof(h.boot), "%s", l->me.boot);
        h.renewed = (int64_t)time(NULL);
        h.lease = REPO_LOCK_LEASE_SECS;
    } else if (rc == PB_ECORRUPT && repo_drv_has_probe(r)) {
        /* Held by a live process here, and caught mid-renewal (rewritten in place). */
        return pb_fail(err, PB_ESTATE, "repository %s is locked by another writer: a live "
                       "process on this host holds %s", repo_location(r), REPO_LOCK_KEY);
    } else if (rc) {
        return rc;
    }
    char why[320] = "";
    bool probed = repo_drv_has_probe(r);
    if (probed && *stale_fd < 0 && strcmp(h.host, l->me.host) == 0 &&
        strcmp(h.boot, l->me.boot) == 0)
        return held_by(r, &h, err); /* a live process on this host has it flock'ed */
    if (!holder_gone(&h, &l->me, *stale_fd >= 0, why, sizeof(why)))
        return held_by(r, &h, err);
    pb_warn("taking over the writer lock %s/%s of %s (pid %ld on host %s): %s",
            repo_location(r), REPO_LOCK_KEY, h.owner[0] ? h.owner : "an unknown writer", h.pid,
            h.host, why);
    rc = repo_drv_lock_remove(r, REPO_LOCK_KEY, err);
    return rc == PB_ENOENT ? 0 : rc;
}

/* After creating it, the lock must hold our token (a racing taker may have replaced it on
 * a server without conditional PUT). */
static int confirm_ours(repo_lock *l, pb_error *err)
{
    lock_info h;
    int rc = lock_read(l->r, &h, err);
    if (rc == 0 && strcmp(h.token, l->me.token) != 0)
        rc = held_by(l->r, &h, err);
    return rc;
}

int repo_lock_acquire(repo *r, const char *owner, repo_lock **out, pb_error *err)
{
    *out = NULL;
    repo_lock *l = calloc(1, sizeof(*l));
    if (!l)
        return pb_fail(err, PB_ENOMEM, "out of memory locking %s", repo_location(r));
    l->r = r;
    l->fd = -1;
    self_info(&l->me, owner);
    char text[LOCK_TEXT_MAX];
    size_t len = lock_format(&l->me, text, sizeof(text));
    int rc = PB_ESTATE, stale_fd = -1;
    for (int attempt = 0; attempt < LOCK_ATTEMPTS; attempt++) {
        rc = repo_drv_put_new(r, REPO_LOCK_KEY, text, len, &l->fd, err);
        if (stale_fd >= 0)
            close(stale_fd); /* released only once the new lock exists (or lost) */
        stale_fd = -1;
        if (rc != PB_EEXIST)
            break;
        if ((rc = judge_existing(l, &stale_fd, err)))
            break;
        rc = pb_fail(err, PB_ESTATE, "could not take the writer lock %s/%s: it changed "
                     "%d times while we looked", repo_location(r), REPO_LOCK_KEY,
                     LOCK_ATTEMPTS);
    }
    if (stale_fd >= 0)
        close(stale_fd);
    if (rc == 0)
        rc = confirm_ours(l, err);
    if (rc) {
        if (l->fd >= 0)
            close(l->fd);
        free(l);
        return rc;
    }
    l->last_renew = pb_now();
    *out = l;
    return 0;
}

int repo_lock_renew(repo_lock *l, pb_error *err)
{
    if (!l || pb_now() - l->last_renew < l->me.lease / 3.0)
        return 0;
    lock_info h;
    int rc = lock_read(l->r, &h, err);
    if (rc == 0 && strcmp(h.token, l->me.token) != 0)
        rc = PB_ESTATE;
    if (rc)
        return pb_fail(err, PB_ESTATE, "lost the writer lock %s/%s (%s): another writer took "
                       "it over", repo_location(l->r), REPO_LOCK_KEY,
                       rc == PB_ESTATE ? "it names another holder" : err->msg);
    l->me.renewed = (int64_t)time(NULL);
    char text[LOCK_TEXT_MAX];
    size_t len = lock_format(&l->me, text, sizeof(text));
    rc = repo_drv_lock_rewrite(l->r, REPO_LOCK_KEY, l->fd, text, len, err);
    if (rc == 0)
        l->last_renew = pb_now();
    return rc;
}

void repo_lock_release(repo_lock *l)
{
    if (!l)
        return;
    pb_error err = PB_ERROR_INIT;
    lock_info h;
    int rc = lock_read(l->r, &h, &err);
    if (rc == 0 && strcmp(h.token, l->me.token) == 0)
        rc = repo_drv_lock_remove(l->r, REPO_LOCK_KEY, &err);
    else if (rc == 0)
        pb_warn("the writer lock %s/%s was taken over by pid %ld on host %s; leaving it",
                repo_location(l->r), REPO_LOCK_KEY, h.pid, h.host);
    if (rc && rc != PB_ENOENT)
        pb_warn("could not remove the writer lock: %s", err.msg);
    if (l->fd >= 0)
        close(l->fd); /* after the unlink: no moment with an unheld lock file */
    free(l);
}
