/* restore/verify.c — verify backups and the WAL archive without writing anything. */
#include "restore/recovery_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rs_verify(repo *r, const char *set, unsigned jobs, rs_stats *stats, pb_error *err)
{
    chain c = {0};
    rs_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    memset(stats, 0, sizeof(*stats));
    rs_opts o = RS_OPTS_INIT;
    o.set = set;
    char id[MF_ID_LEN], why[512];
    double t0 = pb_now();
    int rc = rs_choose_set(r, &o, id, why, sizeof(why), err);
    if (rc == 0)
        rc = chain_resolve(r, id, &c, err);
    if (rc)
        return rc;
    const mf_manifest *m = c.items[c.count - 1];
    ctx.repo = r;
    ctx.chain = &c;
    ctx.stats = stats;
    rs_timeline tl;
    rc = rs_check_wal(r, &o, mf_header_c(m), &tl, err); /* start..stop, one listing */
    if (rc == 0)
        rc = rs_rebuild_parallel(&ctx, m, jobs, err);
    snprintf(stats->id, sizeof(stats->id), "%s", id);
    stats->chain_length = c.count;
    stats->seconds = pb_now() - t0;
    rs_ctx_free_buffers(&ctx);
    chain_free(&c);
    return rc;
}
