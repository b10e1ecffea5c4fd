#include "coordinator/planner.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "coordinator/contract_validation.h"
#include "methods/api/graph_builder.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace tailor::coordinator {
namespace {

using ::tailor::testing::IsOk;
using ::tailor::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using v1::DeploymentContract;

constexpr char kAutocompress[] = R"pb(
  name: "npc-cpu"
  method: AUTOCOMPRESS
  parent { path: "tailor-data/models/parent-small" }
  target { device_kind: "cpu" engine: "tailor-builtin" engine_version: "1" precision: FP32 }
  workload { batch_size: 1 input_tokens: 128 output_tokens: 32 cached_prefix_tokens: 0 }
  budget { latency_ms_max: 40 memory_mib_max: 64 weight_memory_mib_max: 32 }
  priority: 7
)pb";

constexpr char kBlockRemoval[] = R"pb(
  name: "blocks"
  method: BLOCK_REMOVAL
  parent { path: "models/parent" }
  target { device_kind: "cpu" }
  workload { batch_size: 1 input_tokens: 64 output_tokens: 16 }
  budget { weight_memory_mib_max: 8 }
  block_removal { blocks_to_remove: 2 }
)pb";

constexpr char kEntropyCode[] = R"pb(
  name: "entropy"
  method: ENTROPY_CODE
  parent { path: "models/small" }
  target { device_kind: "cpu" }
  workload { batch_size: 1 input_tokens: 64 output_tokens: 16 }
  budget { weight_memory_mib_max: 8 }
)pb";

constexpr char kProbe[] = R"pb(
  name: "probe"
  method: PROBE
  target { device_kind: "cpu" }
  priority: -3
)pb";

DeploymentContract Parse(const std::string& text, const std::string& patch = "") {
  DeploymentContract c;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &c)) << text;
  EXPECT_TRUE(google::protobuf::TextFormat::MergeFromString(patch, &c)) << patch;
  return c;
}

// Plans and checks the graph invariants every plan must hold: unique keys, dependencies
// planned earlier (topological order), placements "agent"/"launcher" with the matching device
// kind, and the contract's priority on every job.
std::vector<PlannedJob> Plan(const DeploymentContract& c) {
  auto plan = PlanCampaign(c);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return {};
  std::set<std::string> seen;
  for (const PlannedJob& job : *plan) {
    for (const std::string& dep : job.depends_on) {
      EXPECT_TRUE(seen.count(dep)) << job.key << " depends on " << dep << " planned later";
    }
    EXPECT_TRUE(seen.insert(job.key).second) << "duplicate key " << job.key;
    const v1::ResourceSpec& r = job.resources;
    if (r.placement() == "agent") {
      EXPECT_EQ(r.device_kind(), c.target().device_kind()) << job.key;
      EXPECT_EQ(r.nodes(), 1) << job.key;
      EXPECT_EQ(r.ranks_per_node(), 1) << job.key;
    } else {
      EXPECT_EQ(r.placement(), "launcher") << job.key;
      EXPECT_EQ(r.device_kind(), "") << job.key;
    }
    EXPECT_EQ(r.priority(), c.priority()) << job.key;
    EXPECT_GE(r.max_attempts(), 1) << job.key;
    EXPECT_GE(r.time_limit_s(), 60) << job.key;
  }
  return *std::move(plan);
}

// One job as "key:kind:placement<-dep,dep" so a whole graph compares in one assertion.
std::vector<std::string> Describe(const std::vector<PlannedJob>& jobs) {
  std::vector<std::string> out;
  for (const PlannedJob& job : jobs) {
    std::string s = job.key + ":" + job.kind + ":" + job.resources.placement();
    for (size_t i = 0; i < job.depends_on.size(); ++i) {
      s += (i == 0 ? "<-" : ",") + job.depends_on[i];
    }
    out.push_back(s);
  }
  return out;
}

