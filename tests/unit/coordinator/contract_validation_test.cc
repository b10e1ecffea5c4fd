#include "coordinator/contract_validation.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/contract_io.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace tailor::coordinator {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::tailor::testing::IsOk;
using ::tailor::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using v1::DeploymentContract;

constexpr char kAutocompress[] = R"pb(
  name: "npc-cpu"
  method: AUTOCOMPRESS
  parent { path: "tailor-data/models/parent-small" }
  target { device_kind: "cpu" engine: "tailor-builtin" engine_version: "1" precision: FP32 }
  workload { batch_size: 1 input_tokens: 128 output_tokens: 32 cached_prefix_tokens: 0 }
  budget { latency_ms_max: 40 memory_mib_max: 64 }
  search { steps: 250 sampled_architectures: 32 alpha: 1.0 dead_zone: 0.02 }
  recovery { tokens: 2000000 }
  resources { search { nodes: 1 ranks_per_node: 2 gpus_per_node: 0 } }
)pb";

constexpr char kBlockRemoval[] = R"pb(
  name: "blocks"
  method: BLOCK_REMOVAL
  parent { artifact_digest: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" }
  target { device_kind: "cpu" }
  workload { batch_size: 1 input_tokens: 64 output_tokens: 16 }
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
)pb";

DeploymentContract Parse(const std::string& text) {
  DeploymentContract c;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &c)) << text;
  return c;
}

std::vector<std::string> ErrorStrings(const DeploymentContract& c) {
  std::vector<std::string> out;
  for (const FieldError& e : CheckContract(c)) out.push_back(e.ToString());
  return out;
}

TEST(WithDefaultsTest, DatasetsTakeTheirStagesLengthsAndPack) {
  DeploymentContract c = Parse(absl::StrCat(kAutocompress, R"pb(
    data {
      calibration { path: "c.jsonl" sequence_tokens: 48 }
      train { path: "t.jsonl" sequence_tokens: 96 }
      eval { path: "e.jsonl" }
    }
  )pb"));
  EXPECT_THAT(ErrorStrings(c), IsEmpty());
  const DeploymentContract d = WithDefaults(c);
  EXPECT_EQ(d.recovery().sequence_length(), 96);
  EXPECT_EQ(d.ranking().sequence_length(), 48);
  EXPECT_EQ(d.search().sequence_length(), 48);
  EXPECT_EQ(d.data().eval().sequence_tokens(), 128);
  EXPECT_TRUE(d.data().eval().packing());
  EXPECT_TRUE(d.data().train().packing());
  EXPECT_FALSE(WithDefaults(Parse(kAutocompress)).has_data());
}

TEST(CheckContractTest, BaseContractsAreValid) {
  for (const char* text : {kAutocompress, kBlockRemoval, kEntropyCode, kProbe}) {
    EXPECT_THAT(ErrorStrings(Parse(text)), IsEmpty()) << text;
    EXPECT_THAT(ValidateContract(Parse(text)), IsOk());
  }
}

TEST(CheckContractTest, DefaultedContractsAreValid) {
  // Every default must itself pass validation, on CPU and on GPU targets.
  for (const char* text : {kAutocompress, kBlockRemoval, kEntropyCode, kProbe}) {
    DeploymentContract c = Parse(text);
    EXPECT_THAT(ErrorStrings(WithDefaults(c)), IsEmpty()) << text;
    c.mutable_target()->set_device_kind("NVIDIA H200");
    c.mutable_resources()->Clear();
    EXPECT_THAT(ErrorStrings(WithDefaults(c)), IsEmpty()) << text;
  }
}

TEST(CheckContractTest, EmptyContractNamesEveryRequiredField) {
  EXPECT_THAT(ErrorStrings(DeploymentContract()),
              ElementsAre("name: required; 1-64 characters of [A-Za-z0-9._-]",
                          "method: required; one of AUTOCOMPRESS, BLOCK_REMOVAL, ENTROPY_CODE, "
                          "PROBE",
                          "target.device_kind: required; the device kind of a profiler agent, "
                          "e.g. \"cpu\""));
}

TEST(CheckContractTest, ReportsAllErrorsInFieldOrder) {
  DeploymentContract c = Parse(kAutocompress);
  c.mutable_resources()->mutable_search()->set_nodes(0);
  c.mutable_workload()->set_batch_size(0);
  c.set_name("bad name");
  c.set_priority(5000);
  EXPECT_THAT(ErrorStrings(c),
              ElementsAre("name: must match [A-Za-z0-9._-]{1,64}, got \"bad name\"",
                          "workload.batch_size: must be >= 1, got 0",
                          "resources.search.nodes: must be >= 1, got 0",
                          "priority: must be <= 1000, got 5000"));
  EXPECT_THAT(ValidateContract(c),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("invalid contract: name: must match [A-Za-z0-9._-]{1,64}, got "
                                 "\"bad name\"; workload.batch_size: must be >= 1, got 0; "
                                 "resources.search.nodes: must be >= 1, got 0; priority: must "
                                 "be <= 1000, got 5000")));
}

TEST(CheckContractTest, ParentFormatNamesASupportedLayout) {
  for (const char* format : {"Qwen3ForCausalLM", "qwen3_moe", "nemotron_h"}) {
    DeploymentContract c = Parse(kAutocompress);
    c.mutable_parent()->set_format(format);
    EXPECT_THAT(ValidateContract(c), IsOk()) << format;
  }
}

TEST(CheckContractTest, ProbeNeedsNeitherParentNorWorkload) {
  DeploymentContract c = Parse(kProbe);
  c.mutable_probe()->set_duration_ms(500);
  EXPECT_THAT(ErrorStrings(c), IsEmpty());
}

TEST(CheckContractTest, LowBitPrecisionIsAllowedForEntropyCode) {
  for (v1::Precision p : {v1::FP8, v1::INT8, v1::INT4, v1::BF16, v1::FP16, v1::FP32}) {
    DeploymentContract c = Parse(kEntropyCode);
    c.mutable_target()->set_precision(p);
    EXPECT_THAT(ErrorStrings(c), IsEmpty()) << v1::Precision_Name(p);
  }
}

TEST(CheckContractTest, GpuResourcesAreFineOnGpuTargets) {
  DeploymentContract c = Parse(kAutocompress);
  c.mutable_target()->set_device_kind("NVIDIA H200");
  v1::ResourceRequest* search = c.mutable_resources()->mutable_search();
  search->set_gpus_per_node(8);
  search->set_gpu_type("h100");
  search->set_nodes(4);
  EXPECT_THAT(ErrorStrings(c), IsEmpty());
}

TEST(CheckContractTest, EveryResourceBlockIsChecked) {
  DeploymentContract c = Parse(kAutocompress);
  v1::Resources* r = c.mutable_resources();
  for (v1::ResourceRequest* block :
       {r->mutable_profile(), r->mutable_rank(), r->mutable_search(), r->mutable_distill(),
        r->mutable_verify(), r->mutable_block_select(), r->mutable_entropy()}) {
    block->set_max_attempts(0);
  }
  EXPECT_THAT(ErrorStrings(c),
              ElementsAre("resources.profile.max_attempts: must be >= 1, got 0",
                          "resources.rank.max_attempts: must be >= 1, got 0",
                          "resources.search.max_attempts: must be >= 1, got 0",
                          "resources.distill.max_attempts: must be >= 1, got 0",
                          "resources.verify.max_attempts: must be >= 1, got 0",
                          "resources.block_select.max_attempts: must be >= 1, got 0",
                          "resources.entropy.max_attempts: must be >= 1, got 0"));
}

