#include "compression/costmodel/interpolation.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tailor::costmodel {

absl::StatusOr<GridInterpolator> GridInterpolator::Build(
    const std::vector<std::vector<double>>& points, const std::vector<double>& values) {
  if (points.empty() || points.size() != values.size()) {
    return absl::InvalidArgumentError(absl::StrCat("interpolation: ", points.size(),
                                                   " points and ", values.size(), " values"));
  }
  const size_t d = points.front().size();
  if (d == 0) return absl::InvalidArgumentError("interpolation: points have no coordinates");
  GridInterpolator g;
  g.axes_.resize(d);
  for (const std::vector<double>& p : points) {
    if (p.size() != d) {
      return absl::InvalidArgumentError(
          absl::StrCat("interpolation: mixed dimensions ", d, " and ", p.size()));
    }
    for (size_t a = 0; a < d; ++a) g.axes_[a].push_back(p[a]);
  }
  int64_t total = 1;
  g.strides_.assign(d, 1);
  for (size_t a = 0; a < d; ++a) {
    std::vector<double>& axis = g.axes_[a];
    std::sort(axis.begin(), axis.end());
    axis.erase(std::unique(axis.begin(), axis.end()), axis.end());
    total *= static_cast<int64_t>(axis.size());
  }
  for (int a = static_cast<int>(d) - 2; a >= 0; --a) {
    g.strides_[a] = g.strides_[a + 1] * static_cast<int64_t>(g.axes_[a + 1].size());
  }
  std::vector<double> sum(total, 0.0);
  std::vector<int> count(total, 0);
  for (size_t i = 0; i < points.size(); ++i) {
    int64_t offset = 0;
    for (size_t a = 0; a < d; ++a) {
      const auto it = std::lower_bound(g.axes_[a].begin(), g.axes_[a].end(), points[i][a]);
      offset += g.strides_[a] * (it - g.axes_[a].begin());
    }
    sum[offset] += values[i];
    ++count[offset];
  }
  g.values_.resize(total);
  for (int64_t o = 0; o < total; ++o) {
    if (count[o] == 0) {
      std::vector<std::string> coords;
      int64_t rest = o;
      for (size_t a = 0; a < d; ++a) {
        coords.push_back(absl::StrCat(g.axes_[a][rest / g.strides_[a]]));
        rest %= g.strides_[a];
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "interpolation: the grid has no point at (", absl::StrJoin(coords, ", "), ")"));
    }
    g.values_[o] = sum[o] / count[o];
  }
  return g;
}

double GridInterpolator::Evaluate(const std::vector<double>& x) const {
  return Recurse(x, 0, 0);
}

double GridInterpolator::Recurse(const std::vector<double>& x, int axis, int64_t offset) const {
  if (axis == dims()) return values_[offset];
  const std::vector<double>& nodes = axes_[axis];
  const int64_t stride = strides_[axis];
  if (nodes.size() == 1) return Recurse(x, axis + 1, offset);
  // The cell [lo, lo + 1] containing x (the first or last cell when x is outside).
  const auto it = std::upper_bound(nodes.begin(), nodes.end(), x[axis]);
  int64_t lo = (it - nodes.begin()) - 1;
  lo = std::clamp<int64_t>(lo, 0, static_cast<int64_t>(nodes.size()) - 2);
  const double w = (x[axis] - nodes[lo]) / (nodes[lo + 1] - nodes[lo]);
  // At a node w is exactly 0 and the far side is skipped, so profiled points come back
  // bit-for-bit.
  const double left = Recurse(x, axis + 1, offset + lo * stride);
  if (w == 0.0) return left;
  const double right = Recurse(x, axis + 1, offset + (lo + 1) * stride);
  if (w == 1.0) return right;
  return (1.0 - w) * left + w * right;
}

}  // namespace tailor::costmodel
