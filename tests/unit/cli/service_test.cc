// The CLI against an in-process fake coordinator: watch (plain lines, reconnects, exit codes),
// status, submit, artifact downloads and logs, all through the real parser and gRPC stubs.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cli/commands.h"
#include "cli/env.h"
#include "cli/parse.h"
#include "common/proto_time.h"
#include "common/sha256.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tailor/v1/agent.grpc.pb.h"
#include "tailor/v1/campaign.grpc.pb.h"

namespace tailor::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);  // 22:13:20 UTC

// Sends `items` (those with position > from) as a stream; the nth call stops early with
// UNAVAILABLE after breaks[n] items when breaks has an entry for it, as a restarting
// coordinator would.
class StreamScript {
 public:
  void set_breaks(std::vector<int> breaks) {
    absl::MutexLock l(&mu_);
    breaks_ = std::move(breaks);
  }
  void set_always_break() {
    absl::MutexLock l(&mu_);
    always_break_ = true;
  }
  // Returns how many items this call may send (-1 = all) and records `from`.
  int BeginCall(int64_t from) {
    absl::MutexLock l(&mu_);
    froms_.push_back(from);
    if (always_break_) return 0;
    const size_t call = froms_.size() - 1;
    return call < breaks_.size() ? breaks_[call] : -1;
  }
  std::vector<int64_t> froms() const {
    absl::MutexLock l(&mu_);
    return froms_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<int> breaks_ ABSL_GUARDED_BY(mu_);
  bool always_break_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<int64_t> froms_ ABSL_GUARDED_BY(mu_);
};

grpc::Status Unavailable() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, "coordinator restarting");
}

class FakeCampaignService final : public v1::CampaignService::Service {
 public:
  v1::Campaign campaign;
  std::vector<v1::Event> events;
  bool replay_all = false;  // ignore from_seq (a misbehaving server)
  grpc::Status watch_error = grpc::Status::OK;
  StreamScript watch_script;
  std::vector<std::string> log_chunks;
  StreamScript log_script;

  grpc::Status GetCampaign(grpc::ServerContext*, const v1::GetCampaignRequest* request,
                           v1::Campaign* response) override {
    if (request->campaign_id() != campaign.id()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("campaign ", request->campaign_id(), " not found"));
    }
    *response = campaign;
    return grpc::Status::OK;
  }

  grpc::Status SubmitCampaign(grpc::ServerContext*, const v1::SubmitCampaignRequest* request,
                              v1::SubmitCampaignResponse* response) override {
    absl::MutexLock l(&mu_);
    submits_.push_back(*request);
    bool seen = false;
    for (size_t i = 0; i + 1 < submits_.size(); ++i) {
      seen |= submits_[i].request_id() == request->request_id();
    }
    *response->mutable_campaign() = campaign;
    response->set_created(!seen);
    return grpc::Status::OK;
  }

  grpc::Status WatchCampaign(grpc::ServerContext*, const v1::WatchCampaignRequest* request,
                             grpc::ServerWriter<v1::Event>* writer) override {
    if (request->campaign_id() != campaign.id()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such campaign");
    }
    if (!watch_error.ok()) return watch_error;
    const int budget = watch_script.BeginCall(request->from_seq());
    int sent = 0;
    for (const v1::Event& e : events) {
      if (!replay_all && e.seq() <= request->from_seq()) continue;
      if (budget >= 0 && sent == budget) return Unavailable();
      writer->Write(e);
      ++sent;
    }
    return grpc::Status::OK;
  }

  grpc::Status GetJobLog(grpc::ServerContext*, const v1::GetJobLogRequest* request,
                         grpc::ServerWriter<v1::LogChunk>* writer) override {
    const int budget = log_script.BeginCall(request->offset());
    int64_t offset = 0;
    int sent = 0;
    for (const std::string& data : log_chunks) {
      const int64_t at = offset;
      offset += static_cast<int64_t>(data.size());
      if (at < request->offset()) continue;
      if (budget >= 0 && sent == budget) return Unavailable();
      v1::LogChunk chunk;
      chunk.set_data(data);
      chunk.set_offset(at);
      writer->Write(chunk);
      ++sent;
    }
    return grpc::Status::OK;
  }

  std::vector<v1::SubmitCampaignRequest> submits() const {
    absl::MutexLock l(&mu_);
    return submits_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<v1::SubmitCampaignRequest> submits_ ABSL_GUARDED_BY(mu_);
};