TEST(CheckContractTest, BoundaryValuesAreAccepted) {
  DeploymentContract c = Parse(kAutocompress);
  c.set_name(std::string(64, 'a'));
  *c.mutable_workload() = Parse(R"pb(workload {
    batch_size: 4096 input_tokens: 1048576 output_tokens: 1048576 cached_prefix_tokens: 0
  })pb").workload();
  c.mutable_search()->set_alpha(0);
  c.mutable_search()->set_dead_zone(0);
  c.mutable_search()->set_extraction_threshold(1);
  c.mutable_search()->set_sampled_architectures(1024);
  c.mutable_search()->set_batch_sequences(1024);
  c.mutable_recovery()->set_tokens(0);
  c.mutable_resources()->mutable_search()->set_time_limit_s(60);
  c.mutable_resources()->mutable_rank()->set_memory_mib(16777216);
  c.set_priority(-1000);
  c.mutable_entropy()->add_table_log(8);
  c.mutable_entropy()->add_table_log(16);
  c.mutable_probe()->set_duration_ms(0);
  (*c.mutable_labels())[std::string(63, 'k')] = std::string(256, 'v');
  EXPECT_THAT(ErrorStrings(c), IsEmpty());
}

// One case per rule: start from a valid contract of `base`, apply `patch` (merged textproto)
// and/or `mutate`, and expect exactly `count` errors, one of which is `expected`.
struct RuleCase {
  const char* test_name;
  const char* base;
  const char* patch;
  void (*mutate)(DeploymentContract&);
  const char* expected;
  int count = 1;
};

void PrintTo(const RuleCase& c, std::ostream* os) { *os << c.test_name; }

class RuleTest : public ::testing::TestWithParam<RuleCase> {};

TEST_P(RuleTest, ReportsFieldAndReason) {
  const RuleCase& rule = GetParam();
  DeploymentContract c = Parse(rule.base);
  if (rule.patch != nullptr) {
    ASSERT_TRUE(google::protobuf::TextFormat::MergeFromString(rule.patch, &c)) << rule.patch;
  }
  if (rule.mutate != nullptr) rule.mutate(c);
  std::vector<std::string> errors = ErrorStrings(c);
  EXPECT_THAT(errors, SizeIs(rule.count));
  EXPECT_THAT(ValidateContract(c),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(rule.expected)));
}

