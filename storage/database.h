#ifndef TAILOR_STORAGE_DATABASE_H_
#define TAILOR_STORAGE_DATABASE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

struct sqlite3;
struct sqlite3_stmt;

namespace tailor::storage {

class Database;

// Maps an SQLite result code to the most specific absl::Status: SQLITE_BUSY/LOCKED ->
// UNAVAILABLE, SQLITE_CONSTRAINT_UNIQUE/PRIMARYKEY -> ALREADY_EXISTS, other constraints ->
// FAILED_PRECONDITION, SQLITE_FULL -> RESOURCE_EXHAUSTED, SQLITE_CORRUPT/NOTADB -> DATA_LOSS,
// SQLITE_CANTOPEN/PERM/READONLY -> PERMISSION_DENIED or UNAVAILABLE, else INTERNAL. The
// message names `context` and includes sqlite3_errmsg(db) when db is non-null.
absl::Status SqliteStatus(int rc, sqlite3* db, absl::string_view context);

// A prepared statement borrowed from the Database's cache. Move-only; on destruction it is
// reset, its bindings cleared, and it goes back to the cache. Bind indexes are 1-based,
// column indexes 0-based (as in SQLite).
class Statement {
 public:
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, int value) { return Bind(index, static_cast<int64_t>(value)); }
  Statement& Bind(int index, double value);
  Statement& Bind(int index, absl::string_view text);
  Statement& Bind(int index, const char* text) { return Bind(index, absl::string_view(text)); }
  Statement& Bind(int index, const std::string& text) {
    return Bind(index, absl::string_view(text));
  }
  Statement& BindBlob(int index, absl::string_view bytes);
  Statement& BindNull(int index);

  // Advances: true when a row is available, false when done. Binding errors recorded by Bind
  // are returned by the first Step.
  absl::StatusOr<bool> Step();
  // Steps to completion, discarding any rows. Returns the first error.
  absl::Status Run();
  // Rewinds so the statement can run again with new bindings.
  void Reset();

  int64_t ColumnInt(int col) const;
  double ColumnDouble(int col) const;
  std::string ColumnText(int col) const;
  std::string ColumnBlob(int col) const;
  bool ColumnIsNull(int col) const;

 private:
  friend class Database;
  Statement(Database* db, sqlite3_stmt* stmt, std::string sql);
  Database* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;
  absl::Status bind_status_;
};

// One schema step. Migrations are numbered 1..N in order; PRAGMA user_version holds the last
// applied number and is set in the same transaction as the step's SQL.
struct Migration {
  int version;
  std::string sql;  // may contain several statements
  // A step that rebuilds a table other tables reference (SQLite cannot drop a constraint in
  // place): foreign keys are off while it runs, as SQLite's documented table-rebuild
  // procedure requires, and PRAGMA foreign_key_check must pass before it commits.
  bool rebuilds_referenced_table = false;
  // Work SQL cannot express (e.g. rewriting stored protobufs), run after `sql` in the same
  // transaction; its error rolls the whole step back.
  std::function<absl::Status(Database&)> code = nullptr;
};

// RAII connection. Opened in WAL mode with synchronous=NORMAL, foreign_keys=ON and a busy
// timeout. Not thread-safe: the owner serialises access (the coordinator's stores hold a
// mutex around it).
class Database {
 public:
  struct Options {
    bool create_if_missing = true;
    absl::Duration busy_timeout = absl::Seconds(10);
    bool read_only = false;
  };

  static absl::StatusOr<std::unique_ptr<Database>> Open(const std::string& path,
                                                        const Options& options);
  static absl::StatusOr<std::unique_ptr<Database>> Open(const std::string& path) {
    return Open(path, Options());
  }
  ~Database();

  // Executes one or more statements without results.
  absl::Status Exec(absl::string_view sql);
  // Borrows a cached prepared statement (prepares it on first use).
  absl::StatusOr<Statement> Prepare(absl::string_view sql);

  // Applies the migrations whose version > user_version, each in its own BEGIN IMMEDIATE
  // transaction. FAILED_PRECONDITION when the file's user_version is newer than the last
  // migration ("database schema version 7 is newer than this binary's 5; upgrade tailor").
  absl::Status Migrate(const std::vector<Migration>& migrations);
  absl::StatusOr<int> UserVersion();

  int64_t LastInsertRowId() const;
  int Changes() const;
  // Runs PRAGMA integrity_check; OK when it says "ok", else DATA_LOSS with its output.
  absl::Status IntegrityCheck();
  // Online backup (sqlite3_backup) into a new file at `dest_path`.
  absl::Status BackupTo(const std::string& dest_path);

  // Called after every successful Transaction::Commit with how long the COMMIT took (the
  // coordinator's /metrics). Set it before the connection is shared; empty: not measured.
  void set_commit_observer(std::function<void(absl::Duration)> observer) {
    commit_observer_ = std::move(observer);
  }

  // Reports a commit made on another connection to this one's observer: the coordinator's
  // group committer writes through its own connection, and /metrics watches this one.
  void ReportCommit(absl::Duration took) const {
    if (commit_observer_) commit_observer_(took);
  }
  // True inside BEGIN ... COMMIT. Some errors (SQLITE_FULL, IOERR) roll the whole
  // transaction back on their own; a caller that goes on after an error must check.
  bool InTransaction() const;

  sqlite3* raw() const { return db_; }
  const std::string& path() const { return path_; }

 private:
  friend class Statement;
  friend class Transaction;
  Database(sqlite3* db, std::string path);
  void Return(std::string sql, sqlite3_stmt* stmt);
  absl::Status ApplyMigration(const Migration& m);

  sqlite3* db_;
  std::string path_;
  std::multimap<std::string, sqlite3_stmt*> cache_;
  std::function<void(absl::Duration)> commit_observer_;
};

// BEGIN IMMEDIATE ... COMMIT; rolls back on destruction unless committed. Not nestable.
class Transaction {
 public:
  static absl::StatusOr<Transaction> Begin(Database* db);
  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  ~Transaction();

  absl::Status Commit();

 private:
  explicit Transaction(Database* db) : db_(db) {}
  Database* db_;
  bool done_ = false;
};

}  // namespace tailor::storage

#endif  // TAILOR_STORAGE_DATABASE_H_
