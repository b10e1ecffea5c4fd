#include "compression/model/config.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace tailor::model {
namespace {

using Json = nlohmann::json;

absl::Status FieldError(absl::string_view field, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", message));
}

// --- validation ---------------------------------------------------------------------

absl::Status CheckPositive(absl::string_view field, int64_t value) {
  if (value <= 0) return FieldError(field, absl::StrCat("must be > 0, got ", value));
  return absl::OkStatus();
}

absl::Status CheckNonNegative(absl::string_view field, int64_t value) {
  if (value < 0) return FieldError(field, absl::StrCat("must be >= 0, got ", value));
  return absl::OkStatus();
}

// Inclusive upper bound of the input limits (config.h).
absl::Status CheckAtMost(absl::string_view field, int64_t value, int64_t max) {
  if (value > max) return FieldError(field, absl::StrCat("must be <= ", max, ", got ", value));
  return absl::OkStatus();
}

absl::Status CheckZero(absl::string_view field, int64_t value, absl::string_view why) {
  if (value != 0) return FieldError(field, absl::StrCat("must be 0 when ", why, ", got ", value));
  return absl::OkStatus();
}

absl::Status ValidateAttention(const std::string& p, const AttentionSpec& a) {
  TAILOR_RETURN_IF_ERROR(CheckNonNegative(p + ".heads", a.heads));
  TAILOR_RETURN_IF_ERROR(CheckAtMost(p + ".heads", a.heads, kMaxHeads));
  if (a.heads == 0) {
    // An absent layer: the other fields are ignored but must not suggest otherwise.
    TAILOR_RETURN_IF_ERROR(CheckZero(p + ".kv_heads", a.kv_heads, "heads is 0"));
    return absl::OkStatus();
  }
  TAILOR_RETURN_IF_ERROR(CheckPositive(p + ".kv_heads", a.kv_heads));
  if (a.kv_heads > a.heads) {
    return FieldError(p + ".kv_heads",
                      absl::StrCat("must be <= heads (", a.heads, "), got ", a.kv_heads));
  }
  if (a.heads % a.kv_heads != 0) {
    return FieldError(p + ".kv_heads",
                      absl::StrCat("must divide heads (", a.heads, "), got ", a.kv_heads));
  }
  TAILOR_RETURN_IF_ERROR(CheckPositive(p + ".head_dim", a.head_dim));
  TAILOR_RETURN_IF_ERROR(CheckAtMost(p + ".head_dim", a.head_dim, kMaxHeads));
  if (a.head_dim % 2 != 0) {
    return FieldError(p + ".head_dim",
                      absl::StrCat("must be even (rotary pairs), got ", a.head_dim));
  }
  return absl::OkStatus();
}

absl::Status ValidateMamba(const std::string& p, const MambaSpec& m) {
  TAILOR_RETURN_IF_ERROR(CheckNonNegative(p + ".heads", m.heads));
  TAILOR_RETURN_IF_ERROR(CheckAtMost(p + ".heads", m.heads, kMaxHeads));
  if (m.heads == 0) return absl::OkStatus();
  TAILOR_RETURN_IF_ERROR(CheckPositive(p + ".head_dim", m.head_dim));
  TAILOR_RETURN_IF_ERROR(CheckAtMost(p + ".head_dim", m.head_dim, kMaxHeads));
  TAILOR_RETURN_IF_ERROR(CheckPositive(p + ".state", m.state));
  TAILOR_RETURN_IF_ERROR(CheckAtMost(p + ".state", m.state, kMaxHeads));
  TAILOR_RETURN_IF_ERROR(CheckPositive(p + ".conv_kernel", m.conv_kernel));
  TAILOR_RETURN_IF_ERROR(CheckAtMost(p + ".conv_kernel", m.conv_kernel, kMaxConvKernel));
  TAILOR_RETURN_IF_ERROR(CheckPositive(p + ".chunk", m.chunk));
  TAILOR_RETURN_IF_ERROR(CheckAtMost(p + ".chunk", m.chunk, kMaxChunk));
  TAILOR_RETURN_IF_ERROR(CheckPositive(p + ".groups", m.groups));
  if (m.heads % m.groups != 0) {
    return FieldError(p + ".groups",
                      absl::StrCat("must divide heads (", m.heads, "), got ", m.groups));
  }
  return absl::OkStatus();
}

// The routing variant of a block with routed experts (config.h, MoeSpec).
absl::Status ValidateMoeRouting(const std::string& p, const MoeSpec& m) {
  TAILOR_RETURN_IF_ERROR(CheckPositive(p + ".groups", m.groups));
  if (m.experts % m.groups != 0) {
    return FieldError(p + ".groups",
                      absl::StrCat("must divide experts (", m.experts, "), got ", m.groups));
  }
  // A group's score is the sum of its two best experts (DeepSeek-V3 / Nemotron-H).
  if (m.groups > 1 && m.experts / m.groups < 2) {
    return FieldError(p + ".groups", absl::StrCat("groups need >= 2 experts each, got ",
                                                  m.experts / m.groups, " per group"));
  }
  if (m.top_groups < 1 || m.top_groups > m.groups) {
    return FieldError(p + ".top_groups", absl::StrCat("must be in [1, groups (", m.groups,
                                                      ")], got ", m.top_groups));
  }
  if (m.top_k > m.top_groups * (m.experts / m.groups)) {
    return FieldError(p + ".top_k", absl::StrCat("must be <= the experts of top_groups groups (",
                                                 m.top_groups * (m.experts / m.groups),
                                                 "), got ", m.top_k));
  }
  if (!(m.scale > 0) || !std::isfinite(m.scale)) {
    return FieldError(p + ".scale", absl::StrCat("must be a finite number > 0, got ", m.scale));
  }
  return absl::OkStatus();
}

absl::Status ValidateMoe(const std::string& p, const MoeSpec& m) {
  TAILOR_RETURN_IF_ERROR(CheckNonNegative(p + ".experts", m.experts));
  TAILOR_RETURN_IF_ERROR(CheckAtMost(p + ".experts", m.experts, kMaxExperts));
  TAILOR_RETURN_IF_ERROR(CheckNonNegative(p + ".shared_ffn", m.shared_ffn));
  TAILOR_RETURN_IF_ERROR(CheckAtMost(p + ".shared_ffn", m.shared_ffn, kMaxWidth));
  if (m.experts == 0) {
    TAILOR_RETURN_IF_ERROR(CheckZero(p + ".top_k", m.top_k, "experts is 0"));
    TAILOR_RETURN_IF_ERROR(CheckZero(p + ".expert_ffn", m.expert_ffn, "experts is 0"));
    // The routing fields are ignored without routed experts (a child that dropped them
    // keeps its parent's, so it still reads as the same family).
    return absl::OkStatus();
  }
  if (m.top_k < 1) return FieldError(p + ".top_k", absl::StrCat("must be >= 1, got ", m.top_k));
  if (m.top_k > m.experts) {
    return FieldError(p + ".top_k",
                      absl::StrCat("must be <= experts (", m.experts, "), got ", m.top_k));
  }
  TAILOR_RETURN_IF_ERROR(CheckPositive(p + ".expert_ffn", m.expert_ffn));
  TAILOR_RETURN_IF_ERROR(CheckAtMost(p + ".expert_ffn", m.expert_ffn, kMaxWidth));
  return ValidateMoeRouting(p, m);
}

// --- JSON reading helpers -------------------------------------------------------------

// Rejects keys the schema does not know, so a typo ("kv_head") is an error, not a default.
absl::Status CheckKeys(const Json& obj, const std::string& path,
                       std::initializer_list<absl::string_view> allowed) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool known = false;
    for (absl::string_view a : allowed) known = known || it.key() == a;
    if (!known) {
      return FieldError(path.empty() ? it.key() : absl::StrCat(path, ".", it.key()),
                        "unknown field");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<const Json*> GetField(const Json& obj, const std::string& path,
                                     const std::string& key) {
  auto it = obj.find(key);
  const std::string field = path.empty() ? key : absl::StrCat(path, ".", key);
  if (it == obj.end()) return FieldError(field, "required");
  return &*it;
}

absl::StatusOr<int64_t> GetInt(const Json& obj, const std::string& path, const std::string& key) {
  TAILOR_ASSIGN_OR_RETURN(const Json* v, GetField(obj, path, key));
  const std::string field = path.empty() ? key : absl::StrCat(path, ".", key);
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return FieldError(field, "out of range");
    return static_cast<int64_t>(u);
  }
  if (!v->is_number_integer()) {
    return FieldError(field, absl::StrCat("must be an integer, got ", v->dump()));
  }
  return v->get<int64_t>();
}

absl::StatusOr<double> GetNumber(const Json& obj, const std::string& path, const std::string& key) {
  TAILOR_ASSIGN_OR_RETURN(const Json* v, GetField(obj, path, key));
  if (!v->is_number()) {
    return FieldError(path.empty() ? key : absl::StrCat(path, ".", key),
                      absl::StrCat("must be a number, got ", v->dump()));
  }
  return v->get<double>();
}

// A bool that may be left out: `fallback` when absent.
absl::StatusOr<bool> GetOptionalBool(const Json& obj, const std::string& path,
                                     const std::string& key, bool fallback) {
  auto it = obj.find(key);
  if (it == obj.end()) return fallback;
  if (!it->is_boolean()) {
    return FieldError(path.empty() ? key : absl::StrCat(path, ".", key),
                      absl::StrCat("must be true or false, got ", it->dump()));
  }
  return it->get<bool>();
}

absl::StatusOr<const Json*> GetObject(const Json& obj, const std::string& path,
                                      const std::string& key) {
  TAILOR_ASSIGN_OR_RETURN(const Json* v, GetField(obj, path, key));
  if (!v->is_object()) {
    return FieldError(path.empty() ? key : absl::StrCat(path, ".", key), "must be an object");
  }
  return v;
}

// A string that may be left out: `fallback` when absent.
absl::StatusOr<std::string> GetOptionalString(const Json& obj, const std::string& path,
                                              const std::string& key, absl::string_view fallback) {
  auto it = obj.find(key);
  if (it == obj.end()) return std::string(fallback);
  if (!it->is_string()) {
    return FieldError(absl::StrCat(path, ".", key),
                      absl::StrCat("must be a string, got ", it->dump()));
  }
  return it->get<std::string>();
}

absl::StatusOr<MoeSpec> ParseMoe(const Json& s, const std::string& sp) {
  TAILOR_RETURN_IF_ERROR(CheckKeys(s, sp,
                                   {"experts", "top_k", "expert_ffn", "shared_ffn", "router",
                                    "norm_top_k", "score_bias", "groups", "top_groups", "scale",
                                    "activation"}));
  MoeSpec m;
  TAILOR_ASSIGN_OR_RETURN(m.experts, GetInt(s, sp, "experts"));
  TAILOR_ASSIGN_OR_RETURN(m.top_k, GetInt(s, sp, "top_k"));
  TAILOR_ASSIGN_OR_RETURN(m.expert_ffn, GetInt(s, sp, "expert_ffn"));
  TAILOR_ASSIGN_OR_RETURN(m.shared_ffn, GetInt(s, sp, "shared_ffn"));
  // The variants are optional: the demo family's configs read (and write) unchanged.
  TAILOR_ASSIGN_OR_RETURN(std::string router, GetOptionalString(s, sp, "router", "softmax"));
  absl::StatusOr<MoeRouter> r = ParseMoeRouter(router);
  if (!r.ok()) return FieldError(sp + ".router", r.status().message());
  m.router = *r;
  TAILOR_ASSIGN_OR_RETURN(m.norm_top_k, GetOptionalBool(s, sp, "norm_top_k", true));
  TAILOR_ASSIGN_OR_RETURN(m.score_bias, GetOptionalBool(s, sp, "score_bias", false));
  if (s.contains("groups")) {
    TAILOR_ASSIGN_OR_RETURN(m.groups, GetInt(s, sp, "groups"));
  }
  if (s.contains("top_groups")) {
    TAILOR_ASSIGN_OR_RETURN(m.top_groups, GetInt(s, sp, "top_groups"));
  }
  if (s.contains("scale")) {
    TAILOR_ASSIGN_OR_RETURN(m.scale, GetNumber(s, sp, "scale"));
  }
  TAILOR_ASSIGN_OR_RETURN(std::string act, GetOptionalString(s, sp, "activation", "swiglu"));
  absl::StatusOr<FfnActivation> a = ParseFfnActivation(act);
  if (!a.ok()) return FieldError(sp + ".activation", a.status().message());
  m.activation = *a;
  return m;
}

absl::StatusOr<LayerSpec> ParseLayer(const Json& j, const std::string& p) {
  if (!j.is_object()) return FieldError(p, "must be an object");
  TAILOR_ASSIGN_OR_RETURN(const Json* kind_json, GetField(j, p, "kind"));
  if (!kind_json->is_string()) return FieldError(p + ".kind", "must be a string");
  absl::StatusOr<LayerKind> kind = ParseLayerKind(kind_json->get<std::string>());
  if (!kind.ok()) return FieldError(p + ".kind", kind.status().message());
  LayerSpec spec;
  spec.kind = *kind;
  const std::string section(LayerKindName(spec.kind));
  // Exactly one section, named after the kind: a stray "moe" block on an attention layer
  // is almost certainly a mistake worth reporting.
  TAILOR_RETURN_IF_ERROR(CheckKeys(j, p, {"kind", section}));
  TAILOR_ASSIGN_OR_RETURN(const Json* s, GetObject(j, p, section));
  const std::string sp = absl::StrCat(p, ".", section);
  switch (spec.kind) {
    case LayerKind::kAttention: {
      TAILOR_RETURN_IF_ERROR(CheckKeys(
          *s, sp, {"heads", "kv_heads", "head_dim", "qkv_bias", "o_bias", "qk_norm", "rope"}));
      AttentionSpec& a = spec.attention;
      TAILOR_ASSIGN_OR_RETURN(a.heads, GetInt(*s, sp, "heads"));
      TAILOR_ASSIGN_OR_RETURN(a.kv_heads, GetInt(*s, sp, "kv_heads"));
      TAILOR_ASSIGN_OR_RETURN(a.head_dim, GetInt(*s, sp, "head_dim"));
      // The variants are optional so that configs written before them read unchanged.
      TAILOR_ASSIGN_OR_RETURN(a.qkv_bias, GetOptionalBool(*s, sp, "qkv_bias", false));
      TAILOR_ASSIGN_OR_RETURN(a.o_bias, GetOptionalBool(*s, sp, "o_bias", false));
      TAILOR_ASSIGN_OR_RETURN(a.qk_norm, GetOptionalBool(*s, sp, "qk_norm", false));
      TAILOR_ASSIGN_OR_RETURN(a.rope, GetOptionalBool(*s, sp, "rope", true));
      break;
    }
    case LayerKind::kMamba: {
      TAILOR_RETURN_IF_ERROR(CheckKeys(
          *s, sp, {"heads", "head_dim", "state", "conv_kernel", "chunk", "groups", "norm"}));
      TAILOR_ASSIGN_OR_RETURN(spec.mamba.heads, GetInt(*s, sp, "heads"));
      TAILOR_ASSIGN_OR_RETURN(spec.mamba.head_dim, GetInt(*s, sp, "head_dim"));
      TAILOR_ASSIGN_OR_RETURN(spec.mamba.state, GetInt(*s, sp, "state"));
      TAILOR_ASSIGN_OR_RETURN(spec.mamba.conv_kernel, GetInt(*s, sp, "conv_kernel"));
      TAILOR_ASSIGN_OR_RETURN(spec.mamba.chunk, GetInt(*s, sp, "chunk"));
      // The variants are optional: configs written before them read unchanged.
      if (s->contains("groups")) {
        TAILOR_ASSIGN_OR_RETURN(spec.mamba.groups, GetInt(*s, sp, "groups"));
      }
      if (auto it = s->find("norm"); it != s->end()) {
        if (!it->is_string()) return FieldError(sp + ".norm", "must be a string");
        absl::StatusOr<MambaNorm> norm = ParseMambaNorm(it->get<std::string>());
        if (!norm.ok()) return FieldError(sp + ".norm", norm.status().message());
        spec.mamba.norm = *norm;
      }
      break;
    }
    case LayerKind::kMoe: {
      TAILOR_ASSIGN_OR_RETURN(spec.moe, ParseMoe(*s, sp));
      break;
    }
    case LayerKind::kMlp: {
      TAILOR_RETURN_IF_ERROR(CheckKeys(*s, sp, {"ffn", "bias", "activation"}));
      TAILOR_ASSIGN_OR_RETURN(spec.mlp.ffn, GetInt(*s, sp, "ffn"));
      TAILOR_ASSIGN_OR_RETURN(spec.mlp.bias, GetOptionalBool(*s, sp, "bias", false));
      if (auto it = s->find("activation"); it != s->end()) {
        if (!it->is_string()) return FieldError(sp + ".activation", "must be a string");
        absl::StatusOr<FfnActivation> act = ParseFfnActivation(it->get<std::string>());
        if (!act.ok()) return FieldError(sp + ".activation", act.status().message());
        spec.mlp.activation = *act;
      }
      break;
    }
  }
  return spec;
}

Json MoeToJson(const MoeSpec& m) {
  Json section = {{"experts", m.experts},
                  {"top_k", m.top_k},
                  {"expert_ffn", m.expert_ffn},
                  {"shared_ffn", m.shared_ffn}};
  // Only non-default variants: the demo family's config text (and its digests) is unchanged.
  const MoeSpec d;
  if (m.router != d.router) section["router"] = std::string(MoeRouterName(m.router));
  if (m.norm_top_k != d.norm_top_k) section["norm_top_k"] = m.norm_top_k;
  if (m.score_bias != d.score_bias) section["score_bias"] = m.score_bias;
  if (m.groups != d.groups) section["groups"] = m.groups;
  if (m.top_groups != d.top_groups) section["top_groups"] = m.top_groups;
  if (m.scale != d.scale) section["scale"] = m.scale;
  if (m.activation != d.activation) {
    section["activation"] = std::string(FfnActivationName(m.activation));
  }
  return section;
}

Json LayerToJson(const LayerSpec& l) {
  Json section;
  switch (l.kind) {
    case LayerKind::kAttention:
      section = {{"heads", l.attention.heads},
                 {"kv_heads", l.attention.kv_heads},
                 {"head_dim", l.attention.head_dim}};
      // Only non-default variants are written: the demo family's configs (and the digests
      // and architecture keys computed from their text) stay exactly as they were.
      if (l.attention.qkv_bias) section["qkv_bias"] = true;
      if (l.attention.o_bias) section["o_bias"] = true;
      if (l.attention.qk_norm) section["qk_norm"] = true;
      if (!l.attention.rope) section["rope"] = false;
      break;
    case LayerKind::kMamba:
      section = {{"heads", l.mamba.heads},
                 {"head_dim", l.mamba.head_dim},
                 {"state", l.mamba.state},
                 {"conv_kernel", l.mamba.conv_kernel},
                 {"chunk", l.mamba.chunk}};
      if (l.mamba.groups != 1) section["groups"] = l.mamba.groups;
      if (l.mamba.norm != MambaNorm::kPerHead) {
        section["norm"] = std::string(MambaNormName(l.mamba.norm));
      }
      break;
    case LayerKind::kMoe:
      section = MoeToJson(l.moe);
      break;
    case LayerKind::kMlp:
      section = {{"ffn", l.mlp.ffn}};
      if (l.mlp.bias) section["bias"] = true;
      if (l.mlp.activation != FfnActivation::kSwiGlu) {
        section["activation"] = std::string(FfnActivationName(l.mlp.activation));
      }
      break;
  }
  Json j;
  j["kind"] = std::string(LayerKindName(l.kind));
  j[std::string(LayerKindName(l.kind))] = section;
  return j;
}

absl::StatusOr<RopeScalingSpec> ParseRopeScaling(const Json& j) {
  const std::string p = "rope_scaling";
  if (!j.is_object()) return FieldError(p, "must be an object");
  TAILOR_RETURN_IF_ERROR(CheckKeys(j, p,
                                   {"type", "factor", "low_freq_factor", "high_freq_factor",
                                    "original_max_positions"}));
  TAILOR_ASSIGN_OR_RETURN(const Json* type, GetField(j, p, "type"));
  RopeScalingSpec r;
  if (*type == "none") return r;
  if (*type != "llama3") {
    return FieldError(p + ".type", absl::StrCat("want \"none\" or \"llama3\", got ", type->dump()));
  }
  r.type = RopeScalingSpec::Type::kLlama3;
  TAILOR_ASSIGN_OR_RETURN(r.factor, GetNumber(j, p, "factor"));
  TAILOR_ASSIGN_OR_RETURN(r.low_freq_factor, GetNumber(j, p, "low_freq_factor"));
  TAILOR_ASSIGN_OR_RETURN(r.high_freq_factor, GetNumber(j, p, "high_freq_factor"));
  TAILOR_ASSIGN_OR_RETURN(r.original_max_positions, GetInt(j, p, "original_max_positions"));
  return r;
}

absl::Status ValidateRopeScaling(const RopeScalingSpec& r) {
  if (r.type == RopeScalingSpec::Type::kNone) return absl::OkStatus();
  for (const auto& [name, v] : {std::pair<const char*, double>{"factor", r.factor},
                                {"low_freq_factor", r.low_freq_factor},
                                {"high_freq_factor", r.high_freq_factor}}) {
    if (!(v > 0) || !std::isfinite(v)) {
      return FieldError(absl::StrCat("rope_scaling.", name),
                        absl::StrCat("must be a finite number > 0, got ", v));
    }
  }
  // The interpolation divides by the difference.
  if (!(r.high_freq_factor > r.low_freq_factor)) {
    return FieldError("rope_scaling.high_freq_factor",
                      absl::StrCat("must be > low_freq_factor (", r.low_freq_factor, "), got ",
                                   r.high_freq_factor));
  }
  return CheckPositive("rope_scaling.original_max_positions", r.original_max_positions);
}

constexpr absl::string_view kFormat = "tailor-hybrid-lm";
constexpr int64_t kFormatVersion = 1;

}  // namespace