class FakeAgentService final : public v1::AgentService::Service {
 public:
  std::string blob;
  bool corrupt = false;

  grpc::Status DownloadArtifact(grpc::ServerContext*, const v1::DownloadArtifactRequest* request,
                                grpc::ServerWriter<v1::ArtifactChunk>* writer) override {
    if (request->digest() != Sha256::Hex(blob)) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no artifact with that digest");
    }
    std::string data = blob;
    if (corrupt) data[data.size() / 2] ^= 0x20;
    constexpr size_t kChunk = 7;
    for (size_t at = 0; at < data.size(); at += kChunk) {
      v1::ArtifactChunk chunk;
      chunk.set_data(data.substr(at, kChunk));
      chunk.set_offset(static_cast<int64_t>(at));
      chunk.set_total_size(static_cast<int64_t>(data.size()));
      writer->Write(chunk);
    }
    return grpc::Status::OK;
  }
};

v1::Event JobEvent(int64_t seq, int seconds, const std::string& job, v1::JobState js,
                   v1::CampaignState cs, const std::string& message) {
  v1::Event e;
  e.set_seq(seq);
  e.set_campaign_id("cmp-1");
  e.set_job_id(job);
  *e.mutable_time() = ToProto(kT0 + absl::Seconds(seconds));
  e.set_job_state(js);
  e.set_campaign_state(cs);
  e.set_message(message);
  return e;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class CliServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    campaigns_.campaign.set_id("cmp-1");
    campaigns_.campaign.set_name("npc-cpu");
    campaigns_.campaign.set_request_id("r-1");
    campaigns_.campaign.set_state(v1::CAMPAIGN_SUCCEEDED);
    *campaigns_.campaign.mutable_created_at() = ToProto(kT0);
    v1::Job* rank = campaigns_.campaign.add_jobs();
    rank->set_id("job-rank");
    rank->set_key("rank");
    rank->set_kind("rank");
    rank->set_state(v1::JOB_SUCCEEDED);
    rank->set_attempt(1);
    campaigns_.events = {
        JobEvent(1, 0, "", v1::JOB_STATE_UNSPECIFIED, v1::CAMPAIGN_QUEUED, "campaign submitted"),
        JobEvent(2, 1, "job-rank", v1::JOB_LEASED, v1::CAMPAIGN_RUNNING, "leased by agt-1"),
        JobEvent(3, 2, "job-rank", v1::JOB_LEASED, v1::CAMPAIGN_STATE_UNSPECIFIED, ""),
        JobEvent(4, 3, "job-rank", v1::JOB_SUCCEEDED, v1::CAMPAIGN_STATE_UNSPECIFIED, "done"),
        JobEvent(5, 3, "", v1::JOB_STATE_UNSPECIFIED, v1::CAMPAIGN_SUCCEEDED,
                 "campaign succeeded"),
    };
    v1::JobProgress* p = campaigns_.events[2].mutable_progress();
    p->set_fraction(0.5);
    p->set_step(5);
    p->set_total_steps(10);
    p->set_message("ranking");

    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&campaigns_);
    builder.RegisterService(&agents_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    address_ = absl::StrCat("127.0.0.1:", port);
    Connect(address_);
  }

  void TearDown() override { server_->Shutdown(); }

  void Connect(const std::string& address) {
    channel_ = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
    campaign_stub_ = v1::CampaignService::NewStub(channel_);
    agent_stub_ = v1::AgentService::NewStub(channel_);
    env_.out = &out_;
    env_.err = &err_;
    env_.campaigns = campaign_stub_.get();
    env_.agents = agent_stub_.get();
    env_.address = address;
    env_.timeout = absl::Seconds(5);
    env_.sleep = [this](absl::Duration d) { sleeps_.push_back(d); };
  }

  // Runs a command line through the real parser and dispatcher.
  int Run(const std::vector<std::string>& args) {
    ParseOutcome parsed = ParseCommandLine(args, out_, err_);
    if (!parsed.run) return parsed.exit_code;
    return Execute(parsed.invocation, env_);
  }

  std::vector<std::string> OutLines() const {
    std::vector<std::string> lines;
    std::istringstream in(out_.str());
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

  std::string TempPath(const std::string& name) const {
    return absl::StrCat(::testing::TempDir(), "cli_service_test_", ::getpid(), "_", name);
  }

  FakeCampaignService campaigns_;
  FakeAgentService agents_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::CampaignService::Stub> campaign_stub_;
  std::unique_ptr<v1::AgentService::Stub> agent_stub_;
  std::ostringstream out_;
  std::ostringstream err_;
  std::vector<absl::Duration> sleeps_;
  CliEnv env_;
};

