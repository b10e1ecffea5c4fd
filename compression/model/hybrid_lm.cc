#include "compression/model/hybrid_lm.h"

#include <torch/torch.h>

#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compression/model/attention.h"
#include "compression/model/mamba.h"
#include "compression/model/mlp.h"
#include "compression/model/moe.h"

namespace tailor::model {

// One residual block: RMSNorm weight plus the mixer. An absent layer has neither.
class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(const LayerSpec& spec, const MixerInit& init) {
    if (!spec.present()) return;
    norm = register_parameter("norm", torch::ones({init.hidden}));
    switch (spec.kind) {
      case LayerKind::kAttention:
        mixer = register_module("attention", std::make_shared<AttentionImpl>(spec.attention, init));
        break;
      case LayerKind::kMamba:
        mixer = register_module("mamba", std::make_shared<MambaImpl>(spec.mamba, init));
        break;
      case LayerKind::kMoe:
        mixer = register_module("moe", std::make_shared<MoeImpl>(spec.moe, init));
        break;
      case LayerKind::kMlp:
        mixer = register_module("mlp", std::make_shared<MlpImpl>(spec.mlp, init));
        break;
    }
  }

  at::Tensor norm;
  std::shared_ptr<Mixer> mixer;
};

namespace {

std::string LayerField(int64_t layer, absl::string_view field) {
  return absl::StrCat("layers[", layer, "].", field);
}

absl::Status FromTorch(const c10::Error& e, absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", e.what_without_backtrace()));
}

absl::Status CheckMaskShape(const at::Tensor& m, int64_t channels, int64_t batch,
                            const std::string& field) {
  if (!m.defined()) return absl::OkStatus();
  if (!m.is_floating_point()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": mask must be floating point"));
  }
  const bool ok = (m.dim() == 1 && m.size(0) == channels) ||
                  (m.dim() == 2 && m.size(0) == batch && m.size(1) == channels);
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": mask shape ", c10::str(m.sizes()),
                                                   ", want [", channels, "] or [", batch, ", ",
                                                   channels, "]"));
  }
  return absl::OkStatus();
}

// Size of each mask axis in `l` (0 when the layer kind has no such axis).
struct MaskAxes {
  int64_t attention_heads = 0, mamba_heads = 0, experts = 0, expert_ffn = 0, shared_ffn = 0,
          mlp_ffn = 0;
};

MaskAxes AxesOf(const LayerSpec& l) {
  MaskAxes a;
  switch (l.kind) {
    case LayerKind::kAttention:
      a.attention_heads = l.attention.heads;
      break;
    case LayerKind::kMamba:
      a.mamba_heads = l.mamba.heads;
      break;
    case LayerKind::kMoe:
      a.experts = l.moe.experts;
      a.expert_ffn = l.moe.expert_ffn;
      a.shared_ffn = l.moe.shared_ffn;
      break;
    case LayerKind::kMlp:
      a.mlp_ffn = l.mlp.ffn;
      break;
  }
  return a;
}

absl::Status CheckSameShape(const HybridConfig& parent, const HybridConfig& child) {
  if (child.vocab != parent.vocab) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab: child has ", child.vocab, ", parent ", parent.vocab));
  }
  if (child.hidden > parent.hidden) {
    return absl::InvalidArgumentError(
        absl::StrCat("hidden: child ", child.hidden, " exceeds the parent's ", parent.hidden));
  }
  if (child.rope_theta != parent.rope_theta || child.norm_eps != parent.norm_eps ||
      child.rope_scaling != parent.rope_scaling ||
      child.tie_embeddings != parent.tie_embeddings) {
    return absl::InvalidArgumentError(
        "rope_theta, norm_eps, rope_scaling and tie_embeddings must match the parent");
  }
  if (child.num_layers() != parent.num_layers()) {
    return absl::InvalidArgumentError(absl::StrCat("layers: child has ", child.num_layers(),
                                                   ", parent ", parent.num_layers(),
                                                   " (remove a layer by giving it width 0)"));
  }
  for (int64_t i = 0; i < child.num_layers(); ++i) {
    const LayerSpec& c = child.layers[i];
    const LayerSpec& p = parent.layers[i];
    if (c.kind != p.kind) {
      return absl::InvalidArgumentError(absl::StrCat("layers[", i, "].kind: child ",
                                                     LayerKindName(c.kind), ", parent ",
                                                     LayerKindName(p.kind)));
    }
    if (c.present() && !p.present()) {
      return absl::InvalidArgumentError(
          absl::StrCat("layers[", i, "]: present in the child but absent in the parent"));
    }
  }
  return absl::OkStatus();
}

