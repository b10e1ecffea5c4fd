#ifndef TAILOR_COMPRESSION_AUTOCOMPRESS_EXTRACT_H_
#define TAILOR_COMPRESSION_AUTOCOMPRESS_EXTRACT_H_

// Extraction (spec §1 Step 4): when, for every gate (choice axis), the top choice has
// probability >= threshold (paper: 0.95), take each gate's highest choice, build the
// student's config and slice its weights from the RANKED parent (prefix slicing), not
// from the temporary supernet weights.

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compression/autocompress/space.h"
#include "compression/model/hybrid_lm.h"

namespace tailor::autocompress {

inline constexpr double kExtractThreshold = 0.95;

struct ExtractionDecision {
  std::vector<int> indices;  // argmax per axis
  std::vector<double> top;   // top probability per axis
  double min_top = 1.0;      // smallest of `top` (1 when there are no axes)
  bool converged = false;    // min_top >= threshold
  std::string weakest_axis;  // name of the axis with min_top (for progress reports)
};

// `probs[a]`: axis a's choice probabilities [n_a]. Ties take the lower (narrower) index.
absl::StatusOr<ExtractionDecision> DecideExtraction(const SearchSpace& space,
                                                    const std::vector<at::Tensor>& probs,
                                                    double threshold = kExtractThreshold);

struct Student {
  model::HybridConfig config;
  model::HybridLM model{nullptr};
};

// The student for `indices`, its weights the prefix of `ranked_parent` (already permuted
// by PermuteModel) that the config selects.
absl::StatusOr<Student> ExtractStudent(const model::HybridLM& ranked_parent,
                                       const SearchSpace& space, const std::vector<int>& indices);

}  // namespace tailor::autocompress

#endif  // TAILOR_COMPRESSION_AUTOCOMPRESS_EXTRACT_H_
