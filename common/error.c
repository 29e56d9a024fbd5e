/* common/error.c — pb_error filling and code names. */
#include "pb.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int fail_v(pb_error *err, int code, int sys_errno, const char *fmt, va_list ap)
{
    if (!err)
        return code;
    err->code = code;
    err->sys_errno = sys_errno;
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    if (sys_errno) {
        size_t n = strlen(err->msg);
        snprintf(err->msg + n, sizeof(err->msg) - n, ": %s", strerror(sys_errno));
    }
    return code;
}

int pb_fail(pb_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_v(err, code, 0, fmt, ap);
    va_end(ap);
    return code;
}

int pb_fail_errno(pb_error *err, int code, const char *fmt, ...)
{
    int saved = errno;
    va_list ap;
    va_start(ap, fmt);
    fail_v(err, code, saved ? saved : EIO, fmt, ap);
    va_end(ap);
    return code;
}

int pb_error_wrap(pb_error *err, const char *fmt, ...)
{
    if (!err)
        return PB_EINVAL;
    char prefix[512], old[sizeof(err->msg)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof(old));
    size_t n = strlen(prefix);
    if (n > sizeof(err->msg) - 3)
        n = sizeof(err->msg) - 3;
    memcpy(err->msg, prefix, n);
    memcpy(err->msg + n, ": ", 2);
    size_t room = sizeof(err->msg) - n - 3;
    size_t oldlen = strnlen(old, room);
    memcpy(err->msg + n + 2, old, oldlen);
    err->msg[n + 2 + oldlen] = '\0';
    return err->code;
}

const char *pb_code_name(int code)
{
    switch (code) {
    case PB_OK: return "ok";
    case PB_ENOENT: return "not found";
    case PB_EIO: return "I/O error";
    case PB_ECORRUPT: return "corrupt";
    case PB_ENOMEM: return "out of memory";
    case PB_EREMOTE: return "remote error";
    case PB_EINVAL: return "invalid input";
    case PB_EEXIST: return "already exists";
    case PB_EPG: return "PostgreSQL error";
    case PB_EUNSUPPORTED: return "unsupported";
    case PB_EAUTH: return "authentication failed";
    case PB_ESTATE: return "invalid state";
    default: return "unknown error";
    }
}
