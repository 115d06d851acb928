/*
 * fx_csv.c — the CSV rows of --csv FILE (fx_csv.h): the table of columns, the writer.
 */
#define _POSIX_C_SOURCE 200809L /* gmtime_r */
#include "fx_csv.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fx_gpu.h" /* FX_EXIT_USAGE */
#include "fx_msg.h"

#include "fx_commit.h" /* FX_GIT_COMMIT: generated at build time (cmake/fx_commit.cmake) */

/* How a column's field is written. */
typedef enum col_kind {
    COL_TEXT,   /* const char *, commas to spaces, NULL empty */
    COL_INT,    /* int, %d */
    COL_MS,     /* double milliseconds, %.5f */
    COL_TFLOPS, /* double, %.2f */
    COL_ERR     /* double max-abs error, %.3e; negative: empty */
} col_kind;

typedef struct column {
    const char *name; /* the header's name: the field's */
    col_kind kind;
    size_t offset; /* of the field in fx_csv_row */
} column;

#define COL(field, kind)                                                                           \
    {                                                                                              \
#field, kind, offsetof(fx_csv_row, field)                                                  \
    }

/* The columns, in order: the header, the row and the bench scripts, which find columns by
 * name, all follow this table. */
static const column columns[] = {
    COL(stage, COL_TEXT),
    COL(direction, COL_TEXT),
    COL(device, COL_TEXT),
    COL(sm_count, COL_INT),
    COL(sm_clock_mhz, COL_INT),
    COL(commit, COL_TEXT),
    COL(date, COL_TEXT),
    COL(batch, COL_INT),
    COL(seqlen_q, COL_INT),
    COL(seqlen_k, COL_INT),
    COL(heads_q, COL_INT),
    COL(heads_kv, COL_INT),
    COL(head_dim, COL_INT),
    COL(dtype, COL_TEXT),
    COL(causal, COL_INT),
    COL(repeats, COL_INT),
    COL(ms, COL_MS),
    COL(ms_min, COL_MS),
    COL(ms_max, COL_MS),
    COL(tflops, COL_TFLOPS),
    COL(err_ref_max, COL_ERR),
    COL(err_prev_max, COL_ERR),
    COL(prev_stage, COL_TEXT),
    COL(check, COL_TEXT),
    COL(head_dim_v, COL_INT),
};

#undef COL

void fx_csv_header(char *buf, size_t len)
{
    size_t used = 0;
    if (len)
        buf[0] = '\0';
    for (size_t c = 0; c < sizeof columns / sizeof columns[0]; ++c) {
        int n = snprintf(buf + used, len - used, "%s%s", c ? "," : "", columns[c].name);
        if (n < 0 || (size_t)n >= len - used) {
            if (len)
                buf[0] = '\0';
            return;
        }
        used += (size_t)n;
    }
}

void fx_csv_row_stamp(fx_csv_row *r)
{
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(r->date_text, sizeof r->date_text, "%Y-%m-%dT%H:%M:%SZ", &tm);
    r->date = r->date_text;
    r->commit = FX_GIT_COMMIT;
}

static int put_text(FILE *f, const char *s)
{
    for (; s && *s; ++s)
        if (fputc(*s == ',' ? ' ' : *s, f) == EOF)
            return -1;
    return 0;
}

static int put_field(FILE *f, const column *c, const fx_csv_row *r)
{
    const char *at = (const char *)r + c->offset;
    double x = 0;
    switch (c->kind) {
    case COL_TEXT: return put_text(f, *(const char *const *)at);
    case COL_INT: return fprintf(f, "%d", *(const int *)at) < 0 ? -1 : 0;
    case COL_MS: return fprintf(f, "%.5f", *(const double *)at) < 0 ? -1 : 0;
    case COL_TFLOPS: return fprintf(f, "%.2f", *(const double *)at) < 0 ? -1 : 0;
    case COL_ERR: x = *(const double *)at; return x >= 0 && fprintf(f, "%.3e", x) < 0 ? -1 : 0;
    }
    return -1;
}

int fx_csv_write_row(FILE *f, const fx_csv_row *r)
{
    for (size_t c = 0; c < sizeof columns / sizeof columns[0]; ++c)
        if ((c && fputc(',', f) == EOF) || put_field(f, &columns[c], r) != 0)
            return -1;
    return fputc('\n', f) == EOF ? -1 : 0;
}

/* Whether a non-empty CSV at `path` begins with FX's header: 1 yes, 0 another first line
 * (written to `first`, its newline removed), -1 unreadable (a write-only file: not judged). */
static int header_matches(const char *path, char *first, size_t first_len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char header[1024];
    fx_csv_header(header, sizeof header);
    if (!fgets(first, (int)first_len, f))
        first[0] = '\0';
    fclose(f);
    first[strcspn(first, "\r\n")] = '\0';
    return strcmp(first, header) == 0;
}

int fx_csv_check_writable(const char *path, char *why, size_t why_len)
{
    /* Whether the file exists, whatever its permissions (a write-only file cannot be opened
     * for reading, and must not be taken for a new one and removed below). */
    struct stat st;
    const bool existed = stat(path, &st) == 0;
    FILE *f = fopen(path, "a");
    if (!f) {
        snprintf(why, why_len, "--csv: cannot open %s for appending: %s", path, strerror(errno));
        return FX_EXIT_USAGE;
    }
    fclose(f);
    /* Only the test of writability: a run that writes no row leaves no empty file. */
    if (!existed)
        remove(path);
    /* Rows appended under another file's header would be read under its columns. */
    char first[1024];
    if (existed && S_ISREG(st.st_mode) && st.st_size > 0 &&
        header_matches(path, first, sizeof first) == 0) {
        snprintf(why, why_len,
                 "--csv: %s does not begin with this harness's header (its first line: "
                 "\"%.60s%s\"): its rows would go under other columns; name a new file or "
                 "one this harness wrote",
                 path, first, strlen(first) > 60 ? "..." : "");
        return FX_EXIT_USAGE;
    }
    return 0;
}

bool fx_csv_append(const char *path, const fx_csv_row *r)
{
    FILE *f = fopen(path, "a");
    if (!f) {
        fx_error("--csv: cannot append to %s: %s: the %s row is lost", path, strerror(errno),
                 r->direction);
        return false;
    }
    char header[1024];
    fx_csv_header(header, sizeof header);
    /* The first failure's errno; buffered writes may fail only at fclose. */
    int err = 0;
    fseek(f, 0, SEEK_END);
    const long size = ftell(f);
    char first[1024];
    if (size > 0 && header_matches(path, first, sizeof first) == 0) {
        fclose(f);
        fx_error("--csv: %s no longer begins with this harness's header: the %s row is lost", path,
                 r->direction);
        return false;
    }
    if (size == 0 && fprintf(f, "%s\n", header) < 0)
        err = errno ? errno : EIO;
    if (!err && fx_csv_write_row(f, r) != 0)
        err = errno ? errno : EIO;
    if (fclose(f) != 0 && !err)
        err = errno ? errno : EIO;
    if (err) {
        fx_error("--csv: cannot write to %s: %s: the %s row is lost", path, strerror(err),
                 r->direction);
        return false;
    }
    return true;
}
