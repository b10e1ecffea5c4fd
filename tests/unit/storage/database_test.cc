#include "storage/database.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace tailor::storage {
namespace {

using ::tailor::testing::IsOk;
using ::tailor::testing::StatusIs;
using ::testing::HasSubstr;

class DatabaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/tailor_db_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/tailor.db";
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::unique_ptr<Database> OpenOrDie() {
    auto db = Database::Open(path_);
    EXPECT_TRUE(db.ok()) << db.status();
    return db.ok() ? std::move(db).value() : nullptr;
  }

  static std::string PragmaText(Database* db, const std::string& sql) {
    auto stmt = db->Prepare(sql);
    EXPECT_TRUE(stmt.ok()) << stmt.status();
    auto row = stmt->Step();
    EXPECT_TRUE(row.ok() && *row) << row.status();
    return stmt->ColumnText(0);
  }

  static int64_t CountRows(Database* db, const std::string& table) {
    auto stmt = db->Prepare("SELECT COUNT(*) FROM " + table);
    EXPECT_TRUE(stmt.ok()) << stmt.status();
    auto row = stmt->Step();
    EXPECT_TRUE(row.ok() && *row) << row.status();
    return stmt->ColumnInt(0);
  }

  static bool TableExists(Database* db, const std::string& name) {
    auto stmt = db->Prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?");
    EXPECT_TRUE(stmt.ok()) << stmt.status();
    stmt->Bind(1, name);
    auto row = stmt->Step();
    EXPECT_TRUE(row.ok()) << row.status();
    return row.ok() && *row;
  }

  std::string dir_;
  std::string path_;
};

const std::vector<Migration>& TwoMigrations() {
  static const auto* m = new std::vector<Migration>{
      {1, "CREATE TABLE a (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"},
      {2,
       "CREATE TABLE b (id INTEGER PRIMARY KEY, a_id INTEGER NOT NULL REFERENCES a(id));"
       "INSERT INTO a (name) VALUES ('seed');"},
  };
  return *m;
}

TEST_F(DatabaseTest, OpenCreatesWalDatabaseWithPragmas) {
  auto db = OpenOrDie();
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(PragmaText(db.get(), "PRAGMA journal_mode"), "wal");
  // synchronous: 0 OFF, 1 NORMAL, 2 FULL.
  EXPECT_EQ(PragmaText(db.get(), "PRAGMA synchronous"), "1");
  EXPECT_EQ(PragmaText(db.get(), "PRAGMA foreign_keys"), "1");
  TAILOR_ASSERT_OK(db->Exec("CREATE TABLE t (x INTEGER)"));
  EXPECT_TRUE(std::filesystem::exists(path_));
  EXPECT_TRUE(std::filesystem::exists(path_ + "-wal"));
  EXPECT_EQ(db->path(), path_);
  EXPECT_NE(db->raw(), nullptr);
}

TEST_F(DatabaseTest, BusyTimeoutComesFromOptions) {
  Database::Options options;
  options.busy_timeout = absl::Milliseconds(1234);
  TAILOR_ASSERT_OK_AND_ASSIGN(auto db, Database::Open(path_, options));
  EXPECT_EQ(PragmaText(db.get(), "PRAGMA busy_timeout"), "1234");
}

TEST_F(DatabaseTest, OpenMissingWithoutCreateIsNotFound) {
  Database::Options options;
  options.create_if_missing = false;
  EXPECT_THAT(Database::Open(path_, options),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("does not exist")));
  EXPECT_FALSE(std::filesystem::exists(path_));
}

TEST_F(DatabaseTest, OpenInMissingDirectoryIsUnavailable) {
  EXPECT_THAT(Database::Open(dir_ + "/no/such/dir/x.db"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("opening database")));
}

TEST_F(DatabaseTest, OpenGarbageFileIsDataLoss) {
  {
    FILE* f = std::fopen(path_.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::string junk(4096, 'x');
    std::fwrite(junk.data(), 1, junk.size(), f);
    std::fclose(f);
  }
  EXPECT_THAT(Database::Open(path_),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("not a database")));
}

