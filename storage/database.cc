#include "storage/database.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace tailor::storage {
namespace {

// Error messages quote the SQL that failed; long migration scripts are cut so a status stays
// readable in logs.
std::string Abbreviate(absl::string_view sql) {
  constexpr size_t kMax = 160;
  std::string s(absl::StripAsciiWhitespace(sql));
  std::replace(s.begin(), s.end(), '\n', ' ');
  if (s.size() > kMax) {
    s.resize(kMax);
    s += "...";
  }
  return s;
}

absl::StatusCode CodeFor(int rc) {
  switch (rc) {
    case SQLITE_CONSTRAINT_UNIQUE:
    case SQLITE_CONSTRAINT_PRIMARYKEY:
    case SQLITE_CONSTRAINT_ROWID:  // a duplicate INTEGER PRIMARY KEY
      return absl::StatusCode::kAlreadyExists;
    default:
      break;
  }
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::StatusCode::kUnavailable;
    case SQLITE_CONSTRAINT:
      return absl::StatusCode::kFailedPrecondition;
    case SQLITE_FULL:
      return absl::StatusCode::kResourceExhausted;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::StatusCode::kDataLoss;
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_AUTH:
      return absl::StatusCode::kPermissionDenied;
    case SQLITE_CANTOPEN:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

bool IsInMemoryPath(const std::string& path) {
  return path == ":memory:" || path.empty() || absl::StartsWith(path, "file::memory:") ||
         path.find("mode=memory") != std::string::npos;
}

// Reads a single-row, single-column pragma such as `PRAGMA journal_mode=WAL`.
absl::StatusOr<std::string> PragmaText(sqlite3* db, const char* sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr);
  if (rc != SQLITE_OK) return SqliteStatus(rc, db, sql);
  rc = sqlite3_step(stmt);
  std::string value;
  if (rc == SQLITE_ROW) {
    const unsigned char* text = sqlite3_column_text(stmt, 0);
    if (text != nullptr) value = reinterpret_cast<const char*>(text);
    rc = SQLITE_OK;
  } else if (rc == SQLITE_DONE) {
    rc = SQLITE_OK;
  }
  absl::Status status = rc == SQLITE_OK ? absl::OkStatus() : SqliteStatus(rc, db, sql);
  sqlite3_finalize(stmt);
  if (!status.ok()) return status;
  return value;
}

}  // namespace

absl::Status SqliteStatus(int rc, sqlite3* db, absl::string_view context) {
  if (rc == SQLITE_OK || rc == SQLITE_ROW || rc == SQLITE_DONE) return absl::OkStatus();
  // sqlite3_errmsg describes the connection's most recent failure, which is `rc` for every
  // caller here; fall back to the generic text when the connection has no error recorded.
  std::string detail;
  if (db != nullptr && sqlite3_errcode(db) != SQLITE_OK) detail = sqlite3_errmsg(db);
  if (detail.empty()) detail = sqlite3_errstr(rc);
  return absl::Status(CodeFor(rc),
                      absl::StrCat(context, ": ", detail, " (sqlite code ", rc, ")"));
}

// ---------------------------------------------------------------------------------------------
// Statement

Statement::Statement(Database* db, sqlite3_stmt* stmt, std::string sql)
    : db_(db), stmt_(stmt), sql_(std::move(sql)) {}

Statement::Statement(Statement&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      stmt_(std::exchange(other.stmt_, nullptr)),
      sql_(std::move(other.sql_)),
      bind_status_(std::move(other.bind_status_)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    // Our current statement goes back to the cache when `old` is destroyed.
    Statement old(std::move(*this));
    db_ = std::exchange(other.db_, nullptr);
    stmt_ = std::exchange(other.stmt_, nullptr);
    sql_ = std::move(other.sql_);
    bind_status_ = std::move(other.bind_status_);
  }
  return *this;
}

Statement::~Statement() {
  if (stmt_ == nullptr) return;
  // Resetting ends any read transaction the statement holds open (which would otherwise block
  // WAL checkpoints) and clearing the bindings keeps the next borrower from inheriting values.
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  db_->Return(std::move(sql_), stmt_);
  stmt_ = nullptr;
  db_ = nullptr;
}

namespace {
absl::Status BindResult(int rc, sqlite3* db, int index, const std::string& sql) {
  if (rc == SQLITE_OK) return absl::OkStatus();
  return SqliteStatus(rc, db, absl::StrCat("binding parameter ", index, " of '",
                                           Abbreviate(sql), "'"));
}

// SQLite binds NULL when handed a null data pointer, so empty values need a real pointer.
const char* NonNull(absl::string_view s) { return s.data() != nullptr ? s.data() : ""; }
}  // namespace

