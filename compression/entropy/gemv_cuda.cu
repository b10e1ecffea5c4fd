#include "compression/entropy/gemv_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compression/entropy/quantize.h"

namespace tailor::entropy {
namespace {

// Mirrors codec.cc: 4 interleaved rANS states per chunk, state in [2^16, 2^32).
constexpr uint32_t kStateLow = 1u << 16;
constexpr int kLanes = 4;
constexpr int kStateBytes = 16;
constexpr int kThreads = 256;  // 64 chunks per block pass, 8 rows per block in the reductions
// Tables larger than this stay in global memory (read through L1): 2^16-slot tables would
// leave no room for a second block per SM.
constexpr size_t kMaxSharedTables = 96 * 1024;

// Corruption bits of the error flag.
enum : int {
  kErrInitialState = 1,
  kErrStreamEnds = 2,
  kErrEscapeEnds = 4,
  kErrEscapeSymbol = 8,
  kErrFinalState = 16,
  kErrUnusedBytes = 32,
};

struct DevChunk {
  uint64_t stream_offset;
  uint64_t escape_offset;
  uint32_t stream_size;
  uint32_t escape_bytes;
};

// Everything the kernels need, passed by value.
struct DevParams {
  const uint8_t* bytes;
  const uint2* tables[4];     // global tables per coded plane (null for raw planes)
  const DevChunk* dirs[4];    // per chunk directory per coded plane
  int64_t raw_offset[4];
  int coded[4];
  int k, table_log, bits;
  int smem_tables;            // 1: tables copied to shared memory per block
  int64_t rows, cols, chunk_width, chunks_per_row, rows_per_chunk, num_chunks;
  int slots;
  int* error;
};

__constant__ float kFp8Table[256];

template <int D>
__host__ __device__ constexpr int PlanesOf() {
  return D == static_cast<int>(DType::kF32) ? 4 : D == static_cast<int>(DType::kBF16) ? 2 : 1;
}

__device__ __forceinline__ uint32_t Load16(const uint8_t* p) {
  // Streams start at any byte offset of the container, so two byte loads (read-only path).
  return static_cast<uint32_t>(__ldg(p)) | (static_cast<uint32_t>(__ldg(p + 1)) << 8);
}
__device__ __forceinline__ uint32_t Load32(const uint8_t* p) {
  return Load16(p) | (Load16(p + 2) << 16);
}

// Plane values of one weight -> float, exactly gemv.cc's ToFloat.
template <int D>
__device__ __forceinline__ float ToFloatDev(const uint32_t* v, const float* fp8) {
  if constexpr (D == static_cast<int>(DType::kF32)) {
    return __uint_as_float(v[0] | (v[1] << 8) | (v[2] << 16) | (v[3] << 24));
  } else if constexpr (D == static_cast<int>(DType::kBF16)) {
    return __uint_as_float((v[0] | (v[1] << 8)) << 16);
  } else if constexpr (D == static_cast<int>(DType::kInt8)) {
    return static_cast<float>(static_cast<int8_t>(v[0]));
  } else if constexpr (D == static_cast<int>(DType::kFP8)) {
    return fp8[v[0]];
  } else {
    return static_cast<float>(static_cast<int>(v[0] ^ 8) - 8);
  }
}

// Pass 1. Four consecutive threads (a "group", inside one warp) decode one chunk: thread q
// owns rANS state q and so decodes symbols q, q+4, q+8, ... in lockstep with the others.
// The renormalisation words of one step are read in symbol order from the shared stream,
// so each thread finds its word's position from a ballot of which lanes need one (a
// prefix count); the escape stream likewise. Each thread multiplies its weights straight
// from registers and keeps one running sum per row; when it leaves a row it writes that
// sum to partials[row][slot] (slot = chunk-in-row * 4 + lane). No weight reaches memory.
// kStore (tests only) writes the decoded floats instead of multiplying.
template <int D, bool kStore>
__global__ void __launch_bounds__(kThreads)
    FusedDecodeKernel(DevParams P, const float* __restrict__ x, float* __restrict__ out) {
  constexpr int NP = PlanesOf<D>();
  extern __shared__ uint2 smem[];
  __shared__ float lut[D == static_cast<int>(DType::kFP8) ? 256 : 1];
  const uint32_t slots_per_table = 1u << P.table_log;
  const uint2* tab[NP];
  int t = 0;
#pragma unroll
  for (int p = 0; p < NP; ++p) {
    tab[p] = P.tables[p];
    if (P.coded[p] && P.smem_tables) {
      uint2* dst = smem + static_cast<size_t>(t) * slots_per_table;
      for (uint32_t i = threadIdx.x; i < slots_per_table; i += blockDim.x) dst[i] = P.tables[p][i];
      tab[p] = dst;
      ++t;
    }
  }
  if constexpr (D == static_cast<int>(DType::kFP8)) {
    // Shared, not __constant__: lanes index it with different values.
    for (int i = threadIdx.x; i < 256; i += blockDim.x) lut[i] = kFp8Table[i];
  }
  __syncthreads();

  const int lane4 = threadIdx.x & 3;
  const unsigned gshift = threadIdx.x & 28;  // first lane of the group inside the warp
  const unsigned gmask = 0xFu << gshift;
  const unsigned lower = (1u << lane4) - 1;
  const uint32_t mask = slots_per_table - 1;
  const int k = P.k, bits = P.bits, tl = P.table_log;
  const uint32_t value_mask = (1u << bits) - 1;
  const uint32_t alphabet = 1u << (k * bits);
  const int64_t cols = P.cols;
  const int64_t groups_per_block = blockDim.x / kLanes;
  // The loop bound is the same for the 4 threads of a group, so they stay converged for
  // the group-masked ballots.
  for (int64_t chunk = blockIdx.x * groups_per_block + threadIdx.x / kLanes;
       chunk < P.num_chunks; chunk += gridDim.x * groups_per_block) {
    int64_t start, count;
    if (P.chunks_per_row > 0) {
      const int64_t row = chunk / P.chunks_per_row;
      const int64_t col = (chunk % P.chunks_per_row) * P.chunk_width;
      start = row * cols + col;
      count = min(P.chunk_width, cols - col);
    } else {
      const int64_t row = chunk * P.rows_per_chunk;
      start = row * cols;
      count = min(P.rows_per_chunk, P.rows - row) * cols;
    }
    const int64_t nsym = (count + k - 1) / k;
    int err = 0;
    uint32_t st[NP], pos[NP], epos[NP], ssize[NP], esize[NP];
    const uint8_t* sbase[NP];
    const uint8_t* ebase[NP];
#pragma unroll
    for (int p = 0; p < NP; ++p) {
      st[p] = kStateLow;
      pos[p] = epos[p] = ssize[p] = esize[p] = 0;
      sbase[p] = ebase[p] = P.bytes;
      if (P.coded[p]) {
        const DevChunk d = P.dirs[p][chunk];
        sbase[p] = P.bytes + d.stream_offset;
        ebase[p] = P.bytes + d.escape_offset;
        ssize[p] = d.stream_size;  // >= kStateBytes, checked on the host
        esize[p] = d.escape_bytes;
        st[p] = Load32(sbase[p] + 4 * lane4);
        pos[p] = kStateBytes;
        if (st[p] < kStateLow) err |= kErrInitialState;
      }
    }
    const int64_t first_row = start / cols;
    const int64_t last_row = (start + count - 1) / cols;
    const int slot = P.chunks_per_row > 0
                         ? static_cast<int>(chunk % P.chunks_per_row) * kLanes + lane4
                         : lane4;
    int64_t cur_row = first_row;
    float acc = 0.0f;
    // Row/column of the first weight of this thread's next symbol.
    int64_t wr = first_row, wc = start - first_row * cols + lane4 * k;
    while (wc >= cols) {
      wc -= cols;
      ++wr;
    }
    for (int64_t j = 0; j * kLanes < nsym; ++j) {
      const int64_t i = j * kLanes + lane4;
      const bool active = i < nsym;
      uint32_t sym[NP];
#pragma unroll
      for (int p = 0; p < NP; ++p) {
        sym[p] = 0;
        if (!P.coded[p]) continue;  // uniform across the grid
        bool need = false, esc = false;
        uint32_t s = 0;
        if (active) {
          const uint2 e = tab[p][st[p] & mask];
          s = e.y & 0xFFFFu;
          st[p] = (e.x & 0x1FFFFu) * (st[p] >> tl) + (e.y >> 16);
          need = st[p] < kStateLow;
          esc = (e.x >> 31) != 0;
        }
        const unsigned nb = (__ballot_sync(gmask, need) >> gshift) & 0xFu;
        const unsigned eb = (__ballot_sync(gmask, esc) >> gshift) & 0xFu;
        if (need) {
          const uint32_t rp = pos[p] + 2 * __popc(nb & lower);
          if (rp + 2 <= ssize[p]) {
            st[p] = (st[p] << 16) | Load16(sbase[p] + rp);
          } else {
            err |= kErrStreamEnds;
          }
        }
        pos[p] += 2 * __popc(nb);
        if (esc) {
          const uint32_t q = epos[p] + 2 * __popc(eb & lower);
          if (q + 2 <= esize[p]) {
            s = Load16(ebase[p] + q);
            if (s >= alphabet) {
              err |= kErrEscapeSymbol;
              s = 0;
            }
          } else {
            err |= kErrEscapeEnds;
          }
        }
        epos[p] += 2 * __popc(eb);
        sym[p] = s;
      }
      if (active) {
        for (int jj = 0; jj < k; ++jj) {
          const int64_t in_chunk = i * k + jj;
          if (in_chunk >= count) break;
          const int64_t w = start + in_chunk;
          uint32_t v[NP];
#pragma unroll
          for (int p = 0; p < NP; ++p) {
            if (P.coded[p]) {
              v[p] = (sym[p] >> (jj * bits)) & value_mask;
            } else if constexpr (D == static_cast<int>(DType::kInt4)) {
              v[p] = (__ldg(P.bytes + P.raw_offset[p] + w / 2) >> (4 * (w & 1))) & 0xFu;
            } else {
              v[p] = __ldg(P.bytes + P.raw_offset[p] + w);
            }
          }
          const float f = ToFloatDev<D>(v, lut);
          if constexpr (kStore) {
            out[w] = f;
          } else {
            int64_t tr = wr, tc = wc + jj;
            while (tc >= cols) {
              tc -= cols;
              ++tr;
            }
            while (tr > cur_row) {
              out[cur_row * P.slots + slot] = acc;
              acc = 0.0f;
              ++cur_row;
            }
            // Separate multiply and add (no FMA contraction), like the CPU kernels.
            acc = __fadd_rn(acc, __fmul_rn(f, __ldg(x + tc)));
          }
        }
      }
      wc += kLanes * k;
      while (wc >= cols) {
        wc -= cols;
        ++wr;
      }
    }
    if constexpr (!kStore) {
      // Rows this thread ended in or never touched still get their (zero) partial.
      for (; cur_row <= last_row; ++cur_row) {
        out[cur_row * P.slots + slot] = acc;
        acc = 0.0f;
      }
    }
    if (err == 0) {
#pragma unroll
      for (int p = 0; p < NP; ++p) {
        if (!P.coded[p]) continue;
        if (st[p] != kStateLow) err |= kErrFinalState;
        if (pos[p] != ssize[p] || epos[p] != esize[p]) err |= kErrUnusedBytes;
      }
    }
    if (err != 0) atomicOr(P.error, err);
  }
}

// Pass 2: one warp per row sums the row's partials in a fixed order (lane l takes slots
// l, l+32, ... sequentially, then an xor-shuffle tree) and applies the scale after the sum.
__global__ void __launch_bounds__(kThreads)
    RowReduceKernel(const float* __restrict__ partials, int slots, int64_t rows,
                    const float* __restrict__ scale, float* __restrict__ y) {
  const int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;  // whole warps leave together
  float s = 0.0f;
  for (int i = lane; i < slots; i += 32) s = __fadd_rn(s, partials[row * slots + i]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s = __fadd_rn(s, __shfl_xor_sync(0xFFFFFFFFu, s, o));
  if (lane == 0) y[row] = scale != nullptr ? __fmul_rn(s, scale[row]) : s;
}

// Dense baseline: one warp per row. When a row is a multiple of 16 bytes each lane reads
// 16-byte vectors (coalesced 512 bytes per warp step); otherwise one weight per lane.
template <int D>
__device__ __forceinline__ float DenseWeight(const uint8_t* row_ptr, int64_t row_first, int64_t c,
                                             const float* fp8) {
  constexpr int NP = PlanesOf<D>();
  uint32_t v[NP];
  if constexpr (D == static_cast<int>(DType::kInt4)) {
    const int64_t w = row_first + c;  // packing runs across rows
    v[0] = (row_ptr[w / 2] >> (4 * (w & 1))) & 0xFu;
  } else {
#pragma unroll
    for (int p = 0; p < NP; ++p) v[p] = row_ptr[c * NP + p];
  }
  return ToFloatDev<D>(v, fp8);
}

template <int D>
__global__ void __launch_bounds__(kThreads)
    DenseGemvKernel(const uint8_t* __restrict__ w, int64_t rows, int64_t cols,
                    const float* __restrict__ x, const float* __restrict__ scale,
                    float* __restrict__ y) {
  constexpr int NP = PlanesOf<D>();
  __shared__ float lut[D == static_cast<int>(DType::kFP8) ? 256 : 1];
  if constexpr (D == static_cast<int>(DType::kFP8)) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) lut[i] = kFp8Table[i];
    __syncthreads();
  }
  const int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  constexpr bool kNibbles = D == static_cast<int>(DType::kInt4);
  const int64_t row_bytes = kNibbles ? cols / 2 : cols * NP;
  float acc = 0.0f;
  if ((kNibbles ? cols % 32 == 0 : row_bytes % 16 == 0)) {
    constexpr int kPerVec = kNibbles ? 32 : 16 / NP;
    const uint4* rv = reinterpret_cast<const uint4*>(w + row * row_bytes);
    const int64_t vecs = row_bytes / 16;
    for (int64_t i = lane; i < vecs; i += 32) {
      const uint4 q = __ldg(rv + i);
      const uint8_t* b = reinterpret_cast<const uint8_t*>(&q);
      const int64_t c0 = i * kPerVec;
#pragma unroll
      for (int e = 0; e < kPerVec; ++e) {
        uint32_t v[NP];
        if constexpr (kNibbles) {
          v[0] = (b[e / 2] >> (4 * (e & 1))) & 0xFu;
        } else {
#pragma unroll
          for (int p = 0; p < NP; ++p) v[p] = b[e * NP + p];
        }
        acc = __fadd_rn(acc, __fmul_rn(ToFloatDev<D>(v, lut), __ldg(x + c0 + e)));
      }
    }
  } else {
    const uint8_t* base = kNibbles ? w : w + row * row_bytes;
    for (int64_t c = lane; c < cols; c += 32) {
      acc = __fadd_rn(acc, __fmul_rn(DenseWeight<D>(base, row * cols, c, lut), __ldg(x + c)));
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) acc = __fadd_rn(acc, __shfl_xor_sync(0xFFFFFFFFu, acc, o));
  if (lane == 0) y[row] = scale != nullptr ? __fmul_rn(acc, scale[row]) : acc;
}

absl::Status CudaError(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(e)));
}

