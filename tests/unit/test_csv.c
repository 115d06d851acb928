/*
 * test_csv.c — the rows of --csv FILE (fx_csv.h): the header the column table writes is
 * FX_CSV_HEADER, the one bench/sweep.sh reads; a row holds one field per column, each
 * written as the benchmark scripts read it; a file that cannot be opened is refused with
 * the system's reason.
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fx_csv.h"
#include "fx_main.h" /* FX_CSV_HEADER */

/* A row with every field set, as a benchmark of stage 08 writes it. */
static fx_csv_row sample_row(void)
{
    fx_csv_row r = {
        .stage = "08_intra_wg_overlap",
        .direction = "fwd",
        .device = "NVIDIA H200, rev 1", /* a comma: the CSV has no quoting */
        .sm_count = 132,
        .sm_clock_mhz = 1980,
        .commit = "d8558c5",
        .date = "2026-12-01T12:00:00Z",
        .batch = 4,
        .seqlen_q = 4096,
        .seqlen_k = 2048,
        .heads_q = 16,
        .heads_kv = 4,
        .head_dim = 128,
        .dtype = "bf16",
        .causal = 1,
        .repeats = 10,
        .ms = 1.234567,
        .ms_min = 1.2,
        .ms_max = 1.3,
        .tflops = 334.567,
        .err_ref_max = 0.00123456,
        .err_prev_max = -1, /* no previous stage compared */
        .prev_stage = "",
        .check = "pass",
        .head_dim_v = 128,
    };
    return r;
}

static void row_text(const fx_csv_row *r, char *buf, size_t len)
{
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fx_csv_write_row(f, r), 0);
    rewind(f);
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
}

static int count_char(const char *s, char c)
{
    int n = 0;
    for (; *s; ++s)
        n += *s == c;
    return n;
}

START_TEST(the_table_writes_the_header_the_bench_scripts_read)
{
    char header[1024];
    fx_csv_header(header, sizeof header);
    ck_assert_str_eq(header, FX_CSV_HEADER);
}
END_TEST

START_TEST(a_row_holds_each_field_as_the_scripts_read_it)
{
    fx_csv_row r = sample_row();
    char line[1024];
    row_text(&r, line, sizeof line);
    ck_assert_str_eq(line, "08_intra_wg_overlap,fwd,NVIDIA H200  rev 1,132,1980,d8558c5,"
                           "2026-12-01T12:00:00Z,4,4096,2048,16,4,128,bf16,1,10,1.23457,1.20000,"
                           "1.30000,334.57,1.235e-03,,,pass,128\n");
    ck_assert_int_eq(count_char(line, ','), count_char(FX_CSV_HEADER, ','));
}
END_TEST

START_TEST(unchecked_errors_and_missing_text_are_empty_fields)
{
    fx_csv_row r = sample_row();
    r.err_ref_max = -1;
    r.err_prev_max = 0.0; /* 0 is an error that was measured: written */
    r.prev_stage = NULL;
    r.check = "skipped";
    char line[1024];
    row_text(&r, line, sizeof line);
    ck_assert_msg(strstr(line, ",334.57,,0.000e+00,,skipped,128\n"), "%s", line);
}
END_TEST

START_TEST(a_stamp_gives_the_commit_and_a_utc_date)
{
    fx_csv_row r = sample_row();
    fx_csv_row_stamp(&r);
    ck_assert_ptr_nonnull(r.commit);
    ck_assert(r.commit[0]);
    ck_assert_uint_eq(strlen(r.date), strlen("2026-12-01T12:00:00Z"));
    ck_assert_int_eq(r.date[10], 'T');
    ck_assert_int_eq(r.date[19], 'Z');
}
END_TEST

START_TEST(a_file_that_cannot_be_opened_is_refused_saying_why)
{
    char why[512];
    ck_assert_int_eq(fx_csv_check_writable("/nonexistent-fx-dir/x.csv", why, sizeof why), 2);
    ck_assert_str_eq(why, "--csv: cannot open /nonexistent-fx-dir/x.csv for appending: "
                          "No such file or directory");
}
END_TEST

START_TEST(the_writability_test_leaves_no_file_and_rows_follow_one_header)
{
    char dir[] = "/tmp/fx_csv_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[64], why[256];
    snprintf(path, sizeof path, "%s/rows.csv", dir);
    ck_assert_int_eq(fx_csv_check_writable(path, why, sizeof why), 0);
    ck_assert_int_ne(access(path, F_OK), 0);

    fx_csv_row r = sample_row();
    ck_assert(fx_csv_append(path, &r));
    r.direction = "bwd";
    ck_assert(fx_csv_append(path, &r));
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char line[1024];
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    ck_assert_str_eq(line, FX_CSV_HEADER "\n");
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    ck_assert_msg(!strncmp(line, "08_intra_wg_overlap,fwd,", 24), "%s", line);
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    ck_assert_msg(!strncmp(line, "08_intra_wg_overlap,bwd,", 24), "%s", line);
    ck_assert_ptr_null(fgets(line, sizeof line, f));
    fclose(f);
    /* A file that exists is kept by the writability test. */
    ck_assert_int_eq(fx_csv_check_writable(path, why, sizeof why), 0);
    ck_assert_int_eq(access(path, F_OK), 0);
    remove(path);
    rmdir(dir);
}
END_TEST

START_TEST(a_file_with_another_header_is_refused_and_not_appended_to)
{
    char dir[] = "/tmp/fx_csv_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[64], why[512];
    snprintf(path, sizeof path, "%s/other.csv", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("a,b\n1,2\n", f);
    fclose(f);

    ck_assert_int_eq(fx_csv_check_writable(path, why, sizeof why), 2);
    ck_assert_msg(strstr(why, "does not begin with this harness's header") &&
                      strstr(why, "\"a,b\""),
                  "%s", why);
    fx_csv_row r = sample_row();
    ck_assert(!fx_csv_append(path, &r));
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char text[64] = {0};
    ck_assert_uint_eq(fread(text, 1, sizeof text - 1, f), strlen("a,b\n1,2\n"));
    fclose(f);
    ck_assert_str_eq(text, "a,b\n1,2\n");

    /* An empty file is a new one: the header goes first. */
    f = fopen(path, "w");
    fclose(f);
    ck_assert_int_eq(fx_csv_check_writable(path, why, sizeof why), 0);
    ck_assert(fx_csv_append(path, &r));
    remove(path);
    rmdir(dir);
}
END_TEST

static Suite *csv_suite(void)
{
    Suite *s = suite_create("csv");
    TCase *t = tcase_create("rows");
    tcase_add_test(t, the_table_writes_the_header_the_bench_scripts_read);
    tcase_add_test(t, a_row_holds_each_field_as_the_scripts_read_it);
    tcase_add_test(t, unchecked_errors_and_missing_text_are_empty_fields);
    tcase_add_test(t, a_stamp_gives_the_commit_and_a_utc_date);
    tcase_add_test(t, a_file_that_cannot_be_opened_is_refused_saying_why);
    tcase_add_test(t, the_writability_test_leaves_no_file_and_rows_follow_one_header);
    tcase_add_test(t, a_file_with_another_header_is_refused_and_not_appended_to);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *runner = srunner_create(csv_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
