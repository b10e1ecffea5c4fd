#include "methods/entropy_code/render.h"

#include "absl/strings/str_cat.h"
#include "cli/format.h"
#include "cli/table.h"

namespace tailor::methods {
namespace {

using cli::Align;
using cli::Column;
using cli::FormatBytes;
using cli::FormatCount;
using cli::FormatNumber;
using cli::RenderFields;
using cli::Table;

using google::protobuf::Struct;

double Num(const Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  return it == s.fields().end() ? 0.0 : it->second.number_value();
}

std::string Text(const Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  return it == s.fields().end() ? "-" : it->second.string_value();
}

bool Has(const Struct& s, const std::string& key) { return s.fields().contains(key); }

}  // namespace

std::string RenderEntropy(const v1::CampaignReport& r, const cli::RenderOptions& options) {
  auto it = r.details().fields().find("entropy");
  if (it == r.details().fields().end() || !it->second.has_struct_value()) return "";
  const Struct& e = it->second.struct_value();
  std::string out = "\nentropy coding\n";
  if (auto t = e.fields().find("tensors"); t != e.fields().end() && t->second.has_list_value()) {
    Table table({{"TENSOR"},
                 {"FORMAT"},
                 {"BITS/W", Align::kRight},
                 {"ENTROPY", Align::kRight},
                 {"CONFIG"},
                 {"GEMV µs", Align::kRight},
                 {"DENSE µs", Align::kRight}});
    for (const auto& v : t->second.list_value().values()) {
      const Struct& row = v.struct_value();
      table.AddRow({Text(row, "name"), Text(row, "dtype"), FormatNumber(Num(row, "bits_per_weight")),
                    FormatNumber(Num(row, "entropy_bits_per_weight")), Text(row, "config"),
                    FormatNumber(Num(row, "gemv_us"), 1), FormatNumber(Num(row, "dense_gemv_us"), 1)});
    }
    absl::StrAppend(&out, table.Render(options.width));
  }
  std::vector<std::pair<std::string, std::string>> fields;
  fields.push_back({"weight format", Text(e, "weight_format")});
  fields.push_back({"bits/weight (total)",
                    absl::StrCat(FormatNumber(Num(e, "bits_per_weight")), " vs entropy ",
                                 FormatNumber(Num(e, "entropy_bits_per_weight")))});
  fields.push_back({"package", absl::StrCat(FormatBytes(static_cast<int64_t>(Num(e, "resident_bytes"))),
                                            " (dense ", FormatBytes(static_cast<int64_t>(Num(e, "dense_bytes"))),
                                            "), ", FormatCount(static_cast<int64_t>(Num(e, "coded_tensors"))),
                                            " tensors coded")});
  if (Has(e, "gemv_batch1_us")) {
    fields.push_back({"batch-1 GEMV (all tensors)",
                      absl::StrCat(FormatNumber(Num(e, "gemv_batch1_us"), 1), " µs vs dense ",
                                   FormatNumber(Num(e, "dense_gemv_batch1_us"), 1), " µs")});
  }
  if (Has(e, "latency_ms")) {
    fields.push_back({"batch-1 request latency",
                      absl::StrCat(FormatNumber(Num(e, "latency_ms")), " ms vs dense ",
                                   FormatNumber(Num(e, "dense_latency_ms")), " ms")});
  }
  if (auto o = e.fields().find("outputs_identical"); o != e.fields().end()) {
    fields.push_back({"greedy outputs",
                      o->second.bool_value()
                          ? absl::StrCat("identical (", FormatCount(static_cast<int64_t>(Num(e, "prompts_compared"))),
                                         " prompts, ", FormatCount(static_cast<int64_t>(Num(e, "tokens_compared"))),
                                         " tokens)")
                          : "DIFFERENT"});
  }
  absl::StrAppend(&out, "\n", RenderFields(fields));
  return out;
}

}  // namespace tailor::methods
