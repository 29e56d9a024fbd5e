/*
 * tests/unit/tools/progress_test.c — tools/progress.c driven by a fake clock on a fake
 * terminal (a temp file): a backup reports after every chunk, but a line is formatted only
 * when it is drawn (twice a second and at the end); the rate and the time left count from
 * the first byte read, not across the checkpoint wait before it.
 */
#include "tools/commands.h"
#include "tests/unit/pbtest.h"

#include <string.h>

typedef struct fake_clock {
    double t;
} fake_clock;

static double fake_now(void *ctx)
{
    return ((fake_clock *)ctx)->t;
}

/* A display that believes it draws on a terminal, into a temp file, on clock c. */
static void tty_progress(cmd_progress *p, fake_clock *c)
{
    pb_options o;
    memset(&o, 0, sizeof(o));
    cmd_progress_init(p, &o);
    p->now = fake_now;
    p->now_ctx = c;
    p->start = p->last = c->t;
    p->tty = p->enabled = true;
    p->out = tmpfile();
}

/* The seconds of the last "ETA h:mm:ss" drawn into out; -1 for none or "unknown". */
static long last_eta(FILE *out)
{
    static char text[1 << 20];
    rewind(out);
    size_t n = fread(text, 1, sizeof(text) - 1, out);
    text[n] = '\0';
    const char *p = NULL;
    for (const char *q = text; (q = strstr(q, "ETA ")) != NULL; q += 4)
        p = q + 4;
    unsigned h, m, s;
    if (!p || sscanf(p, "%u:%u:%u", &h, &m, &s) != 3)
        return -1;
    return (long)h * 3600 + m * 60 + s;
}

static void test_format_only_when_drawn(void)
{
    fake_clock c = {100.0};
    cmd_progress p;
    tty_progress(&p, &c);
    bk_progress b = {0, 10000 * 8192ULL, 0, 1, 0, 0, 0};
    /* 10,000 chunks, one a millisecond: 10 s of reading, 20 redraws. */
    for (int i = 1; i <= 10000; i++) {
        c.t += 0.001;
        b.bytes_done = (uint64_t)i * 8192;
        cmd_progress_backup(&p, &b);
    }
    PBT_CHECK(p.formats >= 19 && p.formats <= 21);
    /* The last file done, too soon for a redraw: kept, and drawn by the end. */
    c.t += 0.001;
    b.files_done = 1;
    cmd_progress_backup(&p, &b);
    unsigned long before_end = p.formats;
    cmd_progress_end(&p);
    PBT_CHECK(p.formats == before_end + 1);
    /* The end drew the newest figures, 100 %. */
    static char text[1 << 16];
    rewind(p.out);
    size_t n = fread(text, 1, sizeof(text) - 1, p.out);
    text[n] = '\0';
    const char *tail = strrchr(text, '\r');
    PBT_CHECK(tail && strstr(tail, "backup: 78.1 / 78.1 MiB (100%)") &&
              strstr(tail, "files 1/1") != NULL);
    fclose(p.out);
}

static void test_eta_from_first_byte(void)
{
    fake_clock c = {0.0};
    cmd_progress p;
    tty_progress(&p, &c);
    const uint64_t mib = 1048576;
    bk_progress b = {0, 100 * mib, 0, 10, 0, 0, 0};
    /* A spread checkpoint: ten minutes at zero bytes, the line redrawn all along. */
    for (; c.t < 600.0; c.t += 0.25)
        cmd_progress_backup(&p, &b);
    PBT_CHECK(last_eta(p.out) == -1);
    /* Then 10 MiB/s: 1 MiB every 0.1 s. Within the first second the rate is not known. */
    for (int k = 1; k <= 5; k++) {
        c.t = 600.0 + 0.1 * k;
        b.bytes_done = (uint64_t)k * mib;
        cmd_progress_backup(&p, &b);
    }
    PBT_CHECK(last_eta(p.out) == -1);
    for (int k = 6; k <= 31; k++) {
        c.t = 600.0 + 0.1 * k;
        b.bytes_done = (uint64_t)k * mib;
        cmd_progress_backup(&p, &b);
    }
    /* 31 MiB after 3 s of reading (from the first chunk at 600.1): 69 MiB left at about
     * 10 MiB/s is 6 to 7 s, not the 1,340 s a rate over the wait gives. */
    cmd_progress_end(&p);
    long eta = last_eta(p.out);
    PBT_CHECK(eta >= 6 && eta <= 7);
    if (eta < 6 || eta > 7)
        fprintf(stderr, "ETA %ld s\n", eta);
    fclose(p.out);
}

/* The whole text drawn into out. */
static const char *drawn(FILE *out)
{
    static char text[1 << 16];
    fflush(out);
    rewind(out);
    size_t n = fread(text, 1, sizeof(text) - 1, out);
    text[n] = '\0';
    return text;
}

/* A log line while the live line is drawn: the line is taken off the terminal first (a
 * log line glued to "ETA 0:00:03" reads as garbage), and drawn again at the next redraw. */
static void test_log_line_clears_the_live_line(void)
{
    fake_clock c = {10.0};
    cmd_progress p;
    tty_progress(&p, &c);
    pb_log_set_console_hook(cmd_progress_before_log, &p);
    bk_progress b = {0, 100 * 8192ULL, 0, 2, 0, 0, 0};
    c.t += 1;
    b.bytes_done = 10 * 8192;
    cmd_progress_backup(&p, &b);
    PBT_CHECK(p.drew);
    pb_info("a log line in the middle of the progress (expected in this test's output)");
    PBT_CHECK(!p.drew);
    const char *t = drawn(p.out);
    size_t n = strlen(t);
    PBT_CHECK(n >= 4 && !strcmp(t + n - 4, "\r\033[K"));
    c.t += 1;
    b.bytes_done = 20 * 8192;
    cmd_progress_backup(&p, &b);
    PBT_CHECK(p.drew);
    cmd_progress_end(&p);
    pb_log_set_console_hook(NULL, NULL);
    fclose(p.out);
}

/* A finished run ends its line at 100%, also when the last figures were short of the
 * total (an estimate, a file that shrank) or the run ended between two redraws. */
static void test_done_is_100_percent(void)
{
    fake_clock c = {10.0};
    cmd_progress p;
    tty_progress(&p, &c);
    bk_progress b = {0, 100 * 8192ULL, 0, 4, 0, 0, 0};
    c.t += 1;
    b.bytes_done = 90 * 8192;
    b.files_done = 3;
    cmd_progress_backup(&p, &b);
    cmd_progress_done(&p);
    cmd_progress_end(&p);
    const char *tail = strrchr(drawn(p.out), '\r');
    PBT_CHECK(tail && strstr(tail, "(100%)") && strstr(tail, "files 4/4") &&
              tail[strlen(tail) - 1] == '\n');
    fclose(p.out);
}

int main(void)
{
    PBT_RUN(test_format_only_when_drawn);
    PBT_RUN(test_eta_from_first_byte);
    PBT_RUN(test_log_line_clears_the_live_line);
    PBT_RUN(test_done_is_100_percent);
    return PBT_DONE();
}
