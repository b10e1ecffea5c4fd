#ifndef TAILOR_COMMON_RANK_ENV_H_
#define TAILOR_COMMON_RANK_ENV_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace tailor {

// Where a worker rank sits and how it reaches its peers and the coordinator.
struct RankEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  std::string coordinator;  // TAILOR_COORDINATOR
  std::string lease_id;     // TAILOR_LEASE_ID
  std::string work_dir;     // TAILOR_WORK_DIR
  // TAILOR_CHECKPOINT_DIR (the launchers set <data dir>/work/<job>/checkpoints), else
  // <work_dir>/../checkpoints: a directory that outlives the job's attempts.
  std::string checkpoint_dir;
  std::string launcher;     // TAILOR_LAUNCHER (local, slurm)
};

// Reads RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT, falling back to Slurm's
// SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID and the first host of SLURM_JOB_NODELIST (compact
// lists like "node[01-04,07]" are expanded here, so no scontrol call is needed). Every
// missing or malformed value is an INVALID_ARGUMENT naming the variable.
absl::StatusOr<RankEnv> ReadRankEnv(const std::function<const char*(const char*)>& getenv_fn);

// The first host of a Slurm node list ("gpu[07-09],cpu1" -> "gpu07").
absl::StatusOr<std::string> FirstSlurmHost(const std::string& nodelist);

}  // namespace tailor

#endif  // TAILOR_COMMON_RANK_ENV_H_
