#include "storage/data_dir_guard.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace tailor::storage {
namespace {

std::string HostName() {
  char host[256] = {0};
  if (::gethostname(host, sizeof(host) - 1) != 0) return "unknown";
  return host;
}

// "pid 123 on host h since 2026-12-02T01:00:00Z" from the lock file's key=value lines.
std::string DescribeHolder(const std::string& lock_path) {
  std::ifstream in(lock_path);
  std::string line, pid = "unknown", host = "unknown", since = "an unknown time";
  while (std::getline(in, line)) {
    absl::string_view value = line;
    if (absl::ConsumePrefix(&value, "pid=")) pid = std::string(value);
    if (absl::ConsumePrefix(&value, "host=")) host = std::string(value);
    if (absl::ConsumePrefix(&value, "started=")) since = std::string(value);
  }
  return absl::StrCat("pid ", pid, " on host ", host, ", started ", since);
}

bool HasAnyFile(const std::filesystem::path& dir) {
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->is_regular_file(ec)) return true;
  }
  return false;
}

// SQL identifiers quoted for the index checks (names come from sqlite_schema itself).
std::string Ident(const std::string& name) {
  return absl::StrCat("\"", absl::StrReplaceAll(name, {{"\"", "\"\""}}), "\"");
}

absl::StatusOr<std::vector<std::string>> QuickCheck(Database* db) {
  std::vector<std::string> problems;
  TAILOR_ASSIGN_OR_RETURN(Statement s, db->Prepare("PRAGMA quick_check(20)"));
  while (true) {
    TAILOR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    const std::string line = s.ColumnText(0);
    if (line != "ok") problems.push_back(line);
  }
  return problems;
}

struct IndexToCheck {
  std::string table, index, column;  // column: the index's first, counted on both sides
};

// Every full index of every rowid table whose first column is a plain column (not an
// expression).
absl::StatusOr<std::vector<IndexToCheck>> IndexesToCheck(Database* db) {
  TAILOR_ASSIGN_OR_RETURN(
      Statement s, db->Prepare("SELECT t.name, il.name, ii.name FROM pragma_table_list AS t, "
                               "pragma_index_list(t.name) AS il, pragma_index_info(il.name) AS ii "
                               "WHERE t.schema = 'main' AND t.type = 'table' AND t.wr = 0 AND "
                               "t.name NOT LIKE 'sqlite_%' AND il.partial = 0 AND ii.seqno = 0 AND "
                               "ii.name IS NOT NULL ORDER BY t.name, il.name"));
  std::vector<IndexToCheck> out;
  while (true) {
    TAILOR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back({s.ColumnText(0), s.ColumnText(1), s.ColumnText(2)});
  }
  return out;
}

// Each index's entries against its table's rows, counted through the index (a covering scan
// of it: count(*) would count the table whatever INDEXED BY says) and without it. Each table
// is scanned once for all of its indexes' columns: a restart at 100k queued campaigns checks
// 18 indexes of 8 tables.
absl::StatusOr<std::vector<std::string>> IndexCountMismatches(Database* db) {
  TAILOR_ASSIGN_OR_RETURN(std::vector<IndexToCheck> indexes, IndexesToCheck(db));
  std::vector<std::string> problems;
  for (size_t first = 0; first < indexes.size();) {
    const std::string& table = indexes[first].table;
    size_t end = first;
    std::vector<std::string> columns;
    while (end < indexes.size() && indexes[end].table == table) {
      const IndexToCheck& i = indexes[end++];
      columns.push_back(absl::StrCat("(SELECT count(", Ident(i.column), ") FROM ", Ident(table),
                                     " INDEXED BY ", Ident(i.index), ")"));
    }
    for (size_t k = first; k < end; ++k) {
      columns.push_back(absl::StrCat("count(", Ident(indexes[k].column), ")"));
    }
    TAILOR_ASSIGN_OR_RETURN(
        Statement s, db->Prepare(absl::StrCat("SELECT ", absl::StrJoin(columns, ", "), " FROM ",
                                              Ident(table), " NOT INDEXED")));
    TAILOR_ASSIGN_OR_RETURN(bool row, s.Step());
    const int n = static_cast<int>(end - first);
    for (int k = 0; row && k < n; ++k) {
      const IndexToCheck& i = indexes[first + k];
      const int64_t in_index = s.ColumnInt(k), in_table = s.ColumnInt(n + k);
      if (in_index != in_table) {
        problems.push_back(absl::StrCat("index ", i.index, " holds ", in_index,
                                        " entries but table ", i.table, " has ", in_table,
                                        " rows"));
      }
    }
    first = end;
  }
  return problems;
}

}  // namespace

