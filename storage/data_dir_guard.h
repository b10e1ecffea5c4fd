#ifndef TAILOR_STORAGE_DATA_DIR_GUARD_H_
#define TAILOR_STORAGE_DATA_DIR_GUARD_H_

// A data directory belongs to one coordinator, and a coordinator serves only a database that
// passed its start checks (docs/operations.md "The data directory"). Both run before the
// coordinator opens its store, so a refused start changes nothing on disk.

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "storage/database.h"

namespace tailor::storage {

// An exclusive flock(2) on <data_dir>/coordinator.lock, held for the object's life (the kernel
// drops it when the process dies, so a crash never leaves a stale lock). The file records the
// holder (pid, host, start time) for the message a second coordinator gets.
class DataDirLock {
 public:
  // FAILED_PRECONDITION naming the holder's pid and host when another process holds the lock.
  static absl::StatusOr<std::unique_ptr<DataDirLock>> Acquire(const std::string& data_dir,
                                                              absl::Time now);
  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;
  ~DataDirLock();

  static std::string PathIn(const std::string& data_dir) { return data_dir + "/coordinator.lock"; }

 private:
  explicit DataDirLock(int fd) : fd_(fd) {}
  int fd_;
};

// FAILED_PRECONDITION when <data_dir>/tailor.db is missing or empty while <data_dir>/blobs
// holds blobs: the database was lost or truncated, and starting afresh would forget every
// campaign and request id (an old request id would then create a new campaign).
absl::Status CheckDatabaseNotLost(const std::string& data_dir);

// DATA_LOSS when PRAGMA quick_check reports damage or an index of a table holds a different
// number of entries than the table has rows (a damaged unique index silently admits
// duplicates, e.g. of request ids). Partial indexes are skipped: they index fewer rows. With
// `second` (another connection to the same file) the index counts run on it concurrently.
absl::Status CheckDatabaseHealth(Database* db, Database* second = nullptr);

// CheckDatabaseHealth on <data_dir>/tailor.db through a read-only connection of its own, so
// that a damaged file is refused before anything (migrations included) writes to it. OK when
// there is no database yet.
absl::Status CheckDatabaseBeforeOpen(const std::string& data_dir);

// What the refusals above tell the operator to do.
std::string RecoverySteps(const std::string& data_dir);

}  // namespace tailor::storage

#endif  // TAILOR_STORAGE_DATA_DIR_GUARD_H_
