/*
 * fx_msg.h — the one prefix of every user-facing message.
 *
 * A stage program's messages begin with its own name, "stage_<id>: " (set once by
 * fx_main from the program's stage id), so a line in a log says which program wrote it.
 * Before that, and in the unit tests, the prefix is FX_MSG_DEFAULT_PREFIX's. C and CUDA
 * C++ (the stages' launchers) both include this header.
 */
#ifndef FX_MSG_H
#define FX_MSG_H

#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define FX_PRINTF_LIKE(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define FX_PRINTF_LIKE(fmt, args)
#endif

/* The prefix's name until fx_msg_set_program is called. */
#define FX_MSG_DEFAULT_PREFIX "flash-explorer"

/* Makes "<name>: " the prefix of every later message (name truncated to 63 bytes);
 * NULL or "" restores FX_MSG_DEFAULT_PREFIX. Not thread-safe: call it before any
 * thread prints. */
void fx_msg_set_program(const char *name);

/* The current prefix, colon and blank included: "stage_03_flash2: ". */
const char *fx_msg_prefix(void);

/* Prints the prefix, the printf-formatted message and a newline to stderr; a line longer
 * than 1 KiB is cut there. */
void fx_error(const char *fmt, ...) FX_PRINTF_LIKE(1, 2);
/* fx_error with the arguments in a va_list (for wrappers of their own). */
void fx_verror(const char *fmt, va_list ap);

/* While a library call runs (api/fx_api.c), the lines fx_error and fx_verror would print
 * go instead, without the prefix, into buf (len bytes, each line after the last, '\n'
 * between them, truncated to fit) on this thread: the call returns them to its caller.
 * fx_msg_capture(NULL, 0) stops that. */
void fx_msg_capture(char *buf, size_t len);

/* The same to stdout, for the lines that report a run's outcome rather than an error
 * ("stage_03_flash2: skipped: no usable GPU: ..."). */
void fx_notice(const char *fmt, ...) FX_PRINTF_LIKE(1, 2);

#ifdef __cplusplus
}
#endif
#endif
