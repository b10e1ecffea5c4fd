#ifndef TAILOR_METHODS_ENTROPY_CODE_JOB_KINDS_H_
#define TAILOR_METHODS_ENTROPY_CODE_JOB_KINDS_H_

namespace tailor::methods::jobs {

// Agent: tunes the codes of every tensor on the target (per-tensor Pareto frontiers).
inline constexpr char kAutotune[] = "autotune";
// Launcher: picks one configuration per tensor under the weight budget and writes the package.
inline constexpr char kSelect[] = "select";

// Job keys of the entropy-coding tail after an AUTOCOMPRESS or BLOCK_REMOVAL verify (kinds
// kAutotune, kSelect and kVerify); an ENTROPY_CODE campaign uses the kinds as keys.
inline constexpr char kTailAutotune[] = "entropy_autotune";
inline constexpr char kTailSelect[] = "entropy_select";
inline constexpr char kTailVerify[] = "entropy_verify";

}  // namespace tailor::methods::jobs

#endif  // TAILOR_METHODS_ENTROPY_CODE_JOB_KINDS_H_