const std::vector<std::string> kWatchLines = {
    "22:13:20 1 - QUEUED campaign submitted",
    "22:13:21 2 rank LEASED leased by agt-1",
    "22:13:22 3 rank LEASED ranking (50%, step 5/10)",
    "22:13:23 4 rank SUCCEEDED done",
    "22:13:23 5 - SUCCEEDED campaign succeeded",
};

TEST_F(CliServiceTest, WatchPrintsOneLinePerEventAndSucceeds) {
  EXPECT_EQ(Run({"watch", "cmp-1"}), 0);
  EXPECT_EQ(OutLines(), kWatchLines);
  EXPECT_EQ(err_.str(), "");
  EXPECT_THAT(campaigns_.watch_script.froms(), ElementsAre(0));
}

TEST_F(CliServiceTest, WatchFromSeqShowsOnlyLaterEvents) {
  EXPECT_EQ(Run({"watch", "cmp-1", "--from-seq", "3"}), 0);
  EXPECT_THAT(OutLines(), ElementsAre(kWatchLines[3], kWatchLines[4]));
  EXPECT_THAT(campaigns_.watch_script.froms(), ElementsAre(3));
}

TEST_F(CliServiceTest, WatchReconnectsFromLastSeqWithoutLosingOrRepeating) {
  campaigns_.watch_script.set_breaks({2, 1});
  EXPECT_EQ(Run({"watch", "cmp-1"}), 0);
  EXPECT_EQ(OutLines(), kWatchLines);
  EXPECT_THAT(campaigns_.watch_script.froms(), ElementsAre(0, 2, 3));
  EXPECT_THAT(err_.str(), HasSubstr("reconnecting after event 2"));
  EXPECT_THAT(err_.str(), HasSubstr("reconnecting after event 3"));
  // Progress between the breaks ended the first outage, so backoff starts over.
  EXPECT_THAT(sleeps_, ElementsAre(absl::Milliseconds(250), absl::Milliseconds(250)));
}

TEST_F(CliServiceTest, WatchSkipsEventsAServerReplaysTwice) {
  campaigns_.replay_all = true;
  campaigns_.watch_script.set_breaks({3});
  EXPECT_EQ(Run({"watch", "cmp-1"}), 0);
  EXPECT_EQ(OutLines(), kWatchLines);
  EXPECT_THAT(campaigns_.watch_script.froms(), ElementsAre(0, 3));
}