absl::string_view LayerKindName(LayerKind kind) {
  switch (kind) {
    case LayerKind::kAttention:
      return "attention";
    case LayerKind::kMamba:
      return "mamba";
    case LayerKind::kMoe:
      return "moe";
    case LayerKind::kMlp:
      return "mlp";
  }
  return "unknown";
}

absl::StatusOr<LayerKind> ParseLayerKind(absl::string_view name) {
  for (LayerKind k : {LayerKind::kAttention, LayerKind::kMamba, LayerKind::kMoe, LayerKind::kMlp}) {
    if (LayerKindName(k) == name) return k;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown layer kind \"", name, "\" (want attention, mamba, moe or mlp)"));
}

absl::string_view FfnActivationName(FfnActivation activation) {
  switch (activation) {
    case FfnActivation::kSwiGlu:
      return "swiglu";
    case FfnActivation::kReluSquared:
      return "relu2";
  }
  return "unknown";
}

absl::StatusOr<FfnActivation> ParseFfnActivation(absl::string_view name) {
  for (FfnActivation a : {FfnActivation::kSwiGlu, FfnActivation::kReluSquared}) {
    if (FfnActivationName(a) == name) return a;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown activation \"", name, "\" (want swiglu or relu2)"));
}

absl::string_view MoeRouterName(MoeRouter router) {
  switch (router) {
    case MoeRouter::kSoftmax:
      return "softmax";
    case MoeRouter::kSigmoid:
      return "sigmoid";
  }
  return "unknown";
}