const PlannedJob& Find(const std::vector<PlannedJob>& jobs, const std::string& key) {
  for (const PlannedJob& job : jobs) {
    if (job.key == key) return job;
  }
  ADD_FAILURE() << "no job " << key;
  static const PlannedJob kNone;
  return kNone;
}

TEST(PlanCampaignTest, Probe) {
  std::vector<PlannedJob> jobs = Plan(Parse(kProbe));
  EXPECT_THAT(Describe(jobs), ElementsAre("probe:probe:agent"));
  EXPECT_EQ(jobs[0].resources.device_kind(), "cpu");
  EXPECT_EQ(jobs[0].resources.priority(), -3);
}

TEST(PlanCampaignTest, Autocompress) {
  EXPECT_THAT(Describe(Plan(Parse(kAutocompress))),
              ElementsAre("profile:profile:agent", "rank:rank:launcher",
                          "search:search:launcher<-profile,rank",
                          "distill:distill:launcher<-search", "verify:verify:agent<-distill"));
}

// search.settle_rungs > 0: the search's ladder is measured on the target, then settled on one
// rank; distillation starts from the settled student.
TEST(PlanCampaignTest, AutocompressWithMeasuredSettle) {
  const std::vector<PlannedJob> jobs =
      Plan(Parse(kAutocompress, "search { settle_rungs: 6 } resources { search { nodes: 2 "
                                "ranks_per_node: 4 } }"));
  EXPECT_THAT(Describe(jobs),
              ElementsAre("profile:profile:agent", "rank:rank:launcher",
                          "search:search:launcher<-profile,rank",
                          "measure:measure:agent<-search",
                          "settle:settle:launcher<-profile,rank,search,measure",
                          "distill:distill:launcher<-settle", "verify:verify:agent<-distill"));
  EXPECT_EQ(Find(jobs, "search").resources.ranks_per_node(), 4);
  EXPECT_EQ(Find(jobs, "settle").resources.nodes(), 1);
  EXPECT_EQ(Find(jobs, "settle").resources.ranks_per_node(), 1);
  EXPECT_EQ(Find(jobs, "measure").resources.device_kind(), "cpu");
}

TEST(PlanCampaignTest, AutocompressWithUniformBaseline) {
  EXPECT_THAT(Describe(Plan(Parse(kAutocompress, "compare_uniform_baseline: true"))),
              ElementsAre("profile:profile:agent", "rank:rank:launcher",
                          "search:search:launcher<-profile,rank",
                          "distill:distill:launcher<-search", "verify:verify:agent<-distill",
                          "baseline_uniform:baseline_uniform:launcher<-profile,rank",
                          "distill_baseline:distill:launcher<-baseline_uniform",
                          "verify_baseline:verify:agent<-distill_baseline"));
}

TEST(PlanCampaignTest, AutocompressWithEntropyPackage) {
  EXPECT_THAT(Describe(Plan(Parse(kAutocompress, "package { entropy_code: true }"))),
              ElementsAre("profile:profile:agent", "rank:rank:launcher",
                          "search:search:launcher<-profile,rank",
                          "distill:distill:launcher<-search", "verify:verify:agent<-distill",
                          "entropy_autotune:autotune:agent<-verify",
                          "entropy_select:select:launcher<-entropy_autotune",
                          "entropy_verify:verify:agent<-entropy_select"));
}

TEST(PlanCampaignTest, AutocompressWithEverything) {
  EXPECT_THAT(
      Describe(Plan(Parse(kAutocompress,
                          "package { entropy_code: true } compare_uniform_baseline: true"))),
      ElementsAre("profile:profile:agent", "rank:rank:launcher",
                  "search:search:launcher<-profile,rank", "distill:distill:launcher<-search",
                  "verify:verify:agent<-distill", "entropy_autotune:autotune:agent<-verify",
                  "entropy_select:select:launcher<-entropy_autotune",
                  "entropy_verify:verify:agent<-entropy_select",
                  "baseline_uniform:baseline_uniform:launcher<-profile,rank",
                  "distill_baseline:distill:launcher<-baseline_uniform",
                  "verify_baseline:verify:agent<-distill_baseline"));
}

