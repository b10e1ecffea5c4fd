#include "common/rank_env.h"

#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tailor {
namespace {

absl::StatusOr<int> IntVar(const std::function<const char*(const char*)>& env,
                           const char* name, const char* fallback, int min, int max,
                           std::optional<int> default_value) {
  const char* v = env(name);
  const char* used = name;
  if ((v == nullptr || *v == '\0') && fallback != nullptr) {
    v = env(fallback);
    used = fallback;
  }
  if (v == nullptr || *v == '\0') {
    if (default_value.has_value()) return *default_value;
    return absl::InvalidArgumentError(absl::StrCat(name, " is not set", fallback ? " (nor " : "",
                                                   fallback ? fallback : "",
                                                   fallback ? ")" : ""));
  }
  int out = 0;
  if (!absl::SimpleAtoi(v, &out) || out < min || out > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(used, ": must be an integer in ", min, "..", max, ", got '", v, "'"));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> FirstSlurmHost(const std::string& nodelist) {
  if (nodelist.empty()) return absl::InvalidArgumentError("SLURM_JOB_NODELIST is empty");
  const size_t bracket = nodelist.find('[');
  const size_t comma = nodelist.find(',');
  if (bracket == std::string::npos || (comma != std::string::npos && comma < bracket)) {
    return nodelist.substr(0, comma);
  }
  const std::string prefix = nodelist.substr(0, bracket);
  size_t end = nodelist.find_first_of("-,]", bracket + 1);
  if (end == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("malformed node list '", nodelist, "'"));
  }
  return prefix + nodelist.substr(bracket + 1, end - bracket - 1);
}

absl::StatusOr<RankEnv> ReadRankEnv(const std::function<const char*(const char*)>& env) {
  RankEnv r;
  auto get = [&](const char* name) -> std::string {
    const char* v = env(name);
    return v == nullptr ? "" : v;
  };
  auto world = IntVar(env, "WORLD_SIZE", "SLURM_NTASKS", 1, 65536, 1);
  if (!world.ok()) return world.status();
  r.world_size = *world;
  auto rank = IntVar(env, "RANK", "SLURM_PROCID", 0, r.world_size - 1, 0);
  if (!rank.ok()) return rank.status();
  r.rank = *rank;
  auto local = IntVar(env, "LOCAL_RANK", "SLURM_LOCALID", 0, 65535, 0);
  if (!local.ok()) return local.status();
  r.local_rank = *local;
  r.master_addr = get("MASTER_ADDR");
  if (r.master_addr.empty()) {
    const std::string nodelist = get("SLURM_JOB_NODELIST");
    if (!nodelist.empty()) {
      auto host = FirstSlurmHost(nodelist);
      if (!host.ok()) return host.status();
      r.master_addr = *host;
    } else {
      r.master_addr = "127.0.0.1";
    }
  }
  auto port = IntVar(env, "MASTER_PORT", nullptr, 1, 65535,
                     r.world_size == 1 ? std::optional<int>(29500) : std::nullopt);
  if (!port.ok()) return port.status();
  r.master_port = *port;
  r.coordinator = get("TAILOR_COORDINATOR");
  r.lease_id = get("TAILOR_LEASE_ID");
  if (r.lease_id.empty()) return absl::InvalidArgumentError("TAILOR_LEASE_ID is not set");
  r.work_dir = get("TAILOR_WORK_DIR");
  if (r.work_dir.empty()) r.work_dir = ".";
  r.checkpoint_dir = get("TAILOR_CHECKPOINT_DIR");
  if (r.checkpoint_dir.empty()) {
    r.checkpoint_dir =
        (std::filesystem::path(r.work_dir).parent_path() / "checkpoints")
            .string();
  }
  r.launcher = get("TAILOR_LAUNCHER");
  if (r.launcher.empty()) r.launcher = "local";
  return r;
}

}  // namespace tailor
