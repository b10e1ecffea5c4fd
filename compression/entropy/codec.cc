#include "compression/entropy/codec.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace tailor::entropy {
namespace {

constexpr char kMagic[4] = {'T', 'E', 'N', 'C'};
constexpr uint16_t kVersion = 1;
constexpr int kHeaderSize = 48;
constexpr uint32_t kStateLow = 1u << 16;  // rANS state lives in [2^16, 2^32)
constexpr int kLanes = 4;                 // interleaved rANS states per chunk
constexpr int kStateBytes = 4 * kLanes;

void PutU8(std::vector<uint8_t>* out, uint8_t v) { out->push_back(v); }
void PutU16(std::vector<uint8_t>* out, uint16_t v) {
  out->push_back(v & 0xFF);
  out->push_back(v >> 8);
}
void PutU32(std::vector<uint8_t>* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back((v >> (8 * i)) & 0xFF);
}
void PutU64(std::vector<uint8_t>* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back((v >> (8 * i)) & 0xFF);
}
uint16_t LoadU16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t LoadU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t LoadU64(const uint8_t* p) {
  return static_cast<uint64_t>(LoadU32(p)) | (static_cast<uint64_t>(LoadU32(p + 4)) << 32);
}

// Bounds-checked cursor over the container: every read says what it was reading when the
// input ends, so a truncated file gives a precise error.
class Reader {
 public:
  Reader(const uint8_t* data, int64_t size, int64_t pos) : data_(data), size_(size), pos_(pos) {}
  absl::Status Need(int64_t n, const char* what) const {
    if (n < 0 || pos_ + n > size_) {
      return absl::DataLossError(absl::StrCat("entropy container truncated reading ", what,
                                              " at byte ", pos_, " (size ", size_, ")"));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<uint8_t> U8(const char* what) {
    TAILOR_RETURN_IF_ERROR(Need(1, what));
    return data_[pos_++];
  }
  absl::StatusOr<uint16_t> U16(const char* what) {
    TAILOR_RETURN_IF_ERROR(Need(2, what));
    pos_ += 2;
    return LoadU16(data_ + pos_ - 2);
  }
  absl::StatusOr<uint32_t> U32(const char* what) {
    TAILOR_RETURN_IF_ERROR(Need(4, what));
    pos_ += 4;
    return LoadU32(data_ + pos_ - 4);
  }
  absl::StatusOr<uint64_t> U64(const char* what) {
    TAILOR_RETURN_IF_ERROR(Need(8, what));
    pos_ += 8;
    return LoadU64(data_ + pos_ - 8);
  }
  absl::Status Skip(int64_t n, const char* what) {
    TAILOR_RETURN_IF_ERROR(Need(n, what));
    pos_ += n;
    return absl::OkStatus();
  }
  int64_t pos() const { return pos_; }

 private:
  const uint8_t* data_;
  int64_t size_;
  int64_t pos_;
};

absl::Status Corrupt(const std::string& what) {
  return absl::DataLossError(absl::StrCat("corrupt entropy container: ", what));
}

// Normalised frequencies of one plane: kept symbols (ascending) plus the escape.
struct FreqTable {
  std::vector<uint16_t> symbols;
  std::vector<uint32_t> freqs;
  uint32_t escape_freq = 0;
};

// Scales counts to sum exactly to `total_slots`, every entry keeping at least one slot.
std::vector<uint32_t> Normalize(const std::vector<uint64_t>& counts, uint32_t total_slots) {
  const uint64_t total = std::accumulate(counts.begin(), counts.end(), uint64_t{0});
  std::vector<uint32_t> f(counts.size());
  int64_t sum = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const uint64_t scaled = (counts[i] * total_slots + total / 2) / total;
    f[i] = static_cast<uint32_t>(std::max<uint64_t>(1, scaled));
    sum += f[i];
  }
  int64_t diff = static_cast<int64_t>(total_slots) - sum;
  if (diff > 0) {
    const size_t top = std::max_element(counts.begin(), counts.end()) - counts.begin();
    f[top] += static_cast<uint32_t>(diff);
  }
  if (diff < 0) {
    // Rounding up the many 1-slot symbols overshoots; take back from the largest entries,
    // a little from each, which costs the least code length.
    std::vector<size_t> order(f.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return f[a] != f[b] ? f[a] > f[b] : a < b;
    });
    while (diff < 0) {
      for (size_t i : order) {
        if (diff == 0) break;
        const int64_t take =
            std::min<int64_t>({static_cast<int64_t>(f[i]) - 1, -diff,
                               std::max<int64_t>(1, f[i] / 8)});
        f[i] -= static_cast<uint32_t>(take);
        diff += take;
      }
    }
  }
  return f;
}

FreqTable BuildFreqTable(const std::vector<uint64_t>& hist, int table_log) {
  const uint32_t slots = 1u << table_log;
  const uint64_t total = std::accumulate(hist.begin(), hist.end(), uint64_t{0});
  FreqTable table;
  if (total == 0) {
    table.symbols = {0};
    table.freqs = {slots};
    return table;
  }
  std::vector<uint32_t> present;
  for (uint32_t s = 0; s < hist.size(); ++s) {
    if (hist[s] > 0) present.push_back(s);
  }
  std::sort(present.begin(), present.end(), [&](uint32_t a, uint32_t b) {
    return hist[a] != hist[b] ? hist[a] > hist[b] : a < b;
  });
  // A symbol earns a slot when its expected share is at least one slot; rarer ones go to the
  // escape stream, where they cost a fixed 16 bits plus the escape's code.
  std::vector<uint32_t> kept;
  for (uint32_t s : present) {
    if (hist[s] * slots >= total) kept.push_back(s);
  }
  bool escape = kept.size() < present.size() || kept.size() > slots;
  if (escape && kept.size() > slots - 1) kept.resize(slots - 1);
  if (kept.empty()) kept.push_back(present[0]);
  escape = kept.size() < present.size();
  std::sort(kept.begin(), kept.end());
  std::vector<uint64_t> counts;
  uint64_t kept_total = 0;
  for (uint32_t s : kept) {
    counts.push_back(hist[s]);
    kept_total += hist[s];
  }
  if (escape) counts.push_back(total - kept_total);
  std::vector<uint32_t> f = Normalize(counts, slots);
  for (size_t i = 0; i < kept.size(); ++i) {
    table.symbols.push_back(static_cast<uint16_t>(kept[i]));
    table.freqs.push_back(f[i]);
  }
  if (escape) table.escape_freq = f.back();
  return table;
}

double EntropyBits(const std::vector<uint64_t>& hist) {
  const double total =
      static_cast<double>(std::accumulate(hist.begin(), hist.end(), uint64_t{0}));
  if (total == 0) return 0.0;
  double bits = 0;
  for (uint64_t c : hist) {
    if (c > 0) bits -= c * std::log2(c / total);
  }
  return bits;
}

// Symbols of plane `plane` for one chunk (k values each, the last padded with zeros).
void ChunkSymbols(const TensorView& view, int plane, int k, int64_t start, int64_t count,
                  std::vector<uint32_t>* out) {
  const int bits = PlaneBits(view.dtype);
  out->clear();
  for (int64_t i = 0; i < count; i += k) {
    uint32_t sym = 0;
    for (int j = 0; j < k && i + j < count; ++j) {
      sym |= PlaneValue(view, plane, start + i + j) << (j * bits);
    }
    out->push_back(sym);
  }
}

}  // namespace

