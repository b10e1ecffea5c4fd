// toy-tailor-profiler-agent: the real agent plus the TOY method's agent job.
#include "common/job_output.h"
#include "methods/registry.h"
#include "profiler-agent/agent_main.h"
#include "profiler-agent/handlers.h"
#include "tests/e2e/toy_method/toy_method.h"

namespace {

absl::StatusOr<tailor::v1::JobOutput> ToyMeasure(tailor::JobContext&) {
  tailor::toy::ToyMeasureResult measured;
  measured.set_value(21);
  tailor::v1::JobOutput output;
  tailor::SetDetail(output, measured);
  return output;
}

}  // namespace

int main(int argc, char** argv) {
  // The method's declarations first: handlers register only for kinds a method declares.
  tailor::methods::AddMethodBeforeStart(tailor::toy::MakeToyMethod());
  return tailor::profiler::AgentMain(argc, argv, [](tailor::AgentRuntime& runtime) {
    tailor::profiler::RegisterAgentJob(runtime, tailor::toy::kToyMeasure, ToyMeasure);
  });
}
