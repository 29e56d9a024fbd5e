/*
 * engine/scan/scan_members.c — others' reads on an md array's member disks ("the
 * device's own counters and the md members' stats"; docs/DESIGN.md, "Polite I/O").
 *
 * Why: the array's /sys/block/mdN/stat counts what goes through the array, ours and the
 * database's alike. A second array or a partition on the same disks reads them without
 * going through it, and only the members' counters show that. Those counters also hold
 * the array's own traffic, split at chunk boundaries into member reads; what they show
 * beyond the array's reads plus one more per chunk of sectors read is someone else's.
 * The estimate leans low (a read is counted as split even when it fits in one chunk), so
 * it never makes the scanner yield for its own reads.
 */
#include "engine/scan/scan_ctl_internal.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A member's whole disk: a partition's directory has a "partition" file, and its parent
 * is the disk. */
static bool member_disk_stat(const char *slave, char *out, size_t len)
{
    char dir[PATH_MAX], probe[PATH_MAX + 16];
    struct stat st;
    if (!realpath(slave, dir))
        return false;
    snprintf(probe, sizeof(probe), "%s/partition", dir);
    if (stat(probe, &st) == 0) {
        char *slash = strrchr(dir, '/');
        if (!slash || slash == dir)
            return false;
        *slash = '\0';
    }
    return snprintf(out, len, "%s/stat", dir) < (int)len;
}

int scan_device_members(const char *dev_dir, scan_members *out)
{
    char path[PATH_MAX + 16], line[64];
    memset(out, 0, sizeof(*out));
    snprintf(path, sizeof(path), "%s/md/chunk_size", dev_dir);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return PB_ENOENT; /* not an md array */
    if (fgets(line, sizeof(line), fp))
        out->chunk_bytes = (size_t)strtoull(line, NULL, 10);
    fclose(fp);
    snprintf(path, sizeof(path), "%s/slaves", dev_dir);
    DIR *d = opendir(path);
    if (!d)
        return PB_ENOENT;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && out->n < SCAN_MEMBERS_MAX) {
        char slave[PATH_MAX + 300];
        if (e->d_name[0] == '.')
            continue;
        snprintf(slave, sizeof(slave), "%s/%s", path, e->d_name);
        if (!member_disk_stat(slave, out->stat[out->n], sizeof(out->stat[0])))
            continue;
        bool seen = false; /* two partitions of one disk: count the disk once */
        for (size_t i = 0; i < out->n && !seen; i++)
            seen = strcmp(out->stat[i], out->stat[out->n]) == 0;
        if (!seen)
            out->n++;
    }
    closedir(d);
    return out->n ? 0 : PB_ENOENT;
}

uint64_t scan_members_direct(scan_member_track *t, uint64_t md_reads, uint64_t md_sectors,
                             uint64_t member_reads, size_t chunk_bytes)
{
    if (t->have && md_reads >= t->md_reads && md_sectors >= t->md_sectors &&
        member_reads >= t->member_reads) {
        uint64_t sectors = md_sectors - t->md_sectors;
        uint64_t split = chunk_bytes >= 512 ? sectors * 512 / chunk_bytes : 0;
        uint64_t explained = (md_reads - t->md_reads) + split;
        uint64_t seen = member_reads - t->member_reads;
        if (seen > explained)
            t->direct += seen - explained;
    }
    t->have = true; /* a counter that went back (a member replaced) is a new baseline */
    t->md_reads = md_reads;
    t->md_sectors = md_sectors;
    t->member_reads = member_reads;
    return t->direct;
}
