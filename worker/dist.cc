#include "worker/dist.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <torch/torch.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace tailor::worker {

struct Dist::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
};

Dist::Dist(std::unique_ptr<Impl> impl, int rank, int world)
    : impl_(std::move(impl)), rank_(rank), world_size_(world) {}

Dist::~Dist() = default;

absl::StatusOr<std::unique_ptr<Dist>> Dist::Connect(const RankEnv& env, absl::Duration timeout) {
  try {
    auto impl = std::make_unique<Impl>();
    c10d::TCPStoreOptions opts;
    opts.port = static_cast<uint16_t>(env.master_port);
    opts.isServer = env.rank == 0;
    opts.numWorkers = env.world_size;
    opts.waitWorkers = true;
    opts.timeout = absl::ToChronoMilliseconds(timeout);
    impl->store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, opts);
    auto options = c10d::ProcessGroupGloo::Options::create(absl::ToChronoMilliseconds(timeout));
    // Loopback for single-host jobs; the rendezvous host's interface otherwise.
    const bool local = env.master_addr == "127.0.0.1" || env.master_addr == "localhost";
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(
        local ? std::string("127.0.0.1") : env.master_addr));
    impl->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(impl->store, env.rank,
                                                           env.world_size, options);
    return std::unique_ptr<Dist>(new Dist(std::move(impl), env.rank, env.world_size));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("rendezvous at ", env.master_addr, ":",
                                               env.master_port, " failed: ", e.what()));
  }
}

absl::Status Dist::AllReduceSum(at::Tensor& tensor) {
  if (world_size_ == 1) return absl::OkStatus();
  try {
    std::vector<at::Tensor> t{tensor};
    impl_->pg->allreduce(t)->wait();
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("allreduce failed (a peer rank died?): ",
                                               e.what()));
  }
}

absl::Status Dist::AllReduceMean(at::Tensor& tensor) {
  absl::Status st = AllReduceSum(tensor);
  if (st.ok() && world_size_ > 1) tensor.div_(world_size_);
  return st;
}

absl::Status Dist::Broadcast(at::Tensor& tensor, int root) {
  if (world_size_ == 1) return absl::OkStatus();
  try {
    std::vector<at::Tensor> t{tensor};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    impl_->pg->broadcast(t, o)->wait();
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("broadcast failed: ", e.what()));
  }
}

absl::Status Dist::BroadcastBytes(std::string& bytes, int root) {
  if (world_size_ == 1) return absl::OkStatus();
  at::Tensor size = torch::tensor({static_cast<int64_t>(bytes.size())}, torch::kLong);
  if (absl::Status st = Broadcast(size, root); !st.ok()) return st;
  const int64_t n = size.item<int64_t>();
  at::Tensor data = torch::empty({n}, torch::kUInt8);
  if (rank_ == root && n > 0) std::memcpy(data.data_ptr(), bytes.data(), n);
  if (n > 0) {
    if (absl::Status st = Broadcast(data, root); !st.ok()) return st;
  }
  if (rank_ != root) bytes.assign(static_cast<const char*>(data.data_ptr()), n);
  return absl::OkStatus();
}

absl::Status Dist::AverageGradients(const std::vector<at::Tensor>& params) {
  if (world_size_ == 1) return absl::OkStatus();
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : params) {
    if (!p.requires_grad()) continue;
    if (!p.grad().defined()) {
      at::Tensor& g = const_cast<at::Tensor&>(p).mutable_grad();
      g = torch::zeros_like(p);
    }
    grads.push_back(p.grad());
  }
  if (grads.empty()) return absl::OkStatus();
  std::vector<at::Tensor> flat_parts;
  for (const at::Tensor& g : grads) flat_parts.push_back(g.reshape({-1}).to(torch::kFloat32));
  at::Tensor flat = torch::cat(flat_parts);
  if (absl::Status st = AllReduceMean(flat); !st.ok()) return st;
  int64_t offset = 0;
  for (at::Tensor& g : grads) {
    const int64_t n = g.numel();
    g.copy_(flat.narrow(0, offset, n).view_as(g));
    offset += n;
  }
  return absl::OkStatus();
}

absl::Status Dist::Barrier() {
  if (world_size_ == 1) return absl::OkStatus();
  try {
    impl_->pg->barrier()->wait();
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("barrier failed: ", e.what()));
  }
}

}  // namespace tailor::worker
