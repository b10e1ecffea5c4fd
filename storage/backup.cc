#include "storage/backup.h"

#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/blob_store.h"
#include "storage/database.h"

namespace tailor::storage {
namespace {

namespace fs = std::filesystem;

// Streams a source blob into the destination store; Commit re-hashes what was written.
absl::Status CopyBlob(const BlobStore& from, BlobStore& to, const std::string& digest,
                      int64_t* bytes) {
  TAILOR_ASSIGN_OR_RETURN(int64_t size, from.Size(digest));
  TAILOR_ASSIGN_OR_RETURN(auto writer, to.NewWriter(size));
  constexpr int64_t kChunk = 4 << 20;
  for (int64_t offset = 0; offset < size; offset += kChunk) {
    TAILOR_ASSIGN_OR_RETURN(std::string chunk, from.ReadChunk(digest, offset, kChunk));
    TAILOR_RETURN_IF_ERROR(writer->Append(chunk));
  }
  auto committed = writer->Commit(digest, size);
  if (!committed.ok()) {
    return absl::DataLossError(absl::StrCat("blob ", digest, " in the data directory is corrupt: ",
                                            committed.status().message()));
  }
  *bytes += size;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BackupSummary> BackupDataDir(const std::string& data_dir,
                                            const std::string& out_dir) {
  const fs::path source_db = fs::path(data_dir) / "tailor.db";
  std::error_code ec;
  if (!fs::is_regular_file(source_db, ec)) {
    return absl::NotFoundError(
        absl::StrCat("no database at ", source_db.string(), " (is --data-dir right?)"));
  }
  if (fs::weakly_canonical(data_dir, ec) == fs::weakly_canonical(out_dir, ec)) {
    return absl::InvalidArgumentError("the backup directory must differ from the data directory");
  }
  fs::create_directories(out_dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create backup directory ", out_dir, ": ", ec.message()));
  }

  BackupSummary summary;
  const fs::path partial = fs::path(out_dir) / "tailor.db.partial";
  fs::remove(partial, ec);
  {
    Database::Options ro;
    ro.create_if_missing = false;
    ro.read_only = true;
    TAILOR_ASSIGN_OR_RETURN(auto source, Database::Open(source_db.string(), ro));
    TAILOR_RETURN_IF_ERROR(source->BackupTo(partial.string()));
  }
  std::set<std::string> digests;
  {
    Database::Options ro;
    ro.create_if_missing = false;
    TAILOR_ASSIGN_OR_RETURN(auto copy, Database::Open(partial.string(), ro));
    if (absl::Status st = copy->IntegrityCheck(); !st.ok()) {
      fs::remove(partial, ec);
      return st;
    }
    TAILOR_ASSIGN_OR_RETURN(Statement q, copy->Prepare("SELECT digest FROM artifacts"));
    while (true) {
      TAILOR_ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      ++summary.artifacts;
      digests.insert(q.ColumnText(0));
    }
    // The copy is a standalone file: fold its WAL in so tailor.db alone is the backup.
    TAILOR_RETURN_IF_ERROR(copy->Exec("PRAGMA wal_checkpoint(TRUNCATE)"));
  }
  for (const char* suffix : {"-wal", "-shm"}) fs::remove(partial.string() + suffix, ec);

  TAILOR_ASSIGN_OR_RETURN(auto from, BlobStore::Open((fs::path(data_dir) / "blobs").string()));
  TAILOR_ASSIGN_OR_RETURN(auto to, BlobStore::Open((fs::path(out_dir) / "blobs").string()));
  for (const std::string& digest : digests) {
    if (to->Exists(digest)) {
      ++summary.blobs_present;
      continue;
    }
    if (!from->Exists(digest)) {
      return absl::DataLossError(absl::StrCat("artifact blob ", digest, " is missing from ",
                                              from->root(), "; the data directory is damaged"));
    }
    TAILOR_RETURN_IF_ERROR(CopyBlob(*from, *to, digest, &summary.blob_bytes_copied));
    ++summary.blobs_copied;
  }

  // The database goes into place last: a backup directory whose tailor.db exists is complete.
  const fs::path final_db = fs::path(out_dir) / "tailor.db";
  fs::rename(partial, final_db, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("cannot rename ", partial.string(), " to ",
                                            final_db.string(), ": ", ec.message()));
  }
  summary.database_path = final_db.string();
  summary.database_bytes = static_cast<int64_t>(fs::file_size(final_db, ec));
  return summary;
}

}  // namespace tailor::storage
