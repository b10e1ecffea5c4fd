#include "compression/hf/hf_checkpoint.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "compression/model/config.h"
#include "compression/model/mapped_file.h"
#include "nlohmann/json.hpp"

namespace tailor::hf {
namespace {

using Json = nlohmann::json;
using model::DType;

// Files an export carries to the student unchanged (tokenizer and generation defaults).
constexpr absl::string_view kTokenizerFiles[] = {
    "added_tokens.json",
    "chat_template.jinja",
    "chat_template.json",
    "generation_config.json",
    "merges.txt",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer.model",
    "tokenizer_config.json",
    "vocab.json",
    "vocab.txt",
};

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Appends tensors for one layout; `why` strings are the config keys sizing each dimension.
class Expect {
 public:
  explicit Expect(std::vector<ExpectedTensor>& out) : out_(out) {}
  void Add(std::string name, std::vector<int64_t> shape, std::vector<std::string> dims) {
    out_.push_back({std::move(name), std::move(shape), std::move(dims)});
  }

 private:
  std::vector<ExpectedTensor>& out_;
};

void AddAttention(const HfConfig& c, const std::string& p, Expect& e) {
  const int64_t q = c.num_attention_heads * c.head_dim;
  const int64_t kv = c.num_key_value_heads * c.head_dim;
  const std::string qd = "num_attention_heads * head_dim";
  const std::string kvd = "num_key_value_heads * head_dim";
  e.Add(p + "q_proj.weight", {q, c.hidden_size}, {qd, "hidden_size"});
  e.Add(p + "k_proj.weight", {kv, c.hidden_size}, {kvd, "hidden_size"});
  e.Add(p + "v_proj.weight", {kv, c.hidden_size}, {kvd, "hidden_size"});
  e.Add(p + "o_proj.weight", {c.hidden_size, q}, {"hidden_size", qd});
  if (c.qkv_bias) {
    e.Add(p + "q_proj.bias", {q}, {qd});
    e.Add(p + "k_proj.bias", {kv}, {kvd});
    e.Add(p + "v_proj.bias", {kv}, {kvd});
  }
  if (c.o_bias) e.Add(p + "o_proj.bias", {c.hidden_size}, {"hidden_size"});
  if (c.qk_norm) {
    e.Add(p + "q_norm.weight", {c.head_dim}, {"head_dim"});
    e.Add(p + "k_norm.weight", {c.head_dim}, {"head_dim"});
  }
}

// SwiGLU MLP (gate, up, down) with the given projection names and width.
void AddSwiGlu(const std::string& p, const char* gate, const char* up, const char* down,
               int64_t width, const std::string& width_key, int64_t hidden, bool bias, Expect& e) {
  e.Add(absl::StrCat(p, gate, ".weight"), {width, hidden}, {width_key, "hidden_size"});
  e.Add(absl::StrCat(p, up, ".weight"), {width, hidden}, {width_key, "hidden_size"});
  e.Add(absl::StrCat(p, down, ".weight"), {hidden, width}, {"hidden_size", width_key});
  if (bias) {
    e.Add(absl::StrCat(p, gate, ".bias"), {width}, {width_key});
    e.Add(absl::StrCat(p, up, ".bias"), {width}, {width_key});
    e.Add(absl::StrCat(p, down, ".bias"), {hidden}, {"hidden_size"});
  }
}

void AddSoftmaxExperts(const HfConfig& c, const std::string& layer, Expect& e) {
  const MoeConfig& m = c.moe;
  const bool mixtral = c.family == Family::kMixtral;
  const std::string experts_key = mixtral ? "num_local_experts" : "num_experts";
  const std::string width_key = mixtral ? "intermediate_size" : "moe_intermediate_size";
  const std::string p = layer + (mixtral ? "block_sparse_moe." : "mlp.");
  e.Add(p + "gate.weight", {m.num_experts, c.hidden_size}, {experts_key, "hidden_size"});
  for (int64_t x = 0; x < m.num_experts; ++x) {
    const std::string ep = absl::StrCat(p, "experts.", x, ".");
    if (mixtral) {
      // w1 = gate, w3 = up, w2 = down.
      AddSwiGlu(ep, "w1", "w3", "w2", m.expert_intermediate, width_key, c.hidden_size, false, e);
    } else {
      AddSwiGlu(ep, "gate_proj", "up_proj", "down_proj", m.expert_intermediate, width_key,
                c.hidden_size, false, e);
    }
  }
}

void AddDecoderLayer(const HfConfig& c, int64_t i, Expect& e) {
  const std::string p = absl::StrCat("model.layers.", i, ".");
  e.Add(p + "input_layernorm.weight", {c.hidden_size}, {"hidden_size"});
  AddAttention(c, p + "self_attn.", e);
  e.Add(p + "post_attention_layernorm.weight", {c.hidden_size}, {"hidden_size"});
  if (c.layers[i] == LayerKind::kAttentionMoe) {
    AddSoftmaxExperts(c, p, e);
  } else {
    AddSwiGlu(p + "mlp.", "gate_proj", "up_proj", "down_proj", c.intermediate_size,
              "intermediate_size", c.hidden_size, c.mlp_bias, e);
  }
}

void AddMamba(const HfConfig& c, const std::string& p, Expect& e) {
  const MambaConfig& m = c.mamba;
  const std::string inner = "mamba_num_heads * mamba_head_dim";
  const std::string conv = inner + " + 2 * n_groups * ssm_state_size";
  e.Add(p + "in_proj.weight",
        {2 * m.intermediate_size() + 2 * m.n_groups * m.state_size + m.num_heads, c.hidden_size},
        {absl::StrCat("2 * ", conv, " + mamba_num_heads"), "hidden_size"});
  e.Add(p + "conv1d.weight", {m.conv_dim(), 1, m.conv_kernel}, {conv, "1", "conv_kernel"});
  if (m.conv_bias) e.Add(p + "conv1d.bias", {m.conv_dim()}, {conv});
  e.Add(p + "dt_bias", {m.num_heads}, {"mamba_num_heads"});
  e.Add(p + "A_log", {m.num_heads}, {"mamba_num_heads"});
  e.Add(p + "D", {m.num_heads}, {"mamba_num_heads"});
  e.Add(p + "norm.weight", {m.intermediate_size()}, {inner});
  e.Add(p + "out_proj.weight", {c.hidden_size, m.intermediate_size()}, {"hidden_size", inner});
}

// Non-gated up/down MLP (Nemotron-H's '-' layers, its experts and shared expert).
void AddUpDown(const std::string& p, int64_t width, const std::string& width_key, int64_t hidden,
               Expect& e) {
  e.Add(p + "up_proj.weight", {width, hidden}, {width_key, "hidden_size"});
  e.Add(p + "down_proj.weight", {hidden, width}, {"hidden_size", width_key});
}

void AddNemotronLayer(const HfConfig& c, int64_t i, Expect& e) {
  const std::string p = absl::StrCat("backbone.layers.", i, ".");
  e.Add(p + "norm.weight", {c.hidden_size}, {"hidden_size"});
  const std::string mixer = p + "mixer.";
  switch (c.layers[i]) {
    case LayerKind::kMamba:
      AddMamba(c, mixer, e);
      break;
    case LayerKind::kAttention:
      AddAttention(c, mixer, e);
      break;
    case LayerKind::kMlp:
      AddUpDown(mixer, c.intermediate_size, "intermediate_size", c.hidden_size, e);
      break;
    default: {
      const MoeConfig& m = c.moe;
      e.Add(mixer + "gate.weight", {m.num_experts, c.hidden_size},
            {"n_routed_experts", "hidden_size"});
      e.Add(mixer + "gate.e_score_correction_bias", {m.num_experts}, {"n_routed_experts"});
      for (int64_t x = 0; x < m.num_experts; ++x) {
        AddUpDown(absl::StrCat(mixer, "experts.", x, "."), m.expert_intermediate,
                  "moe_intermediate_size", c.hidden_size, e);
      }
      AddUpDown(mixer + "shared_experts.", m.shared_intermediate,
                "moe_shared_expert_intermediate_size", c.hidden_size, e);
    }
  }
}

using Mapping = model::MappedFile;

std::string GiB(uint64_t bytes) {
  return absl::StrFormat("%.2f GiB (%d bytes)", static_cast<double>(bytes) / (1ull << 30), bytes);
}

bool IsRegularFile(const std::string& path, uint64_t* size = nullptr) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  if (size != nullptr) *size = static_cast<uint64_t>(st.st_size);
  return true;
}

// weight_map of model.safetensors.index.json: tensor name -> shard file name. Shard names
// must be plain file names in the checkpoint folder (an index must not reach outside it).
absl::StatusOr<std::map<std::string, std::string>> ReadIndex(const std::string& path) {
  TAILOR_ASSIGN_OR_RETURN(std::string text, model::ReadFileToString(path));
  const auto error = [&](absl::string_view message) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", message));
  };
  if (text.size() > model::kMaxSafetensorsHeaderBytes) {
    return error(absl::StrCat(text.size(), " bytes, more than the ",
                              model::kMaxSafetensorsHeaderBytes, " allowed"));
  }
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return error("not valid JSON");
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
    return error("weight_map: missing or not an object");
  }
  std::map<std::string, std::string> map;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    const std::string shard = it->is_string() ? it->get<std::string>() : std::string();
    if (shard.empty() || shard == "." || shard == ".." || shard.find('/') != std::string::npos) {
      return error(absl::StrCat("weight_map: tensor ", it.key(),
                                ": the shard must be a file name in the checkpoint folder, got ",
                                it->dump()));
    }
    map[it.key()] = shard;
  }
  if (map.empty()) return error("weight_map: empty");
  return map;
}

}  // namespace

