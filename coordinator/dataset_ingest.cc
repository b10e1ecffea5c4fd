#include "coordinator/dataset_ingest.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "compression/data/parent_vocabulary.h"
#include "compression/data/text_dataset.h"
#include "compression/model/model_archive.h"
#include "coordinator/parent_architecture.h"

namespace tailor::coordinator {
namespace {

namespace fs = std::filesystem;

struct Role {
  const char* name;
  v1::DatasetRef* ref;
};

std::vector<Role> GivenDatasets(v1::DeploymentContract& c) {
  std::vector<Role> roles;
  v1::DataParams* d = c.mutable_data();
  if (d->has_calibration()) roles.push_back({"calibration", d->mutable_calibration()});
  if (d->has_train()) roles.push_back({"train", d->mutable_train()});
  if (d->has_eval()) roles.push_back({"eval", d->mutable_eval()});
  return roles;
}

absl::Status Prefixed(const std::string& field, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(field, ": ", s.message()));
}

// Reads the whole dataset as rank 0 of 1; the sequences it holds.
absl::StatusOr<int64_t> ReadThrough(const std::string& path, const data::TextDatasetOptions& o,
                                    const tokenizer::Tokenizer* tokenizer) {
  absl::StatusOr<std::unique_ptr<data::TextDatasetReader>> reader =
      data::TextDatasetReader::Open(path, o, tokenizer);
  if (!reader.ok()) return reader.status();
  int64_t sequences = 0;
  while (true) {
    absl::StatusOr<std::optional<data::TokenSequence>> s = (*reader)->Next();
    if (!s.ok()) return s.status();
    if (!s->has_value()) return sequences;
    ++sequences;
  }
}

// The dataset's files as one archive in a temp file, streamed into the blob store.
absl::StatusOr<storage::BlobInfo> StoreDataset(const std::vector<std::string>& files,
                                               storage::BlobStore& blobs) {
  const fs::path dir = fs::path(files.front()).parent_path();
  std::vector<std::string> names;
  for (const std::string& f : files) names.push_back(fs::path(f).filename());
  std::string tmp = (fs::temp_directory_path() / "tailor-dataset-XXXXXX").string();
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) return absl::InternalError("cannot create a temp file for the dataset archive");
  ::close(fd);
  struct Remove {
    std::string path;
    ~Remove() { std::remove(path.c_str()); }
  } remove{tmp};
  if (absl::Status s = model::PackFilesArchive(dir.string(), names, tmp); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<storage::BlobStore::Writer>> writer =
      blobs.NewWriter(kMaxDatasetBytes + (int64_t{1} << 20));
  if (!writer.ok()) return writer.status();
  std::ifstream in(tmp, std::ios::binary);
  std::string chunk(1 << 20, '\0');
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    if (in.gcount() <= 0) break;
    if (absl::Status s = (*writer)->Append({chunk.data(), static_cast<size_t>(in.gcount())});
        !s.ok()) {
      return s;
    }
  }
  return (*writer)->Commit("", -1);
}

}  // namespace

int64_t DatasetSequenceTokens(const v1::DeploymentContract& c, const char* role,
                              int64_t context_tokens) {
  const std::string r = role;
  int64_t n = 0;
  if (r == "train") {
    n = c.recovery().sequence_length();
  } else if (r == "eval") {
    n = c.data().eval().sequence_tokens();
  } else {
    n = c.data().calibration().has_sequence_tokens() ? c.data().calibration().sequence_tokens()
                                                     : c.ranking().sequence_length();
  }
  if (n <= 0) n = 64;
  return context_tokens > 0 && r == "eval" ? std::min(n, context_tokens) : n;
}

absl::Status IngestDatasets(v1::DeploymentContract& contract, storage::BlobStore& blobs) {
  if (!contract.has_data()) return absl::OkStatus();
  std::vector<Role> roles = GivenDatasets(contract);
  std::vector<std::pair<Role, std::vector<std::string>>> to_store;
  absl::StatusOr<data::ParentVocabulary> vocab;
  int64_t total = 0;
  for (const Role& role : roles) {
    const std::string field = absl::StrCat("data.", role.name);
    if (!role.ref->artifact_digest().empty()) {
      if (!blobs.Exists(role.ref->artifact_digest())) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ".artifact_digest: no artifact sha256:", role.ref->artifact_digest(),
            " in this coordinator's blob store; give data.", role.name, ".path"));
      }
      continue;
    }
    if (!vocab.ok() || vocab->vocab_size == 0) {
      absl::StatusOr<std::string> config = ParentConfigText(contract.parent(), blobs);
      if (!config.ok()) return Prefixed("parent", config.status());
      vocab = data::ReadParentVocabulary(*config, "config.json", contract.parent().format(),
                                         contract.parent().path());
      if (!vocab.ok()) return Prefixed("parent", vocab.status());
    }
    const std::string path_field = field + ".path";
    absl::StatusOr<std::vector<std::string>> files = data::DatasetFiles(role.ref->path());
    if (!files.ok()) return Prefixed(path_field, files.status());
    for (const std::string& f : *files) total += static_cast<int64_t>(fs::file_size(f));
    if (total > kMaxDatasetBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          path_field, ": the contract's datasets hold ", total, " bytes; the limit is ",
          kMaxDatasetBytes, " (docs/data.md \"Limits\")"));
    }
    data::TextDatasetOptions o =
        vocab->Options(DatasetSequenceTokens(contract, role.name, vocab->context_tokens));
    o.packing = role.ref->packing();
    absl::StatusOr<int64_t> sequences = ReadThrough(role.ref->path(), o, vocab->tokenizer.get());
    if (!sequences.ok()) {
      absl::Status s = sequences.status();
      if (vocab->tokenizer == nullptr && absl::StrContains(s.message(), "has no tokenizer")) {
        s = absl::Status(s.code(), absl::StrCat(s.message(), " (", vocab->no_tokenizer_reason,
                                                ")"));
      }
      return Prefixed(path_field, s);
    }
    if (*sequences == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          path_field, ": ", role.ref->path(), " holds no sequence of at least 2 tokens"));
    }
    if (std::string(role.name) == "eval" && o.packing) {
      // The exact-match pass reads the prompt/answer lines unpacked: each must fit the context.
      o.packing = false;
      o.only_prompts = true;
      absl::StatusOr<int64_t> prompts = ReadThrough(role.ref->path(), o, vocab->tokenizer.get());
      if (!prompts.ok()) return Prefixed(path_field, prompts.status());
    }
    to_store.emplace_back(role, *std::move(files));
  }
  // Every dataset read cleanly: only now is anything stored.
  for (auto& [role, files] : to_store) {
    absl::StatusOr<storage::BlobInfo> stored = StoreDataset(files, blobs);
    if (!stored.ok()) return Prefixed(absl::StrCat("data.", role.name, ".path"), stored.status());
    role.ref->set_artifact_digest(stored->digest);
  }
  return absl::OkStatus();
}

}  // namespace tailor::coordinator
