/*
 * tools/bench/plan_synthetic.c — restore and verify planning over a synthetic chain in
 * bounded memory. Writes a full and N incremental version 2 manifests of a
 * cluster of S 1 GiB segments (default 10,000: 1.31 billion pages, 10 TB) plus small
 * files into files under --dir, through mf_writer (one chunk at a time), then plans a
 * restore of the newest backup (the chain's manifests merged as sorted streams) and a
 * verify of every backup, each phase in a child process so its peak RSS is its own.
 * No data pages are written: only manifests. Prints time and peak RSS per phase.
 *
 *   plan_synthetic [--dir D] [--segments S] [--incrementals N] [--changed-per-mille M]
 *                  [--small-files F] [--keep]
 * A full at the default scale is ~10.5 GB (8 bytes of hash per page); the lead runs it
 * on an idle machine, a smoke run uses --segments 20.
 */
#include "engine/chain/chain.h"
#include "tests/unit/restore/plan_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SEG_PAGES 131072u /* 1 GiB */
#define FRAME_PAGES 128u  /* 1 MiB frames, as a full backup packs them */

typedef struct bench_opts {
    char dir[3000];
    unsigned segments, incrementals, per_mille, small_files;
    int keep;
} bench_opts;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x9e3779b97f4a7c15ull;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    return x ^ (x >> 32);
}

static void die(const char *what, const pb_error *err)
{
    fprintf(stderr, "plan_synthetic: %s: %s\n", what, err ? err->msg : strerror(errno));
    exit(1);
}

static void usage(const char *why)
{
    fprintf(stderr, "plan_synthetic: %s\nusage: plan_synthetic [--dir D] [--segments S] "
            "[--incrementals N] [--changed-per-mille 1..1000] [--small-files F] [--keep]\n",
            why);
    exit(2);
}

static void id_of(char out[MF_ID_LEN], unsigned b)
{
    snprintf(out, MF_ID_LEN, "20261201-%06u%c", b, b ? 'I' : 'F');
}

/* ---- generating ---- */

static int spool_sink(void *ctx, const void *data, size_t len, pb_error *err)
{
    if (fwrite(data, 1, len, ctx) != len)
        return pb_fail(err, PB_EIO, "writing the spool: %s", strerror(errno));
    return 0;
}

/* Segment s of backup b: the full ships every page in 1 MiB frames; an incremental ships
 * per_mille / 1000 of the pages, scattered, one page a frame. */
static void make_segment(mf_file *f, char path[64], unsigned b, unsigned s, unsigned per_mille)
{
    snprintf(path, 64, "base/16384/%07u", s);
    mf_run *runs = f->runs;
    uint64_t *hashes = f->page_hashes;
    memset(f, 0, sizeof(*f));
    f->runs = runs;
    f->page_hashes = hashes;
    f->path = path;
    f->kind = MF_REL;
    f->mode = 0600;
    f->npages = SEG_PAGES;
    f->size = (uint64_t)SEG_PAGES * PB_PAGE_SIZE;
    f->inode = 1000000 + s;
    uint32_t want = b ? (uint32_t)((uint64_t)SEG_PAGES * per_mille / 1000) : SEG_PAGES / FRAME_PAGES;
    uint32_t stride = b && want ? SEG_PAGES / want : FRAME_PAGES;
    f->nruns = want;
    for (uint32_t i = 0; i < want; i++) {
        uint32_t first = b ? i * stride + (uint32_t)(mix((uint64_t)b << 40 ^ (uint64_t)s << 20 ^ i) % stride)
                           : i * FRAME_PAGES;
        uint32_t count = b ? 1 : FRAME_PAGES;
        f->runs[i] = (mf_run){first, count, 1 + s / 16, count == 1 ? 1300 : 360000,
                              16 + (uint64_t)(s % 16) * 64 * 1048576 + (uint64_t)i * 2048,
                              count * PB_PAGE_SIZE, 0};
    }
    uint64_t k = 0;
    for (uint32_t i = 0; i < want; i++)
        for (uint32_t p = 0; p < f->runs[i].count; p++)
            f->page_hashes[k++] = mix((uint64_t)b << 48 ^ (uint64_t)s << 24 ^ (f->runs[i].first + p));
}