#define TAILOR_CUDA_RETURN_IF_ERROR(expr, what)                      \
  do {                                                               \
    if (absl::Status s_ = CudaError((expr), what); !s_.ok()) return s_; \
  } while (0)

absl::Status Corrupt(const std::string& what) {
  return absl::DataLossError(absl::StrCat("corrupt entropy container (CUDA upload): ", what));
}

absl::Status UploadFp8Table() {
  static const cudaError_t once =
      cudaMemcpyToSymbol(kFp8Table, Fp8E4M3Table(), 256 * sizeof(float));
  return CudaError(once, "copying the fp8 table");
}

DevParams MakeParams(const CudaCodedMatrix& w) {
  DevParams P{};
  P.bytes = static_cast<const uint8_t*>(w.bytes.get());
  const uint2* tables = static_cast<const uint2*>(w.tables.get());
  const DevChunk* dirs = static_cast<const DevChunk*>(w.directory.get());
  const size_t slots = size_t{1} << w.config.table_log;
  int t = 0;
  for (int p = 0; p < 4; ++p) {
    P.tables[p] = nullptr;
    P.dirs[p] = nullptr;
    P.coded[p] = p < w.num_planes && w.plane_coded[p];
    P.raw_offset[p] = w.raw_offset[p];
    if (P.coded[p]) {
      P.tables[p] = tables + t * slots;
      P.dirs[p] = dirs + t * w.geometry.num_chunks;
      ++t;
    }
  }
  P.k = w.config.symbols_per_codeword;
  P.table_log = w.config.table_log;
  P.bits = PlaneBits(w.dtype);
  P.smem_tables = t * slots * sizeof(uint2) <= kMaxSharedTables ? 1 : 0;
  P.rows = w.rows;
  P.cols = w.cols;
  P.chunk_width = w.config.chunk_width;
  P.chunks_per_row = w.geometry.chunks_per_row;
  P.rows_per_chunk = w.geometry.rows_per_chunk;
  P.num_chunks = w.geometry.num_chunks;
  P.slots = w.partial_slots;
  P.error = static_cast<int*>(w.error.get());
  return P;
}

