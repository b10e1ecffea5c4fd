#ifndef TAILOR_TESTS_E2E_TOY_METHOD_TOY_METHOD_H_
#define TAILOR_TESTS_E2E_TOY_METHOD_TOY_METHOD_H_

// A test-only compression method that proves the extension point (docs/architecture.md,
// "Adding a method"): registered through the same path as the built-in methods, planned and
// reported by the real coordinator, run by a real agent and a real 2-rank worker. It ships in
// no build: only the toy-* test binaries link it.

#include <memory>

#include "methods/api/method.h"
#include "toy_results.pb.h"

namespace tailor::toy {

// No enum value in contract.proto: proto3 enums are open, so a contract can carry the number
// and the registry decides what it means. A real method adds its enum value.
inline constexpr v1::Method kToyMethod = static_cast<v1::Method>(1000);

// Agent: "measures" a value on the target device.
inline constexpr char kToyMeasure[] = "toy_measure";
// Launcher: every rank contributes rank + 1 to a sum over the process group.
inline constexpr char kToyTransform[] = "toy_transform";

std::unique_ptr<methods::Method> MakeToyMethod();

}  // namespace tailor::toy

#endif  // TAILOR_TESTS_E2E_TOY_METHOD_TOY_METHOD_H_
