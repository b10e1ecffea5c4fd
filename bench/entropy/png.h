#ifndef TAILOR_BENCH_ENTROPY_PNG_H_
#define TAILOR_BENCH_ENTROPY_PNG_H_

// A minimal RGB PNG writer for the Pareto-frontier plot: stored (uncompressed) deflate
// blocks, so it needs no zlib; a plot of a few hundred KB is fine for a benchmark artifact.

#include <cstdint>
#include <string>
#include <vector>

namespace tailor::bench {

class Canvas {
 public:
  Canvas(int width, int height) : w_(width), h_(height), rgb_(3 * width * height, 255) {}
  void Set(int x, int y, uint32_t color);
  void Line(int x0, int y0, int x1, int y1, uint32_t color);
  void Box(int cx, int cy, int half, uint32_t color);
  bool WritePng(const std::string& path) const;
  int width() const { return w_; }
  int height() const { return h_; }

 private:
  int w_, h_;
  std::vector<uint8_t> rgb_;
};

}  // namespace tailor::bench

#endif  // TAILOR_BENCH_ENTROPY_PNG_H_
