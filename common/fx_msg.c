/*
 * fx_msg.c — the one prefix of every user-facing message (fx_msg.h).
 */
#include "fx_msg.h"

#include <stdio.h>

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

void fx_verror(const char *fmt, va_list ap)
{
    print_line(stderr, fmt, ap);
}

void fx_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    print_line(stderr, fmt, ap);
    va_end(ap);
}

void fx_notice(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    print_line(stdout, fmt, ap);
    va_end(ap);
}