TEST_F(CliServiceTest, WatchGivesUpWhenTheCoordinatorStaysAway) {
  campaigns_.watch_script.set_always_break();
  EXPECT_EQ(Run({"watch", "cmp-1"}), 1);
  EXPECT_THAT(OutLines(), IsEmpty());
  EXPECT_THAT(err_.str(), HasSubstr("tailor: gave up watching campaign cmp-1 after 1m"));
  EXPECT_THAT(err_.str(), HasSubstr("hint: is tailor-coordinator running at"));
  absl::Duration slept;
  for (absl::Duration d : sleeps_) slept += d;
  EXPECT_GE(slept, absl::Seconds(60));
  EXPECT_LE(slept, absl::Seconds(66));
  EXPECT_EQ(sleeps_.back(), absl::Seconds(5));  // backoff is capped
}

TEST_F(CliServiceTest, WatchOfFailedCampaignExitsOneWithError) {
  campaigns_.campaign.set_state(v1::CAMPAIGN_FAILED);
  campaigns_.campaign.set_error("verify: latency 52 ms > budget 40 ms");
  campaigns_.events.back().set_campaign_state(v1::CAMPAIGN_FAILED);
  campaigns_.events.back().set_message("campaign failed");
  EXPECT_EQ(Run({"watch", "cmp-1"}), 1);
  EXPECT_EQ(OutLines().back(), "22:13:23 5 - FAILED campaign failed");
  EXPECT_THAT(err_.str(),
              HasSubstr("tailor: campaign cmp-1 ended FAILED: verify: latency 52 ms > budget "
                        "40 ms\n  hint: `tailor status cmp-1` shows which job failed"));
}

TEST_F(CliServiceTest, WatchOfCancelledCampaignExitsOne) {
  campaigns_.campaign.set_state(v1::CAMPAIGN_CANCELLED);
  campaigns_.events.back().set_campaign_state(v1::CAMPAIGN_CANCELLED);
  EXPECT_EQ(Run({"watch", "cmp-1"}), 1);
  EXPECT_EQ(err_.str(), "tailor: campaign cmp-1 ended CANCELLED\n");
}

TEST_F(CliServiceTest, WatchStopsOnNonTransientStreamError) {
  campaigns_.watch_error = grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "token lacks scope");
  EXPECT_EQ(Run({"watch", "cmp-1"}), 1);
  EXPECT_EQ(err_.str(),
            "tailor: watching campaign cmp-1 failed: token lacks scope\n"
            "  hint: this token may not do that; ask an admin for a token with the right "
            "scope\n");
  EXPECT_THAT(sleeps_, IsEmpty());
}

TEST_F(CliServiceTest, WatchUnknownCampaign) {
  EXPECT_EQ(Run({"watch", "cmp-nope"}), 1);
  EXPECT_EQ(err_.str(),
            "tailor: cannot watch campaign cmp-nope: campaign cmp-nope not found\n"
            "  hint: check the id; `tailor list` shows campaigns\n");
}

TEST_F(CliServiceTest, WatchOnTtyRedrawsInPlace) {
  env_.out_is_tty = true;
  env_.width = 100;
  EXPECT_EQ(Run({"watch", "cmp-1"}), 0);
  const std::string out = out_.str();
  // Frames after the first move the cursor back over the previous frame (4 lines).
  EXPECT_THAT(out, HasSubstr("\x1b[4F\x1b[J"));
  EXPECT_THAT(out, HasSubstr("campaign cmp-1 (npc-cpu)  SUCCEEDED"));
  EXPECT_THAT(out, HasSubstr("rank  SUCCEEDED        1  [####################] 100%"));
}