constexpr char kHex64[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

const RuleCase kRuleCases[] = {
    // name, method
    {"NameRequired", kProbe, nullptr, [](DeploymentContract& c) { c.clear_name(); },
     "name: required; 1-64 characters of [A-Za-z0-9._-]"},
    {"NameCharacters", kProbe, R"pb(name: "npc cpu")pb", nullptr,
     "name: must match [A-Za-z0-9._-]{1,64}, got \"npc cpu\""},
    {"NameTooLong", kProbe, nullptr,
     [](DeploymentContract& c) { c.set_name(std::string(65, 'n')); },
     "name: must match [A-Za-z0-9._-]{1,64}, got \"nnnn"},
    {"MethodRequired", kProbe, R"pb(method: METHOD_UNSPECIFIED)pb", nullptr,
     "method: required; one of AUTOCOMPRESS, BLOCK_REMOVAL, ENTROPY_CODE, PROBE"},
    {"MethodUnknownNumber", kAutocompress, nullptr,
     [](DeploymentContract& c) { c.set_method(static_cast<v1::Method>(42)); },
     "method: must be one of AUTOCOMPRESS, BLOCK_REMOVAL, ENTROPY_CODE, PROBE, got 42"},
    // parent
    {"ParentRequiredForAutocompress", kAutocompress, nullptr,
     [](DeploymentContract& c) { c.clear_parent(); },
     "parent: required for AUTOCOMPRESS; set parent.path or parent.artifact_digest"},
    {"ParentRequiredForBlockRemoval", kBlockRemoval, nullptr,
     [](DeploymentContract& c) { c.clear_parent(); }, "parent: required for BLOCK_REMOVAL"},
    {"ParentRequiredForEntropyCode", kEntropyCode, nullptr,
     [](DeploymentContract& c) { c.clear_parent(); }, "parent: required for ENTROPY_CODE"},
    {"ParentExactlyOne", kAutocompress, nullptr,
     [](DeploymentContract& c) { c.mutable_parent()->set_artifact_digest(kHex64); },
     "parent: set exactly one of path, artifact_digest, got both"},
    {"ParentDigestHex", kBlockRemoval, R"pb(parent { artifact_digest: "ABC" })pb", nullptr,
     "parent.artifact_digest: must be 64 lowercase hex characters (sha256), got \"ABC\""},
    {"ParentDigestUppercase", kBlockRemoval, nullptr,
     [](DeploymentContract& c) {
       std::string upper(kHex64);
       upper[10] = 'A';
       c.mutable_parent()->set_artifact_digest(upper);
     },
     "parent.artifact_digest: must be 64 lowercase hex characters (sha256)"},
    {"ParentPathControlChars", kAutocompress, R"pb(parent { path: "a\nb" })pb", nullptr,
     "parent.path: must not contain control characters, got \"a\\nb\""},
    {"ParentPathTooLong", kAutocompress, nullptr,
     [](DeploymentContract& c) { c.mutable_parent()->set_path(std::string(4097, 'p')); },
     "parent.path: must be at most 4096 bytes, got 4097"},
    {"ParentFormatUnsupported", kAutocompress, nullptr,
     [](DeploymentContract& c) { c.mutable_parent()->set_format("GPT2LMHeadModel"); },
     "parent.format: unsupported \"GPT2LMHeadModel\" (supported: LlamaForCausalLM, "
     "MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, MixtralForCausalLM, "
     "Qwen3MoeForCausalLM, NemotronHForCausalLM, or their model_type llama, mistral, qwen2, "
     "qwen3, mixtral, qwen3_moe, nemotron_h)"},
    {"ParentFormatOnlyForPaths", kBlockRemoval, nullptr,
     [](DeploymentContract& c) {
       c.mutable_parent()->set_path("");
       c.mutable_parent()->set_artifact_digest(kHex64);
       c.mutable_parent()->set_format("qwen3");
     },
     "parent.format: applies to parent.path (a Hugging Face checkpoint folder) only"},
    {"ParentFormatTooLong", kAutocompress, nullptr,
     [](DeploymentContract& c) { c.mutable_parent()->set_format(std::string(65, 'f')); },
     "parent.format: must be an architectures value or model_type of at most 64 printable "
     "bytes"},
    {"ProbeParentStillChecked", kProbe, R"pb(parent { artifact_digest: "xyz" })pb", nullptr,
     "parent.artifact_digest: must be 64 lowercase hex characters (sha256), got \"xyz\""},
    // target
    {"DeviceKindRequired", kAutocompress, nullptr,
     [](DeploymentContract& c) { c.mutable_target()->clear_device_kind(); },
     "target.device_kind: required"},
    {"DeviceKindRequiredForProbe", kProbe, nullptr,
     [](DeploymentContract& c) { c.mutable_target()->clear_device_kind(); },
     "target.device_kind: required"},
    {"DeviceKindTooLong", kProbe, nullptr,
     [](DeploymentContract& c) { c.mutable_target()->set_device_kind(std::string(129, 'd')); },
     "target.device_kind: must be at most 128 characters, got 129"},
    {"DeviceKindWhitespace", kProbe, R"pb(target { device_kind: "cpu " })pb", nullptr,
     "target.device_kind: must not start or end with whitespace, got \"cpu \""},
    {"DeviceKindControlChars", kProbe, R"pb(target { device_kind: "c\tpu" })pb", nullptr,
     "target.device_kind: must not contain control characters, got \"c\\tpu\""},
    {"Engine", kAutocompress, R"pb(target { engine: "my engine" })pb", nullptr,
     "target.engine: must match [A-Za-z0-9._+-]{1,64}, got \"my engine\""},
    {"EngineVersion", kAutocompress, R"pb(target { engine_version: "1/2" })pb", nullptr,
     "target.engine_version: must match [A-Za-z0-9._+-]{1,64}, got \"1/2\""},
    {"EquivalenceMaxKlRange", kAutocompress,
     R"pb(target { equivalence { max_kl: -1e-3 } })pb", nullptr,
     "target.equivalence.max_kl: must be >= 0, got -0.001"},
    {"EquivalenceAgreementRange", kAutocompress,
     R"pb(target { equivalence { min_argmax_agreement: 1.5 } })pb", nullptr,
     "target.equivalence.min_argmax_agreement: must be <= 1, got 1.5"},
    {"LlamaCppServesNoEntropyPackages", kEntropyCode,
     R"pb(target { engine: "llama.cpp" engine_version: "3.21.1" })pb", nullptr,
     "target.engine: llama.cpp serves GGUF files; ENTROPY_CODE delivers an entropy-coded "
     "package, which only tailor-builtin serves"},
    {"LatencyPercentileUnknown", kAutocompress, nullptr,
     [](DeploymentContract& c) {
       c.mutable_budget()->set_latency_percentile(static_cast<v1::LatencyPercentile>(7));
     },
     "budget.latency_percentile: must be one of LATENCY_P50, LATENCY_P90, LATENCY_P99, got 7"},
    {"PrecisionInt8OnlyForEntropy", kAutocompress, R"pb(target { precision: INT8 })pb", nullptr,
     "target.precision: INT8 is only supported for ENTROPY_CODE (the built-in engine serves "
     "FP32, BF16 and FP16)"},
    {"PrecisionFp8OnlyForEntropy", kBlockRemoval, R"pb(target { precision: FP8 })pb", nullptr,
     "target.precision: FP8 is only supported for ENTROPY_CODE"},
    {"PrecisionInt4OnlyForEntropy", kProbe, R"pb(target { precision: INT4 })pb", nullptr,
     "target.precision: INT4 is only supported for ENTROPY_CODE"},
    {"PrecisionUnknownNumber", kAutocompress, nullptr,
     [](DeploymentContract& c) {
       c.mutable_target()->set_precision(static_cast<v1::Precision>(99));
     },
     "target.precision: must be one of FP32, BF16, FP16, FP8, INT8, INT4, got 99"},
    // workload
    {"WorkloadRequiredForBlockRemoval", kBlockRemoval, nullptr,
     [](DeploymentContract& c) { c.clear_workload(); },
     "workload: required for BLOCK_REMOVAL; set batch_size, input_tokens and output_tokens"},
    {"WorkloadRequiredForEntropyCode", kEntropyCode, nullptr,
     [](DeploymentContract& c) { c.clear_workload(); }, "workload: required for ENTROPY_CODE"},
    {"WorkloadBatchRequired", kAutocompress, nullptr,
     [](DeploymentContract& c) { c.mutable_workload()->clear_batch_size(); },
     "workload.batch_size: required for AUTOCOMPRESS"},
    {"WorkloadInputRequired", kAutocompress, nullptr,
     [](DeploymentContract& c) { c.mutable_workload()->clear_input_tokens(); },
     "workload.input_tokens: required for AUTOCOMPRESS"},
    {"WorkloadOutputRequired", kAutocompress, nullptr,
     [](DeploymentContract& c) { c.mutable_workload()->clear_output_tokens(); },
     "workload.output_tokens: required for AUTOCOMPRESS"},
    {"WorkloadBatchMin", kAutocompress, R"pb(workload { batch_size: 0 })pb", nullptr,
     "workload.batch_size: must be >= 1, got 0"},
    {"WorkloadBatchMax", kAutocompress, R"pb(workload { batch_size: 4097 })pb", nullptr,
     "workload.batch_size: must be <= 4096, got 4097"},
    {"WorkloadInputMin", kAutocompress, R"pb(workload { input_tokens: 0 })pb", nullptr,
     "workload.input_tokens: must be >= 1, got 0"},
    {"WorkloadInputMax", kAutocompress, R"pb(workload { input_tokens: 1048577 })pb", nullptr,
     "workload.input_tokens: must be <= 1048576, got 1048577"},
    {"WorkloadOutputMin", kAutocompress, R"pb(workload { output_tokens: -3 })pb", nullptr,
     "workload.output_tokens: must be >= 1, got -3"},
    {"WorkloadOutputMax", kAutocompress, R"pb(workload { output_tokens: 2000000 })pb", nullptr,
     "workload.output_tokens: must be <= 1048576, got 2000000"},
    {"WorkloadCachedMin", kAutocompress, R"pb(workload { cached_prefix_tokens: -1 })pb", nullptr,
     "workload.cached_prefix_tokens: must be >= 0, got -1"},
    {"WorkloadCachedMax", kAutocompress, R"pb(workload { cached_prefix_tokens: 1048577 })pb",
     nullptr, "workload.cached_prefix_tokens: must be <= 1048576, got 1048577"},
    {"WorkloadTotal", kAutocompress,
     R"pb(workload { input_tokens: 1048576 output_tokens: 1048576 cached_prefix_tokens: 1 })pb",
     nullptr,
     "workload: input_tokens + output_tokens + cached_prefix_tokens must be <= 2097152, got "
     "2097153"},
    {"ProbeWorkloadStillChecked", kProbe, R"pb(workload { batch_size: 0 })pb", nullptr,
     "workload.batch_size: must be >= 1, got 0"},
    // budget
    {"BudgetLatencyPositive", kAutocompress, R"pb(budget { latency_ms_max: 0 })pb", nullptr,
     "budget.latency_ms_max: must be > 0, got 0"},
    {"BudgetThroughputPositive", kAutocompress,
     R"pb(budget { throughput_tokens_per_s_min: -5 })pb", nullptr,
     "budget.throughput_tokens_per_s_min: must be > 0, got -5"},
    {"BudgetMemoryFinite", kAutocompress, nullptr,
     [](DeploymentContract& c) {
       c.mutable_budget()->set_memory_mib_max(std::numeric_limits<double>::quiet_NaN());
     },
     "budget.memory_mib_max: must be finite, got nan"},
    {"BudgetMemoryInfinite", kAutocompress, nullptr,
     [](DeploymentContract& c) {
       c.mutable_budget()->set_memory_mib_max(std::numeric_limits<double>::infinity());
     },
     "budget.memory_mib_max: must be finite, got inf"},
    {"BudgetWeightMemoryPositive", kEntropyCode, R"pb(budget { weight_memory_mib_max: 0 })pb",
     nullptr, "budget.weight_memory_mib_max: must be > 0, got 0"},
    {"BudgetWeightWithinTotal", kAutocompress, R"pb(budget { weight_memory_mib_max: 100 })pb",
     nullptr, "budget.weight_memory_mib_max: must be <= budget.memory_mib_max (64), got 100"},
    {"BudgetRequiredForAutocompress", kAutocompress, nullptr,
     [](DeploymentContract& c) { c.clear_budget(); },
     "budget: at least one of latency_ms_max, throughput_tokens_per_s_min, memory_mib_max "
     "(or their *_vs_parent forms) is required for AUTOCOMPRESS"},
    {"WeightBudgetAloneNotEnoughForAutocompress", kAutocompress, nullptr,
     [](DeploymentContract& c) {
       c.clear_budget();
       c.mutable_budget()->set_weight_memory_mib_max(10);
     },
     "budget: at least one of latency_ms_max, throughput_tokens_per_s_min, memory_mib_max "
     "(or their *_vs_parent forms) is required for AUTOCOMPRESS"},
    {"BudgetOrBlocksForBlockRemoval", kBlockRemoval, nullptr,
     [](DeploymentContract& c) { c.mutable_block_removal()->clear_blocks_to_remove(); },
     "budget: at least one of latency_ms_max, throughput_tokens_per_s_min, memory_mib_max "
     "(or their *_vs_parent forms) is required for BLOCK_REMOVAL unless block_removal.blocks_to_remove is set"},
    {"LatencyVsParentIsAFraction", kAutocompress, nullptr,
     [](DeploymentContract& c) {
       c.clear_budget();
       c.mutable_budget()->set_latency_vs_parent_max(1.5);
     },
     "budget.latency_vs_parent_max: must be <= 1, got 1.5"},
    {"MemoryVsParentPositive", kAutocompress, nullptr,
     [](DeploymentContract& c) {
       c.clear_budget();
       c.mutable_budget()->set_memory_vs_parent_max(0);
     },
     "budget.memory_vs_parent_max: must be > 0, got 0"},
    {"ThroughputVsParentBounded", kAutocompress, nullptr,
     [](DeploymentContract& c) {
       c.clear_budget();
       c.mutable_budget()->set_throughput_vs_parent_min(101);
     },
     "budget.throughput_vs_parent_min: must be <= 100, got 101"},
    {"LatencyVsParentNotBesideAbsolute", kAutocompress, nullptr,
     [](DeploymentContract& c) {
       c.clear_budget();
       c.mutable_budget()->set_latency_ms_max(20);
       c.mutable_budget()->set_latency_vs_parent_max(0.7);
     },
     "budget.latency_vs_parent_max: set budget.latency_ms_max or budget.latency_vs_parent_max, "
     "not both"},
    {"BudgetRequiredForEntropyCode", kEntropyCode, nullptr,
     [](DeploymentContract& c) { c.clear_budget(); },
     "budget: weight_memory_mib_max or memory_mib_max is required for ENTROPY_CODE"},
    {"PackageNeedsWeightBudget", kAutocompress, R"pb(package { entropy_code: true })pb", nullptr,
     "budget.weight_memory_mib_max: required when package.entropy_code is true"},
    {"PackageNotForEntropyCode", kEntropyCode, R"pb(package { entropy_code: true })pb", nullptr,
     "package.entropy_code: only valid for AUTOCOMPRESS and BLOCK_REMOVAL, got method "
     "ENTROPY_CODE"},
    {"PackageNotForProbe", kProbe, R"pb(package { entropy_code: true })pb", nullptr,
     "package.entropy_code: only valid for AUTOCOMPRESS and BLOCK_REMOVAL, got method PROBE"},
    // search
    {"SearchStepsMin", kAutocompress, R"pb(search { steps: 0 })pb", nullptr,
     "search.steps: must be >= 1, got 0"},
    {"SearchStepsMax", kAutocompress, R"pb(search { steps: 100001 })pb", nullptr,
     "search.steps: must be <= 100000, got 100001"},
    {"SearchSampledMin", kAutocompress, R"pb(search { sampled_architectures: 0 })pb", nullptr,
     "search.sampled_architectures: must be >= 1, got 0"},
    {"SearchSampledMax", kAutocompress, R"pb(search { sampled_architectures: 1025 })pb",
     nullptr, "search.sampled_architectures: must be <= 1024, got 1025"},
    {"SearchAlphaMin", kAutocompress, R"pb(search { alpha: -0.1 })pb", nullptr,
     "search.alpha: must be >= 0, got -0.1"},
    {"SearchAlphaMax", kAutocompress, R"pb(search { alpha: 1000.5 })pb", nullptr,
     "search.alpha: must be <= 1000, got 1000.5"},
    {"SearchDeadZoneMin", kAutocompress, R"pb(search { dead_zone: -0.01 })pb", nullptr,
     "search.dead_zone: must be >= 0, got -0.01"},
    {"SearchDeadZoneMax", kAutocompress, R"pb(search { dead_zone: 0.5 })pb", nullptr,
     "search.dead_zone: must be < 0.5, got 0.5"},
    {"SearchDeadZoneJustAbove", kAutocompress, R"pb(search { dead_zone: 0.5000000001 })pb",
     nullptr, "search.dead_zone: must be < 0.5, got 0.5000000001"},
    {"SearchRouterLrMin", kAutocompress, R"pb(search { router_lr: 0 })pb", nullptr,
     "search.router_lr: must be > 0, got 0"},
    {"SearchRouterLrMax", kAutocompress, R"pb(search { router_lr: 1.5 })pb", nullptr,
     "search.router_lr: must be <= 1, got 1.5"},
    {"SearchRouterHiddenMin", kAutocompress, R"pb(search { router_hidden: 0 })pb", nullptr,
     "search.router_hidden: must be >= 1, got 0"},
    {"SearchRouterHiddenMax", kAutocompress, R"pb(search { router_hidden: 8193 })pb", nullptr,
     "search.router_hidden: must be <= 8192, got 8193"},
    {"SearchLogitScaleStartPositive", kAutocompress, R"pb(search { logit_scale_start: 0 })pb",
     nullptr, "search.logit_scale_start: must be > 0, got 0"},
    {"SearchLogitScaleEndPositive", kAutocompress, R"pb(search { logit_scale_end: -1 })pb",
     nullptr, "search.logit_scale_end: must be > 0, got -1"},
    {"SearchLogitScaleOrder", kAutocompress,
     R"pb(search { logit_scale_start: 5 logit_scale_end: 2 })pb", nullptr,
     "search.logit_scale_end: must be >= logit_scale_start (5), got 2"},
    {"SearchLogitScaleOrderAgainstDefault", kAutocompress,
     R"pb(search { logit_scale_end: 0.5 })pb", nullptr,
     "search.logit_scale_end: must be >= logit_scale_start (1), got 0.5"},
    {"SearchTemperatureStartMin", kAutocompress, R"pb(search { temperature_start: 0 })pb",
     nullptr, "search.temperature_start: must be > 0, got 0"},
    {"SearchTemperatureStartMax", kAutocompress, R"pb(search { temperature_start: 101 })pb",
     nullptr, "search.temperature_start: must be <= 100, got 101"},
    {"SearchTemperatureEndMin", kAutocompress, R"pb(search { temperature_end: 0 })pb", nullptr,
     "search.temperature_end: must be > 0, got 0"},
    {"SearchTemperatureOrder", kAutocompress,
     R"pb(search { temperature_start: 0.5 temperature_end: 0.8 })pb", nullptr,
     "search.temperature_end: must be <= temperature_start (0.5), got 0.8"},
    {"SearchTemperatureOrderAgainstDefault", kAutocompress,
     R"pb(search { temperature_end: 2 })pb", nullptr,
     "search.temperature_end: must be <= temperature_start (1), got 2"},
    {"SearchExtractionMin", kAutocompress, R"pb(search { extraction_threshold: 0.5 })pb",
     nullptr, "search.extraction_threshold: must be > 0.5, got 0.5"},
    {"SearchExtractionMax", kAutocompress, R"pb(search { extraction_threshold: 1.01 })pb",
     nullptr, "search.extraction_threshold: must be <= 1, got 1.01"},
    {"SearchBatchMin", kAutocompress, R"pb(search { batch_sequences: 0 })pb", nullptr,
     "search.batch_sequences: must be >= 1, got 0"},
    {"SearchBatchCoversSampled", kAutocompress, R"pb(search { batch_sequences: 16 })pb", nullptr,
     "search.batch_sequences: must be >= sampled_architectures (32) so every architecture gets "
     "a sequence, got 16"},
    {"SearchSampledWithinDefaultBatch", kAutocompress,
     R"pb(search { sampled_architectures: 100 })pb", nullptr,
     "search.sampled_architectures: must be <= batch_sequences (default 64) so every "
     "architecture gets a sequence, got 100"},
    {"SearchSequenceLengthMin", kAutocompress, R"pb(search { sequence_length: 0 })pb", nullptr,
     "search.sequence_length: must be >= 1, got 0"},
    {"SearchSequenceLengthMax", kAutocompress, R"pb(search { sequence_length: 65537 })pb",
     nullptr, "search.sequence_length: must be <= 65536, got 65537"},
    {"SearchSupernetLr", kAutocompress, R"pb(search { supernet_lr: 0 })pb", nullptr,
     "search.supernet_lr: must be > 0, got 0"},
    {"SearchSettleRungsMax", kAutocompress, R"pb(search { settle_rungs: 17 })pb", nullptr,
     "search.settle_rungs: must be <= 16, got 17"},
    {"SearchSettleRungsMin", kAutocompress, R"pb(search { settle_rungs: -1 })pb", nullptr,
     "search.settle_rungs: must be >= 0, got -1"},
    {"SearchSettleMargin", kAutocompress, R"pb(search { settle_margin: 0.25 })pb", nullptr,
     "search.settle_margin: must be <= 0.2, got 0.25"},
    {"SearchSettleFineStepsMin", kAutocompress, R"pb(search { settle_fine_steps: 0 })pb",
     nullptr, "search.settle_fine_steps: must be >= 1, got 0"},
    {"SearchSettleFineStepsMax", kAutocompress, R"pb(search { settle_fine_steps: 9 })pb",
     nullptr, "search.settle_fine_steps: must be <= 8, got 9"},
    {"SearchChecksFinite", kAutocompress, nullptr,
     [](DeploymentContract& c) {
       c.mutable_search()->set_alpha(std::numeric_limits<double>::infinity());
     },
     "search.alpha: must be finite, got inf"},
    // ranking, recovery, baseline
    {"RankingSamplesMin", kAutocompress, R"pb(ranking { calibration_samples: 0 })pb", nullptr,
     "ranking.calibration_samples: must be >= 1, got 0"},
    {"RankingSequenceLengthMax", kAutocompress, R"pb(ranking { sequence_length: 70000 })pb",
     nullptr, "ranking.sequence_length: must be <= 65536, got 70000"},
    {"RecoveryTokensMin", kAutocompress, R"pb(recovery { tokens: -1 })pb", nullptr,
     "recovery.tokens: must be >= 0, got -1"},
    {"RecoveryTokensMax", kAutocompress, R"pb(recovery { tokens: 10000000000001 })pb", nullptr,
     "recovery.tokens: must be <= 10000000000000, got 10000000000001"},
    {"RecoveryLearningRate", kAutocompress, R"pb(recovery { learning_rate: 0 })pb", nullptr,
     "recovery.learning_rate: must be > 0, got 0"},
    {"RecoveryBatch", kAutocompress, R"pb(recovery { batch_sequences: 0 })pb", nullptr,
     "recovery.batch_sequences: must be >= 1, got 0"},
    {"RecoverySequenceLength", kAutocompress, R"pb(recovery { sequence_length: 0 })pb", nullptr,
     "recovery.sequence_length: must be >= 1, got 0"},
    {"RecoveryCheckpointEvery", kAutocompress, R"pb(recovery { checkpoint_every_steps: 0 })pb",
     nullptr, "recovery.checkpoint_every_steps: must be >= 1, got 0"},
    {"BaselineOnlyForAutocompress", kBlockRemoval, R"pb(compare_uniform_baseline: true)pb",
     nullptr, "compare_uniform_baseline: only valid for AUTOCOMPRESS, got method BLOCK_REMOVAL"},
    // block_removal
    {"BlocksToRemoveMin", kBlockRemoval, R"pb(block_removal { blocks_to_remove: 0 })pb", nullptr,
     "block_removal.blocks_to_remove: must be >= 1, got 0"},
    {"BlocksToRemoveMax", kBlockRemoval, R"pb(block_removal { blocks_to_remove: 4097 })pb",
     nullptr, "block_removal.blocks_to_remove: must be <= 4096, got 4097"},
    {"BlockCalibrationMin", kBlockRemoval, R"pb(block_removal { calibration_samples: 0 })pb",
     nullptr, "block_removal.calibration_samples: must be >= 1, got 0"},
    {"BlockCalibrationMax", kBlockRemoval,
     R"pb(block_removal { calibration_samples: 100001 })pb", nullptr,
     "block_removal.calibration_samples: must be <= 100000, got 100001"},
    {"BlockCandidatesMin", kBlockRemoval, R"pb(block_removal { candidates: 0 })pb", nullptr,
     "block_removal.candidates: must be >= 1, got 0"},
    {"BlockCandidatesMax", kBlockRemoval, R"pb(block_removal { candidates: 1001 })pb", nullptr,
     "block_removal.candidates: must be <= 1000, got 1001"},
    {"BlockStagesMin", kBlockRemoval, R"pb(block_removal { stages: 0 })pb", nullptr,
     "block_removal.stages: must be >= 1, got 0"},
    {"BlockStagesMax", kBlockRemoval, R"pb(block_removal { stages: 9 })pb", nullptr,
     "block_removal.stages: must be <= 8, got 9"},
    {"BlockStagesAtMostM", kBlockRemoval, R"pb(block_removal { stages: 3 })pb", nullptr,
     "block_removal.stages: at most block_removal.blocks_to_remove (2), got 3"},
    {"BlockStagesNeedAFixedM", kBlockRemoval, nullptr,
     [](DeploymentContract& c) {
       c.mutable_block_removal()->clear_blocks_to_remove();
       c.mutable_block_removal()->set_stages(2);
       c.mutable_budget()->set_latency_ms_max(10);
     },
     "block_removal.stages: 2 stages need block_removal.blocks_to_remove (a budget-driven M is "
     "chosen in one stage)"},
    {"BlockSolverUnknown", kBlockRemoval, nullptr,
     [](DeploymentContract& c) {
       c.mutable_block_removal()->set_solver(static_cast<v1::QuboSolver>(9));
     },
     "block_removal.solver: must be one of QUBO_SOLVER_UNSPECIFIED, EXACT, SIMULATED_ANNEALING, "
     "TABU, got 9"},
    // entropy
    {"EntropySymbolsRange", kEntropyCode, R"pb(entropy { symbols_per_codeword: [ 1, 5 ] })pb",
     nullptr, "entropy.symbols_per_codeword[1]: must be <= 4, got 5"},
    {"EntropySymbolsMin", kEntropyCode, R"pb(entropy { symbols_per_codeword: [ 0 ] })pb", nullptr,
     "entropy.symbols_per_codeword[0]: must be >= 1, got 0"},
    {"EntropyTableLogMin", kEntropyCode, R"pb(entropy { table_log: [ 7 ] })pb", nullptr,
     "entropy.table_log[0]: must be >= 8, got 7"},
    {"EntropyTableLogMax", kEntropyCode, R"pb(entropy { table_log: [ 10, 17 ] })pb", nullptr,
     "entropy.table_log[1]: must be <= 16, got 17"},
    {"EntropyChunkWidthMin", kEntropyCode, R"pb(entropy { chunk_width: [ 32 ] })pb", nullptr,
     "entropy.chunk_width[0]: must be >= 64, got 32"},
    {"EntropyChunkWidthMax", kEntropyCode, R"pb(entropy { chunk_width: [ 1024, 70000 ] })pb",
     nullptr, "entropy.chunk_width[1]: must be <= 65536, got 70000"},
    {"EntropyNoDuplicates", kEntropyCode, R"pb(entropy { table_log: [ 10, 12, 10 ] })pb",
     nullptr, "entropy.table_log[2]: duplicate of entropy.table_log[0] (10)"},
    {"EntropyListLength", kEntropyCode, nullptr,
     [](DeploymentContract& c) {
       for (int i = 0; i < 17; ++i) c.mutable_entropy()->add_chunk_width(64 + i);
     },
     "entropy.chunk_width: at most 16 entries, got 17"},
    {"EntropyWeightFormatUnknown", kEntropyCode, nullptr,
     [](DeploymentContract& c) {
       c.mutable_entropy()->set_weight_format(static_cast<v1::WeightFormat>(9));
     },
     "entropy.weight_format: must be one of WEIGHT_FORMAT_UNSPECIFIED, WEIGHT_BF16, WEIGHT_FP8, "
     "WEIGHT_INT8, WEIGHT_INT4, got 9"},
    // resources
    {"ResourcesNodesMin", kAutocompress, R"pb(resources { search { nodes: 0 } })pb", nullptr,
     "resources.search.nodes: must be >= 1, got 0"},
    {"ResourcesNodesMax", kAutocompress, R"pb(resources { distill { nodes: 1025 } })pb", nullptr,
     "resources.distill.nodes: must be <= 1024, got 1025"},
    {"ResourcesRanksMin", kAutocompress, R"pb(resources { search { ranks_per_node: 0 } })pb",
     nullptr, "resources.search.ranks_per_node: must be >= 1, got 0"},
    {"ResourcesRanksMax", kAutocompress, R"pb(resources { rank { ranks_per_node: 257 } })pb",
     nullptr, "resources.rank.ranks_per_node: must be <= 256, got 257"},
    {"ResourcesGpusMin", kAutocompress, R"pb(resources { search { gpus_per_node: -1 } })pb",
     nullptr, "resources.search.gpus_per_node: must be >= 0, got -1"},
    {"ResourcesGpusMax", kAutocompress,
     R"pb(target { device_kind: "NVIDIA H200" } resources { search { gpus_per_node: 65 } })pb",
     nullptr, "resources.search.gpus_per_node: must be <= 64, got 65"},
    {"ResourcesNoGpusOnCpu", kAutocompress, R"pb(resources { distill { gpus_per_node: 1 } })pb",
     nullptr, "resources.distill.gpus_per_node: must be 0 when target.device_kind is \"cpu\", "
              "got 1"},
    {"ResourcesGpuTypeCharacters", kAutocompress,
     R"pb(target { device_kind: "NVIDIA H200" } resources { search { gpu_type: "H100" } })pb",
     nullptr, "resources.search.gpu_type: must match [a-z0-9_-]{0,32}, got \"H100\""},
    {"ResourcesGpuTypeNeedsGpus", kAutocompress,
     R"pb(resources { search { gpu_type: "h100" } })pb", nullptr,
     "resources.search.gpu_type: needs gpus_per_node >= 1, got gpu_type \"h100\" with 0 GPUs "
     "per node"},
    {"ResourcesMemoryMin", kAutocompress, R"pb(resources { search { memory_mib: -1 } })pb",
     nullptr, "resources.search.memory_mib: must be >= 0, got -1"},
    {"ResourcesMemoryMax", kAutocompress,
     R"pb(resources { search { memory_mib: 16777217 } })pb", nullptr,
     "resources.search.memory_mib: must be <= 16777216, got 16777217"},
    {"ResourcesTimeLimitMin", kAutocompress, R"pb(resources { verify { time_limit_s: 59 } })pb",
     nullptr, "resources.verify.time_limit_s: must be >= 60, got 59"},
    {"ResourcesTimeLimitMax", kAutocompress,
     R"pb(resources { search { time_limit_s: 2592001 } })pb", nullptr,
     "resources.search.time_limit_s: must be <= 2592000, got 2592001"},
    {"ResourcesAttemptsMin", kAutocompress, R"pb(resources { search { max_attempts: 0 } })pb",
     nullptr, "resources.search.max_attempts: must be >= 1, got 0"},
    {"ResourcesAttemptsMax", kAutocompress,
     R"pb(resources { block_select { max_attempts: 21 } })pb", nullptr,
     "resources.block_select.max_attempts: must be <= 20, got 21"},
    {"ResourcesProfileOneAgent", kAutocompress, R"pb(resources { profile { nodes: 2 } })pb",
     nullptr, "resources.profile.nodes: must be 1 (profile jobs run on one profiler agent), "
              "got 2"},
    {"ResourcesVerifyOneRank", kAutocompress,
     R"pb(resources { verify { ranks_per_node: 2 } })pb", nullptr,
     "resources.verify.ranks_per_node: must be 1 (verify jobs run on one profiler agent), got 2"},
    // priority, team, labels, probe
    {"PriorityMin", kProbe, R"pb(priority: -1001)pb", nullptr,
     "priority: must be >= -1000, got -1001"},
    {"PriorityMax", kProbe, R"pb(priority: 1001)pb", nullptr,
     "priority: must be <= 1000, got 1001"},
    {"Team", kProbe, R"pb(team: "Games")pb", nullptr,
     "team: must match [a-z0-9_-]{1,64}, got \"Games\""},
    {"TeamTooLong", kProbe, nullptr, [](DeploymentContract& c) { c.set_team(std::string(65, 't')); },
     "team: must match [a-z0-9_-]{1,64}"},
    {"LabelsCount", kProbe, nullptr,
     [](DeploymentContract& c) {
       for (int i = 0; i < 33; ++i) (*c.mutable_labels())[absl::StrCat("k", i)] = "v";
     },
     "labels: at most 32 entries, got 33"},
    {"LabelKeyCharacters", kProbe, R"pb(labels { key: "Owner" value: "x" })pb", nullptr,
     "labels[\"Owner\"]: key must match [a-z0-9_.-]{1,63}"},
    {"LabelKeyTooLong", kProbe, nullptr,
     [](DeploymentContract& c) { (*c.mutable_labels())[std::string(64, 'k')] = "v"; },
     "key must match [a-z0-9_.-]{1,63}"},
    {"LabelKeyEmpty", kProbe, R"pb(labels { key: "" value: "x" })pb", nullptr,
     "labels[\"\"]: key must match [a-z0-9_.-]{1,63}"},
    {"LabelValueLength", kProbe, nullptr,
     [](DeploymentContract& c) { (*c.mutable_labels())["k"] = std::string(257, 'v'); },
     "labels[\"k\"]: value must be at most 256 characters, got 257"},
    {"ProbeDurationMin", kProbe, R"pb(probe { duration_ms: -1 })pb", nullptr,
     "probe.duration_ms: must be >= 0, got -1"},
    {"ProbeDurationMax", kProbe, R"pb(probe { duration_ms: 600001 })pb", nullptr,
     "probe.duration_ms: must be <= 600000, got 600001"},
    // data, quality
    {"DataNeedsAPath", kAutocompress, R"pb(data { train { packing: true } })pb", nullptr,
     "data.train: set path (a .jsonl file or a folder of *.jsonl shards) or artifact_digest"},
    {"DataDigestHex", kAutocompress, R"pb(data { eval { artifact_digest: "abc" } })pb", nullptr,
     "data.eval.artifact_digest: must be 64 lowercase hex characters (sha256), got \"abc\""},
    {"DataSequenceTokensMin", kAutocompress,
     R"pb(data { eval { path: "e.jsonl" sequence_tokens: 1 } })pb", nullptr,
     "data.eval.sequence_tokens: must be >= 2, got 1"},
    {"DataSequenceTokensAgree", kAutocompress,
     R"pb(recovery { sequence_length: 64 }
          data { train { path: "t.jsonl" sequence_tokens: 32 } })pb",
     nullptr, "data.train.sequence_tokens: 32 disagrees with recovery.sequence_length 64"},
    {"DataPackingOnlyEval", kAutocompress,
     R"pb(data { calibration { path: "c.jsonl" packing: false } })pb", nullptr,
     "data.calibration.packing: false is for data.eval only"},
    {"DataMaxSequences", kAutocompress, R"pb(data { train { path: "t" max_sequences: 0 } })pb",
     nullptr, "data.train.max_sequences: must be >= 1, got 0"},
    {"DataTrainNeedsDistill", kBlockRemoval, R"pb(data { train { path: "t.jsonl" } })pb", nullptr,
     "data.train: BLOCK_REMOVAL plans no distill job here (set block_removal.distill)"},
    {"DataNotForEntropy", kEntropyCode, R"pb(data { calibration { path: "c.jsonl" } })pb",
     nullptr, "data.calibration: ENTROPY_CODE reads no calibration data"},
    {"QualityNeedsEval", kAutocompress,
     R"pb(quality { max_relative_perplexity_increase: 0.2 })pb", nullptr,
     "quality.max_relative_perplexity_increase: needs data.eval to measure it on"},
    {"QualityExactMatchRange", kAutocompress,
     R"pb(data { eval { path: "e.jsonl" } } quality { min_exact_match: 1.5 })pb", nullptr,
     "quality.min_exact_match: must be <= 1, got 1.5"},
};