template <int D, bool kStore>
absl::Status LaunchDecode(const CudaCodedMatrix& w, const float* x, float* out,
                          cudaStream_t stream) {
  const DevParams P = MakeParams(w);
  int coded = 0;
  for (int p = 0; p < 4; ++p) coded += P.coded[p];
  const size_t smem =
      P.smem_tables ? coded * (size_t{1} << P.table_log) * sizeof(uint2) : 0;
  auto kernel = FusedDecodeKernel<D, kStore>;
  TAILOR_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(smem)),
      "setting the shared-memory size");
  // Enough blocks to fill the device, no more: each block loads the tables once and then
  // walks chunks grid-stride, so extra blocks would only reload tables.
  int device = 0, sms = 0, per_sm = 0;
  TAILOR_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device), "cudaGetDevice");
  TAILOR_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "SM count");
  TAILOR_CUDA_RETURN_IF_ERROR(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem),
      "occupancy");
  const int64_t needed = (P.num_chunks + kThreads / kLanes - 1) / (kThreads / kLanes);
  const int64_t blocks = std::max<int64_t>(
      1, std::min<int64_t>(needed, static_cast<int64_t>(sms) * std::max(per_sm, 1)));
  kernel<<<static_cast<unsigned>(blocks), kThreads, smem, stream>>>(P, x, out);
  return CudaError(cudaGetLastError(), "launching the fused decode kernel");
}

