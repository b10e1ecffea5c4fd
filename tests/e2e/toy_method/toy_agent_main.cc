// toy-tailor-profiler-agent: the real agent plus the TOY method's agent job.
#include "common/struct_values.h"
#include "profiler-agent/agent_main.h"
#include "tests/e2e/toy_method/toy_method.h"

int main(int argc, char** argv) {
  return tailor::profiler::AgentMain(argc, argv, [](tailor::AgentRuntime& runtime) {
    runtime.RegisterHandler(tailor::toy::kToyMeasure, [](tailor::JobContext&) {
      google::protobuf::Struct result;
      (*result.mutable_fields())["value"].set_number_value(21);
      return absl::StatusOr<google::protobuf::Struct>(std::move(result));
    });
  });
}
