#ifndef TAILOR_COMPRESSION_ENTROPY_CODEC_H_
#define TAILOR_COMPRESSION_ENTROPY_CODEC_H_

// Lossless entropy coding of one weight tensor (issue #7, docs/entropy.md).
//
// A tensor is split into value planes (F32: 4 byte planes, BF16: low/high byte plane, int8:
// one byte plane, int4: one nibble plane). Each plane is either stored raw or coded with
// 4-way interleaved rANS (32-bit state, 16-bit renormalisation) over symbols of k
// consecutive plane values. The weights are cut into chunks (a slice of one row, or a group
// of whole rows) that decode independently, which is what lets the fused GEMV split work
// across threads. Symbols too rare to earn a table slot go to a per-chunk escape stream.
//
// No LibTorch here: the codec, the kernels and the autotuner build in seconds.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tailor::entropy {

// kFP8 is OCP e4m3 (bias 7, no infinities, S.1111.111 = NaN): one byte plane like int8, but
// the GEMV reads it through a 256-entry float table (quantize.h).
enum class DType : uint8_t { kF32 = 1, kBF16 = 2, kInt8 = 3, kInt4 = 4, kFP8 = 5 };

std::string DTypeName(DType dtype);
// Bits one weight occupies in the dense format.
int DTypeBits(DType dtype);
// Dense size of rows*cols weights (int4: two per byte, low nibble first, last byte padded).
int64_t DenseBytes(DType dtype, int64_t rows, int64_t cols);

// A dense row-major tensor in its storage format (little-endian).
struct TensorView {
  DType dtype = DType::kBF16;
  int64_t rows = 0;
  int64_t cols = 0;
  absl::Span<const uint8_t> data;
};
absl::Status ValidateView(const TensorView& view);

struct CodecConfig {
  int symbols_per_codeword = 1;  // k: 1..4 weights per symbol, k * plane bits <= 16
  int table_log = 12;            // decode table of 2^table_log slots, 8..16
  int chunk_width = 4096;        // weights per independently decodable chunk, 64..65536, %8
  // Planes whose k-symbol entropy is above this fraction of their raw bits are stored raw
  // (BF16 low mantissa bytes are near-uniform: coding them costs decode time, saves nothing).
  double raw_plane_threshold = 0.97;
  bool code_all_planes = false;  // tests: force every plane through the coder
};
absl::Status ValidateConfig(DType dtype, const CodecConfig& config);

// Plane layout of a dtype: number of planes and bits per plane value.
int NumPlanes(DType dtype);
int PlaneBits(DType dtype);
// Value of plane `plane` for weight `index` of a dense tensor.
uint32_t PlaneValue(const TensorView& view, int plane, int64_t index);

// Chunk geometry: chunks never straddle a partial row, so a row is owned by one thread.
struct ChunkGeometry {
  int64_t chunks_per_row = 0;  // > 0 when cols >= chunk_width (chunks are row slices)
  int64_t rows_per_chunk = 0;  // > 0 otherwise (chunks are groups of whole rows)
  int64_t num_chunks = 0;
};
ChunkGeometry ComputeGeometry(int64_t rows, int64_t cols, int chunk_width);
// First linear weight index and weight count of chunk c.
void ChunkExtent(const ChunkGeometry& g, int64_t rows, int64_t cols, int chunk_width,
                 int64_t c, int64_t* start, int64_t* count);

// One decode-table slot: symbol (kEscapeSymbol for the escape), its frequency, and the
// slot's rank inside the symbol's run (slot - cumulative start). Escape slots have bit 31
// of freq set (frequencies need 17 bits).
struct DecodeEntry {
  uint32_t freq;
  uint16_t symbol;
  uint16_t rank;
};
inline constexpr uint32_t kEscapeSymbol = 0xFFFFFFFFu;

