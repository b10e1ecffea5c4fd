#ifndef TAILOR_CLI_ERRORS_H_
#define TAILOR_CLI_ERRORS_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "tailor/v1/campaign.pb.h"

namespace tailor::cli {

// The CLI's contract with scripts: 0 ok; 1 the operation failed (RPC error, invalid contract,
// a watched campaign ended FAILED or CANCELLED); 2 the command line was wrong.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,
  kExitUsage = 2,
};

// 0 for OK, 1 for any error: a failed call is never a usage error, even INVALID_ARGUMENT from
// the server (the command line was well formed; the request was not acceptable).
int ExitCodeForStatus(const absl::Status& status);

// 0 only for SUCCEEDED; a campaign that ended any other way, or has not ended, is a failure
// for `submit --wait` and `watch`.
int ExitCodeForCampaign(v1::CampaignState state);

// What the user can do about an error, or "" when there is nothing useful to say.
// Transport and auth codes (UNAVAILABLE, DEADLINE_EXCEEDED, UNAUTHENTICATED, ...) get generic
// advice naming `address`. For the codes whose meaning depends on what was asked (NOT_FOUND,
// INVALID_ARGUMENT, FAILED_PRECONDITION, ALREADY_EXISTS) a non-empty `request_hint` from the
// verb is used, since only it knows what was looked up or sent.
std::string HintFor(const absl::Status& status, absl::string_view address,
                    absl::string_view request_hint = "");

// Prints "tailor: <what>: <server message>" and, when there is one, "  hint: <hint>" to
// `err`; returns kExitFailure.
int ReportError(std::ostream& err, absl::string_view what, const absl::Status& status,
                absl::string_view address, absl::string_view request_hint = "");

// Prints "tailor: <message>" and the pointer to --help; returns kExitUsage.
int ReportUsageError(std::ostream& err, absl::string_view message);

}  // namespace tailor::cli

#endif  // TAILOR_CLI_ERRORS_H_
