#include "worker/job_io.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/status_macros.h"
#include "common/model_fetch.h"
#include "compression/model/model_archive.h"
#include "tailor/v1/campaign.grpc.pb.h"

namespace tailor::worker {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::Status WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// Rank 0 computes a status; the others learn whether it failed so nobody waits on a
// broadcast that will never come. Returns rank 0's status on every rank (code kept).
absl::Status AgreeOnStatus(WorkerContext& ctx, const absl::Status& mine) {
  std::string wire = mine.ok() ? std::string()
                               : absl::StrCat(static_cast<int>(mine.code()), ":",
                                              mine.message());
  TAILOR_RETURN_IF_ERROR(ctx.dist->BroadcastBytes(wire, 0));
  if (wire.empty()) return absl::OkStatus();
  const size_t colon = wire.find(':');
  const int code = std::atoi(wire.substr(0, colon).c_str());
  return absl::Status(static_cast<absl::StatusCode>(code), wire.substr(colon + 1));
}

}  // namespace

absl::StatusOr<const v1::JobOutput*> Input(const WorkerContext& ctx, const std::string& dep) {
  const auto& inputs = ctx.assignment.inputs();
  const auto it = inputs.find(dep);
  if (it == inputs.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job input '", dep, "' is missing (the job graph lost a dependency)"));
  }
  return &it->second;
}

absl::StatusOr<std::string> NonEmpty(const std::string& dep, absl::string_view field,
                                     const std::string& value) {
  if (value.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job input '", dep, "' has no '", field, "' in its output"));
  }
  return value;
}

absl::StatusOr<model::HybridLM> FetchModel(WorkerContext& ctx, const std::string& digest,
                                           const std::string& name) {
  std::string bytes;
  absl::Status fetched = absl::OkStatus();
  if (ctx.is_rank0()) {
    const std::string tar = absl::StrCat(ctx.work_dir, "/", name, ".tar");
    fetched = ctx.job->DownloadArtifact(digest, tar);
    if (fetched.ok()) {
      auto read = ReadFile(tar);
      if (read.ok()) {
        bytes = *std::move(read);
      } else {
        fetched = read.status();
      }
    }
  }
  TAILOR_RETURN_IF_ERROR(AgreeOnStatus(ctx, fetched));
  TAILOR_RETURN_IF_ERROR(ctx.dist->BroadcastBytes(bytes, 0));
  const std::string dir = absl::StrCat(ctx.work_dir, "/", name, ".rank", ctx.env.rank);
  const std::string tar = dir + ".tar";
  TAILOR_RETURN_IF_ERROR(WriteFile(tar, bytes));
  auto bad = [&](const absl::Status& st) {
    return absl::InvalidArgumentError(
        absl::StrCat("model artifact ", digest, " (", name, ") failed validation: ",
                     st.message()));
  };
  TAILOR_RETURN_IF_ERROR(UnpackModelArtifact(tar, dir, digest, name).status());
  absl::StatusOr<model::HybridLM> m = model::LoadHybridLM(dir);
  if (!m.ok()) return bad(m.status());
  return m;
}

absl::StatusOr<std::string> FetchDataset(WorkerContext& ctx, const std::string& digest,
                                         const std::string& name) {
  constexpr int64_t kChunk = int64_t{64} << 20;
  const std::string dir = absl::StrCat(ctx.work_dir, "/", name, ".rank", ctx.env.rank);
  const std::string tar = dir + ".tar";
  std::string size_text;
  absl::Status fetched = absl::OkStatus();
  if (ctx.is_rank0()) {
    fetched = ctx.job->DownloadArtifact(digest, tar);
    std::error_code ec;
    if (fetched.ok()) size_text = std::to_string(std::filesystem::file_size(tar, ec));
    if (fetched.ok() && ec) fetched = absl::InternalError(absl::StrCat(tar, ": ", ec.message()));
  }
  TAILOR_RETURN_IF_ERROR(AgreeOnStatus(ctx, fetched));
  if (ctx.env.world_size > 1) {
    TAILOR_RETURN_IF_ERROR(ctx.dist->BroadcastBytes(size_text, 0));
    const int64_t size = std::atoll(size_text.c_str());
    std::ifstream in;
    std::ofstream out;
    if (ctx.is_rank0()) {
      in.open(tar, std::ios::binary);
    } else {
      out.open(tar, std::ios::binary | std::ios::trunc);
    }
    for (int64_t done = 0; done < size; done += kChunk) {
      std::string chunk;
      if (ctx.is_rank0()) {
        chunk.resize(static_cast<size_t>(std::min(kChunk, size - done)));
        in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      }
      TAILOR_RETURN_IF_ERROR(ctx.dist->BroadcastBytes(chunk, 0));
      if (!ctx.is_rank0()) out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    }
    if (!ctx.is_rank0()) {
      out.close();
      if (!out) return absl::InternalError(absl::StrCat("cannot write ", tar));
    }
  }
  return UnpackDatasetArtifact(tar, dir, digest, name);
}

absl::StatusOr<v1::CostTable> FetchCostTable(WorkerContext& ctx, const std::string& id) {
  std::string bytes;
  absl::Status fetched = absl::OkStatus();
  if (ctx.is_rank0()) {
    auto stub = v1::CampaignService::NewStub(ctx.job->channel());
    v1::GetCostTableRequest req;
    req.set_id(id);
    v1::CostTable table;
    auto rpc = MakeContext(absl::Seconds(30), ctx.job->token());
    fetched = FromGrpcStatus(stub->GetCostTable(rpc.get(), req, &table));
    if (fetched.ok()) table.SerializeToString(&bytes);
  }
  TAILOR_RETURN_IF_ERROR(AgreeOnStatus(ctx, fetched));
  TAILOR_RETURN_IF_ERROR(ctx.dist->BroadcastBytes(bytes, 0));
  v1::CostTable table;
  if (!table.ParseFromString(bytes)) {
    return absl::DataLossError(absl::StrCat("cost table ", id, ": broadcast bytes do not parse"));
  }
  return table;
}

absl::StatusOr<v1::Artifact> UploadModel(WorkerContext& ctx, const model::HybridLM& m,
                                         const std::string& kind, const std::string& name) {
  if (!ctx.is_rank0()) {
    return absl::FailedPreconditionError("UploadModel: only rank 0 uploads artifacts");
  }
  const std::string dir = UploadedModelDir(ctx, name);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  TAILOR_RETURN_IF_ERROR(model::SaveHybridLM(m, dir));
  const std::string tar = dir + ".tar";
  TAILOR_RETURN_IF_ERROR(model::PackModelArchive(dir, tar));
  return ctx.job->UploadArtifactFile(kind, name + ".tar", tar);
}

std::string UploadedModelDir(const WorkerContext& ctx, const std::string& name) {
  return absl::StrCat(ctx.work_dir, "/", name);
}

std::string CheckpointDir(const WorkerContext& ctx) {
  std::error_code ec;
  std::filesystem::create_directories(ctx.env.checkpoint_dir, ec);
  return ctx.env.checkpoint_dir;
}

}  // namespace tailor::worker