TEST_F(DatabaseTest, ReadOnlyRejectsWrites) {
  {
    auto db = OpenOrDie();
    TAILOR_ASSERT_OK(db->Exec("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);"));
  }
  Database::Options options;
  options.read_only = true;
  TAILOR_ASSERT_OK_AND_ASSIGN(auto db, Database::Open(path_, options));
  EXPECT_EQ(CountRows(db.get(), "t"), 1);
  EXPECT_THAT(db->Exec("INSERT INTO t VALUES (2)"),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("readonly")));
}

TEST_F(DatabaseTest, MigrationsApplyInOrderAndReopenIsNoOp) {
  {
    auto db = OpenOrDie();
    TAILOR_ASSERT_OK_AND_ASSIGN(int v0, db->UserVersion());
    EXPECT_EQ(v0, 0);
    TAILOR_ASSERT_OK(db->Migrate(TwoMigrations()));
    TAILOR_ASSERT_OK_AND_ASSIGN(int v, db->UserVersion());
    EXPECT_EQ(v, 2);
    EXPECT_TRUE(TableExists(db.get(), "a"));
    EXPECT_TRUE(TableExists(db.get(), "b"));
    EXPECT_EQ(CountRows(db.get(), "a"), 1);
  }
  auto db = OpenOrDie();
  // Re-running would fail on CREATE TABLE and duplicate the seed row if it were not skipped.
  TAILOR_ASSERT_OK(db->Migrate(TwoMigrations()));
  TAILOR_ASSERT_OK_AND_ASSIGN(int v, db->UserVersion());
  EXPECT_EQ(v, 2);
  EXPECT_EQ(CountRows(db.get(), "a"), 1);
}

TEST_F(DatabaseTest, MigrationsResumeFromStoredVersion) {
  auto db = OpenOrDie();
  TAILOR_ASSERT_OK(db->Migrate({TwoMigrations()[0]}));
  TAILOR_ASSERT_OK_AND_ASSIGN(int v1, db->UserVersion());
  EXPECT_EQ(v1, 1);
  EXPECT_FALSE(TableExists(db.get(), "b"));
  TAILOR_ASSERT_OK(db->Migrate(TwoMigrations()));
  TAILOR_ASSERT_OK_AND_ASSIGN(int v2, db->UserVersion());
  EXPECT_EQ(v2, 2);
  EXPECT_TRUE(TableExists(db.get(), "b"));
}

TEST_F(DatabaseTest, FailingMigrationRollsBackAndKeepsVersion) {
  auto db = OpenOrDie();
  std::vector<Migration> migrations = TwoMigrations();
  // Migration 3 creates a table and then fails; the table must not survive.
  migrations.push_back({3, "CREATE TABLE c (id INTEGER); INSERT INTO nowhere VALUES (1);"});
  EXPECT_THAT(db->Migrate(migrations),
              StatusIs(absl::StatusCode::kInternal,
                       ::testing::AllOf(HasSubstr("migration 3 failed"),
                                        HasSubstr("no such table: nowhere"))));
  TAILOR_ASSERT_OK_AND_ASSIGN(int v, db->UserVersion());
  EXPECT_EQ(v, 2);
  EXPECT_FALSE(TableExists(db.get(), "c"));
  // The connection is usable afterwards (no transaction left open).
  EXPECT_TRUE(sqlite3_get_autocommit(db->raw()));
  TAILOR_ASSERT_OK_AND_ASSIGN(auto txn, Transaction::Begin(db.get()));
  TAILOR_EXPECT_OK(txn.Commit());
}

TEST_F(DatabaseTest, NewerSchemaIsRefused) {
  auto db = OpenOrDie();
  TAILOR_ASSERT_OK(db->Exec("PRAGMA user_version = 7"));
  std::vector<Migration> five;
  for (int i = 1; i <= 5; ++i) {
    five.push_back({i, "CREATE TABLE t" + std::to_string(i) + " (x INTEGER);"});
  }
  EXPECT_THAT(db->Migrate(five),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("database schema version 7 is newer than this binary's 5; "
                                 "upgrade tailor")));
  EXPECT_FALSE(TableExists(db.get(), "t1"));
}

