/*
 * fx_msg.c — the one prefix of every user-facing message (fx_msg.h).
 */
#include "fx_msg.h"

#include <stdio.h>
#include <string.h>

/* "<name>: ", the name at most 63 bytes: a stage id is a folder name, far shorter. */
static char prefix[64 + 2] = FX_MSG_DEFAULT_PREFIX ": ";

void fx_msg_set_program(const char *name)
{
    if (!name || !name[0])
        name = FX_MSG_DEFAULT_PREFIX;
    snprintf(prefix, sizeof prefix, "%.63s: ", name);
}

const char *fx_msg_prefix(void)
{
    return prefix;
}

/* The line is put together first and written by one fputs, so that the prefix and the
 * message stay together where two processes write to one log. */
static void print_line(FILE *f, const char *fmt, va_list ap)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "%s", prefix);
    if (n < 0 || (size_t)n >= sizeof line - 1)
        n = 0;
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    size_t end = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (end > sizeof line - 2)
        end = sizeof line - 2;
    line[end] = '\n';
    line[end + 1] = '\0';
    fputs(line, f);
    fflush(f);
}

/* fx_msg_capture's buffer, per thread: one library call's messages. */
static _Thread_local char *capture_buf;
static _Thread_local size_t capture_len;

void fx_msg_capture(char *buf, size_t len)
{
    capture_buf = len > 0 ? buf : NULL;
    capture_len = len;
    if (capture_buf)
        capture_buf[0] = '\0';
}

static void capture_line(const char *fmt, va_list ap)
{
    size_t used = strlen(capture_buf);
    if (used > 0 && used + 1 < capture_len) {
        capture_buf[used++] = '\n';
        capture_buf[used] = '\0';
    }
    if (used + 1 < capture_len)
        vsnprintf(capture_buf + used, capture_len - used, fmt, ap);
}

void fx_verror(const char *fmt, va_list ap)
{
    if (capture_buf)
        capture_line(fmt, ap);
    else
        print_line(stderr, fmt, ap);
}

void fx_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fx_verror(fmt, ap);
    va_end(ap);
}

void fx_notice(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    print_line(stdout, fmt, ap);
    va_end(ap);
}