Statement& Statement::Bind(int index, int64_t value) {
  if (stmt_ != nullptr && bind_status_.ok()) {
    bind_status_ = BindResult(sqlite3_bind_int64(stmt_, index, value), db_->raw(), index, sql_);
  }
  return *this;
}

Statement& Statement::Bind(int index, double value) {
  if (stmt_ != nullptr && bind_status_.ok()) {
    bind_status_ = BindResult(sqlite3_bind_double(stmt_, index, value), db_->raw(), index, sql_);
  }
  return *this;
}

Statement& Statement::Bind(int index, absl::string_view text) {
  if (stmt_ != nullptr && bind_status_.ok()) {
    bind_status_ = BindResult(sqlite3_bind_text64(stmt_, index, NonNull(text), text.size(),
                                                  SQLITE_TRANSIENT, SQLITE_UTF8),
                              db_->raw(), index, sql_);
  }
  return *this;
}

Statement& Statement::BindBlob(int index, absl::string_view bytes) {
  if (stmt_ != nullptr && bind_status_.ok()) {
    bind_status_ = BindResult(
        sqlite3_bind_blob64(stmt_, index, NonNull(bytes), bytes.size(), SQLITE_TRANSIENT),
        db_->raw(), index, sql_);
  }
  return *this;
}

Statement& Statement::BindNull(int index) {
  if (stmt_ != nullptr && bind_status_.ok()) {
    bind_status_ = BindResult(sqlite3_bind_null(stmt_, index), db_->raw(), index, sql_);
  }
  return *this;
}

absl::StatusOr<bool> Statement::Step() {
  if (stmt_ == nullptr) {
    return absl::FailedPreconditionError("Step on a moved-from Statement");
  }
  if (!bind_status_.ok()) return bind_status_;
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  absl::Status status =
      SqliteStatus(rc, db_->raw(), absl::StrCat("executing '", Abbreviate(sql_), "'"));
  // Leave the statement rewound so a failed step does not pin a transaction or keep failing.
  sqlite3_reset(stmt_);
  return status;
}

absl::Status Statement::Run() {
  while (true) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

void Statement::Reset() {
  if (stmt_ == nullptr) return;
  sqlite3_reset(stmt_);
  // New bindings follow, so an error from the old ones must not stick.
  bind_status_ = absl::OkStatus();
}

int64_t Statement::ColumnInt(int col) const { return sqlite3_column_int64(stmt_, col); }

double Statement::ColumnDouble(int col) const { return sqlite3_column_double(stmt_, col); }

std::string Statement::ColumnText(int col) const {
  // sqlite3_column_text must come before sqlite3_column_bytes: the conversion it may do
  // changes the byte count.
  const unsigned char* text = sqlite3_column_text(stmt_, col);
  int n = sqlite3_column_bytes(stmt_, col);
  if (text == nullptr) return std::string();
  return std::string(reinterpret_cast<const char*>(text), n);
}

std::string Statement::ColumnBlob(int col) const {
  const void* data = sqlite3_column_blob(stmt_, col);
  int n = sqlite3_column_bytes(stmt_, col);
  if (data == nullptr) return std::string();
  return std::string(static_cast<const char*>(data), n);
}

bool Statement::ColumnIsNull(int col) const {
  return sqlite3_column_type(stmt_, col) == SQLITE_NULL;
}

// ---------------------------------------------------------------------------------------------
// Database

Database::Database(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

Database::~Database() {
  // Statements still borrowed at this point are a caller bug (they would return to a dead
  // Database); close_v2 at least keeps SQLite itself consistent until they are finalized.
  for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
  cache_.clear();
  sqlite3_close_v2(db_);
}

absl::StatusOr<std::unique_ptr<Database>> Database::Open(const std::string& path,
                                                         const Options& options) {
  const bool in_memory = IsInMemoryPath(path);
  if (!in_memory && !options.create_if_missing) {
    struct stat st;
    // SQLite reports a missing file as SQLITE_CANTOPEN; callers deserve NOT_FOUND.
    if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat("database ", path, " does not exist"));
    }
  }
  int flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI;  // the owner serialises access
  if (options.read_only) {
    flags |= SQLITE_OPEN_READONLY;
  } else {
    flags |= SQLITE_OPEN_READWRITE;
    if (options.create_if_missing) flags |= SQLITE_OPEN_CREATE;
  }
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status status = SqliteStatus(rc, raw, absl::StrCat("opening database ", path));
    sqlite3_close_v2(raw);  // open_v2 allocates a handle even on failure
    return status;
  }
  // From here on ~Database closes the handle on every error path.
  std::unique_ptr<Database> db(new Database(raw, path));
  sqlite3_extended_result_codes(raw, 1);
  rc = sqlite3_busy_timeout(
      raw, static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(options.busy_timeout),
                                              INT32_MAX)));
  if (rc != SQLITE_OK) return SqliteStatus(rc, raw, "setting busy timeout");

  if (!options.read_only) {
    // A read-only connection cannot switch the journal mode; it reads whatever the writer set.
    TAILOR_ASSIGN_OR_RETURN(std::string mode, PragmaText(raw, "PRAGMA journal_mode=WAL"));
    mode = absl::AsciiStrToLower(mode);
    const bool ok = mode == "wal" || (in_memory && mode == "memory");
    if (!ok) {
      return absl::FailedPreconditionError(absl::StrCat(
          "database ", path, ": could not enable WAL journal mode (got '", mode, "')"));
    }
  }
  TAILOR_RETURN_IF_ERROR(db->Exec("PRAGMA synchronous=NORMAL"));
  TAILOR_RETURN_IF_ERROR(db->Exec("PRAGMA foreign_keys=ON"));
  return db;
}