absl::StatusOr<MoeRouter> ParseMoeRouter(absl::string_view name) {
  for (MoeRouter r : {MoeRouter::kSoftmax, MoeRouter::kSigmoid}) {
    if (MoeRouterName(r) == name) return r;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown router \"", name, "\" (want softmax or sigmoid)"));
}

bool MoeSpec::SameVariant(const MoeSpec& o) const {
  return router == o.router && norm_top_k == o.norm_top_k && score_bias == o.score_bias &&
         groups == o.groups && top_groups == o.top_groups && scale == o.scale &&
         activation == o.activation;
}

bool MoeSpec::is_default_variant() const { return SameVariant(MoeSpec()); }

absl::string_view MambaNormName(MambaNorm norm) {
  switch (norm) {
    case MambaNorm::kPerHead:
      return "head";
    case MambaNorm::kPerGroup:
      return "group";
  }
  return "unknown";
}

absl::StatusOr<MambaNorm> ParseMambaNorm(absl::string_view name) {
  for (MambaNorm n : {MambaNorm::kPerHead, MambaNorm::kPerGroup}) {
    if (MambaNormName(n) == name) return n;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown norm \"", name, "\" (want head or group)"));
}

int64_t KeptMambaHeads(const MambaSpec& parent, int64_t width) {
  if (parent.heads <= 0) return 0;
  const int64_t groups = std::max<int64_t>(parent.groups, 1);
  const int64_t kept = std::min(width, parent.heads) / groups * groups;
  return std::max(kept, groups);
}