TEST_F(CliServiceTest, StatusJsonUsesProtoNamesAndPrintsDefaults) {
  EXPECT_EQ(Run({"status", "cmp-1", "--json"}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("\"request_id\": \"r-1\""));
  EXPECT_THAT(out_.str(), HasSubstr("\"state\": \"CAMPAIGN_SUCCEEDED\""));
  EXPECT_THAT(out_.str(), HasSubstr("\"error\": \"\""));
}

TEST_F(CliServiceTest, StatusHumanAndNotFound) {
  EXPECT_EQ(Run({"status", "cmp-1"}), 0);
  EXPECT_EQ(OutLines()[0], "campaign     cmp-1");
  EXPECT_EQ(Run({"status", "cmp-2"}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("tailor: cannot get campaign cmp-2: campaign cmp-2 not found"));
}

TEST_F(CliServiceTest, SubmitPrintsIdsAndIsIdempotent) {
  const std::string path = TempPath("npc.textproto");
  std::ofstream(path) << "name: \"npc-cpu\"\nmethod: AUTOCOMPRESS\n";
  EXPECT_EQ(Run({"submit", path, "--request-id", "r-1"}), 0);
  EXPECT_EQ(Run({"submit", path, "--request-id", "r-1"}), 0);
  EXPECT_THAT(OutLines(), ElementsAre("campaign cmp-1 submitted (request id r-1)",
                                      "campaign cmp-1 already submitted (request id r-1)"));
  ASSERT_EQ(campaigns_.submits().size(), 2u);
  EXPECT_EQ(campaigns_.submits()[0].contract().name(), "npc-cpu");
  EXPECT_EQ(campaigns_.submits()[0].contract().method(), v1::AUTOCOMPRESS);
  ::unlink(path.c_str());
}

TEST_F(CliServiceTest, SubmitMakesARequestIdWhenNoneIsGiven) {
  const std::string path = TempPath("auto.textproto");
  std::ofstream(path) << "name: \"npc-cpu\"\n";
  EXPECT_EQ(Run({"submit", path}), 0);
  ASSERT_EQ(campaigns_.submits().size(), 1u);
  const std::string rid = campaigns_.submits()[0].request_id();
  EXPECT_THAT(rid, ::testing::StartsWith("req-"));
  EXPECT_EQ(out_.str(), absl::StrCat("campaign cmp-1 submitted (request id ", rid, ")\n"));
  ::unlink(path.c_str());
}

TEST_F(CliServiceTest, SubmitInvalidContractSendsNothing) {
  const std::string path = TempPath("bad.textproto");
  std::ofstream(path) << "name: \"npc-cpu\"\nworkload { batch: 1 }\n";
  EXPECT_EQ(Run({"submit", path}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("tailor: invalid contract: "));
  EXPECT_THAT(err_.str(), HasSubstr(":2:"));  // file:line:col of the bad field
  EXPECT_THAT(err_.str(), HasSubstr("nothing was submitted"));
  EXPECT_THAT(campaigns_.submits(), IsEmpty());
  ::unlink(path.c_str());
  EXPECT_EQ(Run({"submit", TempPath("missing.textproto")}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("cannot read contract"));
}

TEST_F(CliServiceTest, SubmitWaitFollowsTheCampaign) {
  const std::string path = TempPath("wait.textproto");
  std::ofstream(path) << "name: \"npc-cpu\"\n";
  EXPECT_EQ(Run({"submit", path, "--wait", "--request-id", "r-9"}), 0);
  std::vector<std::string> expected = {"campaign cmp-1 submitted (request id r-9)"};
  expected.insert(expected.end(), kWatchLines.begin(), kWatchLines.end());
  EXPECT_EQ(OutLines(), expected);
  ::unlink(path.c_str());
}

TEST_F(CliServiceTest, SubmitWaitJsonPrintsOnlyTheFinalCampaign) {
  const std::string path = TempPath("wait_json.textproto");
  std::ofstream(path) << "name: \"npc-cpu\"\n";
  campaigns_.campaign.set_state(v1::CAMPAIGN_FAILED);
  campaigns_.events.back().set_campaign_state(v1::CAMPAIGN_FAILED);
  EXPECT_EQ(Run({"submit", path, "--wait", "--json"}), 1);
  EXPECT_EQ(out_.str().front(), '{');
  EXPECT_THAT(out_.str(), HasSubstr("\"state\": \"CAMPAIGN_FAILED\""));
  EXPECT_THAT(out_.str(), ::testing::Not(HasSubstr("campaign submitted")));
  EXPECT_THAT(err_.str(), HasSubstr("ended FAILED"));
  ::unlink(path.c_str());
}

TEST_F(CliServiceTest, WatchStopsWhenStdoutIsClosed) {
  out_.setstate(std::ios::badbit);
  EXPECT_EQ(Run({"watch", "cmp-1"}), 1);
  EXPECT_EQ(err_.str(), "");
  EXPECT_THAT(campaigns_.watch_script.froms(), ElementsAre(0));
}

TEST_F(CliServiceTest, LogsStopQuietlyWhenStdoutIsClosed) {
  campaigns_.log_chunks = {"a\n", "b\n"};
  out_.setstate(std::ios::badbit);
  EXPECT_EQ(Run({"logs", "job-rank", "-f"}), 0);
  EXPECT_EQ(err_.str(), "");
}

TEST_F(CliServiceTest, ArtifactsGetWritesVerifiedFile) {
  agents_.blob = "weights: 0123456789abcdefghijklmnopqrstuvwxyz";
  const std::string path = TempPath("model.bin");
  EXPECT_EQ(Run({"artifacts", "get", Sha256::Hex(agents_.blob), "-o", path}), 0) << err_.str();
  EXPECT_EQ(ReadFile(path), agents_.blob);
  EXPECT_FALSE(Exists(path + ".part"));
  EXPECT_EQ(out_.str(), absl::StrCat("wrote ", path, " (45 B, sha256 verified)\n"));
  ::unlink(path.c_str());
}

TEST_F(CliServiceTest, ArtifactsGetChecksumMismatchLeavesNothing) {
  agents_.blob = "weights: 0123456789abcdefghijklmnopqrstuvwxyz";
  agents_.corrupt = true;
  const std::string path = TempPath("corrupt.bin");
  EXPECT_EQ(Run({"artifacts", "get", Sha256::Hex(agents_.blob), "-o", path}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("checksum mismatch"));
  EXPECT_FALSE(Exists(path));
  EXPECT_FALSE(Exists(path + ".part"));
}

TEST_F(CliServiceTest, ArtifactsGetUnknownDigest) {
  agents_.blob = "x";
  const std::string path = TempPath("unknown.bin");
  EXPECT_EQ(Run({"artifacts", "get", std::string(64, 'a'), "-o", path}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("no artifact with that digest"));
  EXPECT_THAT(err_.str(), HasSubstr("tailor artifacts list"));
  EXPECT_FALSE(Exists(path + ".part"));
}

TEST_F(CliServiceTest, LogsStreamToStdoutAndResumeAtTheByteOffset) {
  campaigns_.log_chunks = {"line 1\n", "line 2\n", "line 3\n"};
  campaigns_.log_script.set_breaks({2});
  EXPECT_EQ(Run({"logs", "job-rank", "--follow"}), 0);
  EXPECT_EQ(out_.str(), "line 1\nline 2\nline 3\n");
  EXPECT_THAT(campaigns_.log_script.froms(), ElementsAre(0, 14));
}

TEST_F(CliServiceTest, NoCoordinatorMeansExitOneWithHint) {
  server_->Shutdown();
  Connect("127.0.0.1:1");
  EXPECT_EQ(Run({"status", "cmp-1"}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("tailor: cannot get campaign cmp-1: "));
  EXPECT_THAT(err_.str(),
              HasSubstr("hint: is tailor-coordinator running at 127.0.0.1:1? start it or pass "
                        "--coordinator"));
}

TEST_F(CliServiceTest, UnimplementedVerbOnOldServer) {
  EXPECT_EQ(Run({"report", "cmp-1"}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("does not serve this call"));
}

}  // namespace
}  // namespace tailor::cli
