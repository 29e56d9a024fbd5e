/*
 * tools/options_table.c — the option table, expanded from tools/options.def, and the
 * typed parsers that turn an option's text into its field: whole numbers, sizes,
 * durations, one of a few words. A value they refuse is named with its option and
 * what the option takes, in one line, whichever source (flag, environment,
 * configuration file) gave it.
 */
#include "tools/options_internal.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FIELD(f) .off = offsetof(pb_options, f), .size = sizeof(((pb_options *)0)->f)
#define STR(f) .kind = OPTK_STR, FIELD(f)
#define WORD(f) .kind = OPTK_WORD, FIELD(f)
#define SWITCH(f, v) .kind = OPTK_SWITCH, FIELD(f), .lo = (v)
#define UINT(f, a, b) .kind = OPTK_UINT, FIELD(f), .lo = (a), .hi = (b)
#define SIZE(f, a, b, m) .kind = OPTK_SIZE, FIELD(f), .lo = (a), .hi = (b), .step = (m)
#define DURATION(f) .kind = OPTK_DURATION, FIELD(f)
#define CHOICE(f, ...)                                                                  \
    .kind = OPTK_CHOICE, FIELD(f), .values = (const long long[]){__VA_ARGS__},          \
    .nvalues = sizeof((const long long[]){__VA_ARGS__}) / sizeof(long long)
#define FN(fn, v) .kind = OPTK_FN, .parse = (fn), .lo = (v)
#define ASK(v) .kind = OPTK_ASK, .lo = (v)
#define CLI(p) .cli_only = true, p

const opts_def opts_table[OPTS_COUNT] = {
#define OPT(id, nm, cmds, a, dflt, mean, p)                                              \
    [OPT_##id] = {.name = nm, .commands = cmds, .arg = a, .default_text = dflt,          \
                  .meaning = mean, p},
#include "tools/options.def"
#undef OPT
};

const opts_def *opts_find(const char *name)
{
    for (size_t i = 0; i < OPTS_COUNT; i++)
        if (!strcmp(opts_table[i].name, name))
            return &opts_table[i];
    return NULL;
}

bool opts_env_name(const char *name, char *out, size_t cap)
{
    int n = snprintf(out, cap, "PAGEBACK_%s", name);
    if (n < 0 || (size_t)n >= cap)
        return false;
    for (char *p = out + 9; *p; p++)
        *p = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
    return true;
}

int opts_parse_size(const char *text, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text || text[0] == '-')
        return PB_EINVAL;
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (v > (ULLONG_MAX >> shift) || v << shift > SIZE_MAX)
        return PB_EINVAL; /* "17179869184G" must not wrap to a small size */
    v <<= shift;
    if (*end == 'i' || *end == 'B')
        end += strspn(end, "iB");
    if (*end)
        return PB_EINVAL;
    *out = (size_t)v;
    return 0;
}

/* "90s", "30m", "12h", "7d" or plain seconds. */
int opts_parse_duration(const char *text, int64_t *out)
{
    char *end;
    long long v = strtoll(text, &end, 10);
    if (end == text || v < 0)
        return PB_EINVAL;
    int64_t mult = 1;
    if (*end == 'm') mult = 60;
    else if (*end == 'h') mult = 3600;
    else if (*end == 'd') mult = 86400;
    else if (*end == 's' || *end == '\0') mult = 1;
    else return PB_EINVAL;
    if (*end && end[1])
        return PB_EINVAL;
    *out = v * mult;
    return 0;
}

int opts_parse_uint(const char *text, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(text, &end, 10);
    if (errno || end == text || *end || text[0] == '-' || v > UINT_MAX)
        return PB_EINVAL;
    *out = (unsigned)v;
    return 0;
}

/* The position of text among the words of "a|b|c", or -1. */
static long word_index(const char *words, const char *text)
{
    size_t n = strlen(text);
    long i = 0;
    for (const char *p = words; p; p = strchr(p, '|'), p = p ? p + 1 : NULL, i++)
        if (!strncmp(p, text, n) && (p[n] == '|' || p[n] == '\0') && n > 0)
            return i;
    return -1;
}

/* "8 KiB", "64 MiB": a bound in a message. */
static void bound_text(unsigned long long v, char *out, size_t cap)
{
    static const char units[] = "GMK";
    for (int i = 0; i < 3; i++) {
        unsigned shift = 30u - 10u * (unsigned)i;
        if (v >= (1ull << shift) && v % (1ull << shift) == 0) {
            snprintf(out, cap, "%llu %ciB", v >> shift, units[i]);
            return;
        }
    }
    snprintf(out, cap, "%llu", v);
}

