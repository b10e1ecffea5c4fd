// tailor-backup: online backup of a coordinator data directory (database + artifact blobs),
// safe while the coordinator runs. See docs/operations.md "Backups of the database and blobs".
#include <iostream>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "storage/backup.h"

int main(int argc, char** argv) {
  CLI::App app{"tailor-backup: consistent online backup of a tailor coordinator's data directory"};
  std::string data_dir = "./tailor-data";
  std::string out_dir;
  bool json = false;
  app.add_option("--data-dir", data_dir, "the coordinator's --data-dir")->capture_default_str();
  app.add_option("--out", out_dir,
                 "backup directory; an earlier backup there is updated incrementally")
      ->required();
  app.add_flag("--json", json, "print the summary as JSON");
  CLI11_PARSE(app, argc, argv);

  auto summary = tailor::storage::BackupDataDir(data_dir, out_dir);
  if (!summary.ok()) {
    std::cerr << "tailor-backup: " << summary.status().message() << "\n";
    return 1;
  }
  if (json) {
    nlohmann::json j = {{"database", summary->database_path},
                        {"database_bytes", summary->database_bytes},
                        {"artifacts", summary->artifacts},
                        {"blobs_copied", summary->blobs_copied},
                        {"blobs_present", summary->blobs_present},
                        {"blob_bytes_copied", summary->blob_bytes_copied}};
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << absl::StrFormat("database   %s (%d bytes, integrity ok)\n", summary->database_path,
                               summary->database_bytes)
            << absl::StrFormat("artifacts  %d\n", summary->artifacts)
            << absl::StrFormat("blobs      %d copied (%d bytes), %d already in the backup\n",
                               summary->blobs_copied, summary->blob_bytes_copied,
                               summary->blobs_present);
  return 0;
}