TEST(PlanCampaignTest, BlockRemovalWithFixedBlockCountSkipsProfiling) {
  EXPECT_THAT(Describe(Plan(Parse(kBlockRemoval))),
              ElementsAre("gate_gradients:gate_gradients:launcher",
                          "solve:solve:launcher<-gate_gradients",
                          "evaluate_candidates:evaluate_candidates:launcher<-solve",
                          "verify:verify:agent<-evaluate_candidates"));
}

TEST(PlanCampaignTest, BudgetDrivenBlockRemovalProfilesFirst) {
  DeploymentContract c = Parse(kBlockRemoval, "budget { latency_ms_max: 20 }");
  c.mutable_block_removal()->clear_blocks_to_remove();
  EXPECT_THAT(Describe(Plan(c)),
              ElementsAre("profile:profile:agent", "gate_gradients:gate_gradients:launcher",
                          "solve:solve:launcher<-gate_gradients,profile",
                          "evaluate_candidates:evaluate_candidates:launcher<-solve",
                          "verify:verify:agent<-evaluate_candidates"));
}

// A budget relative to the parent resolves against the profile job's measurement of the
// parent: a plan without a profile job is refused at submission, naming the budget.
TEST(PlanCampaignTest, RelativeBudgetsNeedAPlanThatProfiles) {
  DeploymentContract fixed = Parse(kBlockRemoval, "budget { latency_vs_parent_max: 0.7 }");
  EXPECT_THAT(
      PlanCampaign(fixed),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "invalid contract: budget.latency_vs_parent_max: a budget relative to the "
               "parent needs the parent measured in the target engine by a profile job, and "
               "this BLOCK_REMOVAL campaign plans none (it profiles only to search for a "
               "size, e.g. BLOCK_REMOVAL without block_removal.blocks_to_remove); state the "
               "budget in absolute units"));
  DeploymentContract driven = fixed;
  driven.mutable_block_removal()->clear_blocks_to_remove();
  EXPECT_THAT(PlanCampaign(driven), IsOk());
  DeploymentContract autocompress = Parse(kAutocompress);
  autocompress.mutable_budget()->clear_memory_mib_max();
  autocompress.mutable_budget()->set_memory_vs_parent_max(0.9);
  EXPECT_THAT(PlanCampaign(autocompress), IsOk());
}

TEST(PlanCampaignTest, BlockRemovalWithDistillation) {
  EXPECT_THAT(Describe(Plan(Parse(kBlockRemoval, "block_removal { distill: true }"))),
              ElementsAre("gate_gradients:gate_gradients:launcher",
                          "solve:solve:launcher<-gate_gradients",
                          "evaluate_candidates:evaluate_candidates:launcher<-solve",
                          "distill:distill:launcher<-evaluate_candidates",
                          "verify:verify:agent<-distill"));
}

TEST(PlanCampaignTest, BlockRemovalWithEntropyPackage) {
  EXPECT_THAT(Describe(Plan(Parse(kBlockRemoval, "package { entropy_code: true }"))),
              ElementsAre("gate_gradients:gate_gradients:launcher",
                          "solve:solve:launcher<-gate_gradients",
                          "evaluate_candidates:evaluate_candidates:launcher<-solve",
                          "verify:verify:agent<-evaluate_candidates",
                          "entropy_autotune:autotune:agent<-verify",
                          "entropy_select:select:launcher<-entropy_autotune",
                          "entropy_verify:verify:agent<-entropy_select"));
}

TEST(PlanCampaignTest, EntropyCode) {
  EXPECT_THAT(Describe(Plan(Parse(kEntropyCode))),
              ElementsAre("autotune:autotune:agent", "select:select:launcher<-autotune",
                          "verify:verify:agent<-select"));
}

