// The model artifact archive: round trip, deterministic bytes, and rejection of archives
// that are corrupt or hold anything but config.json and model.safetensors.

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "compression/model/model_archive.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace tailor::model {
namespace {

using ::tailor::testing::StatusIs;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void Write(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary) << data;
}

std::string Dir(const std::string& name) {
  const std::string d = ::testing::TempDir() + "/archive_" + name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// A ustar member written by hand, so tests can build archives the packer never would.
std::string Member(const std::string& name, const std::string& data, char type = '0') {
  char h[512] = {};
  std::memcpy(h, name.data(), name.size());
  std::snprintf(h + 100, 8, "%07o", 0644);
  std::snprintf(h + 108, 8, "%07o", 0);
  std::snprintf(h + 116, 8, "%07o", 0);
  std::snprintf(h + 124, 12, "%011llo", static_cast<unsigned long long>(data.size()));
  std::snprintf(h + 136, 12, "%011o", 0);
  h[156] = type;
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);
  unsigned sum = 0;
  for (int i = 0; i < 512; ++i) sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
  std::snprintf(h + 148, 8, "%06o", sum);
  h[155] = ' ';
  std::string out(h, 512);
  out += data;
  out.append((512 - data.size() % 512) % 512, '\0');
  return out;
}

std::string End() { return std::string(1024, '\0'); }

TEST(ModelArchiveTest, RoundTripsDeterministically) {
  const std::string src = Dir("src");
  Write(src + "/config.json", "{\"vocab\": 64}");
  std::string weights(70000, '\0');
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<char>(i * 7);
  Write(src + "/model.safetensors", weights);
  Write(src + "/train_report.json", "not packed");
  const std::string a = src + "/a.tar", b = src + "/b.tar";
  ASSERT_TRUE(PackModelArchive(src, a).ok());
  ASSERT_TRUE(PackModelArchive(src, b).ok());
  EXPECT_EQ(Read(a), Read(b));
  EXPECT_EQ(Read(a).size() % 512, 0u);
  EXPECT_FALSE(fs::exists(a + ".tmp"));

  const std::string dst = Dir("dst");
  ASSERT_TRUE(UnpackModelArchive(a, dst).ok());
  EXPECT_EQ(Read(dst + "/config.json"), "{\"vocab\": 64}");
  EXPECT_EQ(Read(dst + "/model.safetensors"), weights);
  EXPECT_FALSE(fs::exists(dst + "/train_report.json"));
}

TEST(ModelArchiveTest, PackNeedsBothFiles) {
  const std::string src = Dir("missing");
  Write(src + "/config.json", "{}");
  EXPECT_THAT(PackModelArchive(src, src + "/x.tar"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("model.safetensors")));
}

TEST(ModelArchiveTest, RejectsForeignEntries) {
  const std::string d = Dir("foreign");
  const std::string out = d + "/out";
  Write(d + "/extra.tar", Member("config.json", "{}") + Member("model.safetensors", "w") +
                              Member("run.sh", "rm -rf /") + End());
  EXPECT_THAT(UnpackModelArchive(d + "/extra.tar", out),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unexpected entry 'run.sh'")));
  Write(d + "/escape.tar", Member("../config.json", "{}") + End());
  EXPECT_THAT(UnpackModelArchive(d + "/escape.tar", out),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'../config.json'")));
  Write(d + "/link.tar", Member("config.json", "", '2') + End());
  EXPECT_THAT(UnpackModelArchive(d + "/link.tar", out),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a regular file")));
  Write(d + "/twice.tar", Member("config.json", "{}") + Member("config.json", "{}") + End());
  EXPECT_THAT(UnpackModelArchive(d + "/twice.tar", out),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("twice")));
  Write(d + "/half.tar", Member("config.json", "{}") + End());
  EXPECT_THAT(UnpackModelArchive(d + "/half.tar", out),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no model.safetensors")));
  // A leading "./" (what `tar cf x.tar ./config.json ...` writes) is fine.
  Write(d + "/dot.tar", Member("./config.json", "{}") + Member("model.safetensors", "w") + End());
  EXPECT_TRUE(UnpackModelArchive(d + "/dot.tar", out).ok());
}

TEST(ModelArchiveTest, RejectsCorruption) {
  const std::string d = Dir("corrupt");
  const std::string out = d + "/out";
  std::string good = Member("config.json", "{}") + Member("model.safetensors", "weights") + End();
  std::string bad = good;
  bad[0] = 'C';  // name changes, checksum no longer matches
  Write(d + "/sum.tar", bad);
  EXPECT_THAT(UnpackModelArchive(d + "/sum.tar", out),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("checksum")));
  Write(d + "/short.tar", good.substr(0, 512 + 512 + 100));
  EXPECT_THAT(UnpackModelArchive(d + "/short.tar", out),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("truncated")));
  Write(d + "/text.tar", std::string(600, 'x'));
  EXPECT_THAT(UnpackModelArchive(d + "/text.tar", out),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("not a tar")));
  EXPECT_THAT(UnpackModelArchive(d + "/none.tar", out),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("none.tar")));
}

TEST(ModelArchiveTest, ReadsConfigWithoutTheWeights) {
  const std::string d = Dir("config_only");
  Write(d + "/packed.tar", Member("config.json", "{\"a\": 1}") +
                               Member("model.safetensors", std::string(4096, 'w')));
  absl::StatusOr<std::string> config = ReadModelArchiveConfig(d + "/packed.tar", 1 << 20);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(*config, "{\"a\": 1}");
  // A config larger than the caller's bound is refused before it is read.
  EXPECT_THAT(ReadModelArchiveConfig(d + "/packed.tar", 4),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("config.json is 8 bytes, limit 4")));
  Write(d + "/weights_first.tar", Member("model.safetensors", "w") + Member("config.json", "{}"));
  EXPECT_THAT(ReadModelArchiveConfig(d + "/weights_first.tar", 1 << 20),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("does not start with config.json")));
  Write(d + "/cut.tar", Member("config.json", std::string(600, 'c')).substr(0, 700));
  EXPECT_THAT(ReadModelArchiveConfig(d + "/cut.tar", 1 << 20),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("truncated archive")));
}

}  // namespace
}  // namespace tailor::model
