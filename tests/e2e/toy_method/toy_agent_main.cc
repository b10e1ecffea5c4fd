// toy-tailor-profiler-agent: the real agent plus the TOY method's agent job.
#include "common/job_output.h"
#include "profiler-agent/agent_main.h"
#include "tests/e2e/toy_method/toy_method.h"

int main(int argc, char** argv) {
  return tailor::profiler::AgentMain(argc, argv, [](tailor::AgentRuntime& runtime) {
    runtime.RegisterHandler(tailor::toy::kToyMeasure, [](tailor::JobContext&) {
      tailor::toy::ToyMeasureResult measured;
      measured.set_value(21);
      tailor::v1::JobOutput output;
      tailor::SetDetail(output, measured);
      return absl::StatusOr<tailor::v1::JobOutput>(std::move(output));
    });
  });
}