TEST(PlanCampaignTest, JobsTakeResourcesFromTheirBlock) {
  // Distinct values per block (time limit = 1000 * block number) show which block each job
  // read; a GPU target lets GPU counts differ too.
  DeploymentContract c = Parse(kAutocompress, R"pb(
    target { device_kind: "NVIDIA H200" precision: BF16 }
    compare_uniform_baseline: true
    package { entropy_code: true }
    resources {
      profile { time_limit_s: 1000 gpus_per_node: 1 max_attempts: 1 }
      rank { time_limit_s: 2000 nodes: 1 ranks_per_node: 2 gpus_per_node: 2 gpu_type: "a100" }
      search { time_limit_s: 3000 nodes: 4 ranks_per_node: 8 gpus_per_node: 8 gpu_type: "h100"
               memory_mib: 512000 max_attempts: 5 }
      distill { time_limit_s: 4000 nodes: 2 ranks_per_node: 4 gpus_per_node: 4 }
      verify { time_limit_s: 5000 max_attempts: 2 }
      entropy { time_limit_s: 7000 nodes: 3 ranks_per_node: 2 gpus_per_node: 2 }
    }
  )pb");
  std::vector<PlannedJob> jobs = Plan(c);
  std::map<std::string, int64_t> time_limit;
  for (const PlannedJob& job : jobs) time_limit[job.key] = job.resources.time_limit_s();
  EXPECT_EQ(time_limit, (std::map<std::string, int64_t>{{"profile", 1000},
                                                        {"rank", 2000},
                                                        {"search", 3000},
                                                        {"baseline_uniform", 3000},
                                                        {"distill", 4000},
                                                        {"distill_baseline", 4000},
                                                        {"verify", 5000},
                                                        {"verify_baseline", 5000},
                                                        {"entropy_verify", 5000},
                                                        {"entropy_autotune", 7000},
                                                        {"entropy_select", 7000}}));

  const v1::ResourceSpec& search = Find(jobs, "search").resources;
  EXPECT_EQ(search.placement(), "launcher");
  EXPECT_EQ(search.device_kind(), "");
  EXPECT_EQ(search.nodes(), 4);
  EXPECT_EQ(search.ranks_per_node(), 8);
  EXPECT_EQ(search.gpus_per_node(), 8);
  EXPECT_EQ(search.gpu_type(), "h100");
  EXPECT_EQ(search.memory_mib(), 512000);
  EXPECT_EQ(search.max_attempts(), 5);
  EXPECT_EQ(search.priority(), 7);
  EXPECT_EQ(Find(jobs, "baseline_uniform").resources.nodes(), 4);
  EXPECT_EQ(Find(jobs, "rank").resources.gpu_type(), "a100");
  EXPECT_EQ(Find(jobs, "distill_baseline").resources.ranks_per_node(), 4);

  const v1::ResourceSpec& profile = Find(jobs, "profile").resources;
  EXPECT_EQ(profile.placement(), "agent");
  EXPECT_EQ(profile.device_kind(), "NVIDIA H200");
  EXPECT_EQ(profile.max_attempts(), 1);
  EXPECT_EQ(Find(jobs, "verify").resources.max_attempts(), 2);

  // The entropy block serves an agent job and a launcher job: the agent job runs as one
  // process on the target whatever nodes/ranks the block asks for the launcher.
  const v1::ResourceSpec& autotune = Find(jobs, "entropy_autotune").resources;
  EXPECT_EQ(autotune.placement(), "agent");
  EXPECT_EQ(autotune.device_kind(), "NVIDIA H200");
  EXPECT_EQ(autotune.nodes(), 1);
  EXPECT_EQ(autotune.ranks_per_node(), 1);
  EXPECT_EQ(autotune.gpus_per_node(), 2);
  const v1::ResourceSpec& select = Find(jobs, "entropy_select").resources;
  EXPECT_EQ(select.nodes(), 3);
  EXPECT_EQ(select.ranks_per_node(), 2);
}

