#include "coordinator/contract_validation.h"

#include <algorithm>
#include <functional>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
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
#include "compression/hf/hf_config.h"
#include "methods/registry.h"

namespace tailor::coordinator {
namespace {

using methods::FormatDouble;
using methods::IsSearchBudgetSet;
using methods::Method;
using methods::Quote;
using v1::DeploymentContract;
using Checker = methods::ContractChecker;

constexpr char kCpu[] = "cpu";

bool IsPackageable(const methods::MethodTraits& t) { return t.packageable; }
bool ServesLowPrecision(const methods::MethodTraits& t) { return t.low_precision_targets; }

// "A, B and C" from the registry's names, as error messages list methods.
std::string JoinNames(const std::vector<std::string>& names, const char* last) {
  if (names.size() <= 1) return absl::StrJoin(names, "");
  return absl::StrCat(
      absl::StrJoin(std::vector<std::string>(names.begin(), names.end() - 1), ", "), last,
      names.back());
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

void CheckIdentity(const DeploymentContract& c, const methods::MethodRegistry& registry,
                   Checker& k) {
  if (c.name().empty()) {
    k.Add("name", absl::StrCat("required; 1-", kMaxNameChars, " characters of [A-Za-z0-9._-]"));
  } else if (!MatchesClass(c.name(), "._-", /*upper_ok=*/true, 1, kMaxNameChars)) {
    k.Add("name", absl::StrCat("must match [A-Za-z0-9._-]{1,", kMaxNameChars, "}, got ",
                               Quote(c.name())));
  }
  const std::string known = absl::StrJoin(registry.Names(), ", ");
  if (c.method() == v1::METHOD_UNSPECIFIED) {
    k.Add("method", absl::StrCat("required; one of ", known));
  } else if (registry.Find(c.method()) == nullptr) {
    k.Add("method", absl::StrCat("must be one of ", known, ", got ", c.method()));
  }
}

// parent.format forces the Hugging Face layout of a parent folder (hf::ParseArchitecture).
void CheckParentFormat(const v1::ModelRef& p, Checker& k) {
  if (p.format().empty()) return;
  if (p.format().size() > kMaxParentFormatBytes || HasControlChar(p.format()) ||
      !IsValidUtf8(p.format())) {
    k.Add("parent.format", absl::StrCat("must be an architectures value or model_type of at "
                                        "most ", kMaxParentFormatBytes, " printable bytes"));
    return;
  }
  if (p.path().empty()) {
    k.Add("parent.format", "applies to parent.path (a Hugging Face checkpoint folder) only");
    return;
  }
  absl::StatusOr<hf::Architecture> a = hf::ParseArchitecture(p.format());
  if (!a.ok()) k.Add("parent.format", std::string(a.status().message()));
}

// A path the coordinator and the jobs read (parent.path, data.*.path).
void CheckPath(const std::string& field, const std::string& path, Checker& k) {
  if (path.size() > kMaxParentPathBytes) {
    k.Add(field, absl::StrCat("must be at most ", kMaxParentPathBytes, " bytes, got ",
                              path.size()));
  } else if (HasControlChar(path)) {
    k.Add(field, absl::StrCat("must not contain control characters, got ", Quote(path)));
  } else if (!IsValidUtf8(path)) {
    k.Add(field, absl::StrCat("must be valid UTF-8, got ", Quote(path)));
  }
}

void CheckParent(const DeploymentContract& c, const Method* m, Checker& k) {
  const v1::ModelRef& p = c.parent();
  bool has_path = !p.path().empty();
  bool has_digest = !p.artifact_digest().empty();
  // An unknown method is reported by CheckIdentity; its parent is still required.
  bool needed = m != nullptr ? m->traits().needs_parent : c.method() != v1::METHOD_UNSPECIFIED;
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
  if (has_path) CheckPath("parent.path", p.path(), k);
  if (has_digest && !IsSha256Hex(p.artifact_digest())) {
    k.Add("parent.artifact_digest",
          absl::StrCat("must be 64 lowercase hex characters (sha256), got ",
                       Quote(p.artifact_digest())));
  }
  CheckParentFormat(p, k);
}

void CheckTarget(const DeploymentContract& c, const methods::MethodRegistry& registry,
                 const Method* m, Checker& k) {
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
  // llama.cpp serves GGUF files: an entropy-coded package is tailor's own format, which only
  // the built-in engine decodes.
  if (t.engine() == "llama.cpp" &&
      (c.method() == v1::ENTROPY_CODE || c.package().entropy_code())) {
    k.Add("target.engine",
          absl::StrCat("llama.cpp serves GGUF files; ",
                       c.method() == v1::ENTROPY_CODE ? "ENTROPY_CODE" : "package.entropy_code",
                       " delivers an entropy-coded package, which only tailor-builtin serves"));
  }
  const v1::EquivalenceGate& g = t.equivalence();
  if (g.has_max_kl()) k.Double("target.equivalence.max_kl", g.max_kl(), 0, true, 1, true);
  if (g.has_min_argmax_agreement()) {
    k.Double("target.equivalence.min_argmax_agreement", g.min_argmax_agreement(), 0, true, 1,
             true);
  }
  v1::Precision p = t.precision();
  if (!v1::Precision_IsValid(p)) {
    k.Add("target.precision",
          absl::StrCat("must be one of FP32, BF16, FP16, FP8, INT8, INT4, got ", p));
  } else if ((p == v1::FP8 || p == v1::INT8 || p == v1::INT4) &&
             (m == nullptr || !m->traits().low_precision_targets)) {
    k.Add("target.precision",
          absl::StrCat(v1::Precision_Name(p), " is only supported for ",
                       JoinNames(registry.Names(ServesLowPrecision), " and "),
                       " (the built-in engine serves FP32, BF16 and FP16)"));
  }
}

void CheckWorkload(const DeploymentContract& c, const Method* m, Checker& k) {
  bool required = m != nullptr && m->traits().needs_workload;
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

// Budgets relative to the parent (coordinator/relative_budget.h): a factor each, and never
// beside the absolute budget of the same resource (which one would bind is not for tailor
// to guess).
void CheckRelativeBudgets(const v1::Budget& b, Checker& k) {
  auto check = [&k](bool has, double factor, const char* field, double hi, bool has_absolute,
                    const char* absolute) {
    if (!has) return;
    const std::string name = absl::StrCat("budget.", field);
    k.Double(name, factor, 0, false, hi, true);
    if (has_absolute) {
      k.Add(name, absl::StrCat("set budget.", absolute, " or budget.", field, ", not both"));
    }
  };
  check(b.has_latency_vs_parent_max(), b.latency_vs_parent_max(), "latency_vs_parent_max", 1,
        b.has_latency_ms_max(), "latency_ms_max");
  check(b.has_throughput_vs_parent_min(), b.throughput_vs_parent_min(),
        "throughput_vs_parent_min", 100, b.has_throughput_tokens_per_s_min(),
        "throughput_tokens_per_s_min");
  check(b.has_memory_vs_parent_max(), b.memory_vs_parent_max(), "memory_vs_parent_max", 1,
        b.has_memory_mib_max(), "memory_mib_max");
}

void CheckBudget(const DeploymentContract& c, const Method* m, Checker& k) {
  const v1::Budget& b = c.budget();
  bool ok = true;
  if (b.has_latency_ms_max()) ok &= k.Positive("budget.latency_ms_max", b.latency_ms_max());
  if (!v1::LatencyPercentile_IsValid(b.latency_percentile())) {
    k.Add("budget.latency_percentile",
          absl::StrCat("must be one of LATENCY_P50, LATENCY_P90, LATENCY_P99, got ",
                       b.latency_percentile()));
  }
  if (b.has_throughput_tokens_per_s_min()) {
    ok &= k.Positive("budget.throughput_tokens_per_s_min", b.throughput_tokens_per_s_min());
  }
  if (b.has_memory_mib_max()) ok &= k.Positive("budget.memory_mib_max", b.memory_mib_max());
  CheckRelativeBudgets(b, k);
  if (b.has_weight_memory_mib_max()) {
    ok &= k.Positive("budget.weight_memory_mib_max", b.weight_memory_mib_max());
  }
  if (ok && b.has_weight_memory_mib_max() && b.has_memory_mib_max() &&
      b.weight_memory_mib_max() > b.memory_mib_max()) {
    k.Add("budget.weight_memory_mib_max",
          absl::StrCat("must be <= budget.memory_mib_max (", FormatDouble(b.memory_mib_max()),
                       "), got ", FormatDouble(b.weight_memory_mib_max())));
  }
  if (m != nullptr) m->CheckChosen(c, k);
  if (c.package().entropy_code() && !b.has_weight_memory_mib_max() && m != nullptr &&
      m->traits().packageable) {
    k.Add("budget.weight_memory_mib_max", "required when package.entropy_code is true");
  }
}

// Recovery (distillation) is shared by the methods that distill their students.
void CheckRecovery(const DeploymentContract& c, Checker& k) {
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
}

// One dataset of `data`; `stage_length` names the stage's own sequence length field that a
// set sequence_tokens must agree with ("" when none), `used` why the method reads it ("" when
// it does not).
void CheckDataset(const std::string& role, const v1::DatasetRef& d, const std::string& unused,
                  const std::vector<std::pair<std::string, std::optional<int32_t>>>& stage_lengths,
                  Checker& k) {
  const std::string p = absl::StrCat("data.", role);
  if (d.path().empty() && d.artifact_digest().empty()) {
    k.Add(p, "set path (a .jsonl file or a folder of *.jsonl shards) or artifact_digest");
    return;
  }
  if (!unused.empty()) k.Add(p, unused);
  if (!d.path().empty()) CheckPath(p + ".path", d.path(), k);
  if (!d.artifact_digest().empty() && !IsSha256Hex(d.artifact_digest())) {
    k.Add(p + ".artifact_digest", absl::StrCat("must be 64 lowercase hex characters (sha256), "
                                               "got ", Quote(d.artifact_digest())));
  }
  if (d.has_sequence_tokens() && k.Int(p + ".sequence_tokens", d.sequence_tokens(), 2, 65536)) {
    for (const auto& [field, length] : stage_lengths) {
      if (length.has_value() && *length != d.sequence_tokens()) {
        k.Add(p + ".sequence_tokens",
              absl::StrCat(d.sequence_tokens(), " disagrees with ", field, " ", *length,
                           "; set one of them"));
      }
    }
  }
  if (d.has_packing() && !d.packing() && role != "eval") {
    k.Add(p + ".packing", "false is for data.eval only: training and calibration read whole "
                          "packed sequences");
  }
  if (d.has_max_sequences()) k.Int(p + ".max_sequences", d.max_sequences(), 1, int64_t{1} << 40);
}

std::optional<int32_t> Length(bool has, int32_t v) {
  return has ? std::optional<int32_t>(v) : std::nullopt;
}

// data { calibration, train, eval }: each read by a stage the contract's method plans.
void CheckData(const DeploymentContract& c, const Method* m, Checker& k) {
  if (!c.has_data()) return;
  const v1::DataParams& d = c.data();
  const std::string method = v1::Method_Name(c.method());
  const bool calibrates = m != nullptr && m->traits().reads_calibration;
  const bool distills = m != nullptr && m->Distills(c);
  const std::string no_distill =
      distills ? ""
               : absl::StrCat(method, " plans no distill job here",
                              c.method() == v1::BLOCK_REMOVAL ? " (set block_removal.distill)"
                                                              : "");
  if (d.has_calibration()) {
    const v1::RankingParams& r = c.ranking();
    const v1::SearchParams& s = c.search();
    CheckDataset("calibration", d.calibration(),
                 calibrates ? "" : absl::StrCat(method, " reads no calibration data"),
                 {{"ranking.sequence_length", Length(r.has_sequence_length(), r.sequence_length())},
                  {"search.sequence_length", Length(s.has_sequence_length(), s.sequence_length())}},
                 k);
  }
  if (d.has_train()) {
    const v1::RecoveryParams& r = c.recovery();
    CheckDataset("train", d.train(), no_distill,
                 {{"recovery.sequence_length",
                   Length(r.has_sequence_length(), r.sequence_length())}},
                 k);
  }
  if (d.has_eval()) CheckDataset("eval", d.eval(), no_distill, {}, k);
}

// quality { ... }: floors judged on data.eval.
void CheckQuality(const DeploymentContract& c, Checker& k) {
  if (!c.has_quality()) return;
  const v1::QualityParams& q = c.quality();
  const bool eval = c.data().has_eval();
  if (q.has_max_relative_perplexity_increase() &&
      k.Double("quality.max_relative_perplexity_increase", q.max_relative_perplexity_increase(),
               0, true, 1000, true) &&
      !eval) {
    k.Add("quality.max_relative_perplexity_increase", "needs data.eval to measure it on");
  }
  if (q.has_min_exact_match() &&
      k.Double("quality.min_exact_match", q.min_exact_match(), 0, true, 1, true) && !eval) {
    k.Add("quality.min_exact_match",
          "needs data.eval with {\"prompt\", \"answer\"} lines to measure it on");
  }
}

void CheckPackage(const DeploymentContract& c, const methods::MethodRegistry& registry,
                  const Method* m, Checker& k) {
  if (c.package().entropy_code() && (m == nullptr || !m->traits().packageable)) {
    k.Add("package.entropy_code",
          absl::StrCat("only valid for ", JoinNames(registry.Names(IsPackageable), " and "),
                       ", got method ", v1::Method_Name(c.method())));
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
}

void SetDefaultResources(v1::ResourceRequest* r, bool cpu, int32_t cpu_ranks) {
  if (!r->has_nodes()) r->set_nodes(1);
  if (!r->has_ranks_per_node()) r->set_ranks_per_node(cpu ? cpu_ranks : 1);
  if (!r->has_gpus_per_node()) r->set_gpus_per_node(cpu ? 0 : 1);
  if (!r->has_memory_mib()) r->set_memory_mib(0);
  if (!r->has_time_limit_s()) r->set_time_limit_s(86400);
  if (!r->has_max_attempts()) r->set_max_attempts(3);
}

}  // namespace

std::vector<FieldError> CheckContract(const DeploymentContract& contract,
                                      const methods::MethodRegistry& registry) {
  const DeploymentContract& c = contract;
  const Method* m = registry.Find(c.method());
  // Every section, the shared ones and each registered method's own, keyed by its field
  // number: errors come out in the order a reader meets the fields.
  struct Section {
    int field_number;
    std::function<void(Checker&)> check;
  };
  using F = DeploymentContract;
  std::vector<Section> sections = {
      {F::kNameFieldNumber, [&](Checker& k) { CheckIdentity(c, registry, k); }},
      {F::kParentFieldNumber, [&](Checker& k) { CheckParent(c, m, k); }},
      {F::kTargetFieldNumber, [&](Checker& k) { CheckTarget(c, registry, m, k); }},
      {F::kWorkloadFieldNumber, [&](Checker& k) { CheckWorkload(c, m, k); }},
      {F::kBudgetFieldNumber, [&](Checker& k) { CheckBudget(c, m, k); }},
      {F::kRecoveryFieldNumber, [&](Checker& k) { CheckRecovery(c, k); }},
      {F::kPackageFieldNumber, [&](Checker& k) { CheckPackage(c, registry, m, k); }},
      {F::kResourcesFieldNumber, [&](Checker& k) { CheckResources(c, k); }},
      {F::kPriorityFieldNumber, [&](Checker& k) { CheckOwnership(c, k); }},
      {F::kDataFieldNumber, [&](Checker& k) { CheckData(c, m, k); }},
      {F::kQualityFieldNumber, [&](Checker& k) { CheckQuality(c, k); }},
  };
  for (const auto& method : registry.all()) {
    for (const methods::ParamsSection& own : method->ParamsSections()) {
      sections.push_back({own.field_number, [&c, own](Checker& k) { own.check(c, k); }});
    }
  }
  std::stable_sort(sections.begin(), sections.end(), [](const Section& a, const Section& b) {
    return a.field_number < b.field_number;
  });
  Checker k;
  for (const Section& section : sections) section.check(k);
  return k.Take();
}

std::vector<FieldError> CheckContract(const DeploymentContract& contract) {
  return CheckContract(contract, methods::BuiltinMethods());
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

absl::StatusOr<ValidatedContract> ValidatedContract::From(const DeploymentContract& contract) {
  if (absl::Status st = ValidateContract(contract); !st.ok()) return st;
  return ValidatedContract(WithDefaults(contract));
}

DeploymentContract WithDefaults(const DeploymentContract& contract) {
  DeploymentContract c = contract;
  bool cpu = c.target().device_kind() == kCpu;

  v1::Target* t = c.mutable_target();
  if (t->engine().empty()) t->set_engine("tailor-builtin");
  if (t->engine_version().empty()) t->set_engine_version("1");
  if (t->precision() == v1::PRECISION_UNSPECIFIED) t->set_precision(cpu ? v1::FP32 : v1::BF16);
  v1::EquivalenceGate* gate = t->mutable_equivalence();
  if (!gate->has_max_kl()) gate->set_max_kl(1e-3);
  if (!gate->has_min_argmax_agreement()) gate->set_min_argmax_agreement(0.99);
  if (c.budget().latency_percentile() == v1::LATENCY_PERCENTILE_UNSPECIFIED) {
    c.mutable_budget()->set_latency_percentile(v1::LATENCY_P50);
  }

  // A missing workload stays missing (PROBE needs none); a given one gets its cached prefix.
  if (c.has_workload() && !c.workload().has_cached_prefix_tokens()) {
    c.mutable_workload()->set_cached_prefix_tokens(0);
  }

  // A dataset's sequence_tokens is the sequence length of the stages that read it (validation
  // refused a disagreeing pair); the eval set's own default is 128 (cut to the parent's
  // context when shorter).
  if (c.has_data()) {
    v1::DataParams* data = c.mutable_data();
    if (data->has_train() && data->train().has_sequence_tokens() &&
        !c.recovery().has_sequence_length()) {
      c.mutable_recovery()->set_sequence_length(data->train().sequence_tokens());
    }
    if (data->has_calibration() && data->calibration().has_sequence_tokens()) {
      const int32_t n = data->calibration().sequence_tokens();
      if (!c.ranking().has_sequence_length()) c.mutable_ranking()->set_sequence_length(n);
      if (!c.search().has_sequence_length()) c.mutable_search()->set_sequence_length(n);
    }
    if (data->has_calibration() && !data->calibration().has_packing()) {
      data->mutable_calibration()->set_packing(true);
    }
    if (data->has_train() && !data->train().has_packing()) {
      data->mutable_train()->set_packing(true);
    }
    if (data->has_eval()) {
      v1::DatasetRef* eval = data->mutable_eval();
      if (!eval->has_packing()) eval->set_packing(true);
      if (!eval->has_sequence_tokens()) eval->set_sequence_tokens(128);
    }
  }

  v1::RecoveryParams* d = c.mutable_recovery();
  if (!d->has_tokens()) d->set_tokens(2000000);
  if (!d->has_learning_rate()) d->set_learning_rate(3e-4);
  if (!d->has_batch_sequences()) d->set_batch_sequences(32);
  if (!d->has_sequence_length()) d->set_sequence_length(64);
  if (!d->has_checkpoint_every_steps()) d->set_checkpoint_every_steps(50);

  // Each method's own sections, whichever method the contract names: the stored contract is
  // then the one source of defaults for every job.
  for (const auto& method : methods::BuiltinMethods().all()) method->ApplyDefaults(c);

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
  return c;
}

}  // namespace tailor::coordinator
