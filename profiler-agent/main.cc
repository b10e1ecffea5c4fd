// tailor-profiler-agent (profiler-agent/agent_main.h).
#include "profiler-agent/agent_main.h"

int main(int argc, char** argv) { return tailor::profiler::AgentMain(argc, argv); }