TEST(PlanCampaignTest, BlockRemovalJobsUseBlockSelectAndDistillBlocks) {
  DeploymentContract c = Parse(kBlockRemoval, R"pb(
    block_removal { distill: true }
    resources {
      block_select { time_limit_s: 600 ranks_per_node: 3 }
      distill { time_limit_s: 700 }
      verify { time_limit_s: 800 }
    }
  )pb");
  std::vector<PlannedJob> jobs = Plan(c);
  for (const char* key : {"gate_gradients", "solve", "evaluate_candidates"}) {
    EXPECT_EQ(Find(jobs, key).resources.time_limit_s(), 600) << key;
    EXPECT_EQ(Find(jobs, key).resources.ranks_per_node(), 3) << key;
  }
  EXPECT_EQ(Find(jobs, "distill").resources.time_limit_s(), 700);
  EXPECT_EQ(Find(jobs, "verify").resources.time_limit_s(), 800);
}

TEST(PlanCampaignTest, AppliesDefaultsToUndefaultedContracts) {
  std::vector<PlannedJob> jobs = Plan(Parse(kAutocompress));
  const v1::ResourceSpec& search = Find(jobs, "search").resources;
  EXPECT_EQ(search.nodes(), 1);
  EXPECT_EQ(search.ranks_per_node(), 2);  // two CPU ranks by default
  EXPECT_EQ(search.gpus_per_node(), 0);
  EXPECT_EQ(search.time_limit_s(), 86400);
  EXPECT_EQ(search.max_attempts(), 3);
  EXPECT_EQ(Find(jobs, "rank").resources.ranks_per_node(), 1);
  // Planning a defaulted contract gives the same graph.
  std::vector<PlannedJob> again = Plan(WithDefaults(Parse(kAutocompress)));
  EXPECT_EQ(Describe(jobs), Describe(again));
  for (size_t i = 0; i < jobs.size() && i < again.size(); ++i) {
    EXPECT_EQ(jobs[i].resources.SerializeAsString(), again[i].resources.SerializeAsString());
  }
}

TEST(PlanCampaignTest, RejectsInvalidContracts) {
  EXPECT_THAT(PlanCampaign(DeploymentContract()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("invalid contract: name: required")));
  DeploymentContract c = Parse(kAutocompress);
  c.mutable_workload()->set_batch_size(0);
  EXPECT_THAT(PlanCampaign(c), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("workload.batch_size: must be >= 1, got 0")));
}