at::Tensor PrefixOnes(int64_t n, int64_t keep) {
  at::Tensor m = torch::zeros({n});
  m.narrow(0, 0, std::min(n, keep)).fill_(1.0);
  return m;
}

}  // namespace

// --- InferenceCache -------------------------------------------------------------------

int64_t InferenceCache::Bytes() const {
  int64_t n = 0;
  for (const LayerCache& l : layers_) {
    for (const at::Tensor* t : {&l.k, &l.v, &l.conv_x, &l.conv_bc, &l.ssm}) {
      if (t->defined()) n += static_cast<int64_t>(t->nbytes());
    }
  }
  return n;
}

void InferenceCache::Reset() {
  for (LayerCache& l : layers_) {
    for (at::Tensor* t : {&l.k, &l.v, &l.conv_x, &l.conv_bc, &l.ssm}) {
      if (t->defined()) t->zero_();
    }
  }
  length_ = 0;
}

// --- HybridLMImpl ---------------------------------------------------------------------

HybridLMImpl::HybridLMImpl(const HybridConfig& config, bool random_init) : config_(config) {
  MixerInit init;
  init.hidden = config.hidden;
  init.norm_eps = config.norm_eps;
  init.rope_theta = config.rope_theta;
  init.rope_scaling = config.rope_scaling;
  init.random = random_init;
  init.std = 0.02;
  // GPT-2's residual scaling: output projections shrink with depth so the residual stream
  // does not grow with the number of blocks at init.
  init.out_std = 0.02 / std::sqrt(2.0 * std::max<int64_t>(1, config.num_layers()));
  embed_ = register_parameter("embed", InitWeight({config.vocab, config.hidden}, init.std, init));
  torch::nn::ModuleList list;
  for (const LayerSpec& spec : config.layers) {
    auto block = std::make_shared<BlockImpl>(spec, init);
    list->push_back(block);
    blocks_.push_back(block);
  }
  register_module("layers", list);
  final_norm_ = register_parameter("final_norm", torch::ones({config.hidden}));
  // A tied head has no tensor of its own: Run projects onto embed_.
  if (!config.tie_embeddings) {
    lm_head_ =
        register_parameter("lm_head", InitWeight({config.vocab, config.hidden}, init.std, init));
  }
}

Mixer* HybridLMImpl::mixer(int64_t layer) const {
  if (layer < 0 || layer >= num_layers()) return nullptr;
  return blocks_[layer]->mixer.get();
}

absl::Status HybridLMImpl::CheckTokens(const at::Tensor& tokens, int64_t start) const {
  if (!tokens.defined() || tokens.scalar_type() != torch::kLong || tokens.dim() != 2 ||
      tokens.size(0) == 0 || tokens.size(1) == 0) {
    return absl::InvalidArgumentError("tokens: want a non-empty int64 tensor [batch, time]");
  }
  if (start + tokens.size(1) > config_.max_seq) {
    return absl::OutOfRangeError(absl::StrCat("sequence length ", start + tokens.size(1),
                                              " exceeds max_seq ", config_.max_seq));
  }
  const int64_t lo = tokens.min().item<int64_t>(), hi = tokens.max().item<int64_t>();
  if (lo < 0 || hi >= config_.vocab) {
    return absl::InvalidArgumentError(absl::StrCat("tokens: values must be in [0, ", config_.vocab,
                                                   "), got [", lo, ", ", hi, "]"));
  }
  return absl::OkStatus();
}

absl::Status HybridLMImpl::CheckOptions(const ForwardOptions& options, int64_t batch) const {
  if (options.mask != nullptr) {
    TAILOR_RETURN_IF_ERROR(ValidateArchMask(*options.mask, config_, batch));
  }
  const at::Tensor& g = options.block_gates;
  if (g.defined() && (g.dim() != 1 || g.size(0) != num_layers() || !g.is_floating_point())) {
    return absl::InvalidArgumentError(
        absl::StrCat("block_gates: want a float tensor [", num_layers(), "]"));
  }
  return absl::OkStatus();
}