std::vector<int64_t> KeptExperts(const MoeSpec& parent, int64_t experts) {
  std::vector<int64_t> kept;
  if (parent.experts <= 0 || experts <= 0) return kept;
  const int64_t groups = std::max<int64_t>(parent.groups, 1), per = parent.experts / groups;
  const int64_t k = std::min(experts / groups, per);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t j = 0; j < k; ++j) kept.push_back(g * per + j);
  }
  return kept;
}

int64_t MambaHeadMultiple(const HybridConfig& config) {
  int64_t multiple = 1;
  for (const LayerSpec& l : config.layers) {
    if (l.kind != LayerKind::kMamba || l.mamba.heads <= 0 || l.mamba.groups <= 0) continue;
    multiple = std::lcm(multiple, l.mamba.groups);
    if (multiple > kMaxHeads) return kMaxHeads;  // no choice but the full width is possible
  }
  return multiple;
}

LayerSpec LayerSpec::AbsentLike(const LayerSpec& layer) {
  LayerSpec s = layer;
  s.attention.heads = s.attention.kv_heads = 0;
  s.mamba.heads = 0;
  s.moe.experts = s.moe.top_k = s.moe.expert_ffn = s.moe.shared_ffn = 0;
  s.mlp.ffn = 0;
  return s;
}

