#include "compression/entropy/gemv.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compression/entropy/quantize.h"

namespace tailor::entropy {
namespace {

// Adds w[t] * x[t] for columns c0..c0+n-1 into lane (column % 8). The aligned middle is a
// plain 8-wide loop the compiler turns into SIMD multiplies and adds (no reassociation).
inline void AccumulateSegment(const float* w, const float* x, int64_t c0, int64_t n,
                              float* acc) {
  int64_t t = 0;
  for (; t < n && ((c0 + t) & 7) != 0; ++t) acc[(c0 + t) & 7] += w[t] * x[t];
  float a[8];
  std::memcpy(a, acc, sizeof(a));
  for (; t + 8 <= n; t += 8) {
    for (int l = 0; l < 8; ++l) a[l] += w[t + l] * x[t + l];
  }
  std::memcpy(acc, a, sizeof(a));
  for (; t < n; ++t) acc[(c0 + t) & 7] += w[t] * x[t];
}

inline float Reduce(const float* a) {
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

// Walks rows in order as blocks of consecutive weights arrive.
class RowCursor {
 public:
  RowCursor(int64_t start, int64_t cols, const float* x, const float* scale, float* y)
      : row_(cols == 0 ? 0 : start / cols), col_(cols == 0 ? 0 : start % cols), cols_(cols),
        x_(x), scale_(scale), y_(y) {}

  void Feed(const float* w, int64_t n) {
    while (n > 0) {
      const int64_t seg = std::min(n, cols_ - col_);
      AccumulateSegment(w, x_ + col_, col_, seg, acc_);
      w += seg;
      n -= seg;
      col_ += seg;
      if (col_ == cols_) {
        const float sum = Reduce(acc_);
        y_[row_] = scale_ != nullptr ? sum * scale_[row_] : sum;
        std::fill(acc_, acc_ + 8, 0.0f);
        ++row_;
        col_ = 0;
      }
    }
  }

 private:
  int64_t row_, col_, cols_;
  const float* x_;
  const float* scale_;
  float* y_;
  float acc_[8] = {0, 0, 0, 0, 0, 0, 0, 0};
};

// Plane values of one weight -> float, per dtype (planes are little-endian bytes).
template <DType D>
inline void ToFloat(const uint8_t* const* v, int64_t n, float* out) {
  if constexpr (D == DType::kF32) {
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t bits = uint32_t{v[0][i]} | (uint32_t{v[1][i]} << 8) |
                            (uint32_t{v[2][i]} << 16) | (uint32_t{v[3][i]} << 24);
      std::memcpy(&out[i], &bits, 4);
    }
  } else if constexpr (D == DType::kBF16) {
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t bits = (uint32_t{v[0][i]} | (uint32_t{v[1][i]} << 8)) << 16;
      std::memcpy(&out[i], &bits, 4);
    }
  } else if constexpr (D == DType::kInt8) {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<int8_t>(v[0][i]));
  } else if constexpr (D == DType::kFP8) {
    const float* lut = Fp8E4M3Table();
    for (int64_t i = 0; i < n; ++i) out[i] = lut[v[0][i]];
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<int>(v[0][i] ^ 8) - 8);
  }
}

inline void UnpackNibbles(const uint8_t* packed, int64_t first, int64_t n, uint8_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t w = first + i;
    out[i] = (w & 1) ? (packed[w / 2] >> 4) : (packed[w / 2] & 0xF);
  }
}

template <typename Fn>
absl::Status ParallelFor(int64_t units, int threads, Fn fn) {
  threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, units)));
  std::vector<absl::Status> status(threads);
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) {
    pool.emplace_back([&, t] { status[t] = fn(units * t / threads, units * (t + 1) / threads); });
  }
  status[0] = fn(0, units / threads);
  for (auto& th : pool) th.join();
  for (const auto& s : status) TAILOR_RETURN_IF_ERROR(s);
  return absl::OkStatus();
}

