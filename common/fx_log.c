/*
 * fx_log.c — the program-name prefix of every message (fx_log.h).
 */
#include <stdarg.h>
#include <stdio.h>

#include "fx_log.h"

static const char *program = "flash-explorer";

void fx_log_set_program(const char *name)
{
    program = name ? name : "flash-explorer";
}

void fx_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", program);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