HybridLMImpl::RunOutput HybridLMImpl::Run(const at::Tensor& tokens_in, InferenceCache* cache,
                                          bool decode, bool want_aux,
                                          const ForwardOptions& options) {
  const at::Tensor tokens = tokens_in.to(embed_.device());
  const int64_t t = tokens.size(1);
  const int64_t position = cache != nullptr ? cache->length_ : 0;
  const at::Tensor no_mask;
  const at::Tensor& hidden_mask = options.mask != nullptr ? options.mask->hidden : no_mask;
  ActivationObserver* obs = options.observer;
  at::Tensor h = ApplyMask(Embed(linear_, embed_, tokens), hidden_mask);
  at::Tensor aux = want_aux ? torch::zeros({}, embed_.options()) : at::Tensor();
  for (int64_t i = 0; i < num_layers(); ++i) {
    const int layer = static_cast<int>(i);
    if (obs != nullptr) obs->OnLayerBegin(layer);
    if (options.layer_timer != nullptr) options.layer_timer->OnLayerBegin(layer);
    BlockImpl& block = *blocks_[i];
    if (block.mixer != nullptr) {
      if (obs != nullptr) obs->Observe({Site::kBlockInput, layer}, h);
      at::Tensor u = RmsNorm(h, block.norm, config_.norm_eps, hidden_mask);
      if (obs != nullptr) obs->Observe({Site::kNormOutput, layer}, u);
      LayerContext ctx;
      ctx.layer = layer;
      ctx.position = position;
      ctx.cache = cache != nullptr ? &cache->layers_[i] : nullptr;
      ctx.decode = decode;
      ctx.mask = options.mask != nullptr && !options.mask->layers.empty() ? &options.mask->layers[i]
                                                                          : nullptr;
      ctx.observer = obs;
      ctx.aux_loss = want_aux ? &aux : nullptr;
      ctx.linear = linear_;
      at::Tensor f = ApplyMask(block.mixer->Forward(u, ctx), hidden_mask);
      if (options.block_gates.defined()) f = f * options.block_gates[i];
      h = h + f;
      if (obs != nullptr) obs->Observe({Site::kBlockOutput, layer}, h);
    }
    if (options.layer_timer != nullptr) options.layer_timer->OnLayerEnd(layer);
    if (obs != nullptr) obs->OnLayerEnd(layer);
  }
  h = RmsNorm(h, final_norm_, config_.norm_eps, hidden_mask);
  if (obs != nullptr) obs->Observe({Site::kNormOutput, -1}, h);
  if (options.last_position_only) h = h.narrow(1, t - 1, 1);
  if (cache != nullptr) cache->length_ += t;
  return {Project(linear_, h, config_.tie_embeddings ? embed_ : lm_head_), aux};
}

absl::StatusOr<ForwardOutput> HybridLMImpl::Forward(const at::Tensor& tokens,
                                                    const ForwardOptions& options) {
  try {
    TAILOR_RETURN_IF_ERROR(CheckTokens(tokens, 0));
    TAILOR_RETURN_IF_ERROR(CheckOptions(options, tokens.size(0)));
    ForwardOptions full = options;
    full.last_position_only = false;
    RunOutput out = Run(tokens, nullptr, /*decode=*/false, /*want_aux=*/true, full);
    return ForwardOutput{out.logits, out.aux_loss};
  } catch (const c10::Error& e) {
    return FromTorch(e, "HybridLM::Forward");
  }
}

absl::StatusOr<InferenceCache> HybridLMImpl::NewCache(int64_t batch, int64_t capacity) const {
  if (capacity == 0) capacity = config_.max_seq;
  if (batch < 1 || capacity < 1 || capacity > config_.max_seq) {
    return absl::InvalidArgumentError(absl::StrCat("NewCache: batch ", batch, " capacity ",
                                                   capacity,
                                                   " (want batch >= 1, 1 <= capacity "
                                                   "<= max_seq ",
                                                   config_.max_seq, ")"));
  }
  try {
    InferenceCache cache;
    cache.batch_ = batch;
    cache.capacity_ = capacity;
    cache.layers_.resize(blocks_.size());
    for (size_t i = 0; i < blocks_.size(); ++i) {
      if (blocks_[i]->mixer != nullptr) {
        blocks_[i]->mixer->InitCache(cache.layers_[i], batch, capacity, embed_.options());
      }
    }
    return cache;
  } catch (const c10::Error& e) {
    return FromTorch(e, "HybridLM::NewCache");
  }
}