std::string RecoverySteps(const std::string& data_dir) {
  return absl::StrCat(
      "To recover: stop every tailor-coordinator on ", data_dir,
      ", move the directory aside, and restore the latest tailor-backup into an empty data "
      "directory (docs/operations.md \"Backups of the database and blobs\"); to start "
      "afresh instead, give --data-dir a new directory");
}

absl::StatusOr<std::unique_ptr<DataDirLock>> DataDirLock::Acquire(const std::string& data_dir,
                                                                  absl::Time now) {
  const std::string path = PathIn(data_dir);
  // O_CLOEXEC: ranks the local launcher forks must not inherit the lock and keep it past a
  // coordinator crash.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot open the data dir lock '", path, "': ", std::strerror(errno)));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err != EWOULDBLOCK) {
      return absl::UnavailableError(absl::StrCat("cannot lock '", path, "': ", std::strerror(err)));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "data dir '", data_dir, "' is in use by another tailor-coordinator (", DescribeHolder(path),
        "): one coordinator owns a data dir; stop that one, or give "
        "this one another --data-dir"));
  }
  const std::string holder = absl::StrCat(
      "pid=", ::getpid(), "\nhost=", HostName(),
      "\nstarted=", absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", now, absl::UTCTimeZone()), "\n");
  if (::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, holder.data(), holder.size(), 0) != static_cast<ssize_t>(holder.size())) {
    const int err = errno;
    ::close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot record the holder in '", path, "': ", std::strerror(err)));
  }
  return std::unique_ptr<DataDirLock>(new DataDirLock(fd));
}

DataDirLock::~DataDirLock() {
  // Emptied first, so that a reader never names a pid that no longer holds the lock.
  if (::ftruncate(fd_, 0) != 0) {
    // Nothing to do: closing releases the lock, which is what matters.
  }
  ::close(fd_);
}

absl::Status CheckDatabaseNotLost(const std::string& data_dir) {
  const std::filesystem::path db = std::filesystem::path(data_dir) / "tailor.db";
  std::error_code ec;
  const bool exists = std::filesystem::exists(db, ec);
  const uintmax_t size = exists ? std::filesystem::file_size(db, ec) : 0;
  if (exists && size > 0) return absl::OkStatus();
  if (!HasAnyFile(std::filesystem::path(data_dir) / "blobs")) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "data dir '", data_dir,
      "': ", exists ? "tailor.db is empty (0 bytes)" : "tailor.db is missing",
      " but blobs/ holds artifacts: the database was lost or truncated, and starting afresh "
      "would forget every campaign and request id. ",
      RecoverySteps(data_dir)));
}

absl::Status CheckDatabaseHealth(Database* db, Database* second) {
  // The two checks read the whole file independently; on a second connection they run side by
  // side (each is about a quarter of a restart at 100k queued campaigns).
  absl::StatusOr<std::vector<std::string>> mismatches = std::vector<std::string>();
  std::thread counter;
  if (second != nullptr) counter = std::thread([&] { mismatches = IndexCountMismatches(second); });
  auto quick = QuickCheck(db);
  if (counter.joinable()) counter.join();
  std::vector<std::string> problems;
  if (!quick.ok()) {
    problems.push_back(std::string(quick.status().message()));
  } else {
    problems = *std::move(quick);
  }
  if (problems.empty()) {
    // Index counts mean something only on a file whose pages are sound.
    if (second == nullptr) mismatches = IndexCountMismatches(db);
    if (!mismatches.ok()) {
      problems.push_back(std::string(mismatches.status().message()));
    } else {
      problems = *std::move(mismatches);
    }
  }
  if (problems.empty()) return absl::OkStatus();
  if (problems.size() > 5) problems.resize(5);
  return absl::DataLossError(absl::StrCat(
      "database '", db->path(), "' failed its start check (", absl::StrJoin(problems, "; "),
      "); the coordinator does not serve a damaged database. ",
      RecoverySteps(std::filesystem::path(db->path()).parent_path().string())));
}

absl::Status CheckDatabaseBeforeOpen(const std::string& data_dir) {
  const std::string path = (std::filesystem::path(data_dir) / "tailor.db").string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) || std::filesystem::file_size(path, ec) == 0) {
    return absl::OkStatus();  // a new data dir; CheckDatabaseNotLost judged the empty case
  }
  Database::Options read_only;
  read_only.read_only = true;
  read_only.create_if_missing = false;
  auto db = Database::Open(path, read_only);
  if (!db.ok()) {
    return absl::DataLossError(absl::StrCat("database '", path, "' failed its start check (",
                                            db.status().message(),
                                            "); the coordinator does not serve a damaged "
                                            "database. ",
                                            RecoverySteps(data_dir)));
  }
  // A second connection for the index counts; without one they follow quick_check.
  auto second = Database::Open(path, read_only);
  return CheckDatabaseHealth(db->get(), second.ok() ? second->get() : nullptr);
}

}  // namespace tailor::storage
