// GroupCommitter: concurrent units share transactions, each caller returns only once its unit
// is durable, units keep their queue order, and failures reach exactly the callers they hit.
#include "storage/group_commit.h"

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/coordinator_store.h"
#include "storage/database.h"

namespace tailor::storage {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class GroupCommitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(std::filesystem::temp_directory_path().string(), "/group-commit-",
                        getpid(), "-",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto store = CoordinatorStore::Open(dir_ + "/tailor.db");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    ASSERT_TRUE(store_->db()
                    ->Exec("CREATE TABLE rows (k TEXT PRIMARY KEY);"
                           "CREATE TABLE log (seq INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT)")
                    .ok());
  }
  void TearDown() override {
    committer_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  void MakeCommitter(GroupCommitter::Options options = GroupCommitter::Options()) {
    auto writer = store_->OpenWriter();
    ASSERT_TRUE(writer.ok()) << writer.status();
    committer_ = std::make_unique<GroupCommitter>(*std::move(writer), options);
  }

  static GroupCommitter::Write Insert(const std::string& k) {
    return [k](CoordinatorStore& s) {
      return s.db()->Exec(absl::StrCat("INSERT INTO rows (k) VALUES ('", k, "')"));
    };
  }
  static GroupCommitter::Write Log(const std::string& name) {
    return [name](CoordinatorStore& s) {
      return s.db()->Exec(absl::StrCat("INSERT INTO log (name) VALUES ('", name, "')"));
    };
  }

  // Whether `k` is in the file, read through a connection of its own (what a restarted
  // coordinator would see).
  bool Durable(const std::string& k) {
    auto db = Database::Open(dir_ + "/tailor.db");
    if (!db.ok()) return false;
    auto s = (*db)->Prepare("SELECT COUNT(*) FROM rows WHERE k = ?");
    if (!s.ok()) return false;
    s->Bind(1, k);
    auto row = s->Step();
    return row.ok() && *row && s->ColumnInt(0) == 1;
  }
  std::vector<std::string> LogNames() {
    std::vector<std::string> names;
    auto s = store_->db()->Prepare("SELECT name FROM log ORDER BY seq");
    EXPECT_TRUE(s.ok());
    while (s.ok() && *s->Step()) names.push_back(s->ColumnText(0));
    return names;
  }

  // Holds the committer's leader inside a first batch, so that everything queued until
  // Release() forms the next batch(es) in a known order.
  void Block() {
    blocker_ = std::thread([this] {
      EXPECT_TRUE(committer_
                      ->Commit([this](CoordinatorStore&) {
                        started_.Notify();
                        release_.WaitForNotification();
                        return absl::OkStatus();
                      })
                      .ok());
    });
    started_.WaitForNotification();
  }
  void Release() {
    release_.Notify();
    blocker_.join();
  }
  // Queues `writes` in order behind the blocker, releases it, and returns each unit's outcome
  // as its Done callback reported it.
  std::vector<absl::Status> CommitAll(std::vector<GroupCommitter::Write> writes) {
    std::vector<absl::Status> out(writes.size());
    absl::BlockingCounter answered(static_cast<int>(writes.size()));
    for (size_t i = 0; i < writes.size(); ++i) {
      committer_->Enqueue(std::move(writes[i]), [this, &out, &answered, i](absl::Status s) {
        out[i] = std::move(s);
        answer_order_.push_back(i);  // Done callbacks run one at a time, on the committer
        answered.DecrementCount();
      });
    }
    EXPECT_EQ(committer_->queued(), writes.size());
    Release();
    answered.Wait();
    return out;
  }

  std::string dir_;
  std::unique_ptr<CoordinatorStore> store_;
  std::unique_ptr<GroupCommitter> committer_;
  std::thread blocker_;
  std::vector<size_t> answer_order_;
  absl::Notification started_;
  absl::Notification release_;
};

TEST_F(GroupCommitTest, ConcurrentUnitsAreDurableWhenCommitReturns) {
  MakeCommitter();
  constexpr int kThreads = 16;
  constexpr int kUnits = 25;
  std::vector<std::thread> threads;
  std::vector<int> not_durable(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int u = 0; u < kUnits; ++u) {
        const std::string k = absl::StrCat(t, "-", u);
        ASSERT_TRUE(committer_->Commit(Insert(k)).ok());
        if (!Durable(k)) ++not_durable[t];
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(not_durable[t], 0) << "thread " << t;
  const GroupCommitter::Stats stats = committer_->stats();
  EXPECT_EQ(stats.units, kThreads * kUnits);
  EXPECT_EQ(stats.failed_units, 0);
  EXPECT_LE(stats.batches, stats.units);
  EXPECT_EQ(committer_->queued(), 0u);
}

TEST_F(GroupCommitTest, UnitsQueuedTogetherShareOneTransactionInQueueOrder) {
  MakeCommitter();
  Block();
  std::vector<GroupCommitter::Write> writes;
  std::vector<std::string> expected;
  for (int i = 0; i < 20; ++i) {
    expected.push_back(absl::StrCat("u", i));
    writes.push_back(Log(expected.back()));
  }
  for (const absl::Status& s : CommitAll(std::move(writes))) EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(LogNames(), expected);
  EXPECT_EQ(answer_order_, std::vector<size_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13,
                                                14, 15, 16, 17, 18, 19}));
  const GroupCommitter::Stats stats = committer_->stats();
  EXPECT_EQ(stats.batches, 2);  // the blocker's, then all 20 together
  EXPECT_EQ(stats.largest_batch, 20u);
}

