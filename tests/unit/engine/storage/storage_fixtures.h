/* tests/unit/engine/storage/storage_fixtures.h — what the posix storage runners
 * (storage_test.c, storage_cleanup_test.c) share. */
#ifndef PB_TEST_STORAGE_FIXTURES_H
#define PB_TEST_STORAGE_FIXTURES_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/storage/storage.h"

/* Counts the files under dir (recursively) whose name contains needle. */
static inline int pbt_count_files(const char *dir, const char *needle)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char p[4096];
        if (snprintf(p, sizeof(p), "%s/%s", dir, de->d_name) >= (int)sizeof(p))
            continue;
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            n += pbt_count_files(p, needle);
        else if (strstr(de->d_name, needle))
            n++;
    }
    closedir(d);
    return n;
}

/* The flushes (fdatasync, fsync) r has made so far (repo_io_counts). */
static inline uint64_t pbt_repo_flushes(const repo *r)
{
    uint64_t flushes = 0, written = 0;
    repo_io_counts(r, &flushes, &written);
    return flushes;
}

#endif
