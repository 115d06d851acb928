# Tests of the repository's scripts, included by tests/CMakeLists.txt. All label unit: no
# GPU and no Check needed; the ones that need a tool exit 77 (a skip) without it.
set(fx_script_tests ${CMAKE_CURRENT_LIST_DIR}/scripts)

# Issue 11's SIGPIPE defect: the backward query of run.sh and scripts/validate_gpu.sh
# (fx_stage_has_backward, scripts/stage_caps.sh), 300 times under pipefail against a
# program that writes 500 lines after the matching one, and against stage 03 (backward)
# and stage 04 (none) themselves.
set(fx_query_programs "")
foreach(id IN ITEMS 03_flash2 04_tma_mbarrier)
  if(TARGET stage_${id})
    list(APPEND fx_query_programs $<TARGET_FILE:stage_${id}>)
  endif()
endforeach()
add_test(NAME scripts_sigpipe_query
         COMMAND bash ${fx_script_tests}/sigpipe_query.sh 300 ${fx_query_programs})
set_tests_properties(scripts_sigpipe_query PROPERTIES LABELS unit TIMEOUT 300
                     SKIP_RETURN_CODE 77)

# No pipe into grep -q/-m/-l, head, cmp or read in a script under pipefail; the known
# ones outside the scripts that were fixed are listed, to be fixed by their owners.
add_test(NAME scripts_lint_pipefail
         COMMAND bash ${fx_script_tests}/lint_pipefail.sh --self-test
                 --known ${fx_script_tests}/sigpipe_known.txt)
set_tests_properties(scripts_lint_pipefail PROPERTIES LABELS unit TIMEOUT 120)

add_test(NAME scripts_shellcheck COMMAND bash ${fx_script_tests}/run_shellcheck.sh)
set_tests_properties(scripts_shellcheck PROPERTIES LABELS unit TIMEOUT 300
                     SKIP_RETURN_CODE 77)

# scripts/stage_diff.sh on two small stage folders made by the test.
add_test(NAME scripts_stage_diff COMMAND bash ${fx_script_tests}/stage_diff_test.sh)
set_tests_properties(scripts_stage_diff PROPERTIES LABELS unit TIMEOUT 120)

# The tree follows .clang-format (clang-format 14, Debian 12's; another version skips).
add_test(NAME format_clang_format COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/format.sh --check)
set_tests_properties(format_clang_format PROPERTIES LABELS unit TIMEOUT 300
                     SKIP_RETURN_CODE 77)

# No source line over 100 columns (generated files aside: scripts/format.sh --help).
add_test(NAME format_columns COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/format.sh --columns)
set_tests_properties(format_columns PROPERTIES LABELS unit TIMEOUT 120)

# The benchmark tooling (sweep, join, compare, bounds, tables, figures, peers.py) against
# stand-in stage programs, a fake PyTorch and a fake FA3 (bench/selftest.sh): no GPU.
add_test(NAME bench_selftest COMMAND bash ${PROJECT_SOURCE_DIR}/bench/selftest.sh)
# RUN_SERIAL: its stand-in GPU stream busy-waits to simulate host dispatch cost, and a test
# compiling beside it on a loaded machine has made one of its checks fail.
set_tests_properties(bench_selftest PROPERTIES LABELS unit TIMEOUT 300 RUN_SERIAL TRUE)

# Numbers in docs come from committed rows: generated tables regenerate unchanged, and a
# measured figure quoted by hand is found in the CSV it names (scripts/check_doc_numbers.sh).
add_test(NAME docs_numbers_from_csv COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check_doc_numbers.sh)
set_tests_properties(docs_numbers_from_csv PROPERTIES LABELS unit TIMEOUT 120)
