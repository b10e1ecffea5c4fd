// The data directory's guards: one coordinator per directory, no database lost beside its
// blobs, and no damaged database served (a damaged unique index is built here byte by byte).
#include "storage/data_dir_guard.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace tailor::storage {
namespace {

using ::tailor::testing::IsOk;
using ::tailor::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

class DataDirGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/tailor_guard_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  void WriteBlob() {
    std::filesystem::create_directories(dir_ + "/blobs/ab");
    std::ofstream(dir_ + "/blobs/ab/abcdef") << "artifact bytes";
  }
  // A table with a unique column and three rows, closed (WAL checkpointed into the file).
  void MakeTable() {
    auto db = Database::Open(dir_ + "/tailor.db");
    ASSERT_THAT(db.status(), IsOk());
    ASSERT_THAT((*db)->Exec("CREATE TABLE campaigns (id INTEGER PRIMARY KEY, request_id TEXT "
                            "NOT NULL UNIQUE); INSERT INTO campaigns (request_id) VALUES "
                            "('r1'), ('r2'), ('r3');"),
                IsOk());
  }
  // Overwrites a b-tree page of the closed database file with `bytes` at its start (the rest
  // of the page zeroed).
  void OverwritePage(const std::string& object, const std::string& bytes) {
    int64_t root = 0, page_size = 0;
    {
      auto db = Database::Open(dir_ + "/tailor.db");
      ASSERT_THAT(db.status(), IsOk());
      auto s = (*db)->Prepare(absl::StrCat(
          "SELECT rootpage, (SELECT page_size FROM pragma_page_size) FROM sqlite_schema "
          "WHERE name = '",
          object, "'"));
      ASSERT_THAT(s.status(), IsOk());
      ASSERT_TRUE(*s->Step());
      root = s->ColumnInt(0);
      page_size = s->ColumnInt(1);
    }
    ASSERT_GT(root, 1);
    std::string page(page_size, '\0');
    page.replace(0, bytes.size(), bytes);
    std::fstream f(dir_ + "/tailor.db", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp((root - 1) * page_size);
    f.write(page.data(), page.size());
  }

  std::string dir_;
};

TEST_F(DataDirGuardTest, SecondLockIsRefusedNamingTheHolderUntilReleased) {
  auto first = DataDirLock::Acquire(dir_, absl::FromUnixSeconds(1764637200));
  ASSERT_THAT(first.status(), IsOk());
  auto second = DataDirLock::Acquire(dir_, absl::Now());
  EXPECT_THAT(second.status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr(absl::StrCat("data dir '", dir_,
                                                    "' is in use by another tailor-coordinator "
                                                    "(pid ",
                                                    ::getpid(), " on host ")),
                             HasSubstr("started 2025-12-02T01:00:00Z"),
                             HasSubstr("give this one another --data-dir"))));
  first->reset();
  EXPECT_THAT(DataDirLock::Acquire(dir_, absl::Now()).status(), IsOk());
}

TEST_F(DataDirGuardTest, MissingOrEmptyDatabaseBesideBlobsIsRefused) {
  EXPECT_THAT(CheckDatabaseNotLost(dir_), IsOk());  // a new data dir
  WriteBlob();
  EXPECT_THAT(CheckDatabaseNotLost(dir_),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("tailor.db is missing but blobs/ holds artifacts"),
                             HasSubstr("restore the latest tailor-backup"))));
  std::ofstream(dir_ + "/tailor.db").close();
  EXPECT_THAT(CheckDatabaseNotLost(dir_),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("tailor.db is empty (0 bytes) but blobs/ holds artifacts")));
  MakeTable();
  EXPECT_THAT(CheckDatabaseNotLost(dir_), IsOk());
}

TEST_F(DataDirGuardTest, HealthyDatabasePasses) {
  MakeTable();
  auto db = Database::Open(dir_ + "/tailor.db");
  ASSERT_THAT(db.status(), IsOk());
  EXPECT_THAT(CheckDatabaseHealth(db->get()), IsOk());
}

// An index page emptied in place: quick_check finds nothing wrong (it does not compare
// indexes with tables), the unique index no longer sees 'r1', and a duplicate request id gets
// in. The start check counts the index against the table.
TEST_F(DataDirGuardTest, DamagedUniqueIndexIsRefused) {
  MakeTable();
  // An empty leaf index page: type 0x0A, no freeblock, 0 cells, the content area starting at
  // the end of the (default 4096-byte) page, no fragmented bytes.
  OverwritePage("sqlite_autoindex_campaigns_1", std::string("\x0a\0\0\0\0\x10\0\0", 8));
  auto db = Database::Open(dir_ + "/tailor.db");
  ASSERT_THAT(db.status(), IsOk());
  ASSERT_THAT((*db)->Exec("INSERT INTO campaigns (request_id) VALUES ('r1')"), IsOk())
      << "the emptied index should no longer enforce uniqueness";
  EXPECT_THAT(CheckDatabaseHealth(db->get()),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("failed its start check (index "
                                       "sqlite_autoindex_campaigns_1 holds 1 entries but "
                                       "table campaigns has 4 rows)"),
                             HasSubstr("does not serve a damaged database"))));
}

// The index counts scan each table once for all of its indexes and run on a second
// connection beside quick_check: with three indexes on the table and one damaged, the refusal
// names that one only, through the coordinator's own entry point.
TEST_F(DataDirGuardTest, OneDamagedIndexOfSeveralIsNamedByTheCheckBeforeOpen) {
  MakeTable();
  {
    auto db = Database::Open(dir_ + "/tailor.db");
    ASSERT_THAT(db.status(), IsOk());
    ASSERT_THAT((*db)->Exec("CREATE INDEX by_request ON campaigns(request_id, id); "
                            "CREATE INDEX by_id ON campaigns(id DESC)"),
                IsOk());
  }
  EXPECT_THAT(CheckDatabaseBeforeOpen(dir_), IsOk());
  OverwritePage("sqlite_autoindex_campaigns_1", std::string("\x0a\0\0\0\0\x10\0\0", 8));
  EXPECT_THAT(CheckDatabaseBeforeOpen(dir_),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("failed its start check (index sqlite_autoindex_campaigns_1 "
                                 "holds 0 entries but table campaigns has 3 rows); the "
                                 "coordinator does not serve a damaged database")));
}

TEST_F(DataDirGuardTest, GarbledPageIsRefused) {
  MakeTable();
  OverwritePage("sqlite_autoindex_campaigns_1", std::string(64, '\xff'));
  auto db = Database::Open(dir_ + "/tailor.db");
  ASSERT_THAT(db.status(), IsOk());
  EXPECT_THAT(CheckDatabaseHealth(db->get()),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("failed its start check")));
}

// The coordinator runs the check before its store opens (and migrates): a damaged file is
// refused through a read-only connection and left byte for byte as it was.
TEST_F(DataDirGuardTest, CheckBeforeOpenRefusesADamagedFileWithoutWritingIt) {
  EXPECT_THAT(CheckDatabaseBeforeOpen(dir_), IsOk());  // no database yet
  MakeTable();
  EXPECT_THAT(CheckDatabaseBeforeOpen(dir_), IsOk());
  OverwritePage("sqlite_autoindex_campaigns_1", std::string(64, '\xff'));
  auto read_bytes = [&] {
    std::ifstream in(dir_ + "/tailor.db", std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string before = read_bytes();
  EXPECT_THAT(CheckDatabaseBeforeOpen(dir_),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("failed its start check")));
  EXPECT_EQ(read_bytes(), before);
}

}  // namespace
}  // namespace tailor::storage