absl::StatusOr<at::Tensor> HybridLMImpl::Prefill(const at::Tensor& tokens, InferenceCache& cache,
                                                 const ForwardOptions& options) {
  try {
    TAILOR_RETURN_IF_ERROR(CheckTokens(tokens, cache.length_));
    if (tokens.size(0) != cache.batch_ || cache.length_ + tokens.size(1) > cache.capacity_) {
      return absl::OutOfRangeError(absl::StrCat("Prefill: ", tokens.size(0), " x ", tokens.size(1),
                                                " tokens do not fit a cache of batch ",
                                                cache.batch_, " holding ", cache.length_, " of ",
                                                cache.capacity_, " positions"));
    }
    TAILOR_RETURN_IF_ERROR(CheckOptions(options, tokens.size(0)));
    torch::NoGradGuard no_grad;
    return Run(tokens, &cache, /*decode=*/false, /*want_aux=*/false, options).logits;
  } catch (const c10::Error& e) {
    return FromTorch(e, "HybridLM::Prefill");
  }
}

absl::StatusOr<at::Tensor> HybridLMImpl::DecodeStep(const at::Tensor& tokens, InferenceCache& cache,
                                                    const ForwardOptions& options) {
  try {
    if (!tokens.defined() || tokens.dim() < 1 || tokens.dim() > 2 ||
        (tokens.dim() == 2 && tokens.size(1) != 1)) {
      return absl::InvalidArgumentError("DecodeStep: tokens must be [batch] or [batch, 1]");
    }
    at::Tensor step = tokens.reshape({tokens.size(0), 1});
    TAILOR_RETURN_IF_ERROR(CheckTokens(step, cache.length_));
    if (step.size(0) != cache.batch_ || cache.length_ + 1 > cache.capacity_) {
      return absl::OutOfRangeError(absl::StrCat(
          "DecodeStep: batch ", step.size(0), " does not fit a cache of batch ", cache.batch_,
          " holding ", cache.length_, " of ", cache.capacity_, " positions"));
    }
    TAILOR_RETURN_IF_ERROR(CheckOptions(options, step.size(0)));
    ForwardOptions opts = options;
    opts.last_position_only = false;
    torch::NoGradGuard no_grad;
    return Run(step, &cache, /*decode=*/true, /*want_aux=*/false, opts).logits.select(1, 0);
  } catch (const c10::Error& e) {
    return FromTorch(e, "HybridLM::DecodeStep");
  }
}

TensorMap HybridLMImpl::StateDict() const {
  TensorMap out;
  for (const auto& item : named_parameters(/*recurse=*/true)) {
    out.emplace(item.key(), item.value().detach());
  }
  return out;
}

absl::Status HybridLMImpl::LoadStateDict(const TensorMap& tensors, absl::string_view source) {
  return LoadStateDict(tensors, source, nullptr);
}

absl::Status HybridLMImpl::LoadStateDict(const TensorMap& tensors, absl::string_view source,
                                         const std::function<void(const at::Tensor&)>& copied) {
  auto params = named_parameters(/*recurse=*/true);
  // Check everything first: a failed load must leave the model untouched.
  for (const auto& item : params) {
    auto it = tensors.find(item.key());
    if (it == tensors.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": missing tensor '", item.key(), "'"));
    }
    const at::Tensor& t = it->second;
    if (t.sizes() != item.value().sizes()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": tensor '", item.key(), "': shape ",
                                                     c10::str(t.sizes()), ", the config needs ",
                                                     c10::str(item.value().sizes())));
    }
    if (!t.is_floating_point()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": tensor '", item.key(), "': dtype ",
                                                     c10::toString(t.scalar_type()),
                                                     ", want a floating type (F32, BF16, F16)"));
    }
  }
  for (const auto& [name, t] : tensors) {
    if (params.find(name) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": unexpected tensor '", name, "' (not in the config)"));
    }
  }
  try {
    torch::NoGradGuard no_grad;
    for (auto& item : params) {
      const at::Tensor& from = tensors.at(item.key());
      item.value().copy_(from);
      if (copied) copied(from);
    }
  } catch (const c10::Error& e) {
    return FromTorch(e, source);
  }
  return absl::OkStatus();
}