namespace internal {
struct HfShard {
  std::string file;  // relative to the checkpoint folder
  std::string path;
  Mapping mapping;
  model::SafetensorsHeader header;
};
}  // namespace internal

namespace {

using internal::HfShard;

// Where the tensors are: the index's weight_map and its shards, or one model.safetensors.
struct ShardPlan {
  bool indexed = false;
  std::map<std::string, std::string> weight_map;    // tensor -> shard file (indexed only)
  std::map<std::string, std::string> first_tensor;  // shard file -> first tensor naming it
};

absl::StatusOr<ShardPlan> PlanShards(const std::string& dir) {
  ShardPlan plan;
  const std::string index = absl::StrCat(dir, "/", kIndexFile);
  if (IsRegularFile(index)) {
    plan.indexed = true;
    TAILOR_ASSIGN_OR_RETURN(plan.weight_map, ReadIndex(index));
    for (const auto& [tensor, shard] : plan.weight_map) plan.first_tensor.emplace(shard, tensor);
    return plan;
  }
  if (!IsRegularFile(absl::StrCat(dir, "/", kSingleFile))) {
    return absl::NotFoundError(
        absl::StrCat(dir, ": neither ", kIndexFile, " nor ", kSingleFile, " found"));
  }
  plan.first_tensor.emplace(std::string(kSingleFile), "");
  return plan;
}

// Every shard exists; returns the sum of their sizes.
absl::StatusOr<uint64_t> StatShards(const std::string& dir, const ShardPlan& plan) {
  uint64_t total = 0;
  for (const auto& [file, tensor] : plan.first_tensor) {
    uint64_t size = 0;
    if (!IsRegularFile(absl::StrCat(dir, "/", file), &size)) {
      return absl::NotFoundError(absl::StrCat(dir, "/", file, ": named by ", kIndexFile,
                                              " for tensor ", tensor, ", not found"));
    }
    total += size;
  }
  return total;
}

// Methods hold the parent in memory, so a parent that cannot fit is refused before any
// work starts rather than discovered by the OOM killer hours later.
absl::Status CheckMemory(const std::string& dir, uint64_t bytes,
                         const HfCheckpointOptions& options) {
  uint64_t limit = options.memory_limit_bytes;
  std::string what = "the memory limit set";
  if (limit == 0) {
    TAILOR_ASSIGN_OR_RETURN(limit, AvailableMemoryBytes());
    what = "memory available (MemAvailable in /proc/meminfo)";
  }
  if (bytes > limit) {
    return absl::ResourceExhaustedError(absl::StrCat(dir, ": the shards take ", GiB(bytes),
                                                     ", more than the ", GiB(limit), " of ", what));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::unique_ptr<HfShard>>> MapShards(const std::string& dir,
                                                                const ShardPlan& plan) {
  std::vector<std::unique_ptr<HfShard>> shards;
  for (const auto& [file, tensor] : plan.first_tensor) {
    auto shard = std::make_unique<HfShard>();
    shard->file = file;
    shard->path = absl::StrCat(dir, "/", file);
    uint64_t size = 0;
    if (!IsRegularFile(shard->path, &size)) {
      return absl::NotFoundError(absl::StrCat(shard->path, ": not found"));
    }
    TAILOR_RETURN_IF_ERROR(shard->mapping.Map(shard->path, size));
    TAILOR_ASSIGN_OR_RETURN(
        shard->header, model::ParseSafetensorsHeader(shard->mapping.bytes(), size, shard->path));
    shards.push_back(std::move(shard));
  }
  return shards;
}

// The index and the shards agree both ways: each listed tensor is in its shard, and each
// shard's tensor is listed there (a tensor the index misplaces or omits would be loaded from
// the wrong file or silently dropped by other readers).
absl::Status CheckIndex(const ShardPlan& plan,
                        const std::vector<std::unique_ptr<HfShard>>& shards) {
  if (!plan.indexed) return absl::OkStatus();
  std::map<std::string, const HfShard*> by_file;
  for (const auto& s : shards) by_file[s->file] = s.get();
  for (const auto& [tensor, file] : plan.weight_map) {
    const HfShard& s = *by_file.at(file);
    if (s.header.Find(tensor) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(s.path, ": has no tensor ", tensor, ", which ",
                                                     kIndexFile, " places there"));
    }
  }
  for (const auto& s : shards) {
    for (const model::TensorEntry& e : s->header.tensors) {
      auto it = plan.weight_map.find(e.name);
      if (it == plan.weight_map.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat(s->path, ": tensor ", e.name, " is not listed in ", kIndexFile));
      }
      if (it->second != s->file) {
        return absl::InvalidArgumentError(absl::StrCat(s->path, ": tensor ", e.name,
                                                       " is also here, but ", kIndexFile,
                                                       " places it in ", it->second));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<ExpectedTensor> ExpectedTensors(const HfConfig& c) {
  std::vector<ExpectedTensor> out;
  Expect e(out);
  const bool nemotron = c.family == Family::kNemotronH;
  e.Add(nemotron ? "backbone.embeddings.weight" : "model.embed_tokens.weight",
        {c.vocab_size, c.hidden_size}, {"vocab_size", "hidden_size"});
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (nemotron) {
      AddNemotronLayer(c, i, e);
    } else {
      AddDecoderLayer(c, i, e);
    }
  }
  e.Add(nemotron ? "backbone.norm_f.weight" : "model.norm.weight", {c.hidden_size},
        {"hidden_size"});
  if (!c.tie_word_embeddings) {
    e.Add("lm_head.weight", {c.vocab_size, c.hidden_size}, {"vocab_size", "hidden_size"});
  }
  return out;
}

absl::StatusOr<uint64_t> AvailableMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t value = 0;
  std::string unit;
  while (in >> key >> value) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return value * 1024;  // the kernel reports kB
  }
  return absl::UnavailableError("/proc/meminfo: no MemAvailable line");
}

namespace {

bool LoadableDType(DType d) { return d == DType::kF32 || d == DType::kBF16 || d == DType::kF16; }

// Shape and dtype of one expected tensor.
absl::Status CheckTensor(const ExpectedTensor& want, const HfShard& shard,
                         const model::TensorEntry& got) {
  if (got.shape != want.shape) {
    return absl::InvalidArgumentError(
        absl::StrCat(shard.path, ": tensor ", want.name, ": shape ", ShapeString(got.shape),
                     " disagrees with ", kConfigFile, ": expected ", ShapeString(want.shape),
                     " = [", absl::StrJoin(want.dims, ", "), "]"));
  }
  if (!LoadableDType(got.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(shard.path, ": tensor ", want.name, ": dtype ",
                                                   model::DTypeName(got.dtype),
                                                   " is not supported (F32, BF16, F16)"));
  }
  return absl::OkStatus();
}

// Every tensor the config implies is present with its shape and a loadable dtype, and no
// other tensor is: an extra tensor means the config does not describe these weights (a bias
// or norm the block math would ignore), so loading it would compute something else.
absl::Status CheckAgainstConfig(
    const std::string& dir, const HfConfig& config, const ShardPlan& plan,
    const std::vector<std::unique_ptr<HfShard>>& shards,
    std::map<std::string, std::pair<const HfShard*, const model::TensorEntry*>, std::less<>>&
        found) {
  for (const auto& s : shards) {
    for (const model::TensorEntry& e : s->header.tensors) found[e.name] = {s.get(), &e};
  }
  const std::string implied =
      absl::StrCat(kConfigFile, " (", ArchitectureName(config.architecture), ")");
  std::set<std::string> expected;
  for (const ExpectedTensor& want : ExpectedTensors(config)) {
    auto it = found.find(want.name);
    if (it == found.end()) {
      const std::string where = plan.indexed ? std::string(kIndexFile) : shards[0]->file;
      return absl::InvalidArgumentError(absl::StrCat(dir, "/", where, ": no tensor ", want.name,
                                                     " ", ShapeString(want.shape), ", which ",
                                                     implied, " implies"));
    }
    TAILOR_RETURN_IF_ERROR(CheckTensor(want, *it->second.first, *it->second.second));
    expected.insert(want.name);
  }
  std::vector<std::string> extra;
  for (const auto& [name, where] : found) {
    if (expected.count(name) == 0) extra.push_back(name);
  }
  if (extra.empty()) return absl::OkStatus();
  std::string message = absl::StrCat(found[extra[0]].first->path, ": unexpected tensor ", extra[0],
                                     ": ", implied, " implies no such tensor");
  if (extra[0] == "lm_head.weight" && config.tie_word_embeddings) {
    message = absl::StrCat(found[extra[0]].first->path,
                           ": unexpected tensor lm_head.weight: ", kConfigFile,
                           " has tie_word_embeddings true");
  }
  if (extra.size() > 1) absl::StrAppend(&message, " (and ", extra.size() - 1, " more)");
  return absl::InvalidArgumentError(message);
}

std::vector<std::string> ListTokenizerFiles(const std::string& dir) {
  std::vector<std::string> out;
  for (absl::string_view f : kTokenizerFiles) {
    if (IsRegularFile(absl::StrCat(dir, "/", f))) out.emplace_back(f);
  }
  return out;
}

}  // namespace

absl::StatusOr<HfCheckpoint> HfCheckpoint::Open(const std::string& dir,
                                                const HfCheckpointOptions& options) {
  HfCheckpoint ckpt;
  ckpt.dir_ = dir;
  TAILOR_ASSIGN_OR_RETURN(ckpt.config_,
                          ReadHfConfig(absl::StrCat(dir, "/", kConfigFile), options.format));
  TAILOR_ASSIGN_OR_RETURN(const ShardPlan plan, PlanShards(dir));
  TAILOR_ASSIGN_OR_RETURN(const uint64_t file_bytes, StatShards(dir, plan));
  TAILOR_RETURN_IF_ERROR(CheckMemory(dir, file_bytes, options));
  TAILOR_ASSIGN_OR_RETURN(ckpt.shards_, MapShards(dir, plan));
  TAILOR_RETURN_IF_ERROR(CheckIndex(plan, ckpt.shards_));
  std::map<std::string, std::pair<const HfShard*, const model::TensorEntry*>, std::less<>> found;
  TAILOR_RETURN_IF_ERROR(CheckAgainstConfig(dir, ckpt.config_, plan, ckpt.shards_, found));
  for (const auto& [name, where] : found) {
    ckpt.tensors_[name] = Located{where.first, where.second};
    ckpt.weight_bytes_ += where.second->end - where.second->begin;
  }
  ckpt.tokenizer_files_ = ListTokenizerFiles(dir);
  return ckpt;
}

HfCheckpoint HfCheckpoint::ConfigRepeated(int copies) const {
  HfCheckpoint deeper;
  deeper.dir_ = dir_;
  deeper.config_ = config_;
  deeper.config_.layers.clear();
  for (int c = 0; c < std::max(1, copies); ++c) {
    deeper.config_.layers.insert(deeper.config_.layers.end(), config_.layers.begin(),
                                 config_.layers.end());
  }
  deeper.config_.num_hidden_layers = static_cast<int64_t>(deeper.config_.layers.size());
  deeper.tokenizer_files_ = tokenizer_files_;
  return deeper;
}

HfCheckpoint::HfCheckpoint(HfCheckpoint&&) noexcept = default;
HfCheckpoint& HfCheckpoint::operator=(HfCheckpoint&&) noexcept = default;
HfCheckpoint::~HfCheckpoint() = default;

std::vector<std::string> HfCheckpoint::shard_files() const {
  std::vector<std::string> out;
  for (const auto& s : shards_) out.push_back(s->file);
  return out;
}

std::vector<std::string> HfCheckpoint::tensor_names() const {
  std::vector<std::string> out;
  for (const auto& [name, located] : tensors_) out.push_back(name);
  return out;
}

using internal::HfShard;

void HfCheckpoint::ReleasePages(const void* data, uint64_t bytes) const {
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t end = begin + bytes;
  for (const std::unique_ptr<internal::HfShard>& shard : shards_) {
    const absl::string_view m = shard->mapping.bytes();
    const uintptr_t lo = reinterpret_cast<uintptr_t>(m.data()), hi = lo + m.size();
    if (m.empty() || begin < lo || end > hi) continue;
    // Whole pages only: a page shared with a neighbouring tensor stays (it is re-read anyway).
    const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
    if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
    return;
  }
}

absl::StatusOr<TensorView> HfCheckpoint::Tensor(absl::string_view name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return absl::NotFoundError(absl::StrCat(dir_, ": no tensor ", name));
  }
  const HfShard& shard = *it->second.shard;
  const model::TensorEntry& e = *it->second.entry;
  TensorView v;
  v.name = &e.name;
  v.file = &shard.path;
  v.dtype = e.dtype;
  v.shape = &e.shape;
  v.data = shard.mapping.bytes().data() + shard.header.data_start + e.begin;
  v.size_bytes = e.end - e.begin;
  return v;
}

}  // namespace tailor::hf
