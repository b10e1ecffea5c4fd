#include "cli/table.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "cli/format.h"

namespace tailor::cli {
namespace {

constexpr size_t kGap = 2;

std::string Sanitize(std::string s) {
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return s;
}

}  // namespace

Table::Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  for (std::string& c : cells) c = Sanitize(std::move(c));
  rows_.push_back(std::move(cells));
}

std::string Table::Render(size_t total_width) const {
  const size_t n = columns_.size();
  if (n == 0) return "";
  std::vector<size_t> widths(n);
  for (size_t c = 0; c < n; ++c) {
    size_t w = DisplayWidth(columns_[c].header);
    for (const auto& row : rows_) w = std::max(w, DisplayWidth(row[c]));
    if (columns_[c].max_width > 0) w = std::min(w, columns_[c].max_width);
    widths[c] = w;
  }
  if (total_width > 0) {
    size_t sum = kGap * (n - 1);
    for (size_t w : widths) sum += w;
    // Shrink the rightmost shrinkable columns first: they are the free text at the end.
    for (size_t c = n; c-- > 0 && sum > total_width;) {
      if (!columns_[c].shrinkable || widths[c] <= kMinShrunkWidth) continue;
      const size_t give = std::min(sum - total_width, widths[c] - kMinShrunkWidth);
      widths[c] -= give;
      sum -= give;
    }
  }

  std::string out;
  auto emit = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t c = 0; c < n; ++c) {
      const std::string cell = TruncateToWidth(cells[c], widths[c]);
      const size_t pad = widths[c] - DisplayWidth(cell);
      if (c > 0) line.append(kGap, ' ');
      if (columns_[c].align == Align::kRight) {
        line.append(pad, ' ');
        line += cell;
      } else {
        line += cell;
        line.append(pad, ' ');
      }
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  };
  std::vector<std::string> header;
  header.reserve(n);
  for (const Column& col : columns_) header.push_back(col.header);
  emit(header);
  for (const auto& row : rows_) emit(row);
  return out;
}

std::string RenderFields(const std::vector<std::pair<std::string, std::string>>& fields) {
  size_t key_width = 0;
  for (const auto& [k, v] : fields) key_width = std::max(key_width, DisplayWidth(k));
  std::string out;
  for (const auto& [k, v] : fields) {
    absl::StrAppend(&out, k, std::string(key_width - DisplayWidth(k) + 2, ' '),
                    v.empty() ? "-" : v, "\n");
  }
  return out;
}

}  // namespace tailor::cli