TEST(TargetFingerprintTest, IsStableHexAndPinned) {
  DeploymentContract c = Parse(kAutocompress);
  std::string fp = TargetFingerprint(c);
  EXPECT_EQ(fp.size(), 64u);
  EXPECT_EQ(fp.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(fp, TargetFingerprint(c));
  // Pinned: a change here silently invalidates every stored cost table, so it must be a
  // deliberate edit of this value (and of docs/contract.md).
  EXPECT_EQ(fp, "f3d4bee90b7d81f1e17cdeeebdeb838c325f2195ece6bd4596266de20e9d1f70");
}

// llama.cpp tables timed through node-llama-cpp's generation loop (before the native harness)
// keep their old fingerprint, so a new campaign profiles again instead of reusing them.
TEST(TargetFingerprintTest, LlamaCppTablesOfTheNativeHarnessArePinned) {
  const DeploymentContract c = Parse(
      kAutocompress, R"pb(target { engine: "llama.cpp" engine_version: "3.21.1" })pb");
  // Without the timing line: 4a6d170b433d47291e5ec349fae968385cfb19ea0d61499cd4dfa1057e88254c.
  EXPECT_EQ(TargetFingerprint(c),
            "895c47869e46e7ad6dd0ab336852305efee957d9ed75a011567aa6fdd52e9943");
}

TEST(TargetFingerprintTest, DefaultsDoNotChangeIt) {
  DeploymentContract explicit_defaults = Parse(kAutocompress);
  DeploymentContract implicit = explicit_defaults;
  implicit.mutable_target()->clear_engine();
  implicit.mutable_target()->clear_engine_version();
  implicit.mutable_target()->clear_precision();  // FP32 is the cpu default
  implicit.mutable_workload()->clear_cached_prefix_tokens();
  EXPECT_EQ(TargetFingerprint(implicit), TargetFingerprint(explicit_defaults));
  EXPECT_EQ(TargetFingerprint(WithDefaults(implicit)), TargetFingerprint(explicit_defaults));
}

TEST(TargetFingerprintTest, ChangesWithEveryTargetField) {
  const DeploymentContract base = Parse(kAutocompress);
  const std::string fp = TargetFingerprint(base);
  std::set<std::string> seen = {fp};
  for (const char* patch : {
           R"pb(target { device_kind: "NVIDIA H200" })pb",
           R"pb(target { engine: "vllm" })pb",
           R"pb(target { engine_version: "2" })pb",
           R"pb(target { precision: BF16 })pb",
           R"pb(workload { batch_size: 2 })pb",
           R"pb(workload { input_tokens: 129 })pb",
           R"pb(workload { output_tokens: 33 })pb",
           R"pb(workload { cached_prefix_tokens: 1 })pb",
       }) {
    std::string changed = TargetFingerprint(Parse(kAutocompress, patch));
    EXPECT_TRUE(seen.insert(changed).second) << patch << " gave a fingerprint seen before";
  }
}

TEST(TargetFingerprintTest, IgnoresEverythingElse) {
  const std::string fp = TargetFingerprint(Parse(kAutocompress));
  for (const char* patch : {
           R"pb(name: "other")pb",
           R"pb(budget { latency_ms_max: 10 memory_mib_max: 32 })pb",
           R"pb(search { steps: 10 alpha: 0.3 })pb",
           R"pb(recovery { tokens: 5 })pb",
           R"pb(resources { search { nodes: 8 } })pb",
           R"pb(priority: 100 team: "games" seed: 9)pb",
           R"pb(labels { key: "k" value: "v" })pb",
           R"pb(compare_uniform_baseline: true)pb",
           R"pb(method: BLOCK_REMOVAL)pb",
       }) {
    EXPECT_EQ(TargetFingerprint(Parse(kAutocompress, patch)), fp) << patch;
  }
}

}  // namespace
}  // namespace tailor::coordinator

namespace tailor::coordinator {
namespace {

// Placement is declared once, with the kind (methods::JobKind): the graph takes it from
// there, and a kind no method declares fails the plan instead of writing a job nobody runs.
TEST(GraphBuilderTest, PlacementComesFromTheKindsDeclaration) {
  v1::DeploymentContract c;
  c.mutable_target()->set_device_kind("cpu");
  v1::ResourceRequest block;
  block.set_nodes(2);
  block.set_ranks_per_node(4);
  methods::GraphBuilder g(c);
  g.Add("profile", "profile", block, {});
  g.Add("search", "search", block, {"profile"});
  absl::StatusOr<std::vector<methods::PlannedJob>> jobs = std::move(g).Finish();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ((*jobs)[0].resources.placement(), "agent");
  EXPECT_EQ((*jobs)[0].resources.device_kind(), "cpu");
  EXPECT_EQ((*jobs)[0].resources.ranks_per_node(), 1);  // an agent is one process
  EXPECT_EQ((*jobs)[1].resources.placement(), "launcher");
  EXPECT_EQ((*jobs)[1].resources.ranks_per_node(), 4);
}

TEST(GraphBuilderTest, UndeclaredKindFailsThePlan) {
  v1::DeploymentContract c;
  methods::GraphBuilder g(c);
  g.Add("quantize", "quantize", v1::ResourceRequest(), {});
  absl::StatusOr<std::vector<methods::PlannedJob>> jobs = std::move(g).Finish();
  EXPECT_EQ(jobs.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(jobs.status().message(), "job quantize: no method declares kind quantize");
}

}  // namespace
}  // namespace tailor::coordinator
