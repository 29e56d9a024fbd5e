/*
 * tests/unit/engine/backup/check_test.c — engine/backup/check_archive.c: where archive_command
 * sends WAL, read from its text as the shell and PostgreSQL read it, and "cannot tell" when
 * the shell would decide at run time.
 */
#include "engine/backup/backup.h"
#include "tests/unit/pbtest.h"

#include <string.h>

static const ck_target want = {"/srv/pb/repo", NULL, NULL};

static ck_cmd_verdict judge(const char *cmd, const ck_target *t)
{
    char why[1024];
    ck_cmd_verdict v = ck_archive_command(cmd, t, why, sizeof(why));
    printf("  %-70.70s -> %d: %s\n", cmd, v, why);
    return v;
}

static void test_same(void)
{
    PBT_CHECK(judge("pageback archive-push %p --repo /srv/pb/repo", &want) == CK_CMD_SAME);
    PBT_CHECK(judge("/usr/bin/pageback archive-push %p --repo=/srv/pb/repo/", &want) ==
              CK_CMD_SAME);
    PBT_CHECK(judge("'/opt/my tools/pageback' archive-push \"%p\" --repo '/srv/pb/repo'",
                    &want) == CK_CMD_SAME);
    PBT_CHECK(judge("PAGEBACK_REPO=/srv/pb/repo pageback archive-push %p", &want) ==
              CK_CMD_SAME);
    PBT_CHECK(judge("test ! -f /x && pageback archive-push %p --repo /srv/pb/repo", &want) ==
              CK_CMD_SAME);
    /* %% is PostgreSQL's escape of %: the path holds one. */
    const ck_target pct = {"/srv/100%", NULL, NULL};
    PBT_CHECK(judge("pageback archive-push %p --repo /srv/100%%", &pct) == CK_CMD_SAME);
}

static void test_elsewhere(void)
{
    PBT_CHECK(judge("pageback archive-push %p --repo /srv/pb/other", &want) ==
              CK_CMD_ELSEWHERE);
    PBT_CHECK(judge("pageback archive-push %p --repo s3://b/p", &want) == CK_CMD_ELSEWHERE);
    const ck_target cl = {"/srv/pb/repo", "/etc/pb.conf", "main"};
    PBT_CHECK(judge("pageback archive-push %p --repo /srv/pb/repo --config /etc/pb.conf "
                    "--cluster other", &cl) == CK_CMD_ELSEWHERE);
    /* A --repo of a later command of the line is not this one's. */
    PBT_CHECK(judge("pageback archive-push %p --repo /srv/pb/other; echo --repo "
                    "/srv/pb/repo", &want) == CK_CMD_ELSEWHERE);
}

static void test_not_pageback(void)
{
    PBT_CHECK(judge("true", &want) == CK_CMD_NOT_PAGEBACK);
    PBT_CHECK(judge("cp %p /mnt/archive/%f", &want) == CK_CMD_NOT_PAGEBACK);
    PBT_CHECK(judge("pageback archive-get %f %p --repo /srv/pb/repo", &want) ==
              CK_CMD_NOT_PAGEBACK);
    PBT_CHECK(judge("", &want) == CK_CMD_NOT_PAGEBACK);
    PBT_CHECK(judge("echo pageback archive-push", &want) == CK_CMD_UNKNOWN);
}

static void test_unknown(void)
{
    PBT_CHECK(judge("pageback archive-push %p", &want) == CK_CMD_UNKNOWN);
    PBT_CHECK(judge("pageback archive-push %p --repo $REPO", &want) == CK_CMD_UNKNOWN);
    PBT_CHECK(judge("pageback archive-push %p --repo \"$HOME/repo\"", &want) ==
              CK_CMD_UNKNOWN);
    PBT_CHECK(judge("pageback archive-push %p --repo '/srv/pb/repo", &want) ==
              CK_CMD_UNKNOWN);
    PBT_CHECK(judge("pageback archive-push %p --config /etc/other.conf", &want) ==
              CK_CMD_UNKNOWN);
    const ck_target cfg = {"/srv/pb/repo", "/etc/pb.conf", NULL};
    PBT_CHECK(judge("pageback archive-push %p --config /etc/pb.conf", &cfg) == CK_CMD_SAME);
}

int main(void)
{
    PBT_RUN(test_same);
    PBT_RUN(test_elsewhere);
    PBT_RUN(test_not_pageback);
    PBT_RUN(test_unknown);
    return PBT_DONE();
}
