#ifndef TAILOR_CLI_TABLE_H_
#define TAILOR_CLI_TABLE_H_

#include <string>
#include <utility>
#include <vector>

namespace tailor::cli {

enum class Align { kLeft, kRight };

struct Column {
  std::string header;
  Align align = Align::kLeft;
  // Cells wider than this are cut (ending in "…"); 0 = no limit.
  size_t max_width = 0;
  // When the whole table is wider than the width given to Render(), shrinkable columns give
  // up space (down to kMinShrunkWidth) before anything else is cut. Free text columns
  // (messages, errors) are shrinkable; ids and numbers are not, so they stay readable.
  bool shrinkable = false;
};

// A plain-text table: a header row and aligned cells separated by two spaces, with no
// trailing whitespace, so that output is stable in tests and easy to grep.
class Table {
 public:
  static constexpr size_t kMinShrunkWidth = 8;

  explicit Table(std::vector<Column> columns);

  // Missing cells are empty; cells past the last column are dropped. Control characters
  // (newlines, tabs, ANSI escapes from server messages) become spaces so rows stay one line.
  void AddRow(std::vector<std::string> cells);
  size_t num_rows() const { return rows_.size(); }

  // Every line ends in '\n'. total_width 0 = unlimited.
  std::string Render(size_t total_width = 0) const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// "key  value" lines with the keys padded to one column; empty values print as "-".
std::string RenderFields(const std::vector<std::pair<std::string, std::string>>& fields);

}  // namespace tailor::cli

#endif  // TAILOR_CLI_TABLE_H_