LayerSpec LayerSpec::Attention(int64_t heads, int64_t kv_heads, int64_t head_dim) {
  LayerSpec s;
  s.kind = LayerKind::kAttention;
  s.attention = {heads, kv_heads, head_dim};
  return s;
}

LayerSpec LayerSpec::Mamba(int64_t heads, int64_t head_dim, int64_t state, int64_t conv_kernel,
                           int64_t chunk) {
  LayerSpec s;
  s.kind = LayerKind::kMamba;
  s.mamba = {heads, head_dim, state, conv_kernel, chunk};
  return s;
}

LayerSpec LayerSpec::Moe(int64_t experts, int64_t top_k, int64_t expert_ffn, int64_t shared_ffn) {
  LayerSpec s;
  s.kind = LayerKind::kMoe;
  s.moe = {experts, top_k, expert_ffn, shared_ffn};
  return s;
}

LayerSpec LayerSpec::Mlp(int64_t ffn) {
  LayerSpec s;
  s.kind = LayerKind::kMlp;
  s.mlp.ffn = ffn;
  return s;
}

HybridConfig WithStandIns(const HybridConfig& config, const std::vector<StandInLayer>& stand_ins) {
  HybridConfig out = config;
  for (const StandInLayer& s : stand_ins) {
    const bool kept =
        std::any_of(config.layers.begin(), config.layers.end(),
                    [&](const LayerSpec& l) { return l.kind == s.absent && l.present(); });
    if (!kept) out.layers.push_back(s.spec);
  }
  return out;
}