absl::Status HybridLMImpl::PermuteHidden(const std::vector<int64_t>& perm) {
  TAILOR_RETURN_IF_ERROR(CheckPermutation(perm, config_.hidden, "hidden"));
  try {
    at::Tensor idx = IndexTensor(perm, embed_.device());
    AssignParameter(embed_, embed_.index_select(1, idx));
    if (lm_head_.defined()) AssignParameter(lm_head_, lm_head_.index_select(1, idx));
    AssignParameter(final_norm_, final_norm_.index_select(0, idx));
    for (auto& block : blocks_) {
      if (block->mixer == nullptr) continue;
      AssignParameter(block->norm, block->norm.index_select(0, idx));
      block->mixer->PermuteHidden(idx);
    }
  } catch (const c10::Error& e) {
    return FromTorch(e, "PermuteHidden");
  }
  return absl::OkStatus();
}

absl::Status HybridLMImpl::PermuteLayer(int64_t layer, const LayerPermutation& perm) {
  if (layer < 0 || layer >= num_layers()) {
    return absl::InvalidArgumentError(absl::StrCat("PermuteLayer: no layer ", layer));
  }
  const LayerKind kind = config_.layers[layer].kind;
  struct Field {
    const char* name;
    bool set;
    bool allowed;
  };
  const bool present = blocks_[layer]->mixer != nullptr;
  const Field fields[] = {
      {"attention_kv_heads", !perm.attention_kv_heads.empty(), kind == LayerKind::kAttention},
      {"attention_heads", !perm.attention_heads.empty(), kind == LayerKind::kAttention},
      {"mamba_heads", !perm.mamba_heads.empty(), kind == LayerKind::kMamba},
      {"experts", !perm.experts.empty(), kind == LayerKind::kMoe},
      {"expert_ffn", !perm.expert_ffn.empty(), kind == LayerKind::kMoe},
      {"shared_ffn", !perm.shared_ffn.empty(), kind == LayerKind::kMoe},
      {"mlp_ffn", !perm.mlp_ffn.empty(), kind == LayerKind::kMlp},
  };
  for (const Field& f : fields) {
    if (f.set && (!f.allowed || !present)) {
      return absl::InvalidArgumentError(
          absl::StrCat(LayerField(layer, f.name), ": not an axis of this ",
                       present ? "" : "absent ", LayerKindName(kind), " layer"));
    }
  }
  if (!present) return absl::OkStatus();
  try {
    absl::Status s = blocks_[layer]->mixer->Permute(perm);
    if (!s.ok()) return absl::Status(s.code(), LayerField(layer, s.message()));
  } catch (const c10::Error& e) {
    return FromTorch(e, absl::StrCat("PermuteLayer ", layer));
  }
  return absl::OkStatus();
}

absl::Status HybridLMImpl::CopyPrefixFrom(const HybridLMImpl& parent) {
  TAILOR_RETURN_IF_ERROR(CheckSameShape(parent.config_, config_));
  try {
    at::Tensor hidden = torch::arange(config_.hidden, torch::kLong).to(parent.embed_.device());
    AssignParameter(embed_, parent.embed_.index_select(1, hidden));
    if (lm_head_.defined()) AssignParameter(lm_head_, parent.lm_head_.index_select(1, hidden));
    AssignParameter(final_norm_, parent.final_norm_.index_select(0, hidden));
    for (int64_t i = 0; i < num_layers(); ++i) {
      BlockImpl& block = *blocks_[i];
      if (block.mixer == nullptr) continue;
      const BlockImpl& from = *parent.blocks_[i];
      AssignParameter(block.norm, from.norm.index_select(0, hidden));
      absl::Status s = block.mixer->CopyPrefixFrom(*from.mixer, hidden);
      if (!s.ok()) return absl::Status(s.code(), absl::StrCat("layers[", i, "]: ", s.message()));
    }
  } catch (const c10::Error& e) {
    return FromTorch(e, "CopyPrefixFrom");
  }
  return absl::OkStatus();
}

// --- free functions ---------------------------------------------------------------------

absl::StatusOr<HybridLM> CreateHybridLM(const HybridConfig& config, uint64_t seed) {
  TAILOR_RETURN_IF_ERROR(ValidateHybridConfig(config));
  try {
    torch::manual_seed(seed);
    return HybridLM(config);
  } catch (const c10::Error& e) {
    return FromTorch(e, "CreateHybridLM");
  }
}