INSTANTIATE_TEST_SUITE_P(Rules, RuleTest, ::testing::ValuesIn(kRuleCases),
                         [](const ::testing::TestParamInfo<RuleCase>& info) {
                           return std::string(info.param.test_name);
                         });

TEST(WithDefaultsTest, FillsEveryDocumentedDefaultOnCpu) {
  DeploymentContract c = WithDefaults(Parse(kProbe));
  EXPECT_EQ(c.target().engine(), "tailor-builtin");
  EXPECT_EQ(c.target().engine_version(), "1");
  EXPECT_EQ(c.target().precision(), v1::FP32);
  EXPECT_FALSE(c.has_workload());  // PROBE needs none; a default shape would be invented data

  const v1::SearchParams& s = c.search();
  EXPECT_EQ(s.steps(), 250);
  EXPECT_EQ(s.sampled_architectures(), 32);
  EXPECT_DOUBLE_EQ(s.alpha(), 1.0);
  EXPECT_DOUBLE_EQ(s.dead_zone(), 0.02);
  EXPECT_DOUBLE_EQ(s.router_lr(), 2e-3);
  EXPECT_EQ(s.router_hidden(), 256);
  EXPECT_DOUBLE_EQ(s.logit_scale_start(), 1);
  EXPECT_DOUBLE_EQ(s.logit_scale_end(), 10);
  EXPECT_DOUBLE_EQ(s.temperature_start(), 1.0);
  EXPECT_DOUBLE_EQ(s.temperature_end(), 0.05);
  EXPECT_DOUBLE_EQ(s.extraction_threshold(), 0.95);
  EXPECT_EQ(s.batch_sequences(), 64);
  EXPECT_EQ(s.sequence_length(), 64);
  EXPECT_DOUBLE_EQ(s.supernet_lr(), 1e-4);
  EXPECT_EQ(s.settle_rungs(), 0);
  EXPECT_DOUBLE_EQ(s.settle_margin(), 0.02);

  EXPECT_EQ(c.ranking().calibration_samples(), 256);
  EXPECT_EQ(c.ranking().sequence_length(), 64);
  EXPECT_EQ(c.recovery().tokens(), 2000000);
  EXPECT_DOUBLE_EQ(c.recovery().learning_rate(), 3e-4);
  EXPECT_EQ(c.recovery().batch_sequences(), 32);
  EXPECT_EQ(c.recovery().sequence_length(), 64);
  EXPECT_EQ(c.recovery().checkpoint_every_steps(), 50);

  EXPECT_FALSE(c.block_removal().has_blocks_to_remove());  // unset = budget-driven
  EXPECT_EQ(c.block_removal().calibration_samples(), 128);
  EXPECT_EQ(c.block_removal().candidates(), 8);
  EXPECT_THAT(c.entropy().symbols_per_codeword(), ElementsAre(1, 2));
  EXPECT_THAT(c.entropy().table_log(), ElementsAre(10, 12));
  EXPECT_THAT(c.entropy().chunk_width(), ElementsAre(1024, 4096));

  const v1::Resources& r = c.resources();
  for (const v1::ResourceRequest* block :
       {&r.profile(), &r.rank(), &r.search(), &r.distill(), &r.verify(), &r.block_select(),
        &r.entropy()}) {
    EXPECT_EQ(block->nodes(), 1);
    EXPECT_EQ(block->gpus_per_node(), 0);
    EXPECT_TRUE(block->has_gpus_per_node());
    EXPECT_EQ(block->gpu_type(), "");
    EXPECT_EQ(block->memory_mib(), 0);
    EXPECT_TRUE(block->has_memory_mib());
    EXPECT_EQ(block->time_limit_s(), 86400);
    EXPECT_EQ(block->max_attempts(), 3);
  }
  EXPECT_EQ(r.profile().ranks_per_node(), 1);
  EXPECT_EQ(r.rank().ranks_per_node(), 1);
  EXPECT_EQ(r.search().ranks_per_node(), 2);
  EXPECT_EQ(r.distill().ranks_per_node(), 2);
  EXPECT_EQ(r.verify().ranks_per_node(), 1);
  EXPECT_EQ(r.block_select().ranks_per_node(), 1);
  EXPECT_EQ(r.entropy().ranks_per_node(), 1);

  EXPECT_TRUE(c.has_priority());
  EXPECT_EQ(c.priority(), 0);
  EXPECT_EQ(c.team(), "default");
  EXPECT_TRUE(c.has_seed());
  EXPECT_EQ(c.seed(), 1u);
  EXPECT_EQ(c.probe().duration_ms(), 1000);
}