template <bool kStore>
absl::Status DispatchDecode(const CudaCodedMatrix& w, const float* x, float* out,
                            cudaStream_t stream) {
  switch (w.dtype) {
    case DType::kF32: return LaunchDecode<static_cast<int>(DType::kF32), kStore>(w, x, out, stream);
    case DType::kBF16: return LaunchDecode<static_cast<int>(DType::kBF16), kStore>(w, x, out, stream);
    case DType::kInt8: return LaunchDecode<static_cast<int>(DType::kInt8), kStore>(w, x, out, stream);
    case DType::kInt4: return LaunchDecode<static_cast<int>(DType::kInt4), kStore>(w, x, out, stream);
    case DType::kFP8: return LaunchDecode<static_cast<int>(DType::kFP8), kStore>(w, x, out, stream);
  }
  return absl::InvalidArgumentError("unknown dtype");
}

}  // namespace

void CudaBuffer::Free::operator()(void* p) const { cudaFree(p); }

absl::StatusOr<CudaBuffer> CudaBuffer::Alloc(size_t bytes) {
  CudaBuffer b;
  void* p = nullptr;
  TAILOR_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, std::max<size_t>(bytes, 16)), "cudaMalloc");
  b.ptr_.reset(p);
  b.size_ = bytes;
  return b;
}

int CudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

absl::StatusOr<CudaCodedMatrix> UploadCoded(const CodedTensor& t) {
  // Parse validated the container, but a CodedTensor is a plain struct: re-check everything
  // the kernel trusts, so no field can make it read outside the uploaded bytes.
  if (absl::Status s = ValidateConfig(t.dtype, t.config); !s.ok()) return Corrupt(std::string(s.message()));
  if (t.rows < 0 || t.cols < 0 || t.rows > (int64_t{1} << 40) || t.cols > (int64_t{1} << 40) ||
      (t.cols != 0 && t.rows > (int64_t{1} << 40) / t.cols)) {
    return Corrupt(absl::StrCat("shape ", t.rows, "x", t.cols));
  }
  const ChunkGeometry g = ComputeGeometry(t.rows, t.cols, t.config.chunk_width);
  if (g.num_chunks != t.geometry.num_chunks || g.chunks_per_row != t.geometry.chunks_per_row ||
      g.rows_per_chunk != t.geometry.rows_per_chunk) {
    return Corrupt("chunk geometry does not match the shape");
  }
  const int np = NumPlanes(t.dtype);
  if (static_cast<int>(t.planes.size()) != np) return Corrupt("plane count");
  const int64_t size = t.size_bytes();
  const int64_t n = t.rows * t.cols;
  const int k = t.config.symbols_per_codeword;
  const uint32_t slots = 1u << t.config.table_log;
  const uint32_t alphabet = 1u << (k * PlaneBits(t.dtype));
  CudaCodedMatrix m;
  m.dtype = t.dtype;
  m.rows = t.rows;
  m.cols = t.cols;
  m.config = t.config;
  m.geometry = g;
  m.num_planes = np;
  m.container_bytes = size;
  std::vector<uint2> tables;
  std::vector<DevChunk> dirs;
  for (int p = 0; p < np; ++p) {
    const CodedPlane& plane = t.planes[p];
    m.plane_coded[p] = plane.coded;
    if (!plane.coded) {
      const int64_t want = t.dtype == DType::kInt4 ? (n + 1) / 2 : n;
      if (plane.raw_size != want || plane.raw_offset < 0 || plane.raw_offset > size - want) {
        return Corrupt(absl::StrCat("raw plane ", p, " outside the container"));
      }
      m.raw_offset[p] = plane.raw_offset;
      continue;
    }
    if (plane.table.size() != slots || plane.stream_offset.size() != static_cast<size_t>(g.num_chunks) ||
        plane.stream_size.size() != plane.stream_offset.size() ||
        plane.escape_offset.size() != plane.stream_offset.size() ||
        plane.escape_count.size() != plane.stream_offset.size()) {
      return Corrupt(absl::StrCat("plane ", p, " table or directory size"));
    }
    for (uint32_t s = 0; s < slots; ++s) {
      const DecodeEntry& e = plane.table[s];
      const uint32_t f = e.freq & 0x1FFFFu;
      if (f == 0 || f > slots || e.rank >= f || e.symbol >= alphabet) {
        return Corrupt(absl::StrCat("plane ", p, " table slot ", s));
      }
      tables.push_back(make_uint2(e.freq, uint32_t{e.symbol} | (uint32_t{e.rank} << 16)));
    }
    for (int64_t c = 0; c < g.num_chunks; ++c) {
      int64_t start, count;
      ChunkExtent(g, t.rows, t.cols, t.config.chunk_width, c, &start, &count);
      const int64_t so = plane.stream_offset[c], ss = plane.stream_size[c];
      const int64_t eo = plane.escape_offset[c], es = 2 * int64_t{plane.escape_count[c]};
      if (ss < kStateBytes || so < 0 || so > size - ss || eo < 0 || eo > size - es ||
          es > 2 * ((count + k - 1) / k)) {
        return Corrupt(absl::StrCat("chunk ", c, " of plane ", p, " outside the container"));
      }
      dirs.push_back(DevChunk{static_cast<uint64_t>(so), static_cast<uint64_t>(eo),
                              static_cast<uint32_t>(ss), static_cast<uint32_t>(es)});
    }
  }
  // Partial slots: 4 lanes per chunk of a row (row slices) or 4 per row (row groups).
  const int64_t slots_per_row = g.chunks_per_row > 0 ? kLanes * g.chunks_per_row : kLanes;
  if (slots_per_row > (int64_t{1} << 24)) return Corrupt("too many chunks per row");
  m.partial_slots = static_cast<int>(slots_per_row);
  if (t.dtype == DType::kFP8) {
    if (absl::Status s = UploadFp8Table(); !s.ok()) return s;
  }
  auto alloc = [](size_t bytes, CudaBuffer* out) -> absl::Status {
    absl::StatusOr<CudaBuffer> b = CudaBuffer::Alloc(bytes);
    if (!b.ok()) return b.status();
    *out = std::move(*b);
    return absl::OkStatus();
  };
  for (absl::Status s :
       {alloc(size, &m.bytes), alloc(tables.size() * sizeof(uint2), &m.tables),
        alloc(dirs.size() * sizeof(DevChunk), &m.directory),
        alloc(static_cast<size_t>(std::max<int64_t>(t.rows, 1)) * slots_per_row * sizeof(float),
              &m.partials),
        alloc(sizeof(int), &m.error)}) {
    if (!s.ok()) return s;
  }
  TAILOR_CUDA_RETURN_IF_ERROR(cudaMemcpy(m.bytes.get(), t.bytes.data(), size, cudaMemcpyHostToDevice),
                              "copying the container");
  TAILOR_CUDA_RETURN_IF_ERROR(cudaMemcpy(m.tables.get(), tables.data(), tables.size() * sizeof(uint2),
                                         cudaMemcpyHostToDevice),
                              "copying the tables");
  TAILOR_CUDA_RETURN_IF_ERROR(cudaMemcpy(m.directory.get(), dirs.data(), dirs.size() * sizeof(DevChunk),
                                         cudaMemcpyHostToDevice),
                              "copying the directory");
  TAILOR_CUDA_RETURN_IF_ERROR(cudaMemset(m.error.get(), 0, sizeof(int)), "clearing the flag");
  return m;
}

