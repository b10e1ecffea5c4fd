#include "bench/entropy/png.h"

#include <cstdlib>
#include <fstream>

namespace tailor::bench {
namespace {

uint32_t Crc(const uint8_t* p, size_t n, uint32_t c = 0xFFFFFFFFu) {
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
  }
  return c;
}

void Be32(std::string& s, uint32_t v) {
  for (int i = 3; i >= 0; --i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void Chunk(std::string& out, const char* type, const std::string& data) {
  Be32(out, static_cast<uint32_t>(data.size()));
  std::string body(type, 4);
  body += data;
  out += body;
  Be32(out, Crc(reinterpret_cast<const uint8_t*>(body.data()), body.size()) ^ 0xFFFFFFFFu);
}

}  // namespace

void Canvas::Set(int x, int y, uint32_t color) {
  if (x < 0 || y < 0 || x >= w_ || y >= h_) return;
  uint8_t* p = &rgb_[3 * (y * w_ + x)];
  p[0] = (color >> 16) & 0xFF;
  p[1] = (color >> 8) & 0xFF;
  p[2] = color & 0xFF;
}

void Canvas::Line(int x0, int y0, int x1, int y1, uint32_t color) {
  const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
  const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
  int err = dx + dy;
  while (true) {
    Set(x0, y0, color);
    if (x0 == x1 && y0 == y1) break;
    const int e2 = 2 * err;
    if (e2 >= dy) { err += dy; x0 += sx; }
    if (e2 <= dx) { err += dx; y0 += sy; }
  }
}

void Canvas::Box(int cx, int cy, int half, uint32_t color) {
  for (int y = cy - half; y <= cy + half; ++y) {
    for (int x = cx - half; x <= cx + half; ++x) Set(x, y, color);
  }
}

bool Canvas::WritePng(const std::string& path) const {
  // Raw scanlines (filter byte 0) in stored deflate blocks of at most 65535 bytes.
  std::string raw;
  for (int y = 0; y < h_; ++y) {
    raw.push_back('\0');
    raw.append(reinterpret_cast<const char*>(&rgb_[3 * y * w_]), 3 * w_);
  }
  std::string z = "\x78\x01";
  uint32_t a = 1, b = 0;
  for (unsigned char c : raw) {
    a = (a + c) % 65521;
    b = (b + a) % 65521;
  }
  for (size_t pos = 0; pos < raw.size() || pos == 0;) {
    const size_t n = std::min<size_t>(65535, raw.size() - pos);
    const bool last = pos + n == raw.size();
    z.push_back(last ? 1 : 0);
    z.push_back(static_cast<char>(n & 0xFF));
    z.push_back(static_cast<char>(n >> 8));
    z.push_back(static_cast<char>(~n & 0xFF));
    z.push_back(static_cast<char>((~n >> 8) & 0xFF));
    z.append(raw, pos, n);
    pos += n;
    if (last) break;
  }
  Be32(z, (b << 16) | a);
  std::string png = "\x89PNG\r\n\x1a\n";
  std::string ihdr;
  Be32(ihdr, w_);
  Be32(ihdr, h_);
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);  // 8-bit RGB, no interlace
  Chunk(png, "IHDR", ihdr);
  Chunk(png, "IDAT", z);
  Chunk(png, "IEND", "");
  std::ofstream out(path, std::ios::binary);
  out.write(png.data(), static_cast<std::streamsize>(png.size()));
  return static_cast<bool>(out);
}

}  // namespace tailor::bench
