// Replays a fuzz target's seed corpus and crash regressions as a unit test, so every input
// that once crashed stays fixed in every build (normal and sanitizer) without libFuzzer.
// TAILOR_FUZZ_CORPUS_DIR and TAILOR_FUZZ_REGRESSION_DIR are set per target by CMake.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

TEST(FuzzReplay, SeedsAndRegressionsRunClean) {
  std::vector<fs::path> files;
  for (const char* dir : {TAILOR_FUZZ_CORPUS_DIR, TAILOR_FUZZ_REGRESSION_DIR}) {
    const fs::path path(dir);
    if (!fs::is_directory(path)) continue;
    for (const auto& entry : fs::directory_iterator(path)) {
      if (entry.is_regular_file() && entry.path().filename().string()[0] != '.') {
        files.push_back(entry.path());
      }
    }
  }
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty()) << "no seeds in " << TAILOR_FUZZ_CORPUS_DIR;
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // A failing input aborts the process; the last line printed names it.
    std::fprintf(stderr, "replaying %s (%zu bytes)\n", file.c_str(), bytes.size());
    EXPECT_EQ(LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()),
                                     bytes.size()),
              0)
        << file;
  }
}

}  // namespace