TEST(WithDefaultsTest, GpuTargetsGetBf16AndOneGpuPerNode) {
  DeploymentContract c = Parse(kProbe);
  c.mutable_target()->set_device_kind("NVIDIA H200");
  c = WithDefaults(c);
  EXPECT_EQ(c.target().precision(), v1::BF16);
  EXPECT_EQ(c.resources().search().gpus_per_node(), 1);
  EXPECT_EQ(c.resources().profile().gpus_per_node(), 1);
  EXPECT_EQ(c.resources().search().ranks_per_node(), 1);
  EXPECT_EQ(c.resources().distill().ranks_per_node(), 1);
}

TEST(WithDefaultsTest, EquivalenceGateAndLatencyPercentileDefaults) {
  DeploymentContract c = WithDefaults(Parse(kAutocompress));
  EXPECT_EQ(c.target().equivalence().max_kl(), 1e-3);
  EXPECT_EQ(c.target().equivalence().min_argmax_agreement(), 0.99);
  EXPECT_EQ(c.budget().latency_percentile(), v1::LATENCY_P50);
  DeploymentContract p99 = Parse(kAutocompress);
  p99.mutable_budget()->set_latency_percentile(v1::LATENCY_P99);
  p99.mutable_target()->mutable_equivalence()->set_max_kl(0);
  p99 = WithDefaults(p99);
  EXPECT_EQ(p99.budget().latency_percentile(), v1::LATENCY_P99);
  EXPECT_EQ(p99.target().equivalence().max_kl(), 0);
  EXPECT_TRUE(p99.target().equivalence().has_max_kl());
}

