#include "compression/autocompress/extract.h"

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace tailor::autocompress {

absl::StatusOr<ExtractionDecision> DecideExtraction(const SearchSpace& space,
                                                    const std::vector<at::Tensor>& probs,
                                                    double threshold) {
  if (probs.size() != space.axes.size()) {
    return absl::InvalidArgumentError(absl::StrCat("DecideExtraction: ", probs.size(),
                                                   " probability vectors for ", space.axes.size(),
                                                   " axes"));
  }
  ExtractionDecision d;
  try {
    for (size_t a = 0; a < probs.size(); ++a) {
      const int64_t n = static_cast<int64_t>(space.axes[a].widths.size());
      if (!probs[a].defined() || probs[a].dim() != 1 || probs[a].size(0) != n) {
        return absl::InvalidArgumentError(
            absl::StrCat(space.axes[a].name, ": probabilities must be [", n, "]"));
      }
      at::Tensor p = probs[a].detach().to(torch::kCPU, torch::kDouble).contiguous();
      const double* v = p.data_ptr<double>();
      int best = 0;
      for (int j = 1; j < n; ++j) {
        if (v[j] > v[best]) best = j;  // strict: ties keep the narrower choice
      }
      d.indices.push_back(best);
      d.top.push_back(v[best]);
      if (a == 0 || v[best] < d.min_top) {
        d.min_top = v[best];
        d.weakest_axis = space.axes[a].name;
      }
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("DecideExtraction: ", e.what_without_backtrace()));
  }
  d.converged = d.min_top >= threshold;
  return d;
}

absl::StatusOr<Student> ExtractStudent(const model::HybridLM& ranked_parent,
                                       const SearchSpace& space, const std::vector<int>& indices) {
  Student s;
  TAILOR_ASSIGN_OR_RETURN(s.config, ChildConfig(ranked_parent->config(), space, indices));
  TAILOR_ASSIGN_OR_RETURN(s.model, model::SliceHybridLM(ranked_parent, s.config));
  return s;
}

}  // namespace tailor::autocompress
