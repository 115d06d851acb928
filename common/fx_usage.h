/*
 * fx_usage.h — --help: the stage, its capabilities, the stages it checks against, and
 * the options of fx_option_table.
 */
#ifndef FX_USAGE_H
#define FX_USAGE_H

#include <stdio.h>

#include "fx_case.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the help of c's program to f. Its "capabilities:" block is fx_caps_describe's
 * lines, which scripts/gen_readme_stages.sh parses. */
void fx_usage(const fx_ctx *c, FILE *f);

/* Writes the options of one --help section (the table's rows of `group`, in order) to f,
 * one "  --name VALUE   help (default D, range lo..hi)" entry each. */
void fx_usage_options(fx_opt_group group, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
