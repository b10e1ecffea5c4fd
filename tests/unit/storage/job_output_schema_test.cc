// Schema version 6: job results typed. Every stored Struct result (Job.legacy_result) becomes
// its JobOutput in one transaction; a result that does not convert fails the migration,
// names its job, and leaves the database exactly as it was (still version 5).
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/coordinator_store.h"
#include "storage/database.h"
#include "storage/schema.h"
#include "tailor/v1/campaign.pb.h"
#include "tests/testing/status_matchers.h"

namespace tailor::storage {
namespace {

using ::tailor::testing::IsOk;
using ::tailor::testing::StatusIs;
using ::testing::HasSubstr;

class JobOutputSchemaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/tailor_outputs_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/tailor.db";
    auto db = Database::Open(path_);
    ASSERT_THAT(db.status(), IsOk());
    const std::vector<Migration> all = CoordinatorMigrations();
    ASSERT_THAT((*db)->Migrate(std::vector<Migration>(all.begin(), all.begin() + 5)), IsOk());
    ASSERT_THAT((*db)->Exec("INSERT INTO campaigns (id, request_id, contract_hash, name, team, "
                            "method, state, fingerprint, created_at, updated_at, contract) "
                            "VALUES ('c-1', 'r', 'h', 'n', 't', 1, 1, '', 1, 1, x'')"),
                IsOk());
    InsertJob(**db, "j-1", "rank", "ranked_model_digest", "ab12");
    InsertJob(**db, "j-2", "search", "student_digest", "cd34");
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // A job as the schema-5 release stored it: one string field in a Struct result.
  static void InsertJob(Database& db, const std::string& id, const std::string& kind,
                        const std::string& key, const std::string& value) {
    v1::Job job;
    job.set_id(id);
    job.set_kind(kind);
    (*job.mutable_legacy_result()->mutable_fields())[key].set_string_value(value);
    auto insert = db.Prepare(
        "INSERT INTO jobs (id, campaign_id, key, kind, state, ord, updated_at, proto) "
        "VALUES (?1, 'c-1', ?2, ?2, 1, 0, 1, ?3)");
    ASSERT_THAT(insert.status(), IsOk());
    ASSERT_THAT(insert->Bind(1, id).Bind(2, kind).BindBlob(3, job.SerializeAsString()).Run(),
                IsOk());
  }

  v1::Job StoredJob(Database& db, const std::string& id) {
    auto row = db.Prepare("SELECT proto FROM jobs WHERE id = ?1");
    EXPECT_THAT(row.status(), IsOk());
    row->Bind(1, id);
    EXPECT_TRUE(*row->Step());
    v1::Job job;
    EXPECT_TRUE(job.ParseFromString(row->ColumnBlob(0)));
    return job;
  }

  std::string dir_, path_;
};

// A stand-in for methods::UpgradeLegacyResult (which storage does not link): digests move to
// the shared field, anything else is refused.
absl::StatusOr<v1::JobOutput> Convert(const std::string& kind,
                                      const google::protobuf::Struct& result) {
  v1::JobOutput output;
  for (const auto& [key, value] : result.fields()) {
    if (key == "student_digest") {
      output.set_student_digest(value.string_value());
    } else if (key == "ranked_model_digest") {
      output.set_model_digest(value.string_value());
    } else {
      return absl::InvalidArgumentError("key '" + key + "' fits no typed output");
    }
  }
  return output;
}

TEST_F(JobOutputSchemaTest, EveryStoredResultBecomesItsTypedOutput) {
  auto store = CoordinatorStore::Open(path_, false, Convert);
  ASSERT_THAT(store.status(), IsOk());
  Database& db = *(*store)->db();
  EXPECT_EQ(*db.UserVersion(), 7);
  const v1::Job rank = StoredJob(db, "j-1");
  EXPECT_FALSE(rank.has_legacy_result());
  EXPECT_EQ(rank.output().model_digest(), "ab12");
  EXPECT_EQ(StoredJob(db, "j-2").output().student_digest(), "cd34");
}

TEST_F(JobOutputSchemaTest, OneUnconvertibleResultChangesNothing) {
  {
    auto db = Database::Open(path_);
    ASSERT_THAT(db.status(), IsOk());
    InsertJob(**db, "j-3", "verify", "mystery", "x");
  }
  auto store = CoordinatorStore::Open(path_, false, Convert);
  EXPECT_THAT(store.status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(store.status().message()),
              HasSubstr("migration 6 failed: job j-3 (verify): key 'mystery'"));

  auto db = Database::Open(path_);
  ASSERT_THAT(db.status(), IsOk());
  EXPECT_EQ(*(*db)->UserVersion(), 5);
  const v1::Job rank = StoredJob(**db, "j-1");  // converted first, then rolled back
  EXPECT_TRUE(rank.has_legacy_result());
  EXPECT_FALSE(rank.has_output());
}

TEST_F(JobOutputSchemaTest, WithoutAConverterStoredResultsAreRefused) {
  auto store = CoordinatorStore::Open(path_);
  EXPECT_THAT(store.status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("job j-1 keeps a schema-5"));
  auto db = Database::Open(path_);
  ASSERT_THAT(db.status(), IsOk());
  EXPECT_EQ(*(*db)->UserVersion(), 5);
}

}  // namespace
}  // namespace tailor::storage