TEST_F(DatabaseTest, MisnumberedMigrationsAreInvalid) {
  auto db = OpenOrDie();
  EXPECT_THAT(db->Migrate({{1, "SELECT 1;"}, {3, "SELECT 1;"}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("numbered 1..N")));
}

TEST_F(DatabaseTest, BindStepAndColumnsForEveryType) {
  auto db = OpenOrDie();
  TAILOR_ASSERT_OK(db->Exec("CREATE TABLE v (i INTEGER, d REAL, t TEXT, b BLOB, n TEXT)"));
  const std::string blob("a\0b\0\0c", 6);
  const std::string text_with_nul("x\0y", 3);
  {
    TAILOR_ASSERT_OK_AND_ASSIGN(auto ins, db->Prepare("INSERT INTO v VALUES (?, ?, ?, ?, ?)"));
    ins.Bind(1, int64_t{1} << 40).Bind(2, 2.5).Bind(3, "héllo").BindBlob(4, blob).BindNull(5);
    TAILOR_ASSERT_OK(ins.Run());
    EXPECT_EQ(db->Changes(), 1);
    EXPECT_EQ(db->LastInsertRowId(), 1);
    ins.Reset();
    ins.Bind(1, 7).Bind(2, -0.25).Bind(3, text_with_nul).BindBlob(4, "").Bind(5, std::string());
    TAILOR_ASSERT_OK(ins.Run());
    EXPECT_EQ(db->LastInsertRowId(), 2);
  }
  TAILOR_ASSERT_OK_AND_ASSIGN(auto sel, db->Prepare("SELECT i, d, t, b, n FROM v ORDER BY rowid"));
  TAILOR_ASSERT_OK_AND_ASSIGN(bool row, sel.Step());
  ASSERT_TRUE(row);
  EXPECT_EQ(sel.ColumnInt(0), int64_t{1} << 40);
  EXPECT_DOUBLE_EQ(sel.ColumnDouble(1), 2.5);
  EXPECT_EQ(sel.ColumnText(2), "héllo");
  EXPECT_EQ(sel.ColumnBlob(3), blob);
  EXPECT_EQ(sel.ColumnBlob(3).size(), 6u);
  EXPECT_TRUE(sel.ColumnIsNull(4));
  EXPECT_FALSE(sel.ColumnIsNull(3));
  EXPECT_EQ(sel.ColumnText(4), "");

  TAILOR_ASSERT_OK_AND_ASSIGN(row, sel.Step());
  ASSERT_TRUE(row);
  EXPECT_EQ(sel.ColumnInt(0), 7);
  EXPECT_DOUBLE_EQ(sel.ColumnDouble(1), -0.25);
  EXPECT_EQ(sel.ColumnText(2), text_with_nul);
  // Empty values are empty, not NULL.
  EXPECT_FALSE(sel.ColumnIsNull(3));
  EXPECT_EQ(sel.ColumnBlob(3), "");
  EXPECT_FALSE(sel.ColumnIsNull(4));

  TAILOR_ASSERT_OK_AND_ASSIGN(row, sel.Step());
  EXPECT_FALSE(row);
}

TEST_F(DatabaseTest, BindErrorIsReturnedByStep) {
  auto db = OpenOrDie();
  TAILOR_ASSERT_OK_AND_ASSIGN(auto stmt, db->Prepare("SELECT ?"));
  stmt.Bind(5, 1);
  EXPECT_THAT(stmt.Step(),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("binding parameter 5")));
  stmt.Reset();
  stmt.Bind(1, 9);
  TAILOR_ASSERT_OK_AND_ASSIGN(bool row, stmt.Step());
  ASSERT_TRUE(row);
  EXPECT_EQ(stmt.ColumnInt(0), 9);
}