std::string DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kBF16: return "bf16";
    case DType::kInt8: return "int8";
    case DType::kInt4: return "int4";
    case DType::kFP8: return "fp8";
  }
  return "unknown";
}

int DTypeBits(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 32;
    case DType::kBF16: return 16;
    case DType::kInt8: return 8;
    case DType::kInt4: return 4;
    case DType::kFP8: return 8;
  }
  return 0;
}

int NumPlanes(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    default: return 1;
  }
}

int PlaneBits(DType dtype) { return dtype == DType::kInt4 ? 4 : 8; }

int64_t DenseBytes(DType dtype, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  return dtype == DType::kInt4 ? (n + 1) / 2 : n * DTypeBits(dtype) / 8;
}

uint32_t PlaneValue(const TensorView& view, int plane, int64_t index) {
  if (view.dtype == DType::kInt4) {
    const uint8_t b = view.data[index / 2];
    return (index & 1) ? (b >> 4) : (b & 0xF);
  }
  return view.data[index * NumPlanes(view.dtype) + plane];
}

absl::Status ValidateView(const TensorView& view) {
  if (DTypeBits(view.dtype) == 0) return absl::InvalidArgumentError("unknown dtype");
  if (view.rows < 0 || view.cols < 0 || view.rows > (int64_t{1} << 40) ||
      view.cols > (int64_t{1} << 40) || view.rows * view.cols > (int64_t{1} << 40)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad tensor shape ", view.rows, "x", view.cols));
  }
  const int64_t want = DenseBytes(view.dtype, view.rows, view.cols);
  if (static_cast<int64_t>(view.data.size()) != want) {
    return absl::InvalidArgumentError(absl::StrCat(DTypeName(view.dtype), " tensor ", view.rows,
                                                   "x", view.cols, " needs ", want,
                                                   " bytes, got ", view.data.size()));
  }
  return absl::OkStatus();
}

absl::Status ValidateConfig(DType dtype, const CodecConfig& c) {
  if (c.symbols_per_codeword < 1 || c.symbols_per_codeword > 4 ||
      c.symbols_per_codeword * PlaneBits(dtype) > 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("symbols_per_codeword ", c.symbols_per_codeword, " invalid for ",
                     DTypeName(dtype), " (1..4 and at most 16 bits per symbol)"));
  }
  if (c.table_log < 8 || c.table_log > 16) {
    return absl::InvalidArgumentError(absl::StrCat("table_log ", c.table_log, " not in 8..16"));
  }
  if (c.chunk_width < 64 || c.chunk_width > 65536 || c.chunk_width % 8 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk_width ", c.chunk_width, " not in 64..65536 or not a multiple of 8"));
  }
  return absl::OkStatus();
}

