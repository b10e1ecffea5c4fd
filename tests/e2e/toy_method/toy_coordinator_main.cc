// toy-tailor-coordinator: the real coordinator with the test-only TOY method registered.
#include "coordinator/coordinator_main.h"
#include "methods/registry.h"
#include "tests/e2e/toy_method/toy_method.h"

int main(int argc, char** argv) {
  tailor::methods::AddMethodBeforeStart(tailor::toy::MakeToyMethod());
  return tailor::coordinator::CoordinatorMain(argc, argv);
}
