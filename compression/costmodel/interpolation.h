#ifndef TAILOR_COMPRESSION_COSTMODEL_INTERPOLATION_H_
#define TAILOR_COMPRESSION_COSTMODEL_INTERPOLATION_H_

// Multilinear interpolation on a tensor grid of profiled points: the cost model's method
// for any width between profiled widths (docs/costmodel.md).
//
// The grid's axes are the distinct values of each coordinate among the points; every
// combination of axis values must be present (the profiler measures full grids). A query
// inside the grid is the multilinear blend of the 2^d corners of its cell, so it reproduces
// every profiled point exactly and is linear along each axis between neighbours. Outside an
// axis's range the nearest two nodes are extended linearly (the search space never asks for
// widths beyond the profiled extremes; this only keeps slightly out-of-grid queries sane).

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace tailor::costmodel {

class GridInterpolator {
 public:
  // points[i] is a coordinate vector (all the same dimension >= 1), values[i] its value.
  // Duplicate points are averaged. INVALID_ARGUMENT for empty input or mixed dimensions;
  // FAILED_PRECONDITION naming a missing grid node.
  static absl::StatusOr<GridInterpolator> Build(const std::vector<std::vector<double>>& points,
                                                const std::vector<double>& values);

  int dims() const { return static_cast<int>(axes_.size()); }
  const std::vector<std::vector<double>>& axes() const { return axes_; }
  // x.size() must equal dims().
  double Evaluate(const std::vector<double>& x) const;

 private:
  double Recurse(const std::vector<double>& x, int axis, int64_t offset) const;

  std::vector<std::vector<double>> axes_;  // ascending distinct values per axis
  std::vector<int64_t> strides_;           // row-major strides into values_
  std::vector<double> values_;
};

}  // namespace tailor::costmodel

#endif  // TAILOR_COMPRESSION_COSTMODEL_INTERPOLATION_H_