bool LayerSpec::present() const {
  switch (kind) {
    case LayerKind::kAttention:
      return attention.heads > 0;
    case LayerKind::kMamba:
      return mamba.heads > 0;
    case LayerKind::kMoe:
      return moe.experts > 0 || moe.shared_ffn > 0;
    case LayerKind::kMlp:
      return mlp.ffn > 0;
  }
  return false;
}

bool LayerSpec::operator==(const LayerSpec& o) const {
  if (kind != o.kind) return false;
  switch (kind) {
    case LayerKind::kAttention:
      return attention.heads == o.attention.heads && attention.kv_heads == o.attention.kv_heads &&
             attention.head_dim == o.attention.head_dim &&
             attention.qkv_bias == o.attention.qkv_bias && attention.o_bias == o.attention.o_bias &&
             attention.qk_norm == o.attention.qk_norm && attention.rope == o.attention.rope;
    case LayerKind::kMamba:
      return mamba.heads == o.mamba.heads && mamba.head_dim == o.mamba.head_dim &&
             mamba.state == o.mamba.state && mamba.conv_kernel == o.mamba.conv_kernel &&
             mamba.chunk == o.mamba.chunk && mamba.groups == o.mamba.groups &&
             mamba.norm == o.mamba.norm;
    case LayerKind::kMoe:
      return moe.experts == o.moe.experts && moe.top_k == o.moe.top_k &&
             moe.expert_ffn == o.moe.expert_ffn && moe.shared_ffn == o.moe.shared_ffn &&
             moe.SameVariant(o.moe);
    case LayerKind::kMlp:
      return mlp.ffn == o.mlp.ffn && mlp.bias == o.mlp.bias &&
             mlp.activation == o.mlp.activation;
  }
  return false;
}

