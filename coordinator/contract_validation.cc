#include "coordinator/contract_validation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/sha256.h"

namespace tailor::coordinator {
namespace {

using v1::DeploymentContract;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr char kCpu[] = "cpu";
constexpr char kSearchBudgets[] =
    "latency_ms_max, throughput_tokens_per_s_min, memory_mib_max";

// Shortest decimal form that reads back as the same double, so "must be < 0.5, got 0.5" can
// never happen for a value slightly above 0.5.
std::string FormatDouble(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  for (int precision = 6; precision < 17; ++precision) {
    std::string s = absl::StrFormat("%.*g", precision, v);
    if (std::strtod(s.c_str(), nullptr) == v) return s;
  }
  return absl::StrFormat("%.17g", v);
}

// Quoted, escaped and shortened: error messages must stay one readable line even when the
// offending value is long or binary.
std::string Quote(absl::string_view s) {
  constexpr size_t kMax = 64;
  std::string body = absl::CEscape(s.substr(0, kMax));
  if (s.size() > kMax) absl::StrAppend(&body, "...");
  return absl::StrCat("\"", body, "\"");
}

bool AllCharsIn(absl::string_view s, absl::string_view extra, bool upper_ok) {
  for (char c : s) {
    bool ok = absl::ascii_isdigit(static_cast<unsigned char>(c)) ||
              (c >= 'a' && c <= 'z') || (upper_ok && c >= 'A' && c <= 'Z') ||
              extra.find(c) != absl::string_view::npos;
    if (!ok) return false;
  }
  return true;
}

bool MatchesClass(absl::string_view s, absl::string_view extra, bool upper_ok, size_t min_len,
                  size_t max_len) {
  return s.size() >= min_len && s.size() <= max_len && AllCharsIn(s, extra, upper_ok);
}

bool HasControlChar(absl::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

// Protobuf strings must be UTF-8: a textproto can smuggle other bytes in through escapes
// ("\377"), and such a contract would not survive the wire (proto3 peers refuse to parse it)
// nor the JSON form. Found by the contract_textproto fuzzer.
bool IsValidUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (s.size() - i <= static_cast<size_t>(n)) return false;
    for (int k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

bool IsSearchBudgetSet(const v1::Budget& b) {
  return b.has_latency_ms_max() || b.has_throughput_tokens_per_s_min() || b.has_memory_mib_max();
}

// Accumulates violations; every helper names the field exactly as a contract writes it.
class Checker {
 public:
  void Add(std::string field, std::string reason) {
    errors_.push_back({std::move(field), std::move(reason)});
  }

  // Integer in [lo, hi]. Returns false (after recording) when out of range.
  bool Int(const std::string& field, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo) {
      Add(field, absl::StrCat("must be >= ", lo, ", got ", v));
      return false;
    }
    if (v > hi) {
      Add(field, absl::StrCat("must be <= ", hi, ", got ", v));
      return false;
    }
    return true;
  }

  // Finite double between lo and hi, each bound inclusive or not (kInf = unbounded).
  bool Double(const std::string& field, double v, double lo, bool lo_inclusive, double hi,
              bool hi_inclusive) {
    if (!std::isfinite(v)) {
      Add(field, absl::StrCat("must be finite, got ", FormatDouble(v)));
      return false;
    }
    if (lo_inclusive ? v < lo : v <= lo) {
      Add(field, absl::StrCat("must be ", lo_inclusive ? ">= " : "> ", FormatDouble(lo),
                              ", got ", FormatDouble(v)));
      return false;
    }
    if (hi_inclusive ? v > hi : v >= hi) {
      Add(field, absl::StrCat("must be ", hi_inclusive ? "<= " : "< ", FormatDouble(hi),
                              ", got ", FormatDouble(v)));
      return false;
    }
    return true;
  }

  bool Positive(const std::string& field, double v) {
    return Double(field, v, 0, /*lo_inclusive=*/false, kInf, /*hi_inclusive=*/true);
  }

  std::vector<FieldError> Take() { return std::move(errors_); }

 private:
  std::vector<FieldError> errors_;
};

void CheckIdentity(const DeploymentContract& c, Checker& k) {
  if (c.name().empty()) {
    k.Add("name", absl::StrCat("required; 1-", kMaxNameChars, " characters of [A-Za-z0-9._-]"));
  } else if (!MatchesClass(c.name(), "._-", /*upper_ok=*/true, 1, kMaxNameChars)) {
    k.Add("name", absl::StrCat("must match [A-Za-z0-9._-]{1,", kMaxNameChars, "}, got ",
                               Quote(c.name())));
  }
  if (c.method() == v1::METHOD_UNSPECIFIED) {
    k.Add("method", "required; one of AUTOCOMPRESS, BLOCK_REMOVAL, ENTROPY_CODE, PROBE");
  } else if (!v1::Method_IsValid(c.method())) {
    k.Add("method", absl::StrCat("must be one of AUTOCOMPRESS, BLOCK_REMOVAL, ENTROPY_CODE, "
                                 "PROBE, got ",
                                 c.method()));
  }
}

void CheckParent(const DeploymentContract& c, Checker& k) {
  const v1::ModelRef& p = c.parent();
  bool has_path = !p.path().empty();
  bool has_digest = !p.artifact_digest().empty();
  bool needed = c.method() != v1::PROBE && c.method() != v1::METHOD_UNSPECIFIED;
  if (!has_path && !has_digest) {
    if (needed) {
      k.Add("parent", absl::StrCat("required for ", v1::Method_Name(c.method()),
                                   "; set parent.path or parent.artifact_digest"));
    }
    return;
  }
  if (has_path && has_digest) {
    k.Add("parent", "set exactly one of path, artifact_digest, got both");
  }
  if (has_path) {
    if (p.path().size() > kMaxParentPathBytes) {
      k.Add("parent.path", absl::StrCat("must be at most ", kMaxParentPathBytes, " bytes, got ",
                                        p.path().size()));
    } else if (HasControlChar(p.path())) {
      k.Add("parent.path", absl::StrCat("must not contain control characters, got ",
                                        Quote(p.path())));
    } else if (!IsValidUtf8(p.path())) {
      k.Add("parent.path", absl::StrCat("must be valid UTF-8, got ", Quote(p.path())));
    }
  }
  if (has_digest && !IsSha256Hex(p.artifact_digest())) {
    k.Add("parent.artifact_digest",
          absl::StrCat("must be 64 lowercase hex characters (sha256), got ",
                       Quote(p.artifact_digest())));
  }
}

void CheckTarget(const DeploymentContract& c, Checker& k) {
  const v1::Target& t = c.target();
  const std::string& dk = t.device_kind();
  if (dk.empty()) {
    k.Add("target.device_kind", "required; the device kind of a profiler agent, e.g. \"cpu\"");
  } else if (dk.size() > kMaxDeviceKindChars) {
    k.Add("target.device_kind", absl::StrCat("must be at most ", kMaxDeviceKindChars,
                                             " characters, got ", dk.size()));
  } else if (HasControlChar(dk)) {
    k.Add("target.device_kind",
          absl::StrCat("must not contain control characters, got ", Quote(dk)));
  } else if (!IsValidUtf8(dk)) {
    k.Add("target.device_kind", absl::StrCat("must be valid UTF-8, got ", Quote(dk)));
  } else if (absl::ascii_isspace(static_cast<unsigned char>(dk.front())) ||
             absl::ascii_isspace(static_cast<unsigned char>(dk.back()))) {
    // Agents match device kinds exactly; stray spaces would leave the campaign waiting forever.
    k.Add("target.device_kind",
          absl::StrCat("must not start or end with whitespace, got ", Quote(dk)));
  }
  if (!t.engine().empty() && !MatchesClass(t.engine(), "._+-", true, 1, kMaxNameChars)) {
    k.Add("target.engine", absl::StrCat("must match [A-Za-z0-9._+-]{1,", kMaxNameChars,
                                        "}, got ", Quote(t.engine())));
  }
  if (!t.engine_version().empty() &&
      !MatchesClass(t.engine_version(), "._+-", true, 1, kMaxNameChars)) {
    k.Add("target.engine_version", absl::StrCat("must match [A-Za-z0-9._+-]{1,", kMaxNameChars,
                                                "}, got ", Quote(t.engine_version())));
  }
  v1::Precision p = t.precision();
  if (!v1::Precision_IsValid(p)) {
    k.Add("target.precision",
          absl::StrCat("must be one of FP32, BF16, FP16, FP8, INT8, INT4, got ", p));
  } else if ((p == v1::FP8 || p == v1::INT8 || p == v1::INT4) &&
             c.method() != v1::ENTROPY_CODE) {
    k.Add("target.precision",
          absl::StrCat(v1::Precision_Name(p), " is only supported for ENTROPY_CODE (the "
                                              "built-in engine serves FP32, BF16 and FP16)"));
  }
}

void CheckWorkload(const DeploymentContract& c, Checker& k) {
  bool required = c.method() == v1::AUTOCOMPRESS || c.method() == v1::BLOCK_REMOVAL ||
                  c.method() == v1::ENTROPY_CODE;
  if (!c.has_workload()) {
    if (required) {
      k.Add("workload", absl::StrCat("required for ", v1::Method_Name(c.method()),
                                     "; set batch_size, input_tokens and output_tokens"));
    }
    return;
  }
  const v1::Workload& w = c.workload();
  // Cost tables are only valid for the exact shape they were measured with, so a method that
  // profiles must state the whole shape; the cached prefix alone defaults to 0.
  auto length = [&](const char* name, bool has, int64_t v, int64_t lo, int64_t hi) {
    std::string field = absl::StrCat("workload.", name);
    if (!has) {
      if (required) k.Add(field, absl::StrCat("required for ", v1::Method_Name(c.method())));
      return false;
    }
    return k.Int(field, v, lo, hi);
  };
  bool ok = length("batch_size", w.has_batch_size(), w.batch_size(), 1, 4096);
  ok &= length("input_tokens", w.has_input_tokens(), w.input_tokens(), 1, 1048576);
  ok &= length("output_tokens", w.has_output_tokens(), w.output_tokens(), 1, 1048576);
  if (w.has_cached_prefix_tokens()) {
    ok &= k.Int("workload.cached_prefix_tokens", w.cached_prefix_tokens(), 0, 1048576);
  }
  int64_t total = int64_t{w.input_tokens()} + w.output_tokens() + w.cached_prefix_tokens();
  if (ok && total > 2097152) {
    k.Add("workload", absl::StrCat("input_tokens + output_tokens + cached_prefix_tokens must "
                                   "be <= 2097152, got ",
                                   total));
  }
}

void CheckBudget(const DeploymentContract& c, Checker& k) {
  const v1::Budget& b = c.budget();
  bool ok = true;
  if (b.has_latency_ms_max()) ok &= k.Positive("budget.latency_ms_max", b.latency_ms_max());
  if (b.has_throughput_tokens_per_s_min()) {
    ok &= k.Positive("budget.throughput_tokens_per_s_min", b.throughput_tokens_per_s_min());
  }
  if (b.has_memory_mib_max()) ok &= k.Positive("budget.memory_mib_max", b.memory_mib_max());
  if (b.has_weight_memory_mib_max()) {
    ok &= k.Positive("budget.weight_memory_mib_max", b.weight_memory_mib_max());
  }
  if (ok && b.has_weight_memory_mib_max() && b.has_memory_mib_max() &&
      b.weight_memory_mib_max() > b.memory_mib_max()) {
    k.Add("budget.weight_memory_mib_max",
          absl::StrCat("must be <= budget.memory_mib_max (", FormatDouble(b.memory_mib_max()),
                       "), got ", FormatDouble(b.weight_memory_mib_max())));
  }
  switch (c.method()) {
    case v1::AUTOCOMPRESS:
      if (!IsSearchBudgetSet(b)) {
        k.Add("budget", absl::StrCat("at least one of ", kSearchBudgets,
                                     " is required for AUTOCOMPRESS"));
      }
      break;
    case v1::BLOCK_REMOVAL:
      if (!IsSearchBudgetSet(b) && !c.block_removal().has_blocks_to_remove()) {
        k.Add("budget", absl::StrCat("at least one of ", kSearchBudgets,
                                     " is required for BLOCK_REMOVAL unless "
                                     "block_removal.blocks_to_remove is set"));
      }
      break;
    case v1::ENTROPY_CODE:
      if (!b.has_weight_memory_mib_max() && !b.has_memory_mib_max()) {
        k.Add("budget", "weight_memory_mib_max or memory_mib_max is required for ENTROPY_CODE");
      }
      break;
    default:
      break;
  }
  if (c.package().entropy_code() && !b.has_weight_memory_mib_max() &&
      (c.method() == v1::AUTOCOMPRESS || c.method() == v1::BLOCK_REMOVAL)) {
    k.Add("budget.weight_memory_mib_max", "required when package.entropy_code is true");
  }
}

void CheckSearch(const DeploymentContract& c, Checker& k) {
  const v1::SearchParams& s = c.search();
  const std::string p = "search.";
  if (s.has_steps()) k.Int(p + "steps", s.steps(), 1, 100000);
  bool sampled_ok = !s.has_sampled_architectures() ||
                    k.Int(p + "sampled_architectures", s.sampled_architectures(), 1, 1024);
  if (s.has_alpha()) k.Double(p + "alpha", s.alpha(), 0, true, 1000, true);
  if (s.has_dead_zone()) k.Double(p + "dead_zone", s.dead_zone(), 0, true, 0.5, false);
  if (s.has_router_lr()) k.Double(p + "router_lr", s.router_lr(), 0, false, 1, true);
  if (s.has_router_hidden()) k.Int(p + "router_hidden", s.router_hidden(), 1, 8192);
  bool scale_start_ok =
      !s.has_logit_scale_start() || k.Positive(p + "logit_scale_start", s.logit_scale_start());
  bool scale_end_ok =
      !s.has_logit_scale_end() || k.Positive(p + "logit_scale_end", s.logit_scale_end());
  // Comparisons use the effective value (explicit or default) on both sides.
  if (scale_start_ok && scale_end_ok && (s.has_logit_scale_start() || s.has_logit_scale_end())) {
    double start = s.has_logit_scale_start() ? s.logit_scale_start() : 1.0;
    double end = s.has_logit_scale_end() ? s.logit_scale_end() : 10.0;
    if (end < start) {
      k.Add(p + "logit_scale_end",
            absl::StrCat("must be >= logit_scale_start (", FormatDouble(start), "), got ",
                         FormatDouble(end)));
    }
  }
  bool temp_start_ok = !s.has_temperature_start() ||
                       k.Double(p + "temperature_start", s.temperature_start(), 0, false, 100, true);
  bool temp_end_ok = !s.has_temperature_end() ||
                     k.Double(p + "temperature_end", s.temperature_end(), 0, false, 100, true);
  if (temp_start_ok && temp_end_ok && (s.has_temperature_start() || s.has_temperature_end())) {
    double start = s.has_temperature_start() ? s.temperature_start() : 1.0;
    double end = s.has_temperature_end() ? s.temperature_end() : 0.05;
    if (end > start) {
      k.Add(p + "temperature_end",
            absl::StrCat("must be <= temperature_start (", FormatDouble(start), "), got ",
                         FormatDouble(end)));
    }
  }
  if (s.has_extraction_threshold()) {
    k.Double(p + "extraction_threshold", s.extraction_threshold(), 0.5, false, 1, true);
  }
  if (s.has_batch_sequences() &&
      k.Int(p + "batch_sequences", s.batch_sequences(), 1, 1048576) && sampled_ok) {
    // Each step splits its batch across the sampled architectures; one needs >= 1 sequence.
    int32_t sampled = s.has_sampled_architectures() ? s.sampled_architectures() : 32;
    if (s.batch_sequences() < sampled) {
      k.Add(p + "batch_sequences",
            absl::StrCat("must be >= sampled_architectures (", sampled,
                         ") so every architecture gets a sequence, got ", s.batch_sequences()));
    }
  } else if (!s.has_batch_sequences() && s.has_sampled_architectures() && sampled_ok &&
             s.sampled_architectures() > 64) {
    k.Add(p + "sampled_architectures",
          absl::StrCat("must be <= batch_sequences (default 64) so every architecture gets a "
                       "sequence, got ",
                       s.sampled_architectures()));
  }
  if (s.has_sequence_length()) k.Int(p + "sequence_length", s.sequence_length(), 1, 65536);
  if (s.has_supernet_lr()) k.Double(p + "supernet_lr", s.supernet_lr(), 0, false, 1, true);
}

void CheckRankingAndRecovery(const DeploymentContract& c, Checker& k) {
  const v1::RankingParams& r = c.ranking();
  if (r.has_calibration_samples()) {
    k.Int("ranking.calibration_samples", r.calibration_samples(), 1, 1000000);
  }
  if (r.has_sequence_length()) k.Int("ranking.sequence_length", r.sequence_length(), 1, 65536);
  const v1::RecoveryParams& d = c.recovery();
  if (d.has_tokens()) k.Int("recovery.tokens", d.tokens(), 0, 10000000000000LL);
  if (d.has_learning_rate()) {
    k.Double("recovery.learning_rate", d.learning_rate(), 0, false, 1, true);
  }
  if (d.has_batch_sequences()) {
    k.Int("recovery.batch_sequences", d.batch_sequences(), 1, 1048576);
  }
  if (d.has_sequence_length()) {
    k.Int("recovery.sequence_length", d.sequence_length(), 1, 65536);
  }
  if (d.has_checkpoint_every_steps()) {
    k.Int("recovery.checkpoint_every_steps", d.checkpoint_every_steps(), 1, 100000000);
  }
  if (c.compare_uniform_baseline() && c.method() != v1::AUTOCOMPRESS) {
    k.Add("compare_uniform_baseline",
          absl::StrCat("only valid for AUTOCOMPRESS, got method ", v1::Method_Name(c.method())));
  }
}

void CheckBlockRemoval(const DeploymentContract& c, Checker& k) {
  const v1::BlockRemovalParams& b = c.block_removal();
  if (b.has_blocks_to_remove()) {
    k.Int("block_removal.blocks_to_remove", b.blocks_to_remove(), 1, 4096);
  }
  if (b.has_calibration_samples()) {
    k.Int("block_removal.calibration_samples", b.calibration_samples(), 1, 100000);
  }
  if (b.has_candidates()) k.Int("block_removal.candidates", b.candidates(), 1, 1000);
  if (b.has_stages() && k.Int("block_removal.stages", b.stages(), 1, 8)) {
    // A budget-driven M is found by solving once; stages need M up front.
    if (b.stages() > 1 && !b.has_blocks_to_remove()) {
      k.Add("block_removal.stages",
            absl::StrCat(b.stages(), " stages need block_removal.blocks_to_remove (a "
                                     "budget-driven M is chosen in one stage)"));
    } else if (b.has_blocks_to_remove() && b.stages() > b.blocks_to_remove()) {
      k.Add("block_removal.stages",
            absl::StrCat("at most block_removal.blocks_to_remove (", b.blocks_to_remove(),
                         "), got ", b.stages()));
    }
  }
  if (!v1::QuboSolver_IsValid(b.solver())) {
    k.Add("block_removal.solver",
          absl::StrCat("must be one of QUBO_SOLVER_UNSPECIFIED, EXACT, SIMULATED_ANNEALING, "
                       "TABU, got ",
                       b.solver()));
  }
}

void CheckCandidateList(const std::string& field,
                        const google::protobuf::RepeatedField<int32_t>& values, int64_t lo,
                        int64_t hi, Checker& k) {
  if (values.size() > kMaxCandidates) {
    k.Add(field, absl::StrCat("at most ", kMaxCandidates, " entries, got ", values.size()));
    return;
  }
  for (int i = 0; i < values.size(); ++i) {
    std::string item = absl::StrCat(field, "[", i, "]");
    if (!k.Int(item, values[i], lo, hi)) continue;
    for (int j = 0; j < i; ++j) {
      if (values[j] == values[i]) {
        k.Add(item, absl::StrCat("duplicate of ", field, "[", j, "] (", values[i], ")"));
        break;
      }
    }
  }
}

void CheckEntropyAndPackage(const DeploymentContract& c, Checker& k) {
  const v1::EntropyParams& e = c.entropy();
  if (!v1::WeightFormat_IsValid(e.weight_format())) {
    k.Add("entropy.weight_format",
          absl::StrCat("must be one of WEIGHT_FORMAT_UNSPECIFIED, WEIGHT_BF16, WEIGHT_FP8, "
                       "WEIGHT_INT8, WEIGHT_INT4, got ",
                       e.weight_format()));
  }
  CheckCandidateList("entropy.symbols_per_codeword", e.symbols_per_codeword(), 1, 4, k);
  CheckCandidateList("entropy.table_log", e.table_log(), 8, 16, k);
  CheckCandidateList("entropy.chunk_width", e.chunk_width(), 64, 65536, k);
  if (c.package().entropy_code() && c.method() != v1::AUTOCOMPRESS &&
      c.method() != v1::BLOCK_REMOVAL) {
    k.Add("package.entropy_code",
          absl::StrCat("only valid for AUTOCOMPRESS and BLOCK_REMOVAL, got method ",
                       v1::Method_Name(c.method())));
  }
}

void CheckResourceRequest(const std::string& block, const v1::ResourceRequest& r,
                          bool single_agent, bool cpu_target, Checker& k) {
  const std::string p = absl::StrCat("resources.", block, ".");
  if (r.has_nodes() && k.Int(p + "nodes", r.nodes(), 1, 1024) && single_agent &&
      r.nodes() != 1) {
    k.Add(p + "nodes",
          absl::StrCat("must be 1 (", block, " jobs run on one profiler agent), got ", r.nodes()));
  }
  if (r.has_ranks_per_node() && k.Int(p + "ranks_per_node", r.ranks_per_node(), 1, 256) &&
      single_agent && r.ranks_per_node() != 1) {
    k.Add(p + "ranks_per_node", absl::StrCat("must be 1 (", block,
                                             " jobs run on one profiler agent), got ",
                                             r.ranks_per_node()));
  }
  bool gpus_ok = !r.has_gpus_per_node() || k.Int(p + "gpus_per_node", r.gpus_per_node(), 0, 64);
  if (gpus_ok && cpu_target && r.gpus_per_node() > 0) {
    k.Add(p + "gpus_per_node",
          absl::StrCat("must be 0 when target.device_kind is \"cpu\", got ", r.gpus_per_node()));
  }
  if (!MatchesClass(r.gpu_type(), "_-", /*upper_ok=*/false, 0, kMaxGpuTypeChars)) {
    k.Add(p + "gpu_type", absl::StrCat("must match [a-z0-9_-]{0,", kMaxGpuTypeChars, "}, got ",
                                       Quote(r.gpu_type())));
  } else if (!r.gpu_type().empty() && gpus_ok) {
    int32_t gpus = r.has_gpus_per_node() ? r.gpus_per_node() : (cpu_target ? 0 : 1);
    if (gpus == 0) {
      k.Add(p + "gpu_type", absl::StrCat("needs gpus_per_node >= 1, got gpu_type ",
                                         Quote(r.gpu_type()), " with 0 GPUs per node"));
    }
  }
  if (r.has_memory_mib()) k.Int(p + "memory_mib", r.memory_mib(), 0, 16777216);
  if (r.has_time_limit_s()) k.Int(p + "time_limit_s", r.time_limit_s(), 60, 2592000);
  if (r.has_max_attempts()) k.Int(p + "max_attempts", r.max_attempts(), 1, 20);
}

void CheckResources(const DeploymentContract& c, Checker& k) {
  const v1::Resources& r = c.resources();
  bool cpu = c.target().device_kind() == kCpu;
  CheckResourceRequest("profile", r.profile(), /*single_agent=*/true, cpu, k);
  CheckResourceRequest("rank", r.rank(), false, cpu, k);
  CheckResourceRequest("search", r.search(), false, cpu, k);
  CheckResourceRequest("distill", r.distill(), false, cpu, k);
  CheckResourceRequest("verify", r.verify(), /*single_agent=*/true, cpu, k);
  CheckResourceRequest("block_select", r.block_select(), false, cpu, k);
  CheckResourceRequest("entropy", r.entropy(), false, cpu, k);
}

void CheckOwnership(const DeploymentContract& c, Checker& k) {
  if (c.has_priority()) k.Int("priority", c.priority(), -1000, 1000);
  if (!c.team().empty() && !MatchesClass(c.team(), "_-", /*upper_ok=*/false, 1, kMaxNameChars)) {
    k.Add("team", absl::StrCat("must match [a-z0-9_-]{1,", kMaxNameChars, "}, got ",
                               Quote(c.team())));
  }
  if (c.labels_size() > kMaxLabels) {
    k.Add("labels", absl::StrCat("at most ", kMaxLabels, " entries, got ", c.labels_size()));
  }
  // Map order is unspecified; sort so the error list is deterministic.
  std::vector<std::pair<std::string, std::string>> labels(c.labels().begin(), c.labels().end());
  std::sort(labels.begin(), labels.end());
  for (const auto& [key, value] : labels) {
    std::string field = absl::StrCat("labels[\"", absl::CEscape(key), "\"]");
    if (!MatchesClass(key, "_.-", /*upper_ok=*/false, 1, kMaxLabelKeyChars)) {
      k.Add(field, absl::StrCat("key must match [a-z0-9_.-]{1,", kMaxLabelKeyChars, "}"));
    }
    if (value.size() > kMaxLabelValueChars) {
      k.Add(field, absl::StrCat("value must be at most ", kMaxLabelValueChars,
                                " characters, got ", value.size()));
    } else if (HasControlChar(value)) {
      k.Add(field, absl::StrCat("value must not contain control characters, got ", Quote(value)));
    } else if (!IsValidUtf8(value)) {
      k.Add(field, absl::StrCat("value must be valid UTF-8, got ", Quote(value)));
    }
  }
  if (c.probe().has_duration_ms()) {
    k.Int("probe.duration_ms", c.probe().duration_ms(), 0, 600000);
  }
}

void SetDefaultResources(v1::ResourceRequest* r, bool cpu, int32_t cpu_ranks) {
  if (!r->has_nodes()) r->set_nodes(1);
  if (!r->has_ranks_per_node()) r->set_ranks_per_node(cpu ? cpu_ranks : 1);
  if (!r->has_gpus_per_node()) r->set_gpus_per_node(cpu ? 0 : 1);
  if (!r->has_memory_mib()) r->set_memory_mib(0);
  if (!r->has_time_limit_s()) r->set_time_limit_s(86400);
  if (!r->has_max_attempts()) r->set_max_attempts(3);
}

void SetDefaultList(google::protobuf::RepeatedField<int32_t>* list,
                    std::initializer_list<int32_t> values) {
  if (list->empty()) list->Add(values.begin(), values.end());
}

}  // namespace

std::vector<FieldError> CheckContract(const DeploymentContract& contract) {
  Checker k;
  // Sections run in proto field order so errors come out in the order a reader meets them.
  CheckIdentity(contract, k);
  CheckParent(contract, k);
  CheckTarget(contract, k);
  CheckWorkload(contract, k);
  CheckBudget(contract, k);
  CheckSearch(contract, k);
  CheckRankingAndRecovery(contract, k);
  CheckBlockRemoval(contract, k);
  CheckEntropyAndPackage(contract, k);
  CheckResources(contract, k);
  CheckOwnership(contract, k);
  return k.Take();
}

absl::Status ValidateContract(const DeploymentContract& contract) {
  std::vector<FieldError> errors = CheckContract(contract);
  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "invalid contract: ",
      absl::StrJoin(errors, "; ", [](std::string* out, const FieldError& e) {
        absl::StrAppend(out, e.ToString());
      })));
}

