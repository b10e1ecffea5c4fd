#include "storage/backup.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/blob_store.h"
#include "storage/coordinator_store.h"
#include "storage/database.h"
#include "tests/testing/status_matchers.h"

namespace tailor::storage {
namespace {

namespace fs = std::filesystem;
using ::tailor::testing::IsOk;
using ::tailor::testing::StatusIs;
using ::testing::HasSubstr;

class BackupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            ("backup-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    data_ = root_ / "data";
    fs::create_directories(data_);
    auto store = CoordinatorStore::Open((data_ / "tailor.db").string());
    ASSERT_THAT(store, IsOk());
    store_ = *std::move(store);
    auto blobs = BlobStore::Open((data_ / "blobs").string());
    ASSERT_THAT(blobs, IsOk());
    blobs_ = *std::move(blobs);
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(root_);
  }

  std::string AddArtifact(const std::string& id, const std::string& content) {
    auto blob = blobs_->Put(content);
    EXPECT_THAT(blob, IsOk());
    v1::Artifact a;
    a.set_digest(blob->digest);
    a.set_size_bytes(blob->size_bytes);
    a.set_kind("model");
    a.set_name(id);
    a.set_campaign_id("c-1");
    a.set_job_id("j-" + id);
    EXPECT_THAT(store_->InsertArtifact(a), IsOk());
    return blob->digest;
  }

  fs::path root_, data_;
  std::unique_ptr<CoordinatorStore> store_;
  std::unique_ptr<BlobStore> blobs_;
};

TEST_F(BackupTest, CopiesDatabaseAndReferencedBlobsThenUpdatesIncrementally) {
  AddArtifact("a", "first model");
  AddArtifact("b", "second model!");
  AddArtifact("c", "first model");  // same content: one blob
  ASSERT_THAT(blobs_->Put("an unreferenced upload"), IsOk());

  const fs::path out = root_ / "backup";
  auto first = BackupDataDir(data_.string(), out.string());
  ASSERT_THAT(first, IsOk());
  EXPECT_EQ(first->database_path, (out / "tailor.db").string());
  EXPECT_EQ(first->artifacts, 3);
  EXPECT_EQ(first->blobs_copied, 2);
  EXPECT_EQ(first->blobs_present, 0);
  EXPECT_EQ(first->blob_bytes_copied, 11 + 13);
  EXPECT_FALSE(fs::exists(out / "tailor.db.partial"));
  EXPECT_FALSE(fs::exists(out / "tailor.db-wal"));

  // The copy is a complete store on its own: it opens, verifies and lists what was there.
  {
    auto copy = CoordinatorStore::Open((out / "tailor.db").string());
    ASSERT_THAT(copy, IsOk());
    auto listed = (*copy)->ListArtifacts("c-1");
    ASSERT_THAT(listed, IsOk());
    EXPECT_EQ(listed->size(), 3u);
    auto copied_blobs = BlobStore::Open((out / "blobs").string());
    ASSERT_THAT(copied_blobs, IsOk());
    for (const auto& a : *listed) EXPECT_THAT((*copied_blobs)->Verify(a.digest()), IsOk());
  }

  const std::string third = AddArtifact("d", "third");
  auto second = BackupDataDir(data_.string(), out.string());
  ASSERT_THAT(second, IsOk());
  EXPECT_EQ(second->artifacts, 4);
  EXPECT_EQ(second->blobs_copied, 1);
  EXPECT_EQ(second->blobs_present, 2);
  EXPECT_EQ(second->blob_bytes_copied, 5);
}

TEST_F(BackupTest, CorruptSourceBlobFailsWithDataLossAndLeavesNoDatabase) {
  const std::string digest = AddArtifact("a", "model bytes");
  auto path = blobs_->PathOf(digest);
  ASSERT_THAT(path, IsOk());
  fs::permissions(*path, fs::perms::owner_write, fs::perm_options::add);
  std::ofstream(*path, std::ios::trunc) << "model bytez";

  const fs::path out = root_ / "backup";
  EXPECT_THAT(BackupDataDir(data_.string(), out.string()),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr(digest)));
  EXPECT_FALSE(fs::exists(out / "tailor.db"));
}

TEST_F(BackupTest, RejectsMissingDatabaseAndBackupIntoTheDataDirectory) {
  EXPECT_THAT(BackupDataDir((root_ / "nowhere").string(), (root_ / "out").string()),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no database at")));
  EXPECT_THAT(BackupDataDir(data_.string(), data_.string()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("must differ")));
}

}  // namespace
}  // namespace tailor::storage