template <DType D>
absl::Status DenseRows(const TensorView& w, const float* x, const float* scale, float* y,
                       int64_t r0, int64_t r1) {
  constexpr int np = D == DType::kF32 ? 4 : D == DType::kBF16 ? 2 : 1;
  uint8_t planes[np][kDecodeBlock];
  const uint8_t* v[np];
  for (int p = 0; p < np; ++p) v[p] = planes[p];
  float wbuf[kDecodeBlock];
  RowCursor cursor(r0 * w.cols, w.cols, x, scale, y);
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t c = 0; c < w.cols; c += kDecodeBlock) {
      const int64_t m = std::min<int64_t>(kDecodeBlock, w.cols - c);
      const int64_t first = r * w.cols + c;
      if constexpr (D == DType::kInt4) {
        UnpackNibbles(w.data.data(), first, m, planes[0]);
      } else {
        const uint8_t* src = w.data.data() + first * np;
        for (int64_t i = 0; i < m; ++i) {
          for (int p = 0; p < np; ++p) planes[p][i] = src[i * np + p];
        }
      }
      ToFloat<D>(v, m, wbuf);
      cursor.Feed(wbuf, m);
    }
  }
  return absl::OkStatus();
}

template <DType D>
absl::Status FusedChunks(const CodedTensor& t, const float* x, const float* scale, float* y,
                         int64_t c_begin, int64_t c_end) {
  constexpr int np = D == DType::kF32 ? 4 : D == DType::kBF16 ? 2 : 1;
  if (c_begin >= c_end) return absl::OkStatus();
  uint8_t planes[np][kDecodeBlock];
  const uint8_t* v[np];
  float wbuf[kDecodeBlock];
  ChunkDecoder dec[np];
  int64_t start, count;
  ChunkExtent(t.geometry, t.rows, t.cols, t.config.chunk_width, c_begin, &start, &count);
  RowCursor cursor(start, t.cols, x, scale, y);
  for (int64_t c = c_begin; c < c_end; ++c) {
    ChunkExtent(t.geometry, t.rows, t.cols, t.config.chunk_width, c, &start, &count);
    for (int p = 0; p < np; ++p) {
      if (t.planes[p].coded) TAILOR_RETURN_IF_ERROR(dec[p].Start(t, p, c, count));
    }
    for (int64_t pos = 0; pos < count; pos += kDecodeBlock) {
      const int64_t m = std::min<int64_t>(kDecodeBlock, count - pos);
      for (int p = 0; p < np; ++p) {
        const CodedPlane& plane = t.planes[p];
        if (plane.coded) {
          TAILOR_RETURN_IF_ERROR(dec[p].Next(m, planes[p]));
          v[p] = planes[p];
        } else if constexpr (D == DType::kInt4) {
          UnpackNibbles(t.bytes.data() + plane.raw_offset, start + pos, m, planes[p]);
          v[p] = planes[p];
        } else {
          v[p] = t.bytes.data() + plane.raw_offset + start + pos;  // raw planes read in place
        }
      }
      ToFloat<D>(v, m, wbuf);
      cursor.Feed(wbuf, m);
    }
    for (int p = 0; p < np; ++p) {
      if (t.planes[p].coded) TAILOR_RETURN_IF_ERROR(dec[p].Finish());
    }
  }
  return absl::OkStatus();
}

// Calls fn(values, n) for the weights [first, first + count) of dense storage, in order, in
// blocks of at most kDecodeBlock floats.
template <DType D, typename Fn>
absl::Status WalkDense(const TensorView& w, int64_t first, int64_t count, Fn&& fn) {
  constexpr int np = D == DType::kF32 ? 4 : D == DType::kBF16 ? 2 : 1;
  uint8_t planes[np][kDecodeBlock];
  const uint8_t* v[np];
  for (int p = 0; p < np; ++p) v[p] = planes[p];
  float wbuf[kDecodeBlock];
  for (int64_t pos = 0; pos < count; pos += kDecodeBlock) {
    const int64_t m = std::min<int64_t>(kDecodeBlock, count - pos);
    if constexpr (D == DType::kInt4) {
      UnpackNibbles(w.data.data(), first + pos, m, planes[0]);
    } else {
      const uint8_t* src = w.data.data() + (first + pos) * np;
      for (int64_t i = 0; i < m; ++i) {
        for (int p = 0; p < np; ++p) planes[p][i] = src[i * np + p];
      }
    }
    ToFloat<D>(v, m, wbuf);
    fn(wbuf, m);
  }
  return absl::OkStatus();
}

