#ifndef TAILOR_COMMON_STATUS_MACROS_H_
#define TAILOR_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Propagates a non-OK absl::Status from the current function.
#define TAILOR_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status tailor_status_ = (expr);          \
    if (!tailor_status_.ok()) return tailor_status_; \
  } while (0)

#define TAILOR_STATUS_CONCAT_INNER_(a, b) a##b
#define TAILOR_STATUS_CONCAT_(a, b) TAILOR_STATUS_CONCAT_INNER_(a, b)

// TAILOR_ASSIGN_OR_RETURN(auto x, MaybeX()); assigns the value or returns the error.
#define TAILOR_ASSIGN_OR_RETURN(lhs, rexpr) \
  TAILOR_ASSIGN_OR_RETURN_IMPL_(TAILOR_STATUS_CONCAT_(tailor_statusor_, __LINE__), lhs, rexpr)

#define TAILOR_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                  \
  if (!statusor.ok()) return statusor.status();             \
  lhs = std::move(statusor).value()

#endif  // TAILOR_COMMON_STATUS_MACROS_H_
