// A data directory written by an earlier release opens under this build: the coordinator
// migrates it in place and every campaign's report reads as that release printed it.
//
// The fixture (tests/e2e/fixtures/schema5_struct_results) was written by the schema-5
// release, whose jobs kept their results as google.protobuf.Struct: the kept data
// directories of six e2e campaigns (AUTOCOMPRESS, BLOCK_REMOVAL alone, staged and with the
// entropy-coded tail, ENTROPY_CODE, PROBE) merged into one tailor.db, and beside it what that
// release's `tailor report ID` and `tailor report ID --json` printed for each campaign.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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

TEST(UpgradeE2E, Schema5DataDirOpensAndReportsReadTheSame) {
  Cluster cluster("upgrade");
  fs::copy_file(FixtureDir() + "/tailor.db", cluster.db_path());
  ASSERT_TRUE(cluster.StartCoordinator()) << ReadFile(cluster.dir() + "/coordinator-0.log");

  const std::vector<std::string> ids = GoldenCampaigns();
  ASSERT_EQ(ids.size(), 8u);
  for (const std::string& id : ids) {
    SCOPED_TRACE(id);
    RunResult text = cluster.Cli({"report", id});
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_EQ(text.out, ReadFile(absl::StrCat(FixtureDir(), "/", id, ".report.txt")));
    RunResult json = cluster.Cli({"report", id, "--json"});
    ASSERT_EQ(json.exit_code, 0) << json.err;
    EXPECT_EQ(nlohmann::json::parse(json.out),
              nlohmann::json::parse(ReadFile(absl::StrCat(FixtureDir(), "/", id, ".report.json"))));
  }
}

}  // namespace
}  // namespace tailor::e2e