TEST(WithDefaultsTest, FillsCachedPrefixOfAGivenWorkload) {
  DeploymentContract c = Parse(kBlockRemoval);
  ASSERT_FALSE(c.workload().has_cached_prefix_tokens());
  c = WithDefaults(c);
  EXPECT_TRUE(c.workload().has_cached_prefix_tokens());
  EXPECT_EQ(c.workload().cached_prefix_tokens(), 0);
  EXPECT_EQ(c.workload().batch_size(), 1);
}

TEST(WithDefaultsTest, KeepsExplicitValuesIncludingZeros) {
  DeploymentContract c = Parse(kAutocompress);
  ASSERT_TRUE(google::protobuf::TextFormat::MergeFromString(R"pb(
    target { engine: "vllm" engine_version: "0.6.3" precision: BF16 }
    search { alpha: 0 dead_zone: 0 steps: 10 }
    recovery { tokens: 0 }
    block_removal { blocks_to_remove: 3 }
    entropy { table_log: [ 14 ] }
    resources { search { ranks_per_node: 4 max_attempts: 1 } }
    priority: 0
    team: "games"
    seed: 0
    probe { duration_ms: 0 }
  )pb", &c));
  DeploymentContract d = WithDefaults(c);
  EXPECT_EQ(d.target().engine(), "vllm");
  EXPECT_EQ(d.target().engine_version(), "0.6.3");
  EXPECT_EQ(d.target().precision(), v1::BF16);
  EXPECT_DOUBLE_EQ(d.search().alpha(), 0);
  EXPECT_DOUBLE_EQ(d.search().dead_zone(), 0);
  EXPECT_EQ(d.search().steps(), 10);
  EXPECT_EQ(d.recovery().tokens(), 0);
  EXPECT_EQ(d.block_removal().blocks_to_remove(), 3);
  EXPECT_THAT(d.entropy().table_log(), ElementsAre(14));
  EXPECT_THAT(d.entropy().chunk_width(), ElementsAre(1024, 4096));
  EXPECT_EQ(d.resources().search().ranks_per_node(), 4);
  EXPECT_EQ(d.resources().search().max_attempts(), 1);
  EXPECT_EQ(d.resources().search().nodes(), 1);
  EXPECT_EQ(d.team(), "games");
  EXPECT_EQ(d.seed(), 0u);
  EXPECT_EQ(d.probe().duration_ms(), 0);
}

TEST(WithDefaultsTest, IsIdempotent) {
  for (const char* text : {kAutocompress, kBlockRemoval, kEntropyCode, kProbe, ""}) {
    DeploymentContract once = WithDefaults(Parse(text));
    DeploymentContract twice = WithDefaults(once);
    EXPECT_TRUE(MessageDifferencer::Equals(once, twice)) << text;
  }
}

// The shipped examples must stay valid: they are what users copy.
std::filesystem::path SourceDir() {
  if (const char* env = std::getenv("TAILOR_SOURCE_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  // tests/unit/coordinator/<this file> -> repository root.
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path().parent_path();
}

TEST(ExamplesTest, EveryExampleContractIsValid) {
  std::filesystem::path dir = SourceDir() / "examples" / "contracts";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::string ext = entry.path().extension().string();
    if (ext != ".textproto" && ext != ".json") continue;
    names.push_back(entry.path().filename().string());
    auto contract = LoadContractFile(entry.path().string());
    ASSERT_THAT(contract, IsOk()) << entry.path();
    EXPECT_THAT(ValidateContract(*contract), IsOk()) << entry.path();
    EXPECT_THAT(ValidateContract(WithDefaults(*contract)), IsOk()) << entry.path();
  }
  EXPECT_THAT(names, ::testing::IsSupersetOf({"probe-cpu.textproto", "npc-cpu.textproto",
                                              "blocks-cpu.textproto", "entropy-cpu.textproto",
                                              "throughput-cpu.json", "text-cpu.textproto"}));
}

TEST(ExamplesTest, NpcExampleMatchesTheArchitectureSketch) {
  auto c = LoadContractFile((SourceDir() / "examples/contracts/npc-cpu.textproto").string());
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->name(), "npc-cpu");
  EXPECT_EQ(c->method(), v1::AUTOCOMPRESS);
  EXPECT_EQ(c->parent().path(), "tailor-data/models/parent-small");
  EXPECT_EQ(c->target().precision(), v1::FP32);
  EXPECT_EQ(c->workload().input_tokens(), 128);
  EXPECT_EQ(c->workload().output_tokens(), 32);
  EXPECT_DOUBLE_EQ(c->budget().latency_ms_max(), 40);
  // The sketch says 64 MiB; the demo parent needs 4.45 MiB, so the example binds at 3.5.
  EXPECT_DOUBLE_EQ(c->budget().memory_mib_max(), 3.5);
  EXPECT_TRUE(c->compare_uniform_baseline());
  EXPECT_EQ(c->resources().search().ranks_per_node(), 2);

  auto probe = LoadContractFile((SourceDir() / "examples/contracts/probe-cpu.textproto").string());
  ASSERT_THAT(probe, IsOk());
  EXPECT_EQ(probe->method(), v1::PROBE);
  EXPECT_EQ(probe->target().device_kind(), "cpu");
  EXPECT_EQ(probe->probe().duration_ms(), 500);
}

}  // namespace
}  // namespace tailor::coordinator