// Index of the chunk holding weight `index` (chunks never straddle a partial row).
int64_t ChunkOf(const CodedTensor& t, int64_t index) {
  const ChunkGeometry& g = t.geometry;
  const int64_t row = index / t.cols;
  if (g.chunks_per_row > 0) return row * g.chunks_per_row + (index % t.cols) / t.config.chunk_width;
  return row / g.rows_per_chunk;
}

// The coded counterpart of WalkDense: decodes the chunks overlapping the range from their
// start and hands over only the weights inside it.
template <DType D, typename Fn>
absl::Status WalkCoded(const CodedTensor& t, int64_t first, int64_t count, Fn&& fn) {
  constexpr int np = D == DType::kF32 ? 4 : D == DType::kBF16 ? 2 : 1;
  if (count <= 0) return absl::OkStatus();
  uint8_t planes[np][kDecodeBlock];
  const uint8_t* v[np];
  float wbuf[kDecodeBlock];
  ChunkDecoder dec[np];
  const int64_t end = first + count;
  for (int64_t c = ChunkOf(t, first); c < t.geometry.num_chunks; ++c) {
    int64_t start, n;
    ChunkExtent(t.geometry, t.rows, t.cols, t.config.chunk_width, c, &start, &n);
    if (start >= end) break;
    for (int p = 0; p < np; ++p) {
      if (t.planes[p].coded) TAILOR_RETURN_IF_ERROR(dec[p].Start(t, p, c, n));
    }
    int64_t pos = 0;
    for (; pos < n && start + pos < end; pos += kDecodeBlock) {
      const int64_t m = std::min<int64_t>(kDecodeBlock, n - pos);
      for (int p = 0; p < np; ++p) {
        const CodedPlane& plane = t.planes[p];
        if (plane.coded) {
          TAILOR_RETURN_IF_ERROR(dec[p].Next(m, planes[p]));
          v[p] = planes[p];
        } else if constexpr (D == DType::kInt4) {
          UnpackNibbles(t.bytes.data() + plane.raw_offset, start + pos, m, planes[p]);
          v[p] = planes[p];
        } else {
          v[p] = t.bytes.data() + plane.raw_offset + start + pos;
        }
      }
      // Only the overlap with [first, end) is converted and handed on.
      const int64_t lo = std::max<int64_t>(first, start + pos) - (start + pos);
      const int64_t hi = std::min<int64_t>(end, start + pos + m) - (start + pos);
      if (lo >= hi) continue;
      const uint8_t* vs[np];
      for (int p = 0; p < np; ++p) vs[p] = v[p] + lo;
      ToFloat<D>(vs, hi - lo, wbuf);
      fn(wbuf, hi - lo);
    }
    // A chunk read to its end is checked like in FusedGemv; one cut short cannot be.
    if (pos >= n) {
      for (int p = 0; p < np; ++p) {
        if (t.planes[p].coded) TAILOR_RETURN_IF_ERROR(dec[p].Finish());
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckBlock(int64_t tensor_rows, int64_t tensor_cols, int64_t first, int64_t count) {
  if (first < 0 || count < 0 || first + count > tensor_rows * tensor_cols) {
    return absl::OutOfRangeError(absl::StrCat("weights [", first, ", ", first + count,
                                              ") outside a tensor of ",
                                              tensor_rows * tensor_cols));
  }
  return absl::OkStatus();
}

template <typename Walk>
absl::Status DispatchDType(DType dtype, Walk walk) {
  switch (dtype) {
    case DType::kF32: return walk(std::integral_constant<DType, DType::kF32>());
    case DType::kBF16: return walk(std::integral_constant<DType, DType::kBF16>());
    case DType::kInt8: return walk(std::integral_constant<DType, DType::kInt8>());
    case DType::kInt4: return walk(std::integral_constant<DType, DType::kInt4>());
    case DType::kFP8: return walk(std::integral_constant<DType, DType::kFP8>());
  }
  return absl::InvalidArgumentError("unknown dtype");
}

}  // namespace

absl::Status DenseGemvBlock(const TensorView& w, int64_t first, int64_t rows, int64_t cols,
                            const float* x, const float* scale, float* y) {
  TAILOR_RETURN_IF_ERROR(ValidateView(w));
  TAILOR_RETURN_IF_ERROR(CheckBlock(w.rows, w.cols, first, rows * cols));
  RowCursor cursor(0, cols, x, scale, y);
  return DispatchDType(w.dtype, [&](auto d) {
    return WalkDense<decltype(d)::value>(w, first, rows * cols,
                                         [&](const float* v, int64_t n) { cursor.Feed(v, n); });
  });
}

absl::Status FusedGemvBlock(const CodedTensor& t, int64_t first, int64_t rows, int64_t cols,
                            const float* x, const float* scale, float* y) {
  TAILOR_RETURN_IF_ERROR(CheckBlock(t.rows, t.cols, first, rows * cols));
  RowCursor cursor(0, cols, x, scale, y);
  return DispatchDType(t.dtype, [&](auto d) {
    return WalkCoded<decltype(d)::value>(t, first, rows * cols,
                                         [&](const float* v, int64_t n) { cursor.Feed(v, n); });
  });
}

absl::Status DenseValues(const TensorView& w, int64_t first, int64_t count, float* out) {
  TAILOR_RETURN_IF_ERROR(ValidateView(w));
  TAILOR_RETURN_IF_ERROR(CheckBlock(w.rows, w.cols, first, count));
  return DispatchDType(w.dtype, [&](auto d) {
    return WalkDense<decltype(d)::value>(w, first, count, [&](const float* v, int64_t n) {
      std::memcpy(out, v, n * sizeof(float));
      out += n;
    });
  });
}

absl::Status FusedValues(const CodedTensor& t, int64_t first, int64_t count, float* out) {
  TAILOR_RETURN_IF_ERROR(CheckBlock(t.rows, t.cols, first, count));
  return DispatchDType(t.dtype, [&](auto d) {
    return WalkCoded<decltype(d)::value>(t, first, count, [&](const float* v, int64_t n) {
      std::memcpy(out, v, n * sizeof(float));
      out += n;
    });
  });
}

absl::Status DenseGemv(const TensorView& w, const float* x, const float* scale, float* y,
                       int threads) {
  TAILOR_RETURN_IF_ERROR(ValidateView(w));
  auto run = [&](auto fn) {
    return ParallelFor(w.rows, threads,
                       [&](int64_t r0, int64_t r1) { return fn(w, x, scale, y, r0, r1); });
  };
  switch (w.dtype) {
    case DType::kF32: return run(DenseRows<DType::kF32>);
    case DType::kBF16: return run(DenseRows<DType::kBF16>);
    case DType::kInt8: return run(DenseRows<DType::kInt8>);
    case DType::kInt4: return run(DenseRows<DType::kInt4>);
    case DType::kFP8: return run(DenseRows<DType::kFP8>);
  }
  return absl::InvalidArgumentError("unknown dtype");
}

absl::Status FusedGemv(const CodedTensor& t, const float* x, const float* scale, float* y,
                       int threads) {
  // Threads split whole rows: with row-slice chunks a unit is one row (chunks_per_row
  // chunks), with row-group chunks a unit is one chunk.
  const ChunkGeometry& g = t.geometry;
  const int64_t per_unit = g.chunks_per_row > 0 ? g.chunks_per_row : 1;
  const int64_t units = g.chunks_per_row > 0 ? t.rows : g.num_chunks;
  auto run = [&](auto fn) {
    return ParallelFor(units, threads, [&](int64_t u0, int64_t u1) {
      return fn(t, x, scale, y, u0 * per_unit, u1 * per_unit);
    });
  };
  switch (t.dtype) {
    case DType::kF32: return run(FusedChunks<DType::kF32>);
    case DType::kBF16: return run(FusedChunks<DType::kBF16>);
    case DType::kInt8: return run(FusedChunks<DType::kInt8>);
    case DType::kInt4: return run(FusedChunks<DType::kInt4>);
    case DType::kFP8: return run(FusedChunks<DType::kFP8>);
  }
  return absl::InvalidArgumentError("unknown dtype");
}

}  // namespace tailor::entropy
