#include "worker/dist.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

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
