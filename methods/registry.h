#ifndef TAILOR_METHODS_REGISTRY_H_
#define TAILOR_METHODS_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "methods/api/method.h"

namespace tailor::methods {

// The compression methods a build knows, keyed by v1::Method. Filled by an explicit list
// (BuiltinMethods) rather than static initialisers, so what a binary offers is readable in
// one place and tests can build their own registry with a test-only method.
class MethodRegistry {
 public:
  // Adds `method`; a second method with the same id replaces nothing and is a programming
  // error (dies), since two owners of one enum value would plan ambiguous graphs.
  void Register(std::unique_ptr<Method> method);

  // The method for `id`, or nullptr when this build has none.
  const Method* Find(v1::Method id) const;

  // In registration order (the enum's order for the built-in ones): error messages list
  // methods in this order.
  const std::vector<std::unique_ptr<Method>>& all() const { return methods_; }

  // The name() of each method whose traits pass `keep` (all by default), in order.
  std::vector<std::string> Names(bool (*keep)(const MethodTraits&) = nullptr) const;

 private:
  std::vector<std::unique_ptr<Method>> methods_;
};

// AUTOCOMPRESS, BLOCK_REMOVAL, ENTROPY_CODE, PROBE (methods/registry.cc), plus any method
// added with AddMethodBeforeStart. The registry the coordinator, the CLI, the worker and the
// agent use; the first call freezes it.
const MethodRegistry& BuiltinMethods();

// Adds a method to what BuiltinMethods() returns. Only for a process's main() before anything
// reads the registry (a test binary proving the extension point with a test-only method);
// dies when called after the first BuiltinMethods().
void AddMethodBeforeStart(std::unique_ptr<Method> method);

// Registers the built-in methods into `registry` (what BuiltinMethods holds), so a test can
// add a method of its own beside them.
void RegisterBuiltinMethods(MethodRegistry& registry);

}  // namespace tailor::methods

#endif  // TAILOR_METHODS_REGISTRY_H_