bool Database::InTransaction() const { return sqlite3_get_autocommit(db_) == 0; }

absl::Status Database::Exec(absl::string_view sql) {
  std::string owned(sql);  // sqlite3_exec needs NUL termination
  int rc = sqlite3_exec(db_, owned.c_str(), nullptr, nullptr, nullptr);
  return SqliteStatus(rc, db_, absl::StrCat("executing '", Abbreviate(sql), "'"));
}

absl::StatusOr<Statement> Database::Prepare(absl::string_view sql) {
  std::string key(sql);
  auto it = cache_.find(key);
  if (it != cache_.end()) {
    sqlite3_stmt* stmt = it->second;
    cache_.erase(it);
    return Statement(this, stmt, std::move(key));
  }
  sqlite3_stmt* stmt = nullptr;
  const char* tail = nullptr;
  // PERSISTENT: these statements live for the connection's lifetime in the cache.
  int rc = sqlite3_prepare_v3(db_, key.data(), static_cast<int>(key.size()),
                              SQLITE_PREPARE_PERSISTENT, &stmt, &tail);
  if (rc != SQLITE_OK) {
    return SqliteStatus(rc, db_, absl::StrCat("preparing '", Abbreviate(sql), "'"));
  }
  if (stmt == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("preparing '", Abbreviate(sql), "': no SQL statement"));
  }
  absl::string_view rest(tail, key.data() + key.size() - tail);
  if (!absl::StripAsciiWhitespace(rest).empty()) {
    sqlite3_finalize(stmt);
    // Only the first statement would run; silently dropping the rest hides bugs.
    return absl::InvalidArgumentError(absl::StrCat(
        "preparing '", Abbreviate(sql), "': Prepare takes exactly one statement; use Exec"));
  }
  return Statement(this, stmt, std::move(key));
}

void Database::Return(std::string sql, sqlite3_stmt* stmt) {
  // The SQL texts are compile-time constants in practice, so the cache stays small.
  cache_.emplace(std::move(sql), stmt);
}

absl::Status Database::Migrate(const std::vector<Migration>& migrations) {
  for (size_t i = 0; i < migrations.size(); ++i) {
    if (migrations[i].version != static_cast<int>(i) + 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("migrations must be numbered 1..N in order; entry ", i, " has version ",
                       migrations[i].version));
    }
  }
  const int latest = static_cast<int>(migrations.size());
  TAILOR_ASSIGN_OR_RETURN(int current, UserVersion());
  if (current > latest) {
    return absl::FailedPreconditionError(
        absl::StrCat("database schema version ", current, " is newer than this binary's ",
                     latest, "; upgrade tailor"));
  }
  for (const Migration& m : migrations) {
    if (m.version <= current) continue;
    // PRAGMA foreign_keys is a no-op inside a transaction: switched around it.
    if (m.rebuilds_referenced_table) TAILOR_RETURN_IF_ERROR(Exec("PRAGMA foreign_keys=OFF"));
    absl::Status s = ApplyMigration(m);
    if (m.rebuilds_referenced_table) {
      const absl::Status on = Exec("PRAGMA foreign_keys=ON");
      if (s.ok()) s = on;
    }
    if (!s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("migration ", m.version, " failed: ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status Database::ApplyMigration(const Migration& m) {
  // The SQL and the version bump commit together, so a crash never leaves a half-applied
  // step recorded as done (SQLite DDL is transactional).
  TAILOR_ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(this));
  if (!m.sql.empty()) TAILOR_RETURN_IF_ERROR(Exec(m.sql));
  if (m.code) TAILOR_RETURN_IF_ERROR(m.code(*this));
  if (m.rebuilds_referenced_table) {
    TAILOR_ASSIGN_OR_RETURN(Statement check, Prepare("PRAGMA foreign_key_check"));
    TAILOR_ASSIGN_OR_RETURN(bool violation, check.Step());
    if (violation) {
      return absl::FailedPreconditionError(
          absl::StrCat("a row of ", check.ColumnText(0), " references a missing row of ",
                       check.ColumnText(2), " after the rebuild"));
    }
  }
  TAILOR_RETURN_IF_ERROR(Exec(absl::StrCat("PRAGMA user_version = ", m.version)));
  return txn.Commit();  // on failure ~Transaction rolls back
}

absl::StatusOr<int> Database::UserVersion() {
  TAILOR_ASSIGN_OR_RETURN(Statement stmt, Prepare("PRAGMA user_version"));
  TAILOR_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return absl::InternalError("PRAGMA user_version returned no row");
  return static_cast<int>(stmt.ColumnInt(0));
}

int64_t Database::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }

int Database::Changes() const { return sqlite3_changes(db_); }

absl::Status Database::IntegrityCheck() {
  TAILOR_ASSIGN_OR_RETURN(Statement stmt, Prepare("PRAGMA integrity_check"));
  std::vector<std::string> lines;
  while (true) {
    TAILOR_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    lines.push_back(stmt.ColumnText(0));
  }
  if (lines.size() == 1 && lines[0] == "ok") return absl::OkStatus();
  return absl::DataLossError(absl::StrCat("integrity check of ", path_,
                                          " failed: ", absl::StrJoin(lines, "; ")));
}

absl::Status Database::BackupTo(const std::string& dest_path) {
  struct stat st;
  if (::stat(dest_path.c_str(), &st) == 0) {
    // Overwriting could clobber a previous good backup with a failed one.
    return absl::AlreadyExistsError(
        absl::StrCat("backup destination ", dest_path, " already exists"));
  }
  sqlite3* dest = nullptr;
  int rc = sqlite3_open_v2(dest_path.c_str(), &dest,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  const std::string context = absl::StrCat("backing up ", path_, " to ", dest_path);
  absl::Status status;
  if (rc != SQLITE_OK) {
    status = SqliteStatus(rc, dest, context);
  } else {
    sqlite3_extended_result_codes(dest, 1);
    sqlite3_backup* backup = sqlite3_backup_init(dest, "main", db_, "main");
    if (backup == nullptr) {
      status = SqliteStatus(sqlite3_extended_errcode(dest), dest, context);
    } else {
      // Copy everything in one step; retry briefly while another connection holds a lock.
      for (int attempt = 0; attempt < 1000; ++attempt) {
        rc = sqlite3_backup_step(backup, -1);
        if (rc != SQLITE_BUSY && rc != SQLITE_LOCKED && rc != SQLITE_OK) break;
        if (rc == SQLITE_OK) continue;
        sqlite3_sleep(10);
      }
      int finish_rc = sqlite3_backup_finish(backup);
      if (rc != SQLITE_DONE) {
        status = SqliteStatus(rc, dest, context);
      } else if (finish_rc != SQLITE_OK) {
        status = SqliteStatus(finish_rc, dest, context);
      }
    }
  }
  sqlite3_close_v2(dest);
  if (!status.ok()) {
    // A partial copy must not be mistaken for a backup.
    std::remove(dest_path.c_str());
    std::remove((dest_path + "-journal").c_str());
    std::remove((dest_path + "-wal").c_str());
    std::remove((dest_path + "-shm").c_str());
  }
  return status;
}

// ---------------------------------------------------------------------------------------------
// Transaction

absl::StatusOr<Transaction> Transaction::Begin(Database* db) {
  // IMMEDIATE takes the write lock up front, so a writer waits (busy timeout) at BEGIN
  // instead of failing with SQLITE_BUSY halfway through when it upgrades from a read.
  TAILOR_RETURN_IF_ERROR(db->Exec("BEGIN IMMEDIATE"));
  return Transaction(db);
}

Transaction::Transaction(Transaction&& other) noexcept
    : db_(other.db_), done_(std::exchange(other.done_, true)) {}

Transaction::~Transaction() {
  if (done_ || db_ == nullptr) return;
  // Some errors (SQLITE_FULL, IOERR) already rolled the transaction back; a second ROLLBACK
  // would only fail.
  if (sqlite3_get_autocommit(db_->raw())) return;
  (void)db_->Exec("ROLLBACK");
}

absl::Status Transaction::Commit() {
  if (done_) return absl::FailedPreconditionError("transaction already finished");
  // On failure (e.g. a deferred foreign-key violation) the transaction stays open and the
  // destructor rolls it back.
  // Wall time on the steady clock: this measures the disk, not the coordinator's clock.
  const auto start = std::chrono::steady_clock::now();
  TAILOR_RETURN_IF_ERROR(db_->Exec("COMMIT"));
  done_ = true;
  if (db_->commit_observer_) {
    db_->commit_observer_(absl::FromChrono(std::chrono::steady_clock::now() - start));
  }
  return absl::OkStatus();
}

}  // namespace tailor::storage