TEST_F(DatabaseTest, PrepareErrors) {
  auto db = OpenOrDie();
  EXPECT_THAT(db->Prepare("SELEC 1"),
              StatusIs(absl::StatusCode::kInternal,
                       ::testing::AllOf(HasSubstr("preparing 'SELEC 1'"), HasSubstr("syntax"))));
  EXPECT_THAT(db->Prepare("SELECT 1; SELECT 2"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("exactly one statement")));
  EXPECT_THAT(db->Prepare("  "),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no SQL statement")));
}

TEST_F(DatabaseTest, ReturnedStatementIsResetAndBindingsCleared) {
  auto db = OpenOrDie();
  TAILOR_ASSERT_OK(db->Exec("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2), (3);"));
  sqlite3_stmt* first = nullptr;
  {
    TAILOR_ASSERT_OK_AND_ASSIGN(auto stmt, db->Prepare("SELECT x, ? FROM t ORDER BY x"));
    stmt.Bind(1, 42);
    TAILOR_ASSERT_OK_AND_ASSIGN(bool row, stmt.Step());
    ASSERT_TRUE(row);
    EXPECT_EQ(stmt.ColumnInt(1), 42);
    first = sqlite3_next_stmt(db->raw(), nullptr);
    // Abandoned mid-iteration: must come back rewound.
  }
  TAILOR_ASSERT_OK_AND_ASSIGN(auto stmt, db->Prepare("SELECT x, ? FROM t ORDER BY x"));
  // Still exactly one prepared statement on the connection: it was reused, not re-prepared.
  EXPECT_EQ(sqlite3_next_stmt(db->raw(), nullptr), first);
  EXPECT_EQ(sqlite3_next_stmt(db->raw(), first), nullptr);
  TAILOR_ASSERT_OK_AND_ASSIGN(bool row, stmt.Step());
  ASSERT_TRUE(row);
  EXPECT_EQ(stmt.ColumnInt(0), 1);  // starts over
  EXPECT_TRUE(stmt.ColumnIsNull(1));  // old binding cleared
}

TEST_F(DatabaseTest, SameSqlCanBeBorrowedTwiceForNestedLoops) {
  auto db = OpenOrDie();
  TAILOR_ASSERT_OK(db->Exec("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2), (3);"));
  const std::string sql = "SELECT x FROM t WHERE x >= ? ORDER BY x";
  std::vector<std::pair<int64_t, int64_t>> pairs;
  {
    TAILOR_ASSERT_OK_AND_ASSIGN(auto outer, db->Prepare(sql));
    outer.Bind(1, 1);
    while (true) {
      TAILOR_ASSERT_OK_AND_ASSIGN(bool row, outer.Step());
      if (!row) break;
      const int64_t x = outer.ColumnInt(0);
      TAILOR_ASSERT_OK_AND_ASSIGN(auto inner, db->Prepare(sql));
      inner.Bind(1, x);
      while (true) {
        TAILOR_ASSERT_OK_AND_ASSIGN(bool r, inner.Step());
        if (!r) break;
        pairs.emplace_back(x, inner.ColumnInt(0));
      }
    }
  }
  using P = std::pair<int64_t, int64_t>;
  EXPECT_THAT(pairs, ::testing::ElementsAre(P{1, 1}, P{1, 2}, P{1, 3}, P{2, 2}, P{2, 3},
                                            P{3, 3}));
  // Both copies went back to the cache; borrowing twice again prepares nothing new.
  int before = 0;
  for (sqlite3_stmt* s = sqlite3_next_stmt(db->raw(), nullptr); s != nullptr;
       s = sqlite3_next_stmt(db->raw(), s)) {
    ++before;
  }
  {
    TAILOR_ASSERT_OK_AND_ASSIGN(auto a, db->Prepare(sql));
    TAILOR_ASSERT_OK_AND_ASSIGN(auto b, db->Prepare(sql));
  }
  int after = 0;
  for (sqlite3_stmt* s = sqlite3_next_stmt(db->raw(), nullptr); s != nullptr;
       s = sqlite3_next_stmt(db->raw(), s)) {
    ++after;
  }
  EXPECT_EQ(before, after);
}

TEST_F(DatabaseTest, MovedStatementReturnsOnce) {
  auto db = OpenOrDie();
  TAILOR_ASSERT_OK_AND_ASSIGN(auto a, db->Prepare("SELECT 1"));
  Statement b = std::move(a);
  EXPECT_THAT(a.Step(), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("moved")));
  TAILOR_ASSERT_OK_AND_ASSIGN(auto c, db->Prepare("SELECT 2"));
  c = std::move(b);  // "SELECT 2" goes back to the cache
  TAILOR_ASSERT_OK_AND_ASSIGN(bool row, c.Step());
  ASSERT_TRUE(row);
  EXPECT_EQ(c.ColumnInt(0), 1);
}