static void add_small_files(mf_writer *w, const bench_opts *o, unsigned b)
{
    pb_error err = PB_ERROR_INIT;
    mf_run run = {0, 1, 1, 200, 16, 8192, 0};
    for (unsigned i = 0; i < o->small_files; i++) {
        char path[64];
        snprintf(path, sizeof(path), "global/%07u", i);
        mf_file f = {0};
        f.path = path;
        f.kind = MF_FILE;
        f.mode = 0600;
        f.size = 8192;
        f.hash = mix(i);
        id_of(f.stored_in, b && i % 50 == 0 ? b : 0);
        f.nruns = 1;
        f.runs = &run;
        if (mf_writer_add(w, &f, &err))
            die("adding a small file", &err);
    }
}

/* One manifest: chunks to a spool, then head + spool into the final file. */
static void write_manifest(const bench_opts *o, unsigned b, mf_file *seg)
{
    char path[3100], spool[3100];
    snprintf(path, sizeof(path), "%s/m%03u", o->dir, b);
    snprintf(spool, sizeof(spool), "%s/spool", o->dir);
    mf_backup h = {0};
    id_of(h.id, b);
    if (b)
        id_of(h.parent, b - 1);
    h.type = b ? 'I' : 'F';
    h.stop_lsn = 0x1000000ull * (b + 1);
    FILE *sp = fopen(spool, "w+");
    mf_writer *w = NULL;
    pb_buf head = {0};
    pb_error err = PB_ERROR_INIT;
    if (!sp || mf_writer_new(&w, &h, chain_manifest_codec(), spool_sink, sp, &err))
        die("starting a manifest", sp ? &err : NULL);
    char seg_path[64];
    for (unsigned s = 0; s < o->segments; s++) {
        make_segment(seg, seg_path, b, s, o->per_mille);
        if (mf_writer_add(w, seg, &err))
            die("adding a segment", &err);
    }
    add_small_files(w, o, b);
    if (mf_writer_finish(w, &head, &err))
        die("finishing a manifest", &err);
    mf_writer_free(w);
    int out = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (out < 0 || write(out, head.data, head.len) != (ssize_t)head.len || fflush(sp))
        die(path, NULL);
    off_t len = ftello(sp), in_off = 0;
    while (in_off < len) {
        ssize_t n = copy_file_range(fileno(sp), &in_off, out, NULL, (size_t)(len - in_off), 0);
        if (n <= 0)
            die("copying the spool", NULL);
    }
    close(out);
    fclose(sp);
    unlink(spool);
    pb_buf_free(&head);
}

static void generate(const bench_opts *o)
{
    mf_file seg = {0};
    seg.runs = malloc(SEG_PAGES * sizeof(mf_run));
    seg.page_hashes = malloc(SEG_PAGES * 8);
    if (!seg.runs || !seg.page_hashes)
        die("allocating one segment", NULL);
    for (unsigned b = 0; b <= o->incrementals; b++)
        write_manifest(o, b, &seg);
    free(seg.runs);
    free(seg.page_hashes);
}

/* ---- reading ---- */

typedef struct file_src {
    int fd;
} file_src;

static int file_read(void *ctx, uint64_t off, size_t len, void *dst, pb_error *err)
{
    file_src *s = ctx;
    for (size_t done = 0; done < len;) {
        ssize_t n = pread(s->fd, (uint8_t *)dst + done, len - done, (off_t)(off + done));
        if (n <= 0)
            return pb_fail(err, n ? PB_EIO : PB_ECORRUPT, "reading a manifest at %llu",
                           (unsigned long long)(off + done));
        done += (size_t)n;
    }
    return 0;
}

static void file_close(void *ctx)
{
    file_src *s = ctx;
    close(s->fd);
    free(s);
}

static mf_stream *open_manifest(const bench_opts *o, unsigned b)
{
    char path[3100];
    snprintf(path, sizeof(path), "%s/m%03u", o->dir, b);
    file_src *s = malloc(sizeof(*s));
    struct stat st;
    if (!s || (s->fd = open(path, O_RDONLY)) < 0 || fstat(s->fd, &st))
        die(path, NULL);
    mf_source src = {file_read, file_close, s, (uint64_t)st.st_size, chain_manifest_codec()};
    mf_stream *m = NULL;
    pb_error err = PB_ERROR_INIT;
    if (mf_stream_open(&m, &src, path, &err))
        die("opening a manifest", &err);
    return m;
}

