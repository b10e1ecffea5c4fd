#ifndef TAILOR_COORDINATOR_COORDINATOR_MAIN_H_
#define TAILOR_COORDINATOR_COORDINATOR_MAIN_H_

namespace tailor::coordinator {

// tailor-coordinator's whole command line: parses the flags, then serves until SIGTERM or
// SIGINT (or creates a token offline with --create-token). Returns the exit code: 0 ok,
// 1 failed, 2 usage. A library function so a test binary can register a test-only method
// (methods::AddMethodBeforeStart) and then run the real coordinator.
int CoordinatorMain(int argc, char** argv);

}  // namespace tailor::coordinator

#endif  // TAILOR_COORDINATOR_COORDINATOR_MAIN_H_
