# Every bench's --quick smoke mode runs in the README test command (issue #19) as
# <target>_quick: the bench must exit 0 and leave a non-empty JSON at its --json-out; no timing
# is ever asserted. Each bench's CMakeLists.txt includes this file itself, so it works however
# the bench's folder was added (bench/CMakeLists.txt or the top-level CMakeLists.txt).
#
#   tailor_add_bench_quick_test(<target> [NAME test] [TIMEOUT s] [ARGS arg...]
#                               [RESOURCE_LOCK name] [SKIP_REGULAR_EXPRESSION regex])
#
# NAME (default <target>_quick) lets one bench register a smoke run per mode.
# ARGS go after --quick; RESOURCE_LOCK serialises tests sharing one thing (dev_slurm: the Slurm
# dev cluster, as tests/e2e does); SKIP_REGULAR_EXPRESSION marks the test skipped when its
# output matches (a bench that cannot get what it needs says so and exits 0).
include_guard(GLOBAL)

function(tailor_add_bench_quick_test target)
  if(NOT TAILOR_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(Q "" "NAME;TIMEOUT;RESOURCE_LOCK;SKIP_REGULAR_EXPRESSION" "ARGS" ${ARGN})
  if(NOT Q_TIMEOUT)
    set(Q_TIMEOUT 300)
  endif()
  set(name ${target}_quick)
  if(Q_NAME)
    set(name ${Q_NAME})
  endif()
  # sh -c SCRIPT BENCH JSON ARGS...: a JSON left by an earlier run must not pass for this one.
  set(script "json=\"$1\"; shift; rm -f \"$json\"")
  string(APPEND script " && \"$0\" --quick \"$@\" --json-out \"$json\" && test -s \"$json\"")
  add_test(NAME ${name}
    COMMAND sh -c "${script}"
      $<TARGET_FILE:${target}> ${CMAKE_CURRENT_BINARY_DIR}/${name}.json ${Q_ARGS})
  set_tests_properties(${name} PROPERTIES LABELS bench TIMEOUT ${Q_TIMEOUT})
  if(Q_RESOURCE_LOCK)
    set_tests_properties(${name} PROPERTIES RESOURCE_LOCK ${Q_RESOURCE_LOCK})
  endif()
  if(Q_SKIP_REGULAR_EXPRESSION)
    set_tests_properties(${name} PROPERTIES SKIP_REGULAR_EXPRESSION ${Q_SKIP_REGULAR_EXPRESSION})
  endif()
endfunction()
