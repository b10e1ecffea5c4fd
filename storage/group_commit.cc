#include "storage/group_commit.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/status_macros.h"
#include "storage/database.h"

namespace tailor::storage {
namespace {

// A cached statement: the savepoint SQL runs twice per unit, parsing it each time would cost
// more than the savepoint itself.
absl::Status RunSql(Database& db, const char* sql) {
  TAILOR_ASSIGN_OR_RETURN(Statement s, db.Prepare(sql));
  return s.Run();
}

// What the other units of a batch get when the transaction they shared was lost.
absl::Status BatchLost(const absl::Status& cause) {
  return absl::Status(cause.code(),
                      absl::StrCat("group commit: the transaction of this batch was rolled back, "
                                   "nothing of it was written: ",
                                   cause.message()));
}

}  // namespace

GroupCommitter::GroupCommitter(std::unique_ptr<CoordinatorStore> writer, Options options)
    : options_(options), writer_(std::move(writer)) {
  thread_ = std::thread([this] { Run(); });
}

GroupCommitter::~GroupCommitter() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    arrived_.Signal();
  }
  thread_.join();
}

void GroupCommitter::Expect() {
  absl::MutexLock lock(&mu_);
  ++expected_;
}

void GroupCommitter::Unexpect() {
  absl::MutexLock lock(&mu_);
  --expected_;
  arrived_.Signal();
}

void GroupCommitter::Enqueue(Write write, Done done, bool expected) {
  absl::MutexLock lock(&mu_);
  if (expected) {
    --expected_;
  } else {
    ++urgent_;
  }
  queue_.push_back(Unit{std::move(write), std::move(done), !expected, absl::OkStatus()});
  arrived_.Signal();
}

bool GroupCommitter::TryClaim() {
  absl::MutexLock lock(&mu_);
  if (!queue_.empty() || writing_ || stopping_) return false;
  writing_ = true;
  return true;
}

absl::Status GroupCommitter::WriteClaimed(Write write) {
  std::vector<Unit> batch;
  batch.push_back(Unit{std::move(write), nullptr, true, absl::OkStatus()});
  WriteBatch(batch);
  absl::MutexLock lock(&mu_);
  CountBatchLocked(batch);
  writing_ = false;
  arrived_.Signal();  // units queued meanwhile were left to the committer thread
  return batch[0].status;
}

void GroupCommitter::CountBatchLocked(const std::vector<Unit>& batch) {
  stats_.units += static_cast<int64_t>(batch.size());
  ++stats_.batches;
  stats_.largest_batch = std::max(stats_.largest_batch, batch.size());
  for (const Unit& unit : batch) stats_.failed_units += unit.status.ok() ? 0 : 1;
}

absl::Status GroupCommitter::Commit(Write write) {
  if (TryClaim()) return WriteClaimed(std::move(write));
  absl::Status status;
  absl::Notification committed;
  Enqueue(std::move(write), [&](absl::Status s) {
    status = std::move(s);
    committed.Notify();
  });
  committed.WaitForNotification();
  return status;
}

void GroupCommitter::LingerLocked() {
  if (options_.linger <= absl::ZeroDuration()) return;
  const absl::Time deadline = absl::Now() + options_.linger;
  while (expected_ > 0 && urgent_ == 0 && !stopping_ && queue_.size() < options_.max_batch) {
    if (arrived_.WaitWithDeadline(&mu_, deadline)) return;  // timed out
  }
}

void GroupCommitter::Run() {
  absl::MutexLock lock(&mu_);
  while (true) {
    while (queue_.empty() || writing_) {
      if (queue_.empty() && stopping_) return;  // nothing is owed
      arrived_.Wait(&mu_);
    }
    LingerLocked();
    writing_ = true;
    const size_t n = std::min(queue_.size(), std::max<size_t>(options_.max_batch, 1));
    std::vector<Unit> batch(std::make_move_iterator(queue_.begin()),
                            std::make_move_iterator(queue_.begin() + n));
    queue_.erase(queue_.begin(), queue_.begin() + n);
    for (const Unit& unit : batch) urgent_ -= unit.urgent ? 1 : 0;
    // Unlocked while writing: this is when the next batch gathers.
    mu_.Unlock();
    WriteBatch(batch);
    mu_.Lock();
    // Counted before any caller hears back, so that what a caller reads next includes it.
    CountBatchLocked(batch);
    writing_ = false;
    mu_.Unlock();
    for (Unit& unit : batch) unit.done(unit.status);
    mu_.Lock();
  }
}

void GroupCommitter::WriteBatch(std::vector<Unit>& batch) {
  absl::MutexLock lock(&write_mu_);
  absl::StatusOr<Transaction> txn = writer_->Begin();
  if (!txn.ok()) {
    for (Unit& unit : batch) unit.status = txn.status();
    return;
  }
  if (batch.size() == 1) {
    // Alone in its transaction: the savepoint would only duplicate the transaction's own
    // rollback (~Transaction) and cost two statements on every lease operation.
    batch[0].status = batch[0].write(*writer_);
    if (batch[0].status.ok()) batch[0].status = txn->Commit();
    return;
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    bool broken = false;
    batch[i].status = WriteUnit(batch[i], &broken);
    if (broken) {
      // The units before this one were written into the same, now rolled back, transaction;
      // those after it never ran. None may be acknowledged.
      const absl::Status lost = BatchLost(batch[i].status);
      for (size_t j = 0; j < batch.size(); ++j) {
        if (j != i) batch[j].status = lost;
      }
      return;  // ~Transaction rolls back whatever is left
    }
  }
  const absl::Status committed = txn->Commit();
  if (committed.ok()) return;
  for (Unit& unit : batch) {
    if (unit.status.ok()) unit.status = BatchLost(committed);
  }
}

absl::Status GroupCommitter::WriteUnit(Unit& unit, bool* broken) {
  Database& db = *writer_->db();
  if (absl::Status s = RunSql(db, "SAVEPOINT unit"); !s.ok()) {
    *broken = true;
    return s;
  }
  absl::Status written = unit.write(*writer_);
  if (written.ok()) written = RunSql(db, "RELEASE unit");
  if (written.ok()) return written;
  if (!db.InTransaction()) {
    // SQLITE_FULL, IOERR and the like end the transaction on their own.
    *broken = true;
    return written;
  }
  // Undo this unit only; the savepoint stays on the stack until released.
  absl::Status undone = RunSql(db, "ROLLBACK TO unit");
  if (undone.ok()) undone = RunSql(db, "RELEASE unit");
  if (!undone.ok()) {
    *broken = true;
    return absl::Status(written.code(), absl::StrCat(written.message(), "; and rolling it back: ",
                                                     undone.message()));
  }
  return written;
}

GroupCommitter::Stats GroupCommitter::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

size_t GroupCommitter::queued() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

}  // namespace tailor::storage
