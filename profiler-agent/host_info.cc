#include "profiler-agent/host_info.h"

#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace tailor::profiler {
namespace {

// Splits "key<TAB>: value" lines. Keys keep their case: on x86 "model" (a number) and
// "model name" (the string we want) differ only by suffix.
std::vector<std::pair<std::string, std::string>> KeyValueLines(absl::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    out.emplace_back(std::string(absl::StripAsciiWhitespace(line.substr(0, colon))),
                     std::string(absl::StripAsciiWhitespace(line.substr(colon + 1))));
  }
  return out;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string ParseCpuModel(absl::string_view cpuinfo) {
  // In order of preference; the first line with the best key wins (all cores repeat it).
  static constexpr std::array<const char*, 5> kKeys = {"model name", "Hardware", "cpu model",
                                                       "Model", "Processor"};
  const auto lines = KeyValueLines(cpuinfo);
  for (const char* key : kKeys) {
    for (const auto& [k, v] : lines) {
      if (k == key && !v.empty()) return v;
    }
  }
  return "unknown";
}

absl::StatusOr<MemInfo> ParseMemInfo(absl::string_view meminfo) {
  std::map<std::string, int64_t> kib;
  for (const auto& [k, v] : KeyValueLines(meminfo)) {
    // Values look like "24683656 kB".
    std::vector<absl::string_view> parts = absl::StrSplit(v, ' ', absl::SkipEmpty());
    int64_t n = 0;
    if (!parts.empty() && absl::SimpleAtoi(parts[0], &n)) kib[k] = n;
  }
  auto get = [&](const char* key) -> int64_t {
    auto it = kib.find(key);
    return it == kib.end() ? -1 : it->second;
  };
  MemInfo out;
  out.total_kib = get("MemTotal");
  if (out.total_kib <= 0) {
    return absl::InvalidArgumentError("meminfo has no MemTotal line");
  }
  out.available_kib = get("MemAvailable");
  if (out.available_kib < 0) {
    out.available_kib = std::max<int64_t>(0, get("MemFree")) +
                        std::max<int64_t>(0, get("Buffers")) +
                        std::max<int64_t>(0, get("Cached"));
  }
  return out;
}

absl::StatusOr<HostInfo> ReadHostInfo(const std::string& proc_dir) {
  HostInfo host;
  absl::StatusOr<std::string> cpuinfo = ReadFile(proc_dir + "/cpuinfo");
  host.cpu_model = cpuinfo.ok() ? ParseCpuModel(*cpuinfo) : "unknown";
  TAILOR_ASSIGN_OR_RETURN(std::string meminfo_text, ReadFile(proc_dir + "/meminfo"));
  TAILOR_ASSIGN_OR_RETURN(MemInfo mem, ParseMemInfo(meminfo_text));
  host.memory_total_mib = mem.total_kib / 1024;
  host.memory_available_mib = mem.available_kib / 1024;
  host.logical_cores = static_cast<int>(std::thread::hardware_concurrency());
  cpu_set_t set;
  CPU_ZERO(&set);
  host.usable_cores =
      sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : host.logical_cores;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) == 0) host.hostname = name;
  struct utsname uts;
  if (uname(&uts) == 0) host.kernel = absl::StrCat(uts.sysname, " ", uts.release, " ", uts.machine);
  if (BuiltWithCuda()) host.cuda = QueryCuda();
  return host;
}

}  // namespace tailor::profiler