absl::Status FusedGemvCuda(const CudaCodedMatrix& w, const float* x_dev, const float* scale_dev,
                           float* y_dev, cudaStream_t stream) {
  if (w.rows == 0) return absl::OkStatus();
  if (w.cols == 0) {
    return CudaError(cudaMemsetAsync(y_dev, 0, w.rows * sizeof(float), stream), "zeroing y");
  }
  float* partials = static_cast<float*>(w.partials.get());
  if (absl::Status s = DispatchDecode<false>(w, x_dev, partials, stream); !s.ok()) return s;
  const int64_t blocks = (w.rows * 32 + kThreads - 1) / kThreads;
  RowReduceKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      partials, w.partial_slots, w.rows, scale_dev, y_dev);
  return CudaError(cudaGetLastError(), "launching the row reduction");
}

absl::Status DecodeValuesCuda(const CudaCodedMatrix& w, float* out_dev, cudaStream_t stream) {
  if (w.rows * w.cols == 0) return absl::OkStatus();
  return DispatchDecode<true>(w, nullptr, out_dev, stream);
}

absl::Status CudaDecodeStatus(const CudaCodedMatrix& w, cudaStream_t stream) {
  TAILOR_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  int flag = 0;
  TAILOR_CUDA_RETURN_IF_ERROR(cudaMemcpy(&flag, w.error.get(), sizeof(int), cudaMemcpyDeviceToHost),
                              "reading the error flag");
  if (flag == 0) return absl::OkStatus();
  TAILOR_CUDA_RETURN_IF_ERROR(cudaMemset(w.error.get(), 0, sizeof(int)), "clearing the flag");
  std::string what;
  const std::pair<int, const char*> names[] = {
      {kErrInitialState, "initial state"}, {kErrStreamEnds, "coded stream ends early"},
      {kErrEscapeEnds, "escape stream ends early"}, {kErrEscapeSymbol, "escaped symbol invalid"},
      {kErrFinalState, "final rANS state mismatch"}, {kErrUnusedBytes, "unused stream bytes"}};
  for (const auto& [bit, name] : names) {
    if (flag & bit) absl::StrAppend(&what, what.empty() ? "" : ", ", name);
  }
  return absl::DataLossError(absl::StrCat("corrupt entropy container (CUDA decode): ", what));
}

