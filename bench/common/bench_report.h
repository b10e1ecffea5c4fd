#ifndef TAILOR_BENCH_COMMON_BENCH_REPORT_H_
#define TAILOR_BENCH_COMMON_BENCH_REPORT_H_

// What every bench's JSON report starts with (the machine, the time) and how it is written.

#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tailor::bench {

// "2 CPUs, Linux 6.1.0": what a reader needs to weigh the figures.
inline std::string Machine() {
  utsname u{};
  ::uname(&u);
  return absl::StrCat(::sysconf(_SC_NPROCESSORS_ONLN), " CPUs, ", u.sysname, " ", u.release);
}

// Now, ISO 8601 UTC to the second.
inline std::string UtcNow() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// Writes `report` to `path` (its folder created); false, after saying so on stderr as
// `bench`, when it cannot.
inline bool WriteJson(const nlohmann::json& report, const std::string& path, const char* bench) {
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  std::ofstream file(path);
  file << report.dump(2) << "\n";
  file.close();
  if (!file) {
    std::fprintf(stderr, "%s: cannot write %s\n", bench, path.c_str());
    return false;
  }
  return true;
}

}  // namespace tailor::bench

#endif  // TAILOR_BENCH_COMMON_BENCH_REPORT_H_