// A later unit sees what an earlier unit of the same batch wrote: order holds inside a batch.
TEST_F(GroupCommitTest, ALaterUnitSeesAnEarlierOneOfItsBatch) {
  MakeCommitter();
  Block();
  std::vector<GroupCommitter::Write> writes;
  writes.push_back(Insert("parent"));
  writes.push_back([](CoordinatorStore& s) -> absl::Status {
    auto q = s.db()->Prepare("SELECT COUNT(*) FROM rows WHERE k = 'parent'");
    if (!q.ok()) return q.status();
    auto row = q->Step();
    if (!row.ok()) return row.status();
    if (q->ColumnInt(0) != 1) return absl::FailedPreconditionError("parent not written yet");
    return s.db()->Exec("INSERT INTO rows (k) VALUES ('child')");
  });
  for (const absl::Status& s : CommitAll(std::move(writes))) EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(Durable("parent"));
  EXPECT_TRUE(Durable("child"));
}

TEST_F(GroupCommitTest, AFailingUnitFailsOnlyItsCallerAndLeavesNothing) {
  MakeCommitter();
  Block();
  std::vector<GroupCommitter::Write> writes;
  writes.push_back(Insert("a"));
  // Writes one row, then breaks a constraint: both must be undone, and only for this caller.
  writes.push_back([](CoordinatorStore& s) -> absl::Status {
    absl::Status st = s.db()->Exec("INSERT INTO rows (k) VALUES ('b-partial')");
    if (!st.ok()) return st;
    return s.db()->Exec("INSERT INTO rows (k) VALUES ('a')");
  });
  // An error that is not SQLite's: its writes are undone just the same.
  writes.push_back([](CoordinatorStore& s) -> absl::Status {
    absl::Status st = s.db()->Exec("INSERT INTO rows (k) VALUES ('c-partial')");
    if (!st.ok()) return st;
    return absl::InvalidArgumentError("bad input");
  });
  writes.push_back(Insert("d"));
  const std::vector<absl::Status> out = CommitAll(std::move(writes));
  EXPECT_TRUE(out[0].ok()) << out[0];
  EXPECT_EQ(out[1].code(), absl::StatusCode::kAlreadyExists) << out[1];
  EXPECT_EQ(out[2].code(), absl::StatusCode::kInvalidArgument) << out[2];
  EXPECT_TRUE(out[3].ok()) << out[3];
  EXPECT_TRUE(Durable("a"));
  EXPECT_TRUE(Durable("d"));
  EXPECT_FALSE(Durable("b-partial"));
  EXPECT_FALSE(Durable("c-partial"));
  const GroupCommitter::Stats stats = committer_->stats();
  EXPECT_EQ(stats.batches, 2);
  EXPECT_EQ(stats.failed_units, 2);
}

// A unit alone in its transaction (no savepoint) that fails leaves nothing either.
TEST_F(GroupCommitTest, AFailingUnitAloneLeavesNothing) {
  MakeCommitter();
  const absl::Status failed = committer_->Commit([](CoordinatorStore& s) -> absl::Status {
    absl::Status st = s.db()->Exec("INSERT INTO rows (k) VALUES ('alone-partial')");
    if (!st.ok()) return st;
    return absl::InvalidArgumentError("bad input");
  });
  EXPECT_EQ(failed.code(), absl::StatusCode::kInvalidArgument) << failed;
  EXPECT_FALSE(Durable("alone-partial"));
  EXPECT_TRUE(committer_->Commit(Insert("next")).ok());
  EXPECT_TRUE(Durable("next"));
  EXPECT_FALSE(Durable("alone-partial"));
}