static void report(const char *what, const rs_stream_stats *st, double secs)
{
    printf("%s: %llu files (%llu segments), %llu pages, %llu frames (%.2f GiB); "
           "manifest bytes held at most %.2f MiB; %.1f s\n", what,
           (unsigned long long)st->files, (unsigned long long)st->rel_files,
           (unsigned long long)st->pages, (unsigned long long)st->frames,
           (double)st->bytes / (1u << 30), (double)st->peak_held / (1u << 20), secs);
}

static void plan_restore(const bench_opts *o)
{
    size_t n = o->incrementals + 1;
    mf_stream **streams = calloc(n, sizeof(*streams));
    if (!streams)
        die("allocating the chain", NULL);
    double t0 = now();
    for (size_t b = 0; b < n; b++)
        streams[b] = open_manifest(o, (unsigned)b);
    rs_stream_stats st;
    pb_error err = PB_ERROR_INIT;
    if (rs_plan_chain_stream(streams, n, &st, &err))
        die("restore planning", &err);
    report("restore planning", &st, now() - t0);
    free(streams);
}

static void plan_verify(const bench_opts *o)
{
    rs_stream_stats st = {0};
    pb_error err = PB_ERROR_INIT;
    double t0 = now();
    for (unsigned b = 0; b <= o->incrementals; b++) {
        mf_stream *s = open_manifest(o, b);
        if (rs_plan_verify_stream(s, &st, &err))
            die("verify planning", &err);
        mf_stream_close(s);
    }
    report("verify planning", &st, now() - t0);
}

/* Runs fn in a child; prints the child's own peak RSS. */
static void phase(const char *name, void (*fn)(const bench_opts *), const bench_opts *o)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        die("fork", NULL);
    if (pid == 0) {
        fn(o);
        fflush(stdout);
        _exit(0);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
        die(name, NULL);
    printf("%s: peak RSS %.1f MiB\n", name, ru.ru_maxrss / 1024.0);
}

static void parse_args(int argc, char **argv, bench_opts *o)
{
    const char *tmp = getenv("TMPDIR");
    *o = (bench_opts){.segments = 10000, .incrementals = 30, .per_mille = 1,
                      .small_files = 20000, .dir = {0}};
    snprintf(o->dir, sizeof(o->dir), "%s/plan_synthetic.%d", tmp ? tmp : "/tmp", (int)getpid());
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--keep")) {
            o->keep = 1;
            continue;
        }
        if (!v)
            usage("an option lacks its value");
        i++;
        if (!strcmp(a, "--dir"))
            snprintf(o->dir, sizeof(o->dir), "%s", v);
        else if (!strcmp(a, "--segments"))
            o->segments = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--incrementals"))
            o->incrementals = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--changed-per-mille"))
            o->per_mille = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--small-files"))
            o->small_files = (unsigned)strtoul(v, NULL, 10);
        else
            usage("unknown option");
    }
    if (o->per_mille < 1 || o->per_mille > 1000 || o->incrementals > 1000)
        usage("--changed-per-mille is 1..1000 and --incrementals at most 1000");
}

int main(int argc, char **argv)
{
    bench_opts o;
    parse_args(argc, argv, &o);
    if (pb_mkdir_p(o.dir, 0700, NULL))
        die(o.dir, NULL);
    printf("synthetic chain in %s: %u segments x %u pages = %llu pages (%.2f TB), %u small "
           "files, 1 full + %u incrementals (%u per mille of pages changed each)\n", o.dir,
           o.segments, SEG_PAGES, (unsigned long long)o.segments * SEG_PAGES,
           (double)o.segments * SEG_PAGES * PB_PAGE_SIZE / 1e12, o.small_files,
           o.incrementals, o.per_mille);
    double t0 = now();
    phase("generate", generate, &o);
    printf("generate: %.1f s\n", now() - t0);
    char cmd[7000];
    snprintf(cmd, sizeof(cmd), "du -sh '%s' | sed 's/^/manifests on disk: /'; "
             "ls -l '%s/m000' | awk '{print \"full manifest: \" $5 \" bytes\"}'", o.dir, o.dir);
    if (system(cmd) != 0)
        fprintf(stderr, "plan_synthetic: du failed\n");
    phase("restore planning", plan_restore, &o);
    phase("verify planning", plan_verify, &o);
    if (!o.keep) {
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", o.dir);
        if (system(cmd) != 0)
            fprintf(stderr, "plan_synthetic: could not remove %s\n", o.dir);
    }
    return 0;
}
