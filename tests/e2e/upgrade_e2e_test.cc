// A data directory written by an earlier release opens under this build: the coordinator
// migrates it in place and every campaign's report reads as that release printed it, but for
// lines a later report adds about data the release already had (WithoutAddedLines).
//
// The fixture (tests/e2e/fixtures/schema5_struct_results) was written by the schema-5
// release, whose jobs kept their results as google.protobuf.Struct: the kept data
// directories of six e2e campaigns (AUTOCOMPRESS, BLOCK_REMOVAL alone, staged and with the
// entropy-coded tail, ENTROPY_CODE, PROBE) merged into one tailor.db, and beside it what that
// release's `tailor report ID` and `tailor report ID --json` printed for each campaign.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/cluster.h"
#include "tests/e2e/process.h"

namespace tailor::e2e {
namespace {

namespace fs = std::filesystem;

std::string FixtureDir() {
  return std::string(TAILOR_SOURCE_DIR) + "/tests/e2e/fixtures/schema5_struct_results";
}

// The campaign ids the fixture holds a golden report for.
std::vector<std::string> GoldenCampaigns() {
  std::vector<std::string> ids;
  for (const fs::directory_entry& e : fs::directory_iterator(FixtureDir())) {
    const std::string name = e.path().filename().string();
    const std::string suffix = ".report.txt";
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      ids.push_back(name.substr(0, name.size() - suffix.size()));
    }
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

// `text` without the lines this build's report adds to what the release printed, each said
// of data the release already had (a student whose KD loss is above the uniform baseline's):
// the rest must read exactly as the release printed it. `added` counts the lines removed.
std::string WithoutAddedLines(const std::string& text, int& added) {
  std::vector<absl::string_view> kept;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, "STUDENT BELOW THE UNIFORM BASELINE: ")) {
      ++added;
    } else {
      kept.push_back(line);
    }
  }
  return absl::StrJoin(kept, "\n");
}

// A JSON value with proto3's defaults dropped (zero, false, "", empty lists and objects) and
// int64 strings read as numbers: what a Struct result and its typed output share.
nlohmann::json Normalized(const nlohmann::json& v) {
  if (v.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, x] : v.items()) {
      if (k == "@type") continue;
      nlohmann::json n = Normalized(x);
      if (!n.is_null()) out[k] = n;
    }
    return out.empty() ? nlohmann::json() : out;
  }
  if (v.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& x : v) out.push_back(Normalized(x));
    return out.empty() ? nlohmann::json() : out;
  }
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s.empty()) return nullptr;
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (end != s.c_str() && *end == '\0' && s.find_first_not_of("-0123456789") == s.npos) {
      return d == 0 ? nlohmann::json() : nlohmann::json(d);
    }
    return v;
  }
  if (v.is_boolean()) return v.get<bool>() ? v : nlohmann::json();
  if (v.is_number()) return v.get<double>() == 0 ? nlohmann::json() : nlohmann::json(v.get<double>());
  return v;
}

// A typed job output as the schema-5 release's flat Struct had it: the detail's fields
// beside the shared ones.
nlohmann::json Flattened(nlohmann::json output) {
  if (output.contains("detail")) {
    for (const auto& [k, x] : output["detail"].items()) output[k] = x;
    output.erase("detail");
  }
  return output;
}

TEST(UpgradeE2E, Schema5DataDirOpensAndReportsReadTheSame) {
  Cluster cluster("upgrade");
  fs::copy_file(FixtureDir() + "/tailor.db", cluster.db_path());
  ASSERT_TRUE(cluster.StartCoordinator()) << ReadFile(cluster.dir() + "/coordinator-0.log");

  const std::vector<std::string> ids = GoldenCampaigns();
  ASSERT_EQ(ids.size(), 8u);
  std::map<std::string, int> added;
  for (const std::string& id : ids) {
    SCOPED_TRACE(id);
    RunResult text = cluster.Cli({"report", id});
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_EQ(WithoutAddedLines(text.out, added[id]),
              ReadFile(absl::StrCat(FixtureDir(), "/", id, ".report.txt")));
    RunResult json = cluster.Cli({"report", id, "--json"});
    ASSERT_EQ(json.exit_code, 0) << json.err;
    nlohmann::json now = nlohmann::json::parse(json.out);
    nlohmann::json then =
        nlohmann::json::parse(ReadFile(absl::StrCat(FixtureDir(), "/", id, ".report.json")));
    // The release kept each job's raw result in `details` under its job key; they are now
    // typed in `outputs` and must carry every value the raw result did.
    nlohmann::json outputs = now["outputs"];
    now.erase("outputs");
    std::vector<std::string> job_keys;
    for (const auto& [key, result] : then["details"].items()) {
      if (outputs.contains(key)) job_keys.push_back(key);  // else a method's own section
    }
    ASSERT_FALSE(job_keys.empty());
    for (const std::string& key : job_keys) {
      SCOPED_TRACE(key);
      EXPECT_EQ(Normalized(Flattened(outputs[key])), Normalized(then["details"][key]));
      then["details"].erase(key);
    }
    for (nlohmann::json* report : {&now, &then}) {
      if (report->contains("details") && (*report)["details"].empty()) report->erase("details");
    }
    // Report fields added after the release (e.g. `datasets`, repeated and so always printed)
    // carry nothing for its campaigns when empty.
    std::vector<std::string> added_empty;
    for (const auto& [key, value] : now.items()) {
      if (!then.contains(key) && (value.is_array() || value.is_object()) && value.empty()) {
        added_empty.push_back(key);
      }
    }
    for (const std::string& key : added_empty) now.erase(key);
    EXPECT_EQ(now, then);
  }
  // The one AUTOCOMPRESS campaign with a uniform baseline distilled its student to KD 0.0147
  // against the baseline's 0.0028: its report now says so, and no other report changed.
  EXPECT_EQ(added, (std::map<std::string, int>{{"c-01a234eaf48fac12b6c8b7", 0},
                                               {"c-01a234eaf4ae1247d5cba0", 1},
                                               {"c-01a234eb2d015bbcc7bfe2", 0},
                                               {"c-01a234eb54baeea10f27d0", 0},
                                               {"c-01a234ebb8025c7fb7ff40", 0},
                                               {"c-01a234ebb9fdd14d6632e4", 0},
                                               {"c-01a234ebc0a0a22752850c", 0},
                                               {"c-01a234ebdbbcf60a7e3a7b", 0}}));
}

}  // namespace
}  // namespace tailor::e2e