DeploymentContract WithDefaults(const DeploymentContract& contract) {
  DeploymentContract c = contract;
  bool cpu = c.target().device_kind() == kCpu;

  v1::Target* t = c.mutable_target();
  if (t->engine().empty()) t->set_engine("tailor-builtin");
  if (t->engine_version().empty()) t->set_engine_version("1");
  if (t->precision() == v1::PRECISION_UNSPECIFIED) t->set_precision(cpu ? v1::FP32 : v1::BF16);

  // A missing workload stays missing (PROBE needs none); a given one gets its cached prefix.
  if (c.has_workload() && !c.workload().has_cached_prefix_tokens()) {
    c.mutable_workload()->set_cached_prefix_tokens(0);
  }

  v1::SearchParams* s = c.mutable_search();
  if (!s->has_steps()) s->set_steps(250);
  if (!s->has_sampled_architectures()) s->set_sampled_architectures(32);
  if (!s->has_alpha()) s->set_alpha(1.0);
  if (!s->has_dead_zone()) s->set_dead_zone(0.02);
  if (!s->has_router_lr()) s->set_router_lr(2e-3);
  if (!s->has_router_hidden()) s->set_router_hidden(256);
  if (!s->has_logit_scale_start()) s->set_logit_scale_start(1.0);
  if (!s->has_logit_scale_end()) s->set_logit_scale_end(10.0);
  if (!s->has_temperature_start()) s->set_temperature_start(1.0);
  if (!s->has_temperature_end()) s->set_temperature_end(0.05);
  if (!s->has_extraction_threshold()) s->set_extraction_threshold(0.95);
  if (!s->has_batch_sequences()) s->set_batch_sequences(64);
  if (!s->has_sequence_length()) s->set_sequence_length(64);
  if (!s->has_supernet_lr()) s->set_supernet_lr(1e-4);

  v1::RankingParams* r = c.mutable_ranking();
  if (!r->has_calibration_samples()) r->set_calibration_samples(256);
  if (!r->has_sequence_length()) r->set_sequence_length(64);

  v1::RecoveryParams* d = c.mutable_recovery();
  if (!d->has_tokens()) d->set_tokens(2000000);
  if (!d->has_learning_rate()) d->set_learning_rate(3e-4);
  if (!d->has_batch_sequences()) d->set_batch_sequences(32);
  if (!d->has_sequence_length()) d->set_sequence_length(64);
  if (!d->has_checkpoint_every_steps()) d->set_checkpoint_every_steps(50);

  // blocks_to_remove stays unset on purpose: unset means "smallest M that meets the budget".
  v1::BlockRemovalParams* b = c.mutable_block_removal();
  if (!b->has_calibration_samples()) b->set_calibration_samples(128);
  if (!b->has_candidates()) b->set_candidates(8);
  if (!b->has_stages()) b->set_stages(1);

  v1::EntropyParams* e = c.mutable_entropy();
  SetDefaultList(e->mutable_symbols_per_codeword(), {1, 2});
  SetDefaultList(e->mutable_table_log(), {10, 12});
  SetDefaultList(e->mutable_chunk_width(), {1024, 4096});

  // Search and distillation are data-parallel; two CPU ranks exercise the collective path
  // (Gloo) by default at little cost.
  v1::Resources* res = c.mutable_resources();
  SetDefaultResources(res->mutable_profile(), cpu, 1);
  SetDefaultResources(res->mutable_rank(), cpu, 1);
  SetDefaultResources(res->mutable_search(), cpu, 2);
  SetDefaultResources(res->mutable_distill(), cpu, 2);
  SetDefaultResources(res->mutable_verify(), cpu, 1);
  SetDefaultResources(res->mutable_block_select(), cpu, 1);
  SetDefaultResources(res->mutable_entropy(), cpu, 1);

  if (!c.has_priority()) c.set_priority(0);
  if (c.team().empty()) c.set_team("default");
  if (!c.has_seed()) c.set_seed(1);
  if (!c.probe().has_duration_ms()) c.mutable_probe()->set_duration_ms(1000);
  return c;
}

}  // namespace tailor::coordinator