absl::StatusOr<HybridLM> CreateUninitializedHybridLM(const HybridConfig& config) {
  TAILOR_RETURN_IF_ERROR(ValidateHybridConfig(config));
  try {
    return HybridLM(config, /*random_init=*/false);
  } catch (const c10::Error& e) {
    return FromTorch(e, "CreateUninitializedHybridLM");
  }
}

absl::Status SaveHybridLM(const HybridLM& model, const std::string& dir, DType dtype) {
  if (dtype != DType::kF32 && dtype != DType::kBF16 && dtype != DType::kF16) {
    return absl::InvalidArgumentError("SaveHybridLM: dtype must be F32, BF16 or F16");
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat(dir, ": cannot create: ", ec.message()));
  TAILOR_RETURN_IF_ERROR(WriteHybridConfig(model->config(), dir + "/config.json"));
  TensorMap tensors;
  try {
    const at::ScalarType st = dtype == DType::kBF16  ? torch::kBFloat16
                              : dtype == DType::kF16 ? torch::kHalf
                                                     : torch::kFloat;
    for (const auto& [name, t] : model->StateDict()) tensors.emplace(name, t.to(st));
  } catch (const c10::Error& e) {
    return FromTorch(e, "SaveHybridLM");
  }
  return SaveSafetensors(dir + "/model.safetensors", tensors, {{"format", "tailor-hybrid-lm"}});
}

absl::StatusOr<HybridLM> LoadHybridLM(const std::string& dir) {
  TAILOR_ASSIGN_OR_RETURN(HybridConfig config, ReadHybridConfig(dir + "/config.json"));
  const std::string path = dir + "/model.safetensors";
  TAILOR_ASSIGN_OR_RETURN(TensorMap tensors, LoadSafetensors(path));
  TAILOR_ASSIGN_OR_RETURN(HybridLM model, CreateHybridLM(config, 0));
  TAILOR_RETURN_IF_ERROR(model->LoadStateDict(tensors, path));
  return model;
}

absl::StatusOr<HybridLM> SliceHybridLM(const HybridLM& parent, const HybridConfig& child) {
  TAILOR_RETURN_IF_ERROR(ValidateHybridConfig(child));
  TAILOR_RETURN_IF_ERROR(CheckSameShape(parent->config(), child));
  TAILOR_ASSIGN_OR_RETURN(HybridLM out, CreateHybridLM(child, 0));
  try {
    out->to(parent->parameters().empty() ? torch::Device(torch::kCPU)
                                         : parent->parameters().front().device());
  } catch (const c10::Error& e) {
    return FromTorch(e, "SliceHybridLM");
  }
  TAILOR_RETURN_IF_ERROR(out->CopyPrefixFrom(*parent));
  return out;
}

absl::Status PermuteHybridLM(HybridLM& model, const Permutation& perm) {
  if (!perm.layers.empty() && static_cast<int64_t>(perm.layers.size()) != model->num_layers()) {
    return absl::InvalidArgumentError(absl::StrCat("Permutation: ", perm.layers.size(),
                                                   " layer entries for ", model->num_layers(),
                                                   " layers"));
  }
  if (!perm.hidden.empty()) TAILOR_RETURN_IF_ERROR(model->PermuteHidden(perm.hidden));
  for (size_t i = 0; i < perm.layers.size(); ++i) {
    TAILOR_RETURN_IF_ERROR(model->PermuteLayer(static_cast<int64_t>(i), perm.layers[i]));
  }
  return absl::OkStatus();
}

