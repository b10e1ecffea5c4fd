#ifndef TAILOR_METHODS_REGISTRY_H_
#define TAILOR_METHODS_REGISTRY_H_

#include <deque>
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

  // The declaration of job kind `name`: a shared kind's, else the first method's that
  // declares it; nullptr when none does.
  const JobKind* FindJobKind(const std::string& name) const;

 private:
  std::vector<std::unique_ptr<Method>> methods_;
  std::deque<JobKind> kinds_;  // every method's JobKinds(), in order; stable addresses
};

// The kinds several methods plan (methods/api/job_kinds.h): profile and verify on the agent,
// distill on the launcher.
const std::vector<JobKind>& SharedJobKinds();

// BuiltinMethods().FindJobKind(name).
const JobKind* FindJobKind(const std::string& name);

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