// A parsed, validated container. Holds the bytes; plane sections refer into them.
struct CodedPlane {
  bool coded = false;
  int value_bits = 8;
  // raw planes
  int64_t raw_offset = 0;
  int64_t raw_size = 0;
  // coded planes
  bool has_escape = false;
  uint16_t escape_slot_symbol = 0;  // symbol id used in `table` for the escape
  std::vector<DecodeEntry> table;   // 2^table_log entries
  std::vector<uint8_t> is_escape;   // per slot: 1 when the slot decodes to the escape
  std::vector<int64_t> stream_offset;  // per chunk, absolute offset in bytes
  std::vector<uint32_t> stream_size;
  std::vector<int64_t> escape_offset;  // per chunk, absolute offset
  std::vector<uint32_t> escape_count;
  int64_t num_kept_symbols = 0;
};

struct CodedTensor {
  DType dtype = DType::kBF16;
  int64_t rows = 0;
  int64_t cols = 0;
  CodecConfig config;
  ChunkGeometry geometry;
  std::vector<CodedPlane> planes;
  std::vector<uint8_t> bytes;  // the whole container
  int64_t size_bytes() const { return static_cast<int64_t>(bytes.size()); }
  double bits_per_weight() const {
    return rows * cols == 0 ? 0.0 : 8.0 * bytes.size() / static_cast<double>(rows * cols);
  }
};

// Encodes a dense tensor into a container (format in docs/entropy.md).
absl::StatusOr<std::vector<uint8_t>> Encode(const TensorView& view, const CodecConfig& config);

struct ParseOptions {
  // The fuzz test turns this off to exercise the structural checks behind the checksums.
  bool verify_checksums = true;
};
// Parses and validates a container: every size, offset, table and count is checked, so
// decoding afterwards never reads out of bounds (stream contents are checked while decoding).
absl::StatusOr<CodedTensor> Parse(std::vector<uint8_t> bytes, const ParseOptions& options = {});

// Decodes back to the dense format (exact round trip).
absl::StatusOr<std::vector<uint8_t>> Decode(const CodedTensor& coded);

// Incremental decoder of one coded plane of one chunk (used by Decode and the fused GEMV).
class ChunkDecoder {
 public:
  // `count` is the number of weights of the chunk.
  absl::Status Start(const CodedTensor& t, int plane, int64_t chunk, int64_t count);
  // Writes the next n plane values (n a multiple of k unless it ends the chunk).
  absl::Status Next(int64_t n, uint8_t* out);
  // All symbols consumed: the states must be back at their initial value and the stream
  // exactly used up, which catches most corruption the table walk cannot.
  absl::Status Finish() const;

 private:
  const CodedPlane* plane_ = nullptr;
  const uint8_t* p_ = nullptr;
  const uint8_t* end_ = nullptr;
  const uint8_t* esc_ = nullptr;
  const uint8_t* esc_end_ = nullptr;
  uint32_t x_[4] = {0, 0, 0, 0};
  int64_t sym_index_ = 0;
  int64_t remaining_ = 0;
  int table_log_ = 0;
  int k_ = 1;
  int bits_ = 8;
  uint32_t alphabet_ = 0;
};

// Empirical Shannon entropy (bits per weight) of the symbols of k values of each plane,
// summed over planes; the size floor for a configuration.
double EmpiricalBitsPerWeight(const TensorView& view, int symbols_per_codeword);

// Symbol histogram of one plane (alphabet 2^(k*bits)).
std::vector<uint64_t> PlaneHistogram(const TensorView& view, int plane, int k);

// Container size predicted from the histograms (code lengths of the normalised table,
// escapes at 16 bits, tables, chunk directories and states) without encoding; the
// autotuner prunes with it.
int64_t PredictEncodedBytes(const TensorView& view, const CodecConfig& config);

uint32_t Crc32(const uint8_t* data, size_t size, uint32_t crc = 0);

}  // namespace tailor::entropy

#endif  // TAILOR_COMPRESSION_ENTROPY_CODEC_H_