absl::StatusOr<ArchMask> PrefixMask(const HybridConfig& parent, const HybridConfig& child) {
  TAILOR_RETURN_IF_ERROR(ValidateHybridConfig(child));
  TAILOR_RETURN_IF_ERROR(CheckSameShape(parent, child));
  try {
    ArchMask mask;
    mask.hidden = PrefixOnes(parent.hidden, child.hidden);
    for (int64_t i = 0; i < parent.num_layers(); ++i) {
      const LayerSpec& p = parent.layers[i];
      const LayerSpec& c = child.layers[i];
      LayerMask m;
      switch (p.kind) {
        case LayerKind::kAttention: {
          if (p.attention.heads == 0) break;
          const int64_t pg = p.attention.heads / p.attention.kv_heads;
          const int64_t cg = c.attention.heads > 0 ? c.attention.heads / c.attention.kv_heads : 0;
          m.attention_heads = torch::zeros({p.attention.heads});
          for (int64_t h = 0; h < p.attention.heads; ++h) {
            if (h / pg < c.attention.kv_heads && h % pg < cg) m.attention_heads[h].fill_(1.0);
          }
          break;
        }
        case LayerKind::kMamba: {
          if (p.mamba.heads == 0) break;
          if (c.mamba.heads > 0 && c.mamba.groups != p.mamba.groups) {
            return absl::InvalidArgumentError(absl::StrCat(
                "layers[", i, "].mamba.groups: child ", c.mamba.groups, ", parent ",
                p.mamba.groups, " (heads are pruned inside their B/C group)"));
          }
          // The first heads of EACH B/C group, as CopyPrefixFrom keeps them.
          const int64_t pg = p.mamba.heads / p.mamba.groups;
          const int64_t cg = c.mamba.heads / p.mamba.groups;
          m.mamba_heads = torch::zeros({p.mamba.heads});
          for (int64_t h = 0; h < p.mamba.heads; ++h) {
            if (h % pg < cg) m.mamba_heads[h].fill_(1.0);
          }
          break;
        }
        case LayerKind::kMoe:
          if (p.moe.experts > 0) {
            if (c.moe.experts > 0 && c.moe.groups != p.moe.groups) {
              return absl::InvalidArgumentError(absl::StrCat(
                  "layers[", i, "].moe.groups: child ", c.moe.groups, ", parent ", p.moe.groups,
                  " (experts are pruned inside their routing group)"));
            }
            // The first experts of EACH routing group, as CopyPrefixFrom keeps them.
            m.experts = torch::zeros({p.moe.experts});
            for (int64_t e : KeptExperts(p.moe, c.moe.experts)) m.experts[e].fill_(1.0);
            m.expert_ffn = PrefixOnes(p.moe.expert_ffn, c.moe.expert_ffn);
          }
          if (p.moe.shared_ffn > 0) m.shared_ffn = PrefixOnes(p.moe.shared_ffn, c.moe.shared_ffn);
          break;
        case LayerKind::kMlp:
          if (p.mlp.ffn > 0) m.mlp_ffn = PrefixOnes(p.mlp.ffn, c.mlp.ffn);
          break;
      }
      mask.layers.push_back(m);
    }
    return mask;
  } catch (const c10::Error& e) {
    return FromTorch(e, "PrefixMask");
  }
}

absl::Status ValidateArchMask(const ArchMask& mask, const HybridConfig& config, int64_t batch) {
  TAILOR_RETURN_IF_ERROR(CheckMaskShape(mask.hidden, config.hidden, batch, "hidden"));
  if (mask.layers.empty()) return absl::OkStatus();
  if (static_cast<int64_t>(mask.layers.size()) != config.num_layers()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layers: ", mask.layers.size(), " layer masks for ", config.num_layers(), " layers"));
  }
  for (int64_t i = 0; i < config.num_layers(); ++i) {
    const LayerMask& m = mask.layers[i];
    const MaskAxes a = AxesOf(config.layers[i]);
    const std::pair<const at::Tensor*, std::pair<int64_t, const char*>> axes[] = {
        {&m.attention_heads, {a.attention_heads, "attention_heads"}},
        {&m.mamba_heads, {a.mamba_heads, "mamba_heads"}},
        {&m.experts, {a.experts, "experts"}},
        {&m.expert_ffn, {a.expert_ffn, "expert_ffn"}},
        {&m.shared_ffn, {a.shared_ffn, "shared_ffn"}},
        {&m.mlp_ffn, {a.mlp_ffn, "mlp_ffn"}},
    };
    for (const auto& [tensor, axis] : axes) {
      if (!tensor->defined()) continue;
      const std::string field = LayerField(i, axis.second);
      if (axis.first == 0) {
        return absl::InvalidArgumentError(absl::StrCat(field, ": set, but this ",
                                                       LayerKindName(config.layers[i].kind),
                                                       " layer has no such axis"));
      }
      TAILOR_RETURN_IF_ERROR(CheckMaskShape(*tensor, axis.first, batch, field));
    }
  }
  return absl::OkStatus();
}

}  // namespace tailor::model
