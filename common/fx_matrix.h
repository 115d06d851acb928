/*
 * fx_matrix.h — the GPU test matrix of a stage, generated from its capabilities
 * (DESIGN.md, "Tests"; docs/harness.md, "--matrix").
 */
#ifndef FX_MATRIX_H
#define FX_MATRIX_H

#include "fx_case.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs every case of c->self's matrix (device open), one line each, and re-runs a failing
 * one verbosely. c->opt's shape options are ignored; --fuzz draws fresh seeds. Returns 0
 * when no case failed (skips, exit 77 of a case, allowed), else 1. */
int fx_run_matrix(const fx_ctx *c);

#ifdef __cplusplus
}
#endif
#endif
