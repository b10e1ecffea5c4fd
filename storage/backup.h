#ifndef TAILOR_STORAGE_BACKUP_H_
#define TAILOR_STORAGE_BACKUP_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace tailor::storage {

struct BackupSummary {
  std::string database_path;  // out_dir/tailor.db
  int64_t database_bytes = 0;
  int64_t artifacts = 0;      // artifact rows in the copied database
  int64_t blobs_copied = 0;   // blobs written to out_dir/blobs by this run
  int64_t blobs_present = 0;  // blobs an earlier backup into out_dir already holds
  int64_t blob_bytes_copied = 0;
};

// A consistent backup of a coordinator data directory that may be in use by a running
// coordinator:
//   1. SQLite's online backup API copies data_dir/tailor.db into out_dir/tailor.db.partial,
//      PRAGMA integrity_check runs on the copy, and only then is it renamed to tailor.db
//      (replacing an older backup atomically);
//   2. every blob an artifact row of the COPY names is copied into out_dir/blobs through the
//      blob store's writer, which re-hashes it, so a corrupt source blob fails the backup with
//      DATA_LOSS instead of producing a backup that cannot be restored.
// Blobs are published before the rows naming them commit, so copying after the database
// snapshot finds every blob the snapshot references. Blobs already in out_dir (an earlier
// backup) are content-addressed and kept: repeated backups into one directory are incremental.
// Job logs (data_dir/logs) and scratch (data_dir/work) are not part of a backup.
absl::StatusOr<BackupSummary> BackupDataDir(const std::string& data_dir,
                                            const std::string& out_dir);

}  // namespace tailor::storage

#endif  // TAILOR_STORAGE_BACKUP_H_