absl::StatusOr<CudaDenseMatrix> UploadDense(const TensorView& view) {
  if (absl::Status s = ValidateView(view); !s.ok()) return s;
  if (view.dtype == DType::kFP8) {
    if (absl::Status s = UploadFp8Table(); !s.ok()) return s;
  }
  CudaDenseMatrix m;
  m.dtype = view.dtype;
  m.rows = view.rows;
  m.cols = view.cols;
  absl::StatusOr<CudaBuffer> b = CudaBuffer::Alloc(view.data.size());
  if (!b.ok()) return b.status();
  m.data = std::move(*b);
  TAILOR_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(m.data.get(), view.data.data(), view.data.size(), cudaMemcpyHostToDevice),
      "copying the dense tensor");
  return m;
}

absl::Status DenseGemvCuda(const CudaDenseMatrix& w, const float* x_dev, const float* scale_dev,
                           float* y_dev, cudaStream_t stream) {
  if (w.rows == 0) return absl::OkStatus();
  const int64_t blocks = (w.rows * 32 + kThreads - 1) / kThreads;
  const uint8_t* d = static_cast<const uint8_t*>(w.data.get());
  switch (w.dtype) {
#define TAILOR_DENSE_CASE(T)                                                               \
  case DType::T:                                                                           \
    DenseGemvKernel<static_cast<int>(DType::T)>                                            \
        <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(d, w.rows, w.cols, x_dev, \
                                                                 scale_dev, y_dev);        \
    break;
    TAILOR_DENSE_CASE(kF32)
    TAILOR_DENSE_CASE(kBF16)
    TAILOR_DENSE_CASE(kInt8)
    TAILOR_DENSE_CASE(kInt4)
    TAILOR_DENSE_CASE(kFP8)
#undef TAILOR_DENSE_CASE
  }
  return CudaError(cudaGetLastError(), "launching the dense GEMV");
}

}  // namespace tailor::entropy
