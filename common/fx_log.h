/*
 * fx_log.h — the one way a stage program tells its user something went wrong.
 *
 * Every message starts with the program's name ("stage_08_intra_wg_overlap: ...") so that
 * a line in a log names what printed it. Usable from C and from CUDA C++ (the launchers).
 */
#ifndef FX_LOG_H
#define FX_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

/* Sets the prefix of every later message (the program's name); NULL restores the default,
 * "flash-explorer". */
void fx_log_set_program(const char *name);

/* Prints "<program>: <message>\n" to stderr; printf-style. */
void fx_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif
