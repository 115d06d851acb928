/*
 * fx_csv.h — the rows --csv FILE appends: one per benchmarked (stage, direction,
 * problem). The columns, in order, and how each is written are one table in fx_csv.c;
 * FX_CSV_HEADER (fx_main.h, where bench/sweep.sh reads it) must equal the header that
 * table gives, which tests/unit/test_csv.c checks. docs/harness.md, "The CSV", says what
 * each column means.
 */
#ifndef FX_CSV_H
#define FX_CSV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One row; each field is named as its column. Text fields are written as they are,
 * commas replaced by spaces (the CSV has no quoting), NULL as empty. */
typedef struct fx_csv_row {
    const char *stage, *direction, *device; /* direction: "fwd" or "bwd" */
    int sm_count, sm_clock_mhz;             /* sm_clock_mhz: NVML's, 0 without NVML */
    const char *commit, *date;              /* fx_csv_row_stamp fills both */
    int batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim;
    const char *dtype;
    int causal, repeats;
    double ms, ms_min, ms_max, tflops; /* median, fastest, slowest timed call; TFLOP/s */
    double err_ref_max, err_prev_max;  /* max-abs errors; negative: empty (not checked) */
    const char *prev_stage;            /* NULL or "": none */
    const char *check;                 /* "pass", "fail" or "skipped" */
    /* V's and O's columns (fx_head_dim_v): head_dim unless set. The last column, so that
     * the columns before it read as they did. */
    int head_dim_v;
    char date_text[32]; /* where fx_csv_row_stamp writes the date */
} fx_csv_row;

/* The header line (no newline) into buf; "" when len is too small for it. */
void fx_csv_header(char *buf, size_t len);

/* Sets r->commit to the commit of the build (FX_GIT_COMMIT, cmake/fx_commit.cmake) and r->date
 * to now, UTC ISO 8601 ("2026-12-01T12:00:00Z", in r->date_text). */
void fx_csv_row_stamp(fx_csv_row *r);

/* Writes r as one line, newline included, to f. Returns 0, or -1 when a write failed. */
int fx_csv_write_row(FILE *f, const fx_csv_row *r);

/* Whether `path` can be opened for appending, tested once at start-up so that rows are
 * not lost after minutes of timing; a file the test creates is removed again. Returns 0,
 * or 2 with the reason in `why`: "--csv: cannot open PATH for appending: <strerror>", or
 * a non-empty file whose first line is not FX_CSV_HEADER (rows appended there would be
 * read under another file's columns). */
int fx_csv_check_writable(const char *path, char *why, size_t why_len);

/* Appends r to `path`, after the header when the file is new or empty; refuses a file
 * that no longer begins with the header. Returns true, or false after saying on stderr
 * (fx_error) why the row is lost. */
bool fx_csv_append(const char *path, const fx_csv_row *r);

#ifdef __cplusplus
}
#endif
#endif