ChunkGeometry ComputeGeometry(int64_t rows, int64_t cols, int chunk_width) {
  ChunkGeometry g;
  if (rows == 0 || cols == 0) return g;
  if (cols >= chunk_width) {
    g.chunks_per_row = (cols + chunk_width - 1) / chunk_width;
    g.num_chunks = g.chunks_per_row * rows;
  } else {
    g.rows_per_chunk = std::max<int64_t>(1, chunk_width / cols);
    g.num_chunks = (rows + g.rows_per_chunk - 1) / g.rows_per_chunk;
  }
  return g;
}

void ChunkExtent(const ChunkGeometry& g, int64_t rows, int64_t cols, int chunk_width, int64_t c,
                 int64_t* start, int64_t* count) {
  if (g.chunks_per_row > 0) {
    const int64_t row = c / g.chunks_per_row;
    const int64_t col = (c % g.chunks_per_row) * chunk_width;
    *start = row * cols + col;
    *count = std::min<int64_t>(chunk_width, cols - col);
  } else {
    const int64_t row = c * g.rows_per_chunk;
    *start = row * cols;
    *count = std::min<int64_t>(g.rows_per_chunk, rows - row) * cols;
  }
}

uint32_t Crc32(const uint8_t* data, size_t size, uint32_t crc) {
  static const std::array<uint32_t, 256> kTable = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int j = 0; j < 8; ++j) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) crc = kTable[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

std::vector<uint64_t> PlaneHistogram(const TensorView& view, int plane, int k) {
  const int bits = PlaneBits(view.dtype);
  std::vector<uint64_t> hist(size_t{1} << (k * bits), 0);
  const int64_t n = view.rows * view.cols;
  for (int64_t i = 0; i < n; i += k) {
    uint32_t sym = 0;
    for (int j = 0; j < k && i + j < n; ++j) sym |= PlaneValue(view, plane, i + j) << (j * bits);
    ++hist[sym];
  }
  return hist;
}

double EmpiricalBitsPerWeight(const TensorView& view, int k) {
  const int64_t n = view.rows * view.cols;
  if (n == 0) return 0.0;
  double bits = 0;
  for (int p = 0; p < NumPlanes(view.dtype); ++p) bits += EntropyBits(PlaneHistogram(view, p, k));
  return bits / n;
}

int64_t PredictEncodedBytes(const TensorView& view, const CodecConfig& config) {
  const int k = config.symbols_per_codeword;
  const int64_t n = view.rows * view.cols;
  const ChunkGeometry g = ComputeGeometry(view.rows, view.cols, config.chunk_width);
  const int bits = PlaneBits(view.dtype);
  double total = kHeaderSize;
  for (int p = 0; p < NumPlanes(view.dtype); ++p) {
    const std::vector<uint64_t> hist = PlaneHistogram(view, p, k);
    total += 4;
    if (!config.code_all_planes &&
        !(n > 0 && EntropyBits(hist) < config.raw_plane_threshold * n * bits)) {
      total += 8 + DenseBytes(view.dtype, view.rows, view.cols) / NumPlanes(view.dtype);
      continue;
    }
    const FreqTable table = BuildFreqTable(hist, config.table_log);
    const double slots = static_cast<double>(1u << config.table_log);
    std::vector<uint32_t> freq(hist.size(), 0);
    for (size_t i = 0; i < table.symbols.size(); ++i) freq[table.symbols[i]] = table.freqs[i];
    double code_bits = 0;
    for (size_t s = 0; s < hist.size(); ++s) {
      if (hist[s] == 0) continue;
      code_bits += freq[s] > 0 ? hist[s] * std::log2(slots / freq[s])
                               : hist[s] * (std::log2(slots / table.escape_freq) + 16);
    }
    // 16 state bytes per chunk replace about 4 bytes of flushed code.
    total += 8 + 4.0 * table.symbols.size() + 4 + g.num_chunks * (8 + kStateBytes - 4) +
             code_bits / 8;
  }
  return static_cast<int64_t>(std::ceil(total));
}

namespace {

// The histogram over the chunk-aligned symbols (padding included) is what the coder sees.
std::vector<uint64_t> ChunkAlignedHistogram(const TensorView& view, const CodecConfig& config,
                                            const ChunkGeometry& g, int plane,
                                            std::vector<uint32_t>* syms) {
  const int k = config.symbols_per_codeword;
  std::vector<uint64_t> hist(size_t{1} << (k * PlaneBits(view.dtype)), 0);
  for (int64_t c = 0; c < g.num_chunks; ++c) {
    int64_t start, count;
    ChunkExtent(g, view.rows, view.cols, config.chunk_width, c, &start, &count);
    ChunkSymbols(view, plane, k, start, count, syms);
    for (uint32_t s : *syms) ++hist[s];
  }
  return hist;
}

// Raw planes keep the weight order: one byte per value, or packed nibbles for int4.
void AppendRawPlane(const TensorView& view, int plane, std::vector<uint8_t>* body) {
  const int64_t n = view.rows * view.cols;
  if (view.dtype == DType::kInt4) {
    PutU64(body, view.data.size());
    body->insert(body->end(), view.data.begin(), view.data.end());
  } else {
    PutU64(body, n);
    for (int64_t i = 0; i < n; ++i) body->push_back(PlaneValue(view, plane, i));
  }
}

// The encoder's view of a plane's table: per symbol its frequency (0 when it is escaped) and
// cumulative start slot; the escape takes the last slots.
struct EncodeTable {
  std::vector<uint32_t> freq;
  std::vector<uint32_t> start;
  uint32_t escape_freq = 0;
  uint32_t escape_start = 0;
};

// Writes the frequency table (symbol count, escape frequency, ascending symbol and
// frequency-1 pairs) and returns the encoder's view of it.
EncodeTable AppendFreqTable(const FreqTable& table, size_t alphabet, std::vector<uint8_t>* body) {
  EncodeTable enc;
  enc.freq.assign(alphabet, 0);
  enc.start.assign(alphabet, 0);
  uint32_t cum = 0;
  PutU32(body, static_cast<uint32_t>(table.symbols.size()));
  PutU32(body, table.escape_freq);
  for (size_t i = 0; i < table.symbols.size(); ++i) {
    PutU16(body, table.symbols[i]);
    PutU16(body, static_cast<uint16_t>(table.freqs[i] - 1));
    enc.freq[table.symbols[i]] = table.freqs[i];
    enc.start[table.symbols[i]] = cum;
    cum += table.freqs[i];
  }
  enc.escape_freq = table.escape_freq;
  enc.escape_start = cum;
  return enc;
}

// rANS-codes one chunk's symbols: `stream` gets the final lane states followed by the
// renormalisation words, `esc` the escaped symbols, both in the order the decoder reads them.
// `words` is scratch space reused across chunks.
void EncodeChunk(const std::vector<uint32_t>& syms, const EncodeTable& enc, int tl,
                 std::vector<uint16_t>* words, std::vector<uint8_t>* stream,
                 std::vector<uint16_t>* esc) {
  uint32_t x[kLanes] = {kStateLow, kStateLow, kStateLow, kStateLow};
  words->clear();
  // rANS is LIFO: encode backwards so the decoder reads forwards.
  for (int64_t i = static_cast<int64_t>(syms.size()) - 1; i >= 0; --i) {
    uint32_t& s = x[i % kLanes];
    uint32_t f = enc.freq[syms[i]];
    uint32_t st = enc.start[syms[i]];
    if (f == 0) {
      esc->push_back(static_cast<uint16_t>(syms[i]));
      f = enc.escape_freq;
      st = enc.escape_start;
    }
    const uint64_t x_max = static_cast<uint64_t>(f) << (32 - tl);
    if (s >= x_max) {
      words->push_back(static_cast<uint16_t>(s & 0xFFFF));
      s >>= 16;
    }
    s = ((s / f) << tl) + (s % f) + st;
  }
  std::reverse(esc->begin(), esc->end());
  for (int j = 0; j < kLanes; ++j) PutU32(stream, x[j]);
  for (auto it = words->rbegin(); it != words->rend(); ++it) PutU16(stream, *it);
}

// Encodes every chunk of a coded plane, then writes the chunk directory (stream size and
// escape count per chunk) followed by the concatenated streams and escapes.
void AppendCodedChunks(const TensorView& view, const CodecConfig& config, const ChunkGeometry& g,
                       int plane, const EncodeTable& enc, std::vector<uint32_t>* syms,
                       std::vector<uint8_t>* body) {
  std::vector<std::vector<uint8_t>> streams(g.num_chunks);
  std::vector<std::vector<uint16_t>> escapes(g.num_chunks);
  std::vector<uint16_t> words;
  for (int64_t c = 0; c < g.num_chunks; ++c) {
    int64_t start, count;
    ChunkExtent(g, view.rows, view.cols, config.chunk_width, c, &start, &count);
    ChunkSymbols(view, plane, config.symbols_per_codeword, start, count, syms);
    EncodeChunk(*syms, enc, config.table_log, &words, &streams[c], &escapes[c]);
  }
  PutU32(body, static_cast<uint32_t>(g.num_chunks));
  for (int64_t c = 0; c < g.num_chunks; ++c) {
    PutU32(body, static_cast<uint32_t>(streams[c].size()));
    PutU32(body, static_cast<uint32_t>(escapes[c].size()));
  }
  for (const auto& s : streams) body->insert(body->end(), s.begin(), s.end());
  for (const auto& e : escapes) {
    for (uint16_t v : e) PutU16(body, v);
  }
}

// Prepends the fixed 48-byte header (format in docs/entropy.md) to the plane sections.
std::vector<uint8_t> AssembleContainer(const TensorView& view, const CodecConfig& config,
                                       const std::vector<uint8_t>& body) {
  std::vector<uint8_t> out;
  out.reserve(kHeaderSize + body.size());
  out.insert(out.end(), kMagic, kMagic + 4);
  PutU16(&out, kVersion);
  PutU8(&out, static_cast<uint8_t>(view.dtype));
  PutU8(&out, static_cast<uint8_t>(config.symbols_per_codeword));
  PutU8(&out, static_cast<uint8_t>(config.table_log));
  PutU8(&out, static_cast<uint8_t>(NumPlanes(view.dtype)));
  PutU16(&out, 0);
  PutU32(&out, static_cast<uint32_t>(config.chunk_width));
  PutU64(&out, view.rows);
  PutU64(&out, view.cols);
  PutU64(&out, body.size());
  PutU32(&out, Crc32(body.data(), body.size()));
  PutU32(&out, Crc32(out.data(), out.size()));
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

}  // namespace

absl::StatusOr<std::vector<uint8_t>> Encode(const TensorView& view, const CodecConfig& config) {
  TAILOR_RETURN_IF_ERROR(ValidateView(view));
  TAILOR_RETURN_IF_ERROR(ValidateConfig(view.dtype, config));
  const int bits = PlaneBits(view.dtype);
  const ChunkGeometry g = ComputeGeometry(view.rows, view.cols, config.chunk_width);
  const int64_t n = view.rows * view.cols;

  std::vector<uint8_t> body;
  std::vector<uint32_t> syms;
  for (int plane = 0; plane < NumPlanes(view.dtype); ++plane) {
    const std::vector<uint64_t> hist = ChunkAlignedHistogram(view, config, g, plane, &syms);
    const double raw_bits = static_cast<double>(n) * bits;
    const bool coded = config.code_all_planes ||
                       (n > 0 && EntropyBits(hist) < config.raw_plane_threshold * raw_bits);
    PutU8(&body, coded ? 1 : 0);
    PutU8(&body, static_cast<uint8_t>(bits));
    PutU16(&body, 0);
    if (!coded) {
      AppendRawPlane(view, plane, &body);
      continue;
    }
    const FreqTable table = BuildFreqTable(hist, config.table_log);
    const EncodeTable enc = AppendFreqTable(table, hist.size(), &body);
    AppendCodedChunks(view, config, g, plane, enc, &syms, &body);
  }
  return AssembleContainer(view, config, body);
}

namespace {

// Checks the fixed header (size, magic, checksums, version, dtype, config, shape, body size)
// and fills t's dtype, config, shape and chunk geometry from it.
absl::Status ParseHeader(const ParseOptions& options, CodedTensor* t) {
  const uint8_t* d = t->bytes.data();
  const int64_t size = static_cast<int64_t>(t->bytes.size());
  if (size < kHeaderSize) {
    return absl::DataLossError(
        absl::StrCat("entropy container truncated: ", size, " bytes, header needs ", kHeaderSize));
  }
  if (std::memcmp(d, kMagic, 4) != 0) return Corrupt("bad magic");
  if (options.verify_checksums && Crc32(d, kHeaderSize - 4) != LoadU32(d + 44)) {
    return Corrupt("header checksum mismatch");
  }
  if (LoadU16(d + 4) != kVersion) {
    return Corrupt(absl::StrCat("unsupported version ", LoadU16(d + 4)));
  }
  const uint8_t dtype = d[6];
  if (dtype < 1 || dtype > 5) return Corrupt(absl::StrCat("unknown dtype ", dtype));
  t->dtype = static_cast<DType>(dtype);
  t->config.symbols_per_codeword = d[7];
  t->config.table_log = d[8];
  if (d[9] != NumPlanes(t->dtype)) return Corrupt(absl::StrCat("plane count ", d[9]));
  if (LoadU16(d + 10) != 0) return Corrupt("reserved header bits set");
  t->config.chunk_width = static_cast<int>(std::min<uint32_t>(LoadU32(d + 12), 1u << 30));
  if (absl::Status s = ValidateConfig(t->dtype, t->config); !s.ok()) {
    return Corrupt(s.message().data());
  }
  const uint64_t rows = LoadU64(d + 16), cols = LoadU64(d + 24), body_size = LoadU64(d + 32);
  if (rows > (uint64_t{1} << 40) || cols > (uint64_t{1} << 40) ||
      (cols != 0 && rows > (uint64_t{1} << 40) / cols)) {
    return Corrupt(absl::StrCat("shape ", rows, "x", cols));
  }
  t->rows = static_cast<int64_t>(rows);
  t->cols = static_cast<int64_t>(cols);
  if (body_size != static_cast<uint64_t>(size - kHeaderSize)) {
    return absl::DataLossError(absl::StrCat("entropy container body is ", size - kHeaderSize,
                                            " bytes, header says ", body_size));
  }
  if (options.verify_checksums && Crc32(d + kHeaderSize, body_size) != LoadU32(d + 40)) {
    return Corrupt("body checksum mismatch");
  }
  t->geometry = ComputeGeometry(t->rows, t->cols, t->config.chunk_width);
  return absl::OkStatus();
}

// Sizes every plane section is checked against, derived from the validated header.
struct PlaneLimits {
  int64_t n = 0;          // weights in the tensor
  uint32_t slots = 0;     // decode table slots, 2^table_log
  int bits = 0;           // bits per plane value
  uint64_t alphabet = 0;  // distinct symbols of k plane values
};

absl::Status ParseRawPlane(const CodedTensor& t, int p, const PlaneLimits& lim, Reader* r,
                           CodedPlane* plane) {
  TAILOR_ASSIGN_OR_RETURN(uint64_t raw, r->U64("raw plane size"));
  const int64_t want = t.dtype == DType::kInt4 ? (lim.n + 1) / 2 : lim.n;
  if (raw != static_cast<uint64_t>(want)) {
    return Corrupt(absl::StrCat("raw plane ", p, " size ", raw, ", expected ", want));
  }
  plane->raw_offset = r->pos();
  plane->raw_size = want;
  return r->Skip(want, "raw plane");
}

// Reads the frequency table and expands it into the decode table: each kept symbol fills a
// run of slots as long as its frequency, the escape fills the remaining slots.
absl::Status ParseFreqTable(int p, const PlaneLimits& lim, Reader* r, CodedPlane* plane) {
  TAILOR_ASSIGN_OR_RETURN(uint32_t num_symbols, r->U32("symbol count"));
  TAILOR_ASSIGN_OR_RETURN(uint32_t escape_freq, r->U32("escape frequency"));
  if (num_symbols == 0 || num_symbols > lim.slots || num_symbols > lim.alphabet) {
    return Corrupt(absl::StrCat("plane ", p, " has ", num_symbols, " symbols"));
  }
  if (escape_freq > lim.slots) return Corrupt("escape frequency above table size");
  TAILOR_RETURN_IF_ERROR(r->Need(int64_t{4} * num_symbols, "frequency table"));
  plane->table.resize(lim.slots);
  plane->is_escape.assign(lim.slots, 0);
  uint64_t cum = 0;
  int64_t prev = -1;
  for (uint32_t i = 0; i < num_symbols; ++i) {
    TAILOR_ASSIGN_OR_RETURN(uint16_t sym, r->U16("symbol"));
    TAILOR_ASSIGN_OR_RETURN(uint16_t fm1, r->U16("frequency"));
    const uint32_t f = uint32_t{fm1} + 1;
    if (sym <= prev || sym >= lim.alphabet) return Corrupt("symbols not ascending or out of range");
    prev = sym;
    if (cum + f > lim.slots) return Corrupt("frequencies exceed the table size");
    for (uint32_t j = 0; j < f; ++j) {
      plane->table[cum + j] = DecodeEntry{f, sym, static_cast<uint16_t>(j)};
    }
    cum += f;
  }
  if (cum + escape_freq != lim.slots) {
    return Corrupt(absl::StrCat("frequencies sum to ", cum + escape_freq, ", not ", lim.slots));
  }
  plane->has_escape = escape_freq > 0;
  for (uint32_t j = 0; j < escape_freq; ++j) {
    plane->table[cum + j] = DecodeEntry{escape_freq | 0x80000000u, 0, static_cast<uint16_t>(j)};
    plane->is_escape[cum + j] = 1;
  }
  plane->num_kept_symbols = num_symbols;
  return absl::OkStatus();
}

// Reads the chunk directory (stream size and escape count per chunk), checks each entry
// against the chunk's symbol count, then records where each chunk's stream and escapes start
// in the concatenated sections that follow.
absl::Status ParseChunkIndex(const CodedTensor& t, int p, Reader* r, CodedPlane* plane) {
  const int k = t.config.symbols_per_codeword;
  TAILOR_ASSIGN_OR_RETURN(uint32_t num_chunks, r->U32("chunk count"));
  if (num_chunks != t.geometry.num_chunks) {
    return Corrupt(absl::StrCat("chunk count ", num_chunks, ", geometry needs ",
                                t.geometry.num_chunks));
  }
  TAILOR_RETURN_IF_ERROR(r->Need(int64_t{8} * num_chunks, "chunk directory"));
  plane->stream_size.resize(num_chunks);
  plane->escape_count.resize(num_chunks);
  int64_t stream_total = 0, escape_total = 0;
  for (uint32_t c = 0; c < num_chunks; ++c) {
    TAILOR_ASSIGN_OR_RETURN(plane->stream_size[c], r->U32("stream size"));
    TAILOR_ASSIGN_OR_RETURN(plane->escape_count[c], r->U32("escape count"));
    int64_t start, count;
    ChunkExtent(t.geometry, t.rows, t.cols, t.config.chunk_width, c, &start, &count);
    const int64_t nsym = (count + k - 1) / k;
    if (plane->stream_size[c] < kStateBytes || plane->stream_size[c] % 2 != 0 ||
        plane->escape_count[c] > nsym || (!plane->has_escape && plane->escape_count[c] != 0)) {
      return Corrupt(absl::StrCat("chunk ", c, " of plane ", p, " has stream ",
                                  plane->stream_size[c], " bytes, ", plane->escape_count[c],
                                  " escapes"));
    }
    stream_total += plane->stream_size[c];
    escape_total += plane->escape_count[c];
  }
  int64_t off = r->pos();
  TAILOR_RETURN_IF_ERROR(r->Skip(stream_total, "streams"));
  plane->stream_offset.resize(num_chunks);
  for (uint32_t c = 0; c < num_chunks; ++c) {
    plane->stream_offset[c] = off;
    off += plane->stream_size[c];
  }
  off = r->pos();
  TAILOR_RETURN_IF_ERROR(r->Skip(2 * escape_total, "escape stream"));
  plane->escape_offset.resize(num_chunks);
  for (uint32_t c = 0; c < num_chunks; ++c) {
    plane->escape_offset[c] = off;
    off += 2 * int64_t{plane->escape_count[c]};
  }
  return absl::OkStatus();
}

// One plane section: mode, value bits and reserved bits, then a raw plane or a coded plane
// (frequency table, chunk index, streams).
absl::StatusOr<CodedPlane> ParsePlane(const CodedTensor& t, int p, const PlaneLimits& lim,
                                      Reader* r) {
  CodedPlane plane;
  TAILOR_ASSIGN_OR_RETURN(uint8_t mode, r->U8("plane mode"));
  TAILOR_ASSIGN_OR_RETURN(uint8_t vbits, r->U8("plane bits"));
  TAILOR_ASSIGN_OR_RETURN(uint16_t reserved, r->U16("plane reserved"));
  if (mode > 1) return Corrupt(absl::StrCat("plane ", p, " mode ", mode));
  if (vbits != lim.bits) return Corrupt(absl::StrCat("plane ", p, " value bits ", vbits));
  if (reserved != 0) return Corrupt("reserved plane bits set");
  plane.coded = mode == 1;
  plane.value_bits = vbits;
  if (!plane.coded) {
    TAILOR_RETURN_IF_ERROR(ParseRawPlane(t, p, lim, r, &plane));
    return plane;
  }
  TAILOR_RETURN_IF_ERROR(ParseFreqTable(p, lim, r, &plane));
  TAILOR_RETURN_IF_ERROR(ParseChunkIndex(t, p, r, &plane));
  return plane;
}

}  // namespace

absl::StatusOr<CodedTensor> Parse(std::vector<uint8_t> bytes, const ParseOptions& options) {
  CodedTensor t;
  t.bytes = std::move(bytes);
  TAILOR_RETURN_IF_ERROR(ParseHeader(options, &t));
  const int64_t size = static_cast<int64_t>(t.bytes.size());
  const int k = t.config.symbols_per_codeword;
  PlaneLimits lim;
  lim.n = t.rows * t.cols;
  lim.slots = 1u << t.config.table_log;
  lim.bits = PlaneBits(t.dtype);
  lim.alphabet = uint64_t{1} << (k * lim.bits);

  Reader r(t.bytes.data(), size, kHeaderSize);
  for (int p = 0; p < NumPlanes(t.dtype); ++p) {
    TAILOR_ASSIGN_OR_RETURN(CodedPlane plane, ParsePlane(t, p, lim, &r));
    t.planes.push_back(std::move(plane));
  }
  if (r.pos() != size) return Corrupt(absl::StrCat(size - r.pos(), " trailing bytes"));
  return t;
}

absl::Status ChunkDecoder::Start(const CodedTensor& t, int plane, int64_t chunk, int64_t count) {
  plane_ = &t.planes[plane];
  const uint8_t* base = t.bytes.data();
  p_ = base + plane_->stream_offset[chunk];
  end_ = p_ + plane_->stream_size[chunk];
  esc_ = base + plane_->escape_offset[chunk];
  esc_end_ = esc_ + 2 * int64_t{plane_->escape_count[chunk]};
  table_log_ = t.config.table_log;
  k_ = t.config.symbols_per_codeword;
  bits_ = plane_->value_bits;
  alphabet_ = 1u << (k_ * bits_);
  sym_index_ = 0;
  remaining_ = count;
  for (int j = 0; j < kLanes; ++j) {
    x_[j] = LoadU32(p_ + 4 * j);  // Parse guaranteed >= kStateBytes
    if (x_[j] < kStateLow) return Corrupt(absl::StrCat("chunk ", chunk, " initial state"));
  }
  p_ += kStateBytes;
  return absl::OkStatus();
}

namespace {

// One rANS decode step; false when the stream or the escape stream runs out or an escaped
// symbol is out of range. The escape flag rides in bit 31 of the frequency.
inline bool DecodeOne(uint32_t& x, const DecodeEntry* table, uint32_t mask, int table_log,
                      const uint8_t*& p, const uint8_t* end, const uint8_t*& esc,
                      const uint8_t* esc_end, uint32_t alphabet, uint32_t* sym) {
  const DecodeEntry e = table[x & mask];
  *sym = e.symbol;
  x = (e.freq & 0x1FFFF) * (x >> table_log) + e.rank;
  if (x < kStateLow) {
    if (p + 2 > end) return false;
    x = (x << 16) | LoadU16(p);
    p += 2;
  }
  if (e.freq >> 31) {
    if (esc + 2 > esc_end) return false;
    *sym = LoadU16(esc);
    esc += 2;
    if (*sym >= alphabet) return false;
  }
  return true;
}

}  // namespace

absl::Status ChunkDecoder::Next(int64_t n, uint8_t* out) {
  if (n > remaining_) return absl::InternalError("decoding past the end of a chunk");
  const uint32_t mask = (1u << table_log_) - 1;
  const DecodeEntry* table = plane_->table.data();
  const uint32_t value_mask = (1u << bits_) - 1;
  const int k = k_, bits = bits_, tl = table_log_;
  const uint8_t* p = p_;
  const uint8_t* esc = esc_;
  int64_t produced = 0;
  uint32_t sym;
  auto fail = [&] {
    return Corrupt(esc + 2 > esc_end_ ? "escape stream ends early or escaped symbol invalid"
                                      : "coded stream ends early or escaped symbol invalid");
  };
  // Head: reach lane 0 so the main loop can keep the four states in registers.
  while (produced < n && (sym_index_ & (kLanes - 1)) != 0) {
    if (!DecodeOne(x_[sym_index_ & 3], table, mask, tl, p, end_, esc, esc_end_, alphabet_, &sym)) {
      return fail();
    }
    ++sym_index_;
    const int take = static_cast<int>(std::min<int64_t>(k, n - produced));
    for (int j = 0; j < take; ++j) out[produced + j] = (sym >> (j * bits)) & value_mask;
    produced += take;
  }
  uint32_t x0 = x_[0], x1 = x_[1], x2 = x_[2], x3 = x_[3];
  const int64_t group = int64_t{kLanes} * k;
  bool ok = true;
  if (k == 1) {
    for (; ok && produced + group <= n; produced += group) {
      // Zeroed: a failed decode still stores this group (branch-free) before returning.
      uint32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      ok = DecodeOne(x0, table, mask, tl, p, end_, esc, esc_end_, alphabet_, &s0) &&
           DecodeOne(x1, table, mask, tl, p, end_, esc, esc_end_, alphabet_, &s1) &&
           DecodeOne(x2, table, mask, tl, p, end_, esc, esc_end_, alphabet_, &s2) &&
           DecodeOne(x3, table, mask, tl, p, end_, esc, esc_end_, alphabet_, &s3);
      out[produced] = s0;
      out[produced + 1] = s1;
      out[produced + 2] = s2;
      out[produced + 3] = s3;
      sym_index_ += 4;
    }
  } else {
    for (; ok && produced + group <= n; produced += group) {
      uint32_t s[4] = {0, 0, 0, 0};
      ok = DecodeOne(x0, table, mask, tl, p, end_, esc, esc_end_, alphabet_, &s[0]) &&
           DecodeOne(x1, table, mask, tl, p, end_, esc, esc_end_, alphabet_, &s[1]) &&
           DecodeOne(x2, table, mask, tl, p, end_, esc, esc_end_, alphabet_, &s[2]) &&
           DecodeOne(x3, table, mask, tl, p, end_, esc, esc_end_, alphabet_, &s[3]);
      for (int l = 0; l < 4; ++l) {
        for (int j = 0; j < k; ++j) out[produced + l * k + j] = (s[l] >> (j * bits)) & value_mask;
      }
      sym_index_ += 4;
    }
  }
  x_[0] = x0, x_[1] = x1, x_[2] = x2, x_[3] = x3;
  if (!ok) return fail();
  // Tail: fewer than four symbols left in this call.
  while (produced < n) {
    if (!DecodeOne(x_[sym_index_ & 3], table, mask, tl, p, end_, esc, esc_end_, alphabet_, &sym)) {
      return fail();
    }
    ++sym_index_;
    const int take = static_cast<int>(std::min<int64_t>(k, n - produced));
    for (int j = 0; j < take; ++j) out[produced + j] = (sym >> (j * bits)) & value_mask;
    produced += take;
  }
  p_ = p;
  esc_ = esc;
  remaining_ -= n;
  return absl::OkStatus();
}

absl::Status ChunkDecoder::Finish() const {
  if (remaining_ != 0) return absl::InternalError("chunk not fully decoded");
  for (int j = 0; j < kLanes; ++j) {
    if (x_[j] != kStateLow) return Corrupt("final rANS state mismatch");
  }
  if (p_ != end_) return Corrupt("unused bytes at the end of a coded stream");
  if (esc_ != esc_end_) return Corrupt("unused escape values");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint8_t>> Decode(const CodedTensor& t) {
  const int64_t n = t.rows * t.cols;
  std::vector<uint8_t> out(DenseBytes(t.dtype, t.rows, t.cols), 0);
  const int np = NumPlanes(t.dtype);
  std::vector<uint8_t> values;
  for (int p = 0; p < np; ++p) {
    const CodedPlane& plane = t.planes[p];
    if (!plane.coded) {
      const uint8_t* raw = t.bytes.data() + plane.raw_offset;
      if (t.dtype == DType::kInt4) {
        std::memcpy(out.data(), raw, plane.raw_size);
      } else {
        for (int64_t i = 0; i < n; ++i) out[i * np + p] = raw[i];
      }
      continue;
    }
    for (int64_t c = 0; c < t.geometry.num_chunks; ++c) {
      int64_t start, count;
      ChunkExtent(t.geometry, t.rows, t.cols, t.config.chunk_width, c, &start, &count);
      values.resize(count);
      ChunkDecoder dec;
      TAILOR_RETURN_IF_ERROR(dec.Start(t, p, c, count));
      TAILOR_RETURN_IF_ERROR(dec.Next(count, values.data()));
      TAILOR_RETURN_IF_ERROR(dec.Finish());
      if (t.dtype == DType::kInt4) {
        for (int64_t i = 0; i < count; ++i) {
          const int64_t w = start + i;
          out[w / 2] |= (w & 1) ? (values[i] << 4) : values[i];
        }
      } else {
        for (int64_t i = 0; i < count; ++i) out[(start + i) * np + p] = values[i];
      }
    }
  }
  return out;
}

}  // namespace tailor::entropy