TEST_F(DatabaseTest, TransactionRollsBackOnDestruction) {
  auto db = OpenOrDie();
  TAILOR_ASSERT_OK(db->Exec("CREATE TABLE t (x INTEGER)"));
  {
    TAILOR_ASSERT_OK_AND_ASSIGN(auto txn, Transaction::Begin(db.get()));
    TAILOR_ASSERT_OK(db->Exec("INSERT INTO t VALUES (1)"));
    EXPECT_EQ(CountRows(db.get(), "t"), 1);
  }
  EXPECT_EQ(CountRows(db.get(), "t"), 0);
  EXPECT_TRUE(sqlite3_get_autocommit(db->raw()));
}

TEST_F(DatabaseTest, CommittedTransactionPersistsAcrossReopen) {
  {
    auto db = OpenOrDie();
    TAILOR_ASSERT_OK(db->Exec("CREATE TABLE t (x INTEGER)"));
    TAILOR_ASSERT_OK_AND_ASSIGN(auto txn, Transaction::Begin(db.get()));
    TAILOR_ASSERT_OK(db->Exec("INSERT INTO t VALUES (1), (2)"));
    Transaction moved = std::move(txn);  // the moved-from one must not roll back
    TAILOR_ASSERT_OK(moved.Commit());
    EXPECT_THAT(moved.Commit(),
                StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("already finished")));
  }
  auto db = OpenOrDie();
  EXPECT_EQ(CountRows(db.get(), "t"), 2);
}

TEST_F(DatabaseTest, NestedTransactionIsRefused) {
  auto db = OpenOrDie();
  TAILOR_ASSERT_OK_AND_ASSIGN(auto txn, Transaction::Begin(db.get()));
  EXPECT_THAT(Transaction::Begin(db.get()),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("within a transaction")));
}

TEST_F(DatabaseTest, SecondWriterIsUnavailableAfterBusyTimeout) {
  auto db = OpenOrDie();
  Database::Options options;
  options.busy_timeout = absl::Milliseconds(20);
  TAILOR_ASSERT_OK_AND_ASSIGN(auto other, Database::Open(path_, options));
  TAILOR_ASSERT_OK_AND_ASSIGN(auto txn, Transaction::Begin(db.get()));
  EXPECT_THAT(Transaction::Begin(other.get()),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("locked")));
}

TEST_F(DatabaseTest, ConstraintViolationsMapToSpecificCodes) {
  auto db = OpenOrDie();
  TAILOR_ASSERT_OK(db->Migrate(TwoMigrations()));
  TAILOR_ASSERT_OK_AND_ASSIGN(auto ins, db->Prepare("INSERT INTO a (name) VALUES (?)"));
  ins.Bind(1, "seed");
  EXPECT_THAT(ins.Run(), StatusIs(absl::StatusCode::kAlreadyExists,
                                  HasSubstr("UNIQUE constraint failed: a.name")));
  ins.Reset();
  ins.Bind(1, "fresh");
  TAILOR_EXPECT_OK(ins.Run());

  EXPECT_THAT(db->Exec("INSERT INTO a (id, name) VALUES (1, 'dup-pk')"),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("a.id")));

  TAILOR_ASSERT_OK_AND_ASSIGN(auto fk, db->Prepare("INSERT INTO b (a_id) VALUES (?)"));
  fk.Bind(1, 999);
  EXPECT_THAT(fk.Run(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                 HasSubstr("FOREIGN KEY constraint failed")));
  EXPECT_THAT(db->Exec("INSERT INTO a (name) VALUES (NULL)"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("NOT NULL")));
}

