#include "compression/hf/hf_export_nemotron_h.h"

#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compression/hf/hf_export.h"
#include "compression/hf/hf_import_nemotron_h.h"

namespace tailor::hf {
namespace {

// The first thing in which `have` (the model) differs from `want` (what config.json imports
// as), or "" when they are equal.
std::string ConfigDifference(const model::HybridConfig& have, const model::HybridConfig& want) {
  if (have.vocab != want.vocab) return absl::StrCat("vocab ", have.vocab, " vs ", want.vocab);
  if (have.hidden != want.hidden) {
    return absl::StrCat("hidden ", have.hidden, " vs ", want.hidden);
  }
  if (have.max_seq != want.max_seq) {
    return absl::StrCat("max_seq ", have.max_seq, " vs ", want.max_seq);
  }
  if (have.norm_eps != want.norm_eps) {
    return absl::StrCat("norm_eps ", have.norm_eps, " vs ", want.norm_eps);
  }
  if (have.tie_embeddings != want.tie_embeddings) return "tie_embeddings";
  if (have.num_layers() != want.num_layers()) {
    return absl::StrCat(have.num_layers(), " layers vs ", want.num_layers());
  }
  for (int64_t i = 0; i < have.num_layers(); ++i) {
    if (have.layers[i] != want.layers[i]) return absl::StrCat("layer ", i);
  }
  return "";
}

// One HF tensor being assembled from the internal tensors that ImportNemotronH cuts it into.
struct HfTensorParts {
  std::vector<at::Tensor> rows;  // row slices in row order, or the one whole tensor
  bool whole = false;
};

// The HF tensor from its parts. Row slices are [rows, ...]; conv1d.weight keeps HF's
// [channels, 1, kernel] where tailor stores [channels, kernel].
at::Tensor Assemble(const std::string& name, const HfTensorParts& parts) {
  if (parts.whole) return parts.rows.front();
  std::vector<at::Tensor> flat;
  for (const at::Tensor& r : parts.rows) flat.push_back(r.reshape({r.size(0), -1}));
  at::Tensor t = torch::cat(flat, 0);
  if (absl::EndsWith(name, "conv1d.weight")) return t.unsqueeze(1);
  if (parts.rows.front().dim() == 1) return t.reshape({t.size(0)});
  return t;
}

// Every HF tensor of `config` in the importer's order, cut from `state`.
absl::StatusOr<std::vector<std::pair<std::string, at::Tensor>>> HfTensors(
    const HfConfig& config, const model::TensorMap& state) {
  TAILOR_ASSIGN_OR_RETURN(std::vector<NemotronHTensorSlice> slices,
                          NemotronHTensorSlices(config));
  std::vector<std::string> order;
  std::map<std::string, HfTensorParts> parts;
  for (const NemotronHTensorSlice& s : slices) {
    const auto it = state.find(s.internal);
    if (it == state.end()) {
      return absl::InternalError(absl::StrCat("the model has no tensor ", s.internal));
    }
    // An expert's HF tensor is one entry of the internal [E, ...] stack, taken whole.
    const at::Tensor source = s.expert >= 0 ? it->second.select(0, s.expert) : it->second;
    if (parts.find(s.hf) == parts.end()) order.push_back(s.hf);
    HfTensorParts& p = parts[s.hf];
    p.whole = s.rows < 0;
    p.rows.push_back(source);  // slices are listed in row order (AddMambaSlices)
  }
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const std::string& name : order) out.emplace_back(name, Assemble(name, parts.at(name)));
  return out;
}

}  // namespace

absl::Status WriteNemotronHCheckpoint(const model::HybridLM& model, nlohmann::json config_json,
                                      const std::string& dir, model::DType dtype) {
  if (dtype != model::DType::kF32 && dtype != model::DType::kBF16 &&
      dtype != model::DType::kF16) {
    return absl::InvalidArgumentError("a Nemotron-H checkpoint is stored as F32, BF16 or F16");
  }
  config_json["torch_dtype"] = TorchDTypeName(dtype);
  const std::string text = config_json.dump(2) + "\n";
  TAILOR_ASSIGN_OR_RETURN(HfConfig config, ParseHfConfigJson(text, "config.json", ""));
  if (config.family != Family::kNemotronH) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config.json: architecture ", ArchitectureName(config.architecture), " is not Nemotron-H"));
  }
  TAILOR_ASSIGN_OR_RETURN(model::HybridConfig want, NemotronHHybridConfig(config));
  const std::string differs = ConfigDifference(model->config(), want);
  if (!differs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config.json does not describe the model: ", differs, " (model vs config.json)"));
  }
  std::vector<model::RawTensor> raw;
  try {
    torch::NoGradGuard no_grad;
    TAILOR_ASSIGN_OR_RETURN(auto tensors, HfTensors(config, model->StateDict()));
    for (auto& [name, t] : tensors) {
      const at::Tensor f32 = t.to(torch::kFloat32).contiguous();
      model::RawTensor r;
      r.name = name;
      r.dtype = dtype;
      r.shape.assign(f32.sizes().begin(), f32.sizes().end());
      r.data = ConvertF32(static_cast<const char*>(f32.data_ptr()), f32.numel(), dtype);
      raw.push_back(std::move(r));
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("Nemotron-H checkpoint: ", e.what_without_backtrace()));
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(dir, ": ", ec.message()));
  TAILOR_RETURN_IF_ERROR(model::WriteSafetensors(dir + "/model.safetensors", raw,
                                                 {{"format", "pt"}}));
  return model::WriteFileAtomically(dir + "/config.json", text);
}

}  // namespace tailor::hf