namespace {

// Weights of one layer; `active` counts only top_k experts.
int64_t LayerParams(const LayerSpec& l, int64_t h, bool active) {
  if (!l.present()) return 0;
  int64_t n = h;  // pre-norm weight
  switch (l.kind) {
    case LayerKind::kAttention: {
      const auto& a = l.attention;
      n += 2 * h * a.heads * a.head_dim + 2 * h * a.kv_heads * a.head_dim;
      if (a.qkv_bias) n += (a.heads + 2 * a.kv_heads) * a.head_dim;
      if (a.o_bias) n += h;
      if (a.qk_norm) n += 2 * a.head_dim;
      break;
    }
    case LayerKind::kMamba: {
      const auto& m = l.mamba;
      const int64_t inner = m.heads * m.head_dim, bc = 2 * m.groups * m.state;
      n += h * (2 * inner + bc + m.heads);      // z, x, B/C, dt projections
      n += (inner + bc) * (m.conv_kernel + 1);  // conv weight + bias
      n += 3 * m.heads + inner + inner * h;              // dt_bias, A, D, norm, out
      break;
    }
    case LayerKind::kMoe: {
      const auto& m = l.moe;
      const int64_t counted = active ? m.top_k : m.experts;
      // SwiGLU: gate, up, down; relu2: up, down.
      const int64_t mats = m.activation == FfnActivation::kSwiGlu ? 3 : 2;
      n += m.experts * h + counted * mats * h * m.expert_ffn + mats * h * m.shared_ffn;
      if (m.score_bias) n += m.experts;
      break;
    }
    case LayerKind::kMlp: {
      // relu2 has no gate projection (and no gate bias).
      const int64_t projections = l.mlp.activation == FfnActivation::kSwiGlu ? 3 : 2;
      n += projections * h * l.mlp.ffn;
      if (l.mlp.bias) n += (projections - 1) * l.mlp.ffn + h;
      break;
    }
  }
  return n;
}

}  // namespace

int64_t HybridConfig::ParameterCount() const {
  // Embedding, head (unless tied to the embedding), final norm.
  int64_t n = (tie_embeddings ? 1 : 2) * vocab * hidden + hidden;
  for (const LayerSpec& l : layers) n += LayerParams(l, hidden, /*active=*/false);
  return n;
}

int64_t HybridConfig::ActiveParameterCount() const {
  int64_t n = (tie_embeddings ? 1 : 2) * vocab * hidden + hidden;
  for (const LayerSpec& l : layers) n += LayerParams(l, hidden, /*active=*/true);
  return n;
}

bool HybridConfig::operator==(const HybridConfig& o) const {
  return vocab == o.vocab && hidden == o.hidden && max_seq == o.max_seq &&
         rope_theta == o.rope_theta && norm_eps == o.norm_eps && rope_scaling == o.rope_scaling &&
         tie_embeddings == o.tie_embeddings && layers == o.layers;
}

