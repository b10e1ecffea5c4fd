#include "common/rank_env.h"

#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace tailor {
namespace {

using ::tailor::testing::StatusIs;
using ::testing::HasSubstr;

std::function<const char*(const char*)> Env(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

TEST(RankEnvTest, TorchStyleVariables) {
  auto r = ReadRankEnv(Env({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"},
                            {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29400"},
                            {"TAILOR_LEASE_ID", "l-1"}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rank, 1);
  EXPECT_EQ(r->world_size, 2);
  EXPECT_EQ(r->master_addr, "10.0.0.1");
  EXPECT_EQ(r->master_port, 29400);
}

TEST(RankEnvTest, SlurmVariables) {
  auto r = ReadRankEnv(Env({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "1"},
                            {"SLURM_JOB_NODELIST", "gpu[07-09],cpu1"}, {"MASTER_PORT", "1234"},
                            {"TAILOR_LEASE_ID", "l-1"}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rank, 3);
  EXPECT_EQ(r->world_size, 4);
  EXPECT_EQ(r->local_rank, 1);
  EXPECT_EQ(r->master_addr, "gpu07");
}

TEST(RankEnvTest, FirstSlurmHost) {
  EXPECT_EQ(*FirstSlurmHost("node1"), "node1");
  EXPECT_EQ(*FirstSlurmHost("node1,node2"), "node1");
  EXPECT_EQ(*FirstSlurmHost("n[3,5]"), "n3");
  EXPECT_EQ(*FirstSlurmHost("n[10-12]"), "n10");
  EXPECT_THAT(FirstSlurmHost("n[1"), StatusIs(absl::StatusCode::kInvalidArgument,
                                              HasSubstr("malformed node list")));
}

TEST(RankEnvTest, ErrorsNameTheVariable) {
  EXPECT_THAT(ReadRankEnv(Env({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"TAILOR_LEASE_ID", "l"},
                               {"MASTER_PORT", "1"}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("RANK: must be an integer in 0..1, got '2'")));
  EXPECT_THAT(ReadRankEnv(Env({{"WORLD_SIZE", "2"}, {"TAILOR_LEASE_ID", "l"}})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("MASTER_PORT is not set")));
  EXPECT_THAT(ReadRankEnv(Env({})), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("TAILOR_LEASE_ID is not set")));
}

}  // namespace
}  // namespace tailor
