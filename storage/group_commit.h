#ifndef TAILOR_STORAGE_GROUP_COMMIT_H_
#define TAILOR_STORAGE_GROUP_COMMIT_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "storage/coordinator_store.h"

namespace tailor::storage {

// Group commit: units of work queued by many threads are written several per SQLite
// transaction, so concurrent callers share one BEGIN IMMEDIATE ... COMMIT (one WAL append of
// the pages they all touch) instead of paying for one each.
//
// Guarantees:
// - A unit's Done runs (and Commit returns) OK only after the transaction holding the unit
//   committed: a caller never acknowledges work a crash could lose.
// - Units run in the order Enqueue() was called, in the same or a later transaction than every
//   unit queued before them, and their Done callbacks run in that order.
// - Each unit of a batch runs inside its own SAVEPOINT (a unit alone needs none). A unit whose
//   write fails is rolled back alone and only its caller gets the error; the rest of its batch
//   commits. Why not fail the batch: one bad submission must not fail the 63 beside it. An error that ends the
//   whole transaction (SQLite rolled it back itself, the COMMIT failed) fails every unit of
//   the batch with that error, because none of their writes survived.
//
// One committer thread takes every queued unit (up to max_batch), writes and commits them
// without holding the queue's lock, then runs their Done callbacks. Units queued meanwhile form
// the next batch. Callers need not block: the coordinator's gRPC handlers queue a submission
// and answer from its Done, so a handful of gRPC threads keep many units in flight.
//
// Alone, a caller writes its unit itself (TryClaim, WriteClaimed; Commit does so): when nothing
// is queued or being written there is nothing to share a transaction with, and handing the
// unit to the committer thread would only add two thread switches to its latency.
//
// Lingering: on a busy machine the threads that would queue the next units may not get a CPU
// while the committer writes, so batches shrink to one unit. Callers may therefore announce a
// unit before they prepare it (Expect), and the committer waits, at most `linger`, while
// announced units are still to come. It never waits once an urgent unit (queued with
// `expected = false`, by a caller that holds locks others need) is in the queue.
// Thread-safe.
class GroupCommitter {
 public:
  // Runs inside the batch's transaction, on the committer thread (or the claiming caller's);
  // it must only write through `store`.
  using Write = std::function<absl::Status(CoordinatorStore& store)>;
  // Runs on the committer thread after the unit's batch ended, without locks held. It must be
  // quick and must not wait for the committer (no Commit() from inside it).
  using Done = std::function<void(absl::Status status)>;

  struct Options {
    // Bounds the work (and so the latency) of one transaction.
    size_t max_batch = 256;
    // The longest the committer waits for announced units. Real time, not an injected clock:
    // it only lends the CPU to the threads preparing them, and a FakeClock would never end it.
    absl::Duration linger = absl::ZeroDuration();
  };

  struct Stats {
    int64_t units = 0;          // units whose batch ran
    int64_t batches = 0;        // transactions begun
    int64_t failed_units = 0;   // units that got an error
    size_t largest_batch = 0;
  };

  // `writer` is used only by the committer thread (CoordinatorStore::OpenWriter).
  explicit GroupCommitter(std::unique_ptr<CoordinatorStore> writer)
      : GroupCommitter(std::move(writer), Options()) {}
  GroupCommitter(std::unique_ptr<CoordinatorStore> writer, Options options);
  // Writes every unit still queued (their callers are owed an answer), then stops.
  ~GroupCommitter();
  GroupCommitter(const GroupCommitter&) = delete;
  GroupCommitter& operator=(const GroupCommitter&) = delete;

  // Announces a unit the caller is about to queue with Enqueue(..., /*expected=*/true);
  // Unexpect() withdraws an announcement that will not be kept.
  void Expect() ABSL_LOCKS_EXCLUDED(mu_);
  void Unexpect() ABSL_LOCKS_EXCLUDED(mu_);
  // Queues `write` behind every unit queued so far; `done` gets its outcome. Cheap: callers
  // may hold their own locks, which is how they order units (the coordinator enqueues under
  // its mutex). `expected` keeps an Expect(); otherwise the unit is urgent.
  void Enqueue(Write write, Done done, bool expected = false) ABSL_LOCKS_EXCLUDED(mu_);
  // Enqueue (urgent) and block until the unit's transaction committed (OK) or failed; written
  // on the caller's thread when nothing else is queued or being written.
  absl::Status Commit(Write write) ABSL_LOCKS_EXCLUDED(mu_, write_mu_);
  // Claims the writer when nothing is queued or being written. After `true` the caller must
  // call WriteClaimed() exactly once; units queued meanwhile wait for it. Claiming under the
  // caller's own lock orders the unit as Enqueue would.
  bool TryClaim() ABSL_LOCKS_EXCLUDED(mu_);
  // Writes `write` in its own transaction on the calling thread and releases the claim.
  absl::Status WriteClaimed(Write write) ABSL_LOCKS_EXCLUDED(mu_, write_mu_);

  Stats stats() const ABSL_LOCKS_EXCLUDED(mu_);
  // Units queued and not yet taken into a batch (for tests).
  size_t queued() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Unit {
    Write write;
    Done done;
    bool urgent = false;
    absl::Status status;  // set by the committer thread while it writes the batch
  };

  void Run() ABSL_LOCKS_EXCLUDED(mu_, write_mu_);
  // Waits (at most options_.linger) while announced units are still to come.
  void LingerLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CountBatchLocked(const std::vector<Unit>& batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes and commits `batch`, setting every unit's status.
  void WriteBatch(std::vector<Unit>& batch) ABSL_LOCKS_EXCLUDED(mu_, write_mu_);
  // One unit inside its savepoint. Sets *broken when the transaction did not survive.
  absl::Status WriteUnit(Unit& unit, bool* broken) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);

  const Options options_;

  mutable absl::Mutex mu_;
  absl::CondVar arrived_;  // a unit was queued, an announcement withdrawn, or stop requested
  std::deque<Unit> queue_ ABSL_GUARDED_BY(mu_);
  int64_t expected_ ABSL_GUARDED_BY(mu_) = 0;  // announced, not yet queued
  int64_t urgent_ ABSL_GUARDED_BY(mu_) = 0;    // urgent units in queue_
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;  // a batch or a claimed unit is being written
  Stats stats_ ABSL_GUARDED_BY(mu_);

  // Held by the committer thread while it writes; never contended, it makes the single-writer
  // rule checkable by the thread-safety analysis.
  absl::Mutex write_mu_;
  const std::unique_ptr<CoordinatorStore> writer_ ABSL_PT_GUARDED_BY(write_mu_);

  std::thread thread_;  // last: started once everything above is initialised
};

}  // namespace tailor::storage

#endif  // TAILOR_STORAGE_GROUP_COMMIT_H_