// When the transaction itself is lost, the units before the culprit were written into it and
// are gone too: every caller of the batch gets an error, none is acknowledged.
TEST_F(GroupCommitTest, ALostTransactionFailsEveryCallerOfTheBatch) {
  MakeCommitter();
  Block();
  std::vector<GroupCommitter::Write> writes;
  writes.push_back(Insert("before"));
  writes.push_back(
      [](CoordinatorStore& s) { return s.db()->Exec("ROLLBACK"); });  // ends the transaction
  writes.push_back(Insert("after"));
  const std::vector<absl::Status> out = CommitAll(std::move(writes));
  for (const absl::Status& s : out) EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(out[0].message()), HasSubstr("rolled back, nothing of it was written"));
  EXPECT_THAT(std::string(out[2].message()), HasSubstr("rolled back, nothing of it was written"));
  EXPECT_FALSE(Durable("before"));
  EXPECT_FALSE(Durable("after"));
  // The committer goes on with the next batch.
  EXPECT_TRUE(committer_->Commit(Insert("later")).ok());
  EXPECT_TRUE(Durable("later"));
}

TEST_F(GroupCommitTest, BatchesAreBoundedByMaxBatch) {
  GroupCommitter::Options options;
  options.max_batch = 2;
  MakeCommitter(options);
  Block();
  std::vector<GroupCommitter::Write> writes;
  for (int i = 0; i < 5; ++i) writes.push_back(Log(absl::StrCat("u", i)));
  for (const absl::Status& s : CommitAll(std::move(writes))) EXPECT_TRUE(s.ok()) << s;
  EXPECT_THAT(LogNames(), ElementsAre("u0", "u1", "u2", "u3", "u4"));
  const GroupCommitter::Stats stats = committer_->stats();
  EXPECT_EQ(stats.batches, 4);  // the blocker's, then 2 + 2 + 1
  EXPECT_EQ(stats.largest_batch, 2u);
}

// The committer waits for announced units, so that they share the transaction...
TEST_F(GroupCommitTest, LingersForAnnouncedUnitsUntilTheyArrive) {
  GroupCommitter::Options options;
  options.linger = absl::Seconds(60);  // only their arrival can end this wait in the test
  MakeCommitter(options);
  committer_->Expect();
  committer_->Expect();
  absl::Notification first_done;
  committer_->Enqueue(Insert("first"), [&](absl::Status s) {
    EXPECT_TRUE(s.ok()) << s;
    first_done.Notify();
  }, /*expected=*/true);
  // Still held back: one announced unit is missing.
  EXPECT_FALSE(first_done.WaitForNotificationWithTimeout(absl::Milliseconds(100)));
  EXPECT_FALSE(Durable("first"));
  absl::Notification second_done;
  committer_->Enqueue(Insert("second"), [&](absl::Status s) {
    EXPECT_TRUE(s.ok()) << s;
    second_done.Notify();
  }, /*expected=*/true);
  first_done.WaitForNotification();
  second_done.WaitForNotification();
  const GroupCommitter::Stats stats = committer_->stats();
  EXPECT_EQ(stats.batches, 1);
  EXPECT_EQ(stats.largest_batch, 2u);
}

// ...but never for a unit whose caller holds locks the others may need, nor for an
// announcement that was withdrawn.
TEST_F(GroupCommitTest, UrgentUnitsAndWithdrawnAnnouncementsEndTheWait) {
  GroupCommitter::Options options;
  options.linger = absl::Seconds(60);
  MakeCommitter(options);
  committer_->Expect();
  EXPECT_TRUE(committer_->Commit(Insert("urgent")).ok());  // returns although one is announced
  absl::Notification done;
  committer_->Enqueue(Insert("announced"), [&](absl::Status s) {
    EXPECT_TRUE(s.ok()) << s;
    done.Notify();
  }, /*expected=*/true);
  done.WaitForNotification();
  committer_->Expect();
  absl::Notification later;
  committer_->Expect();
  committer_->Enqueue(Insert("later"), [&](absl::Status) { later.Notify(); }, /*expected=*/true);
  committer_->Unexpect();  // the other announced unit will not come
  later.WaitForNotification();
  EXPECT_TRUE(Durable("urgent"));
  EXPECT_TRUE(Durable("announced"));
  EXPECT_TRUE(Durable("later"));
}

// Callers are owed an answer: a committer that is destroyed first writes what is queued.
TEST_F(GroupCommitTest, DestructionWritesAndAnswersEveryQueuedUnit) {
  MakeCommitter();
  Block();
  std::vector<absl::Status> out(3, absl::UnknownError("not answered"));
  for (int i = 0; i < 3; ++i) {
    committer_->Enqueue(Insert(absl::StrCat("q", i)), [&out, i](absl::Status s) { out[i] = s; });
  }
  Release();
  committer_.reset();
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(out[i].ok()) << out[i];
    EXPECT_TRUE(Durable(absl::StrCat("q", i)));
  }
}

TEST(GroupCommitWriterTest, AnInMemoryDatabaseHasNoSecondConnection) {
  auto store = CoordinatorStore::Open(":memory:");
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->OpenWriter().status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace tailor::storage