/* What the option takes, after its name: "must be 1..256", "must be warn or fail". */
static void what_it_takes(const opts_def *d, char *out, size_t cap)
{
    bool secs = d->arg && !strcmp(d->arg, "SECONDS");
    char lo[32], hi[32], step[32];
    size_t n = 0;
    switch (d->kind) {
    case OPTK_UINT:
        if (d->hi < INT_MAX)
            snprintf(out, cap, "must be %llu..%llu%s", d->lo, d->hi, secs ? " seconds" : "");
        else if (d->lo)
            snprintf(out, cap, "must be at least %llu", d->lo);
        else
            snprintf(out, cap, "expects %s", secs ? "seconds" : "a whole number");
        return;
    case OPTK_SIZE:
        bound_text(d->lo, lo, sizeof(lo));
        bound_text(d->hi, hi, sizeof(hi));
        bound_text(d->step, step, sizeof(step));
        n = (size_t)snprintf(out, cap, "expects bytes (a number with K, M or G)");
        if (d->step > 1 && n < cap)
            n += (size_t)snprintf(out + n, cap - n, ", a multiple of %s", step);
        if (d->hi < SIZE_MAX && n < cap)
            snprintf(out + n, cap - n, " from %s to %s", lo, hi);
        else if (d->lo > 1 && n < cap)
            snprintf(out + n, cap - n, " of at least %s", lo);
        else if (d->lo == 1 && n < cap)
            snprintf(out + n, cap - n, " above 0");
        return;
    case OPTK_DURATION:
        snprintf(out, cap, "expects a duration like 90s, 30m, 12h or 7d");
        return;
    default: /* the words of arg: "a|b|c" as "a, b or c" */
        n = (size_t)snprintf(out, cap, "must be ");
        for (const char *p = d->arg ? d->arg : ""; *p && n + 4 < cap; p++) {
            if (*p != '|') {
                out[n++] = *p;
                continue;
            }
            const char *sep = strchr(p + 1, '|') ? ", " : " or ";
            n += (size_t)snprintf(out + n, cap - n, "%s", sep);
        }
        out[n < cap ? n : cap - 1] = '\0';
        return;
    }
}

static int bad_value(const opts_def *d, const char *arg, pb_error *err)
{
    char what[160];
    what_it_takes(d, what, sizeof(what));
    return pb_fail(err, PB_EINVAL, "--%s %s, not '%s'", d->name, what, arg ? arg : "");
}

/* A number into its field, whatever the field's width (bool, enum, int, size_t...). */
static void store(pb_options *o, const opts_def *d, unsigned long long v)
{
    char *p = (char *)o + d->off;
    uint8_t v8 = (uint8_t)v;
    uint16_t v16 = (uint16_t)v;
    uint32_t v32 = (uint32_t)v;
    uint64_t v64 = v;
    switch (d->size) {
    case 1: memcpy(p, &v8, 1); break;
    case 2: memcpy(p, &v16, 2); break;
    case 4: memcpy(p, &v32, 4); break;
    default: memcpy(p, &v64, 8); break;
    }
}

static int apply_number(pb_options *o, const opts_def *d, const char *arg, pb_error *err)
{
    unsigned u;
    size_t sz;
    int64_t secs;
    long i;
    switch (d->kind) {
    case OPTK_UINT:
        if (opts_parse_uint(arg, &u) || u < d->lo || u > d->hi)
            return bad_value(d, arg, err);
        store(o, d, u);
        return 0;
    case OPTK_SIZE:
        if (opts_parse_size(arg, &sz) || sz < d->lo || sz > d->hi || sz % d->step)
            return bad_value(d, arg, err);
        store(o, d, sz);
        return 0;
    case OPTK_DURATION:
        if (opts_parse_duration(arg, &secs))
            return bad_value(d, arg, err);
        store(o, d, (unsigned long long)secs);
        return 0;
    default: /* OPTK_CHOICE */
        if ((i = word_index(d->arg, arg)) < 0 || (size_t)i >= d->nvalues)
            return bad_value(d, arg, err);
        store(o, d, (unsigned long long)d->values[i]);
        return 0;
    }
}

int opts_apply(pb_options *o, opts_id id, const char *arg, pb_error *err)
{
    const opts_def *d = &opts_table[id];
    switch (d->kind) {
    case OPTK_WORD:
        if (word_index(d->arg, arg) < 0)
            return bad_value(d, arg, err);
        /* fall through */
    case OPTK_STR:
        *(const char **)((char *)o + d->off) = arg;
        return 0;
    case OPTK_SWITCH:
        store(o, d, d->lo);
        return 0;
    case OPTK_FN:
        return d->parse(o, d, arg, err);
    case OPTK_ASK:
        return 0;
    default:
        return apply_number(o, d, arg, err);
    }
}
