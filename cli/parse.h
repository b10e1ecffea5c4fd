#ifndef TAILOR_CLI_PARSE_H_
#define TAILOR_CLI_PARSE_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace tailor::cli {

enum class Verb {
  kNone,
  kSubmit,
  kStatus,
  kWatch,
  kList,
  kQueue,
  kAgents,
  kDrain,
  kCancel,
  kArtifactsList,
  kArtifactsGet,
  kCostsList,
  kCostsShow,
  kReport,
  kLogs,
  kRecompress,
  kDelete,
  kTokensCreate,
  kTokensList,
  kTokensRevoke,
  kTokensAudit,
};

struct GlobalOptions {
  std::string coordinator;  // empty: $TAILOR_COORDINATOR, else 127.0.0.1:50051
  std::string token;        // empty: $TAILOR_TOKEN
  std::string ca_cert;      // PEM file; TLS when set
  double timeout_s = 30;    // deadline of each unary call
};

// One parsed command line. Verbs use the fields they declare; the rest keep their defaults.
struct Invocation {
  Verb verb = Verb::kNone;
  GlobalOptions global;
  // The verb's positional: FILE (submit), campaign ID (status, watch, cancel, report,
  // artifacts list), AGENT_ID (drain), DIGEST (artifacts get), FINGERPRINT (costs show),
  // JOB (logs) or token ID (tokens revoke). `team` is also the team of `tokens create`, `all`
  // also includes revoked and expired tokens in `tokens list`.
  std::string target;
  bool json = false;
  bool wait = false;             // submit
  std::string request_id;        // submit
  int64_t from_seq = 0;          // watch
  std::string team;              // list
  bool all = false;              // agents: include offline
  bool undo = false;             // drain
  std::string reason;            // cancel
  std::string output_path;       // artifacts get -o
  std::string device_kind;       // costs list
  bool follow = false;           // logs
  std::string engine_version;    // recompress
  std::string engine;            // recompress
  bool dry_run = false;          // recompress
  std::string role;              // tokens create
  std::string description;       // tokens create
  std::optional<absl::Duration> expires_in;  // tokens create; nullopt: never expires
  int64_t limit = 100;           // tokens audit
};

struct ParseOutcome {
  // False when nothing should run: --help was printed (exit 0) or the line was wrong
  // (exit 2, message already printed).
  bool run = false;
  int exit_code = 0;
  Invocation invocation;
};

// Parses the arguments after the program name. Help goes to `out`, usage errors to `err`.
// Never throws: CLI11's exceptions end here.
ParseOutcome ParseCommandLine(const std::vector<std::string>& args, std::ostream& out,
                              std::ostream& err);

}  // namespace tailor::cli

#endif  // TAILOR_CLI_PARSE_H_
