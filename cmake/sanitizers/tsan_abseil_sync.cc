// Linked into every executable of the ThreadSanitizer build (TAILOR_SANITIZE=tsan) only.
//
// Abseil comes from Debian, compiled without -fsanitize=thread, so TSan cannot see that an
// absl::Mutex orders memory: a field written under mu_ on one thread and read under mu_ on
// another is reported as a race ("As if synchronized via sleep"). gRPC's own locks are
// absl::Mutex too. Rebuilding Abseil with TSan is not possible on a machine that only reaches
// the Debian registry, so instead this file interposes the exported lock and wait entry
// points: each forwards to Abseil's real function (dlsym(RTLD_NEXT)) and tells TSan about
// the happens-before edge it implies (__tsan_release before a lock is given up,
// __tsan_acquire after it is taken). The executables are linked with --export-dynamic so the
// calls from inside libabsl and libgrpc resolve here as well. The locking itself is still
// Abseil's; TSan only learns what it guarantees.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);

namespace {

#define TAILOR_STR2(x) #x
#define TAILOR_STR(x) TAILOR_STR2(x)

// "_ZN4absl" + <inline namespace> + `rest`: the Itanium mangling of absl::<ns>::<rest>.
std::string Mangled(const char* rest) {
  const char* ns = TAILOR_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  return std::string("_ZN4absl") + std::to_string(std::strlen(ns)) + ns + rest;
}

template <typename Fn>
Fn Real(const char* rest) {
  const std::string name = Mangled(rest);
  void* sym = dlsym(RTLD_NEXT, name.c_str());
  if (sym == nullptr) {
    std::fprintf(stderr, "tsan_abseil_sync: %s not found in libabsl (%s)\n", name.c_str(),
                 dlerror());
    std::abort();
  }
  return reinterpret_cast<Fn>(sym);
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

// Taking a lock acquires what the last holder released; giving it up releases.
void Mutex::Lock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex4LockEv");
  real(this);
  __tsan_acquire(this);
}

void Mutex::ReaderLock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex10ReaderLockEv");
  real(this);
  __tsan_acquire(this);
}

bool Mutex::TryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("5Mutex7TryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

bool Mutex::ReaderTryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("5Mutex13ReaderTryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

void Mutex::Unlock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex6UnlockEv");
  __tsan_release(this);
  real(this);
}

void Mutex::ReaderUnlock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex12ReaderUnlockEv");
  __tsan_release(this);
  real(this);
}

void Mutex::LockWhen(const Condition& cond) {
  static const auto real =
      Real<void (*)(Mutex*, const Condition&)>("5Mutex8LockWhenERKNS0_9ConditionE");
  real(this, cond);
  __tsan_acquire(this);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  static const auto real =
      Real<void (*)(Mutex*, const Condition&)>("5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  real(this, cond);
  __tsan_acquire(this);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, absl::Duration)>(
      "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const bool met = real(this, cond, timeout);
  __tsan_acquire(this);  // held either way
  return met;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, absl::Time)>(
      "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  const bool met = real(this, cond, deadline);
  __tsan_acquire(this);
  return met;
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, absl::Duration)>(
      "5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const bool met = real(this, cond, timeout);
  __tsan_acquire(this);
  return met;
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, absl::Time)>(
      "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  const bool met = real(this, cond, deadline);
  __tsan_acquire(this);
  return met;
}

// Await and CondVar waits give the lock up while they block and take it back before they
// return.
void Mutex::Await(const Condition& cond) {
  static const auto real =
      Real<void (*)(Mutex*, const Condition&)>("5Mutex5AwaitERKNS0_9ConditionE");
  __tsan_release(this);
  real(this, cond);
  __tsan_acquire(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, absl::Duration)>(
      "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  __tsan_release(this);
  const bool met = real(this, cond, timeout);
  __tsan_acquire(this);
  return met;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, absl::Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, absl::Time)>(
      "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_release(this);
  const bool met = real(this, cond, deadline);
  __tsan_acquire(this);
  return met;
}

void CondVar::Wait(Mutex* mu) {
  static const auto real = Real<void (*)(CondVar*, Mutex*)>("7CondVar4WaitEPNS0_5MutexE");
  __tsan_release(mu);
  real(this, mu);
  __tsan_acquire(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
  static const auto real = Real<bool (*)(CondVar*, Mutex*, absl::Duration)>(
      "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  __tsan_release(mu);
  const bool timed_out = real(this, mu, timeout);
  __tsan_acquire(mu);
  return timed_out;
}

bool CondVar::WaitWithDeadline(Mutex* mu, absl::Time deadline) {
  static const auto real = Real<bool (*)(CondVar*, Mutex*, absl::Time)>(
      "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  __tsan_release(mu);
  const bool timed_out = real(this, mu, deadline);
  __tsan_acquire(mu);
  return timed_out;
}

ABSL_NAMESPACE_END
}  // namespace absl
