#ifndef TAILOR_TESTS_FUZZ_FUZZ_CHECK_H_
#define TAILOR_TESTS_FUZZ_FUZZ_CHECK_H_

// Invariant checks inside fuzz targets: a violated one prints what and where, then aborts,
// which libFuzzer (and the replay test) report as a crash with the input saved.

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond, ...)                                                    \
  do {                                                                           \
    if (!(cond)) {                                                               \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed: ", __FILE__, __LINE__, \
                   #cond);                                                       \
      std::fprintf(stderr, __VA_ARGS__);                                         \
      std::fprintf(stderr, "\n");                                                \
      std::abort();                                                              \
    }                                                                            \
  } while (0)

#endif  // TAILOR_TESTS_FUZZ_FUZZ_CHECK_H_