absl::Status ValidateHybridConfig(const HybridConfig& c) {
  TAILOR_RETURN_IF_ERROR(CheckPositive("vocab", c.vocab));
  TAILOR_RETURN_IF_ERROR(CheckAtMost("vocab", c.vocab, kMaxVocab));
  TAILOR_RETURN_IF_ERROR(CheckPositive("hidden", c.hidden));
  TAILOR_RETURN_IF_ERROR(CheckAtMost("hidden", c.hidden, kMaxWidth));
  TAILOR_RETURN_IF_ERROR(CheckPositive("max_seq", c.max_seq));
  TAILOR_RETURN_IF_ERROR(CheckAtMost("max_seq", c.max_seq, kMaxSeq));
  if (!(c.rope_theta > 0) || !std::isfinite(c.rope_theta)) {
    return FieldError("rope_theta",
                      absl::StrCat("must be a finite number > 0, got ", c.rope_theta));
  }
  if (!(c.norm_eps > 0) || !std::isfinite(c.norm_eps)) {
    return FieldError("norm_eps", absl::StrCat("must be a finite number > 0, got ", c.norm_eps));
  }
  TAILOR_RETURN_IF_ERROR(ValidateRopeScaling(c.rope_scaling));
  if (c.num_layers() > kMaxLayers) {
    return FieldError("layers",
                      absl::StrCat("at most ", kMaxLayers, " entries, got ", c.num_layers()));
  }
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const LayerSpec& l = c.layers[i];
    const std::string p = absl::StrCat("layers[", i, "].", LayerKindName(l.kind));
    switch (l.kind) {
      case LayerKind::kAttention:
        TAILOR_RETURN_IF_ERROR(ValidateAttention(p, l.attention));
        break;
      case LayerKind::kMamba:
        TAILOR_RETURN_IF_ERROR(ValidateMamba(p, l.mamba));
        break;
      case LayerKind::kMoe:
        TAILOR_RETURN_IF_ERROR(ValidateMoe(p, l.moe));
        break;
      case LayerKind::kMlp:
        TAILOR_RETURN_IF_ERROR(CheckNonNegative(p + ".ffn", l.mlp.ffn));
        TAILOR_RETURN_IF_ERROR(CheckAtMost(p + ".ffn", l.mlp.ffn, kMaxWidth));
        break;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<HybridConfig> ParseHybridConfigJson(absl::string_view json_text) {
  if (json_text.size() > kMaxConfigJsonBytes) {
    return absl::InvalidArgumentError(absl::StrCat("config: ", json_text.size(),
                                                   " bytes, larger than the limit of ",
                                                   kMaxConfigJsonBytes, " bytes"));
  }
  Json j = Json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("config: not valid JSON");
  if (!j.is_object()) return absl::InvalidArgumentError("config: must be a JSON object");
  TAILOR_RETURN_IF_ERROR(CheckKeys(
      j, "",
      {"format", "version", "vocab", "hidden", "max_seq", "rope_theta", "norm_eps", "rope_scaling",
       "tie_embeddings", "layers"}));
  // format/version are optional so hand-written configs stay short, but when present they
  // must match: a future format must not be misread as this one.
  if (auto it = j.find("format");
      it != j.end() && (!it->is_string() || it->get<std::string>() != kFormat)) {
    return FieldError("format", absl::StrCat("must be \"", kFormat, "\", got ", it->dump()));
  }
  if (j.contains("version")) {
    TAILOR_ASSIGN_OR_RETURN(int64_t version, GetInt(j, "", "version"));
    if (version != kFormatVersion) {
      return FieldError("version", absl::StrCat("unsupported (this build reads ", kFormatVersion,
                                                "), got ", version));
    }
  }
  HybridConfig c;
  TAILOR_ASSIGN_OR_RETURN(c.vocab, GetInt(j, "", "vocab"));
  TAILOR_ASSIGN_OR_RETURN(c.hidden, GetInt(j, "", "hidden"));
  TAILOR_ASSIGN_OR_RETURN(c.max_seq, GetInt(j, "", "max_seq"));
  TAILOR_ASSIGN_OR_RETURN(c.rope_theta, GetNumber(j, "", "rope_theta"));
  TAILOR_ASSIGN_OR_RETURN(c.norm_eps, GetNumber(j, "", "norm_eps"));
  if (auto it = j.find("rope_scaling"); it != j.end()) {
    TAILOR_ASSIGN_OR_RETURN(c.rope_scaling, ParseRopeScaling(*it));
  }
  TAILOR_ASSIGN_OR_RETURN(c.tie_embeddings, GetOptionalBool(j, "", "tie_embeddings", false));
  TAILOR_ASSIGN_OR_RETURN(const Json* layers, GetField(j, "", "layers"));
  if (!layers->is_array()) return FieldError("layers", "must be an array");
  if (layers->size() > static_cast<size_t>(kMaxLayers)) {
    return FieldError("layers",
                      absl::StrCat("at most ", kMaxLayers, " entries, got ", layers->size()));
  }
  for (size_t i = 0; i < layers->size(); ++i) {
    TAILOR_ASSIGN_OR_RETURN(LayerSpec l, ParseLayer((*layers)[i], absl::StrCat("layers[", i, "]")));
    c.layers.push_back(l);
  }
  TAILOR_RETURN_IF_ERROR(ValidateHybridConfig(c));
  return c;
}

std::string HybridConfigToJson(const HybridConfig& c) {
  Json j = Json::object();
  j["format"] = std::string(kFormat);
  j["version"] = kFormatVersion;
  j["vocab"] = c.vocab;
  j["hidden"] = c.hidden;
  j["max_seq"] = c.max_seq;
  j["rope_theta"] = c.rope_theta;
  j["norm_eps"] = c.norm_eps;
  // Written only when set, so the demo family's config text is what it always was.
  if (c.rope_scaling.type == RopeScalingSpec::Type::kLlama3) {
    j["rope_scaling"] = {{"type", "llama3"},
                         {"factor", c.rope_scaling.factor},
                         {"low_freq_factor", c.rope_scaling.low_freq_factor},
                         {"high_freq_factor", c.rope_scaling.high_freq_factor},
                         {"original_max_positions", c.rope_scaling.original_max_positions}};
  }
  if (c.tie_embeddings) j["tie_embeddings"] = true;
  Json layers = Json::array();
  for (const LayerSpec& l : c.layers) layers.push_back(LayerToJson(l));
  j["layers"] = layers;
  return j.dump(2) + "\n";
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::UnavailableError(absl::StrCat(path, ": cannot open: ", std::strerror(err)));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read failed"));
  return ss.str();
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    return absl::UnavailableError(absl::StrCat(tmp, ": cannot create: ", std::strerror(errno)));
  }
  bool ok = std::fwrite(contents.data(), 1, contents.size(), f) == contents.size();
  ok = std::fflush(f) == 0 && ok;
  ok = ::fsync(::fileno(f)) == 0 && ok;
  ok = std::fclose(f) == 0 && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    return absl::UnavailableError(absl::StrCat(tmp, ": write failed: ", std::strerror(errno)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::UnavailableError(absl::StrCat(path, ": rename failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<HybridConfig> ReadHybridConfig(const std::string& path) {
  TAILOR_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  absl::StatusOr<HybridConfig> c = ParseHybridConfigJson(text);
  if (!c.ok()) {
    return absl::Status(c.status().code(), absl::StrCat(path, ": ", c.status().message()));
  }
  return c;
}

absl::Status WriteHybridConfig(const HybridConfig& config, const std::string& path) {
  TAILOR_RETURN_IF_ERROR(ValidateHybridConfig(config));
  return WriteFileAtomically(path, HybridConfigToJson(config));
}

}  // namespace tailor::model
