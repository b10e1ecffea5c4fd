// Request and upload size limits at the coordinator's gRPC surface (docs/operations.md,
// "Input limits"): a message larger than max_message_bytes is refused by gRPC with
// RESOURCE_EXHAUSTED, and an upload whose header declares more than max_upload_bytes is
// refused with INVALID_ARGUMENT naming header.size_bytes, while one at the limit passes
// the size check. The limits are lowered here so the test stays small.

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "common/clock.h"
#include "common/sha256.h"
#include "coordinator/server.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tailor/v1/agent.grpc.pb.h"

namespace tailor::coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kUploadLimit = 1024;
constexpr int kMessageLimit = 64 * 1024;

class UploadLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/tailor_limits_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    ServerOptions options;
    options.data_dir = dir_;
    options.listen = "127.0.0.1:0";
    options.launcher = "none";
    options.max_message_bytes = kMessageLimit;
    options.core.max_upload_bytes = kUploadLimit;
    auto server = CoordinatorServer::Create(options, Clock::Real());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    auto port = server_->Start();
    ASSERT_TRUE(port.ok()) << port.status();
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(4 * kMessageLimit);  // let the client send oversized messages
    stub_ = v1::AgentService::NewStub(grpc::CreateCustomChannel(
        "127.0.0.1:" + std::to_string(*port), grpc::InsecureChannelCredentials(), args));
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(absl::Milliseconds(100));
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Sends a header declaring `size` bytes and the matching data; returns the call's status.
  grpc::Status Upload(int64_t size) {
    grpc::ClientContext context;
    v1::Artifact artifact;
    auto stream = stub_->UploadArtifact(&context, &artifact);
    const std::string data(static_cast<size_t>(size), 'x');
    v1::UploadArtifactRequest request;
    auto* header = request.mutable_header();
    header->set_lease_id("no-such-lease");
    header->set_kind("model");
    header->set_name("model.tar");
    header->set_size_bytes(size);
    header->set_sha256(Sha256::Hex(data));
    stream->Write(request);
    request.Clear();
    request.set_data(data);
    stream->Write(request);
    stream->WritesDone();
    return stream->Finish();
  }

  std::string dir_;
  std::unique_ptr<CoordinatorServer> server_;
  std::unique_ptr<v1::AgentService::Stub> stub_;
};

TEST_F(UploadLimitsTest, UploadAtTheLimitPassesTheSizeCheckAndOnePastIsRefused) {
  const grpc::Status at = Upload(kUploadLimit);
  // Past the size check: what fails now is the made-up lease, not the size.
  EXPECT_FALSE(at.ok());
  EXPECT_THAT(at.error_message(), Not(HasSubstr("size_bytes")));

  const grpc::Status past = Upload(kUploadLimit + 1);
  EXPECT_EQ(past.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(past.error_message(), HasSubstr("header.size_bytes: must be in 0..1024, got 1025"));
}

TEST_F(UploadLimitsTest, MessageLargerThanTheLimitIsResourceExhausted) {
  auto call = [&](size_t hostname_bytes) {
    grpc::ClientContext context;
    v1::RegisterAgentRequest request;
    request.mutable_info()->set_hostname(std::string(hostname_bytes, 'h'));
    v1::RegisterAgentResponse response;
    return stub_->Register(&context, request, &response);
  };
  // Just under the limit the request reaches the service (which judges its contents).
  const grpc::Status under = call(kMessageLimit - 64);
  EXPECT_NE(under.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << under.error_message();
  const grpc::Status past = call(kMessageLimit + 1);
  EXPECT_EQ(past.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << past.error_message();
}

}  // namespace
}  // namespace tailor::coordinator
