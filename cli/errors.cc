#include "cli/errors.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tailor::cli {

int ExitCodeForStatus(const absl::Status& status) {
  return status.ok() ? kExitOk : kExitFailure;
}

int ExitCodeForCampaign(v1::CampaignState state) {
  return state == v1::CAMPAIGN_SUCCEEDED ? kExitOk : kExitFailure;
}

std::string HintFor(const absl::Status& status, absl::string_view address,
                    absl::string_view request_hint) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAlreadyExists:
      return std::string(request_hint);
    case absl::StatusCode::kUnavailable:
      return absl::StrCat("is tailor-coordinator running at ", address,
                          "? start it or pass --coordinator");
    case absl::StatusCode::kDeadlineExceeded:
      return absl::StrCat("the coordinator at ", address,
                          " did not answer in time; retry or raise --timeout");
    case absl::StatusCode::kUnauthenticated:
      return "pass a valid API token with --token or set TAILOR_TOKEN";
    case absl::StatusCode::kPermissionDenied:
      return "this token may not do that; ask an admin for a token with the right scope";
    case absl::StatusCode::kNotFound:
      return request_hint.empty() ? "check the id; `tailor list` shows campaigns"
                                  : std::string(request_hint);
    case absl::StatusCode::kUnimplemented:
      return absl::StrCat("the coordinator at ", address,
                          " does not serve this call; upgrade it to match this CLI");
    case absl::StatusCode::kResourceExhausted:
      if (absl::StrContains(status.message(), "disk is full") ||
          absl::StrContains(status.message(), "No space left")) {
        return "the coordinator's data directory (database and blobs) is out of space; free "
               "space there and retry";
      }
      return "the coordinator is at a limit (load or message size); retry later";
    default:
      return "";
  }
}

int ReportError(std::ostream& err, absl::string_view what, const absl::Status& status,
                absl::string_view address, absl::string_view request_hint) {
  const std::string message = status.message().empty()
                                  ? absl::StatusCodeToString(status.code())
                                  : std::string(status.message());
  err << "tailor: " << what << ": " << message << "\n";
  const std::string hint = HintFor(status, address, request_hint);
  if (!hint.empty()) err << "  hint: " << hint << "\n";
  return kExitFailure;
}

int ReportUsageError(std::ostream& err, absl::string_view message) {
  err << "tailor: " << message << "\n"
      << "Run with --help for more information.\n";
  return kExitUsage;
}

}  // namespace tailor::cli
