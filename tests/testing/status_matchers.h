#ifndef TAILOR_TESTS_TESTING_STATUS_MATCHERS_H_
#define TAILOR_TESTS_TESTING_STATUS_MATCHERS_H_

// absl 20220623 ships no status matchers; these mirror the later absl ones.
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"

namespace tailor::testing {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

MATCHER(IsOk, "is OK") {
  const absl::Status& s = GetStatus(arg);
  if (!s.ok()) *result_listener << "status is " << s;
  return s.ok();
}

// The code alone, whatever the message says.
MATCHER_P(StatusIs, code, "") {
  const absl::Status& s = GetStatus(arg);
  *result_listener << "status is " << s;
  return s.code() == code;
}

MATCHER_P2(StatusIs, code, message_matcher, "") {
  const absl::Status& s = GetStatus(arg);
  *result_listener << "status is " << s;
  return s.code() == code &&
         ::testing::ExplainMatchResult(message_matcher, std::string(s.message()),
                                       result_listener);
}

}  // namespace tailor::testing

#define TAILOR_ASSERT_OK(expr) ASSERT_THAT((expr), ::tailor::testing::IsOk())
#define TAILOR_EXPECT_OK(expr) EXPECT_THAT((expr), ::tailor::testing::IsOk())
#define TAILOR_ASSERT_OK_AND_ASSIGN(lhs, rexpr)                      \
  TAILOR_ASSERT_OK_AND_ASSIGN_IMPL_(                                  \
      TAILOR_STATUS_CONCAT_TEST_(tailor_test_statusor_, __LINE__), lhs, rexpr)
#define TAILOR_STATUS_CONCAT_TEST_INNER_(a, b) a##b
#define TAILOR_STATUS_CONCAT_TEST_(a, b) TAILOR_STATUS_CONCAT_TEST_INNER_(a, b)
#define TAILOR_ASSERT_OK_AND_ASSIGN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                       \
  ASSERT_TRUE(statusor.ok()) << statusor.status();               \
  lhs = std::move(statusor).value()

#endif  // TAILOR_TESTS_TESTING_STATUS_MATCHERS_H_
