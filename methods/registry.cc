#include "methods/registry.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "methods/api/job_kinds.h"
#include "methods/autocompress/autocompress.h"
#include "methods/block_removal/block_removal.h"
#include "methods/entropy_code/entropy_code.h"
#include "methods/probe/probe.h"

namespace tailor::methods {

void MethodRegistry::Register(std::unique_ptr<Method> method) {
  if (method == nullptr || Find(method->id()) != nullptr) {
    std::fprintf(stderr, "method registry: %s registered twice or null\n",
                 method == nullptr ? "(null)" : method->name().c_str());
    std::abort();
  }
  // One kind, one placement: a kind two methods declare differently would run wherever the
  // first declaration says, whichever method planned it.
  for (const JobKind& kind : method->JobKinds()) {
    const JobKind* known = FindJobKind(kind.name);
    if (known != nullptr && known->placement != kind.placement) {
      std::fprintf(stderr, "method registry: %s declares job kind %s with another placement\n",
                   method->name().c_str(), kind.name);
      std::abort();
    }
    kinds_.push_back(kind);
  }
  methods_.push_back(std::move(method));
}

const JobKind* MethodRegistry::FindJobKind(const std::string& name) const {
  for (const JobKind& kind : SharedJobKinds()) {
    if (kind.name == name) return &kind;
  }
  for (const JobKind& kind : kinds_) {
    if (kind.name == name) return &kind;
  }
  return nullptr;
}

const std::vector<JobKind>& SharedJobKinds() {
  static const auto* kinds = new std::vector<JobKind>{
      {jobs::kProfile, Placement::kAgent, v1::ProfileResult::descriptor()},
      {jobs::kVerify, Placement::kAgent, nullptr},
      {jobs::kDriftCheck, Placement::kAgent, v1::DriftCheckResult::descriptor()},
      {jobs::kMeasure, Placement::kAgent, v1::MeasureResult::descriptor()},
      {jobs::kDistill, Placement::kLauncher, v1::DistillResult::descriptor()}};
  return *kinds;
}

const JobKind* FindJobKind(const std::string& name) {
  return BuiltinMethods().FindJobKind(name);
}

const Method* MethodRegistry::Find(v1::Method id) const {
  for (const auto& m : methods_) {
    if (m->id() == id) return m.get();
  }
  return nullptr;
}

std::vector<std::string> MethodRegistry::Names(bool (*keep)(const MethodTraits&)) const {
  std::vector<std::string> out;
  for (const auto& m : methods_) {
    if (keep == nullptr || keep(m->traits())) out.push_back(m->name());
  }
  return out;
}

// The registration list: adding a method adds one line here.
void RegisterBuiltinMethods(MethodRegistry& registry) {
  registry.Register(MakeAutocompressMethod());
  registry.Register(MakeBlockRemovalMethod());
  registry.Register(MakeEntropyCodeMethod());
  registry.Register(MakeProbeMethod());
}

namespace {

// Methods added before the first BuiltinMethods(); written by one thread in main() only.
std::vector<std::unique_ptr<Method>>& PendingMethods() {
  static auto* pending = new std::vector<std::unique_ptr<Method>>();
  return *pending;
}
std::atomic<bool> frozen{false};

}  // namespace

const MethodRegistry& BuiltinMethods() {
  static const MethodRegistry* const registry = [] {
    frozen = true;
    auto* r = new MethodRegistry();
    RegisterBuiltinMethods(*r);
    for (auto& m : PendingMethods()) r->Register(std::move(m));
    PendingMethods().clear();
    return r;
  }();
  return *registry;
}

void AddMethodBeforeStart(std::unique_ptr<Method> method) {
  if (frozen) {
    std::fprintf(stderr, "method registry: AddMethodBeforeStart after BuiltinMethods()\n");
    std::abort();
  }
  PendingMethods().push_back(std::move(method));
}

}  // namespace tailor::methods