TEST_F(DatabaseTest, SqliteStatusMapping) {
  EXPECT_TRUE(SqliteStatus(SQLITE_OK, nullptr, "x").ok());
  EXPECT_TRUE(SqliteStatus(SQLITE_DONE, nullptr, "x").ok());
  EXPECT_THAT(SqliteStatus(SQLITE_BUSY, nullptr, "ctx"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("ctx: database is locked")));
  EXPECT_THAT(SqliteStatus(SQLITE_LOCKED_SHAREDCACHE, nullptr, "ctx"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("ctx")));
  EXPECT_THAT(SqliteStatus(SQLITE_CONSTRAINT_PRIMARYKEY, nullptr, "ctx"),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("ctx")));
  EXPECT_THAT(SqliteStatus(SQLITE_CONSTRAINT_CHECK, nullptr, "ctx"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("ctx")));
  EXPECT_THAT(SqliteStatus(SQLITE_FULL, nullptr, "ctx"),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("full")));
  EXPECT_THAT(SqliteStatus(SQLITE_CORRUPT, nullptr, "ctx"),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("malformed")));
  EXPECT_THAT(SqliteStatus(SQLITE_NOTADB, nullptr, "ctx"),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("ctx")));
  EXPECT_THAT(SqliteStatus(SQLITE_READONLY, nullptr, "ctx"),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("ctx")));
  EXPECT_THAT(SqliteStatus(SQLITE_CANTOPEN, nullptr, "ctx"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("ctx")));
  EXPECT_THAT(SqliteStatus(SQLITE_IOERR_WRITE, nullptr, "ctx"),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("ctx: disk I/O error")));
}

TEST_F(DatabaseTest, IntegrityCheckOk) {
  auto db = OpenOrDie();
  TAILOR_ASSERT_OK(db->Migrate(TwoMigrations()));
  TAILOR_EXPECT_OK(db->IntegrityCheck());
}

TEST_F(DatabaseTest, IntegrityCheckReportsDamageAsDataLoss) {
  {
    auto db = OpenOrDie();
    TAILOR_ASSERT_OK(db->Exec(
        "CREATE TABLE t (x INTEGER, y INTEGER); CREATE INDEX i ON t(x);"
        "INSERT INTO t VALUES (1, 10), (2, 20), (3, 30);"));
    // Point the index at the other column: its stored entries no longer match the rows.
    TAILOR_ASSERT_OK(db->Exec(
        "PRAGMA writable_schema = ON;"
        "UPDATE sqlite_master SET sql = 'CREATE INDEX i ON t(y)' WHERE name = 'i';"
        "PRAGMA writable_schema = OFF;"));
  }
  auto db = OpenOrDie();
  EXPECT_THAT(db->IntegrityCheck(),
              StatusIs(absl::StatusCode::kDataLoss,
                       ::testing::AllOf(HasSubstr("integrity check of"),
                                        HasSubstr("missing from index i"))));
}

TEST_F(DatabaseTest, BackupProducesReadableCopy) {
  const std::string backup = dir_ + "/backup.db";
  {
    auto db = OpenOrDie();
    TAILOR_ASSERT_OK(db->Migrate(TwoMigrations()));
    TAILOR_ASSERT_OK(db->Exec("INSERT INTO a (name) VALUES ('x'), ('y')"));
    TAILOR_ASSERT_OK(db->BackupTo(backup));
    EXPECT_THAT(db->BackupTo(backup),
                StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("already exists")));
    // Later writes do not reach the copy.
    TAILOR_ASSERT_OK(db->Exec("INSERT INTO a (name) VALUES ('z')"));
  }
  TAILOR_ASSERT_OK_AND_ASSIGN(auto copy, Database::Open(backup));
  TAILOR_EXPECT_OK(copy->IntegrityCheck());
  TAILOR_ASSERT_OK_AND_ASSIGN(int v, copy->UserVersion());
  EXPECT_EQ(v, 2);
  EXPECT_EQ(CountRows(copy.get(), "a"), 3);
}

TEST_F(DatabaseTest, BackupIntoMissingDirectoryFails) {
  auto db = OpenOrDie();
  EXPECT_THAT(db->BackupTo(dir_ + "/missing/backup.db"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("backing up")));
}

}  // namespace
}  // namespace tailor::storage
