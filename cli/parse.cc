#include "cli/parse.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <map>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/errors.h"
#include "common/duration_flag.h"
#include "common/ids.h"
#include "common/sha256.h"

namespace tailor::cli {
namespace {

constexpr char kDescription[] =
    "tailor: submit and follow LLM compression campaigns on a tailor-coordinator.\n"
    "Exit codes: 0 ok, 1 failed (RPC error, invalid contract, campaign FAILED/CANCELLED), "
    "2 usage error.";

// CLI11's range validators print the whole double range; these say what is expected.
std::string PositiveSeconds(const std::string& value) {
  double v = 0;
  if (!absl::SimpleAtod(value, &v) || !(v > 0) || !std::isfinite(v)) {
    return absl::StrCat("'", value, "' is not a positive number of seconds");
  }
  return "";
}

std::string NonNegativeInteger(const std::string& value) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(value, &v) || v < 0) {
    return absl::StrCat("'", value, "' is not a sequence number (an integer >= 0)");
  }
  return "";
}

// Verbs and, for the two nouns, their sub-verbs; used to name an unknown command before
// CLI11 reports it as a missing subcommand.
const std::map<std::string, std::vector<std::string>>& KnownVerbs() {
  static const auto* verbs = new std::map<std::string, std::vector<std::string>>{
      {"submit", {}}, {"status", {}},     {"watch", {}},        {"list", {}},
      {"queue", {}},  {"agents", {}},     {"drain", {}},        {"cancel", {}},
      {"report", {}}, {"logs", {}},       {"recompress", {}},   {"delete", {}},
      {"artifacts", {"list", "get"}},     {"costs", {"list", "show"}},
      {"tokens", {"create", "list", "revoke", "audit"}}};
  return *verbs;
}

// Global options that take a value, so the scan below can skip it.
bool TakesValue(const std::string& arg) {
  return arg == "--coordinator" || arg == "--token" || arg == "--ca-cert" || arg == "--timeout";
}

// Finds the command words (skipping options) and checks them against KnownVerbs(). Returns a
// usage message, or "" when the words are known (or absent, which CLI11 reports).
std::string CheckCommandWords(const std::vector<std::string>& args) {
  std::vector<std::string> words;
  for (size_t i = 0; i < args.size() && words.size() < 2; ++i) {
    const std::string& a = args[i];
    if (a == "--") break;
    if (!a.empty() && a[0] == '-') {
      if (TakesValue(a)) ++i;
      continue;
    }
    words.push_back(a);
    if (words.size() == 1 && KnownVerbs().count(a) > 0 && KnownVerbs().at(a).empty()) break;
  }
  if (words.empty()) return "";
  auto it = KnownVerbs().find(words[0]);
  if (it == KnownVerbs().end()) {
    std::vector<std::string> names;
    for (const auto& [name, subs] : KnownVerbs()) names.push_back(name);
    return absl::StrCat("unknown command '", words[0], "'; commands are ",
                        absl::StrJoin(names, ", "));
  }
  if (words.size() > 1 && !it->second.empty() &&
      std::find(it->second.begin(), it->second.end(), words[1]) == it->second.end()) {
    return absl::StrCat("unknown command '", words[0], " ", words[1], "'; use ", words[0], " ",
                        absl::StrJoin(it->second, " or "));
  }
  return "";
}

// The subcommands, so that the verb can be read back after parsing.
struct Subcommands {
  std::vector<std::pair<CLI::App*, Verb>> verbs;
};

void AddGlobalOptions(CLI::App& app, GlobalOptions& g) {
  app.add_option("--coordinator", g.coordinator,
                 "Coordinator HOST:PORT (default $TAILOR_COORDINATOR, else 127.0.0.1:50051)");
  app.add_option("--token", g.token, "API token (default $TAILOR_TOKEN)");
  app.add_option("--ca-cert", g.ca_cert, "PEM file of the CA to verify the coordinator; enables TLS (default $TAILOR_CA_CERT)")
      ->check(CLI::ExistingFile);
  app.add_option("--timeout", g.timeout_s,
                 "Deadline of each call in seconds (streams have none)")
      ->capture_default_str()
      ->check(PositiveSeconds, "SECONDS");
}

// Adds subcommands and records which verb each one is.
struct VerbAdder {
  Subcommands& s;
  CLI::App* operator()(CLI::App* parent, const char* name, const char* help, Verb verb) {
    CLI::App* sub = parent->add_subcommand(name, help);
    s.verbs.emplace_back(sub, verb);
    return sub;
  }
};

// submit, status, watch, list, cancel, report, logs: what submitters use.
void DeclareCampaignVerbs(CLI::App& app, Invocation& inv, VerbAdder add) {
  CLI::App* submit = add(&app, "submit", "Submit a contract (textproto or JSON)", Verb::kSubmit);
  submit->add_option("FILE", inv.target, "Contract file")->required();
  submit->add_flag("--wait", inv.wait, "Follow the campaign until it ends (like watch)");
  submit->add_option("--request-id", inv.request_id,
                     "Idempotency key (default: a new one, printed)");
  submit->add_flag("--json", inv.json, "Print the campaign as JSON");

  CLI::App* status = add(&app, "status", "Show a campaign and its jobs", Verb::kStatus);
  status->add_option("ID", inv.target, "Campaign id")->required();
  status->add_flag("--json", inv.json, "Print the campaign as JSON");

  CLI::App* watch = add(&app, "watch", "Follow a campaign's events until it ends", Verb::kWatch);
  watch->add_option("ID", inv.target, "Campaign id")->required();
  watch->add_option("--from-seq", inv.from_seq, "Show events after this sequence number")
      ->check(NonNegativeInteger, "N");

  CLI::App* list = add(&app, "list", "List campaigns, newest first", Verb::kList);
  list->add_option("--team", inv.team, "Only this team's campaigns");
  list->add_flag("--json", inv.json, "Print JSON");

  CLI::App* cancel = add(&app, "cancel", "Cancel a campaign and its jobs", Verb::kCancel);
  cancel->add_option("ID", inv.target, "Campaign id")->required();
  cancel->add_option("--reason", inv.reason, "Why (recorded in the event log)");

  CLI::App* report = add(&app, "report", "Show a campaign's report", Verb::kReport);
  report->add_option("ID", inv.target, "Campaign id")->required();
  report->add_flag("--json", inv.json, "Print the report as JSON");

  CLI::App* logs = add(&app, "logs", "Print a job's log", Verb::kLogs);
  logs->add_option("JOB", inv.target, "Job id")->required();
  logs->add_flag("-f,--follow", inv.follow, "Keep printing until the job ends");

}

// queue, agents, drain, recompress, delete: the cluster admin's view.
void DeclareAdminVerbs(CLI::App& app, Invocation& inv, VerbAdder add) {
  CLI::App* queue = add(&app, "queue", "Show runnable and leased jobs", Verb::kQueue);
  queue->add_flag("--json", inv.json, "Print JSON");

  CLI::App* agents = add(&app, "agents", "List agents", Verb::kAgents);
  agents->add_flag("--all", inv.all, "Include offline agents");
  agents->add_flag("--json", inv.json, "Print JSON");

  CLI::App* drain = add(&app, "drain", "Stop giving an agent new work", Verb::kDrain);
  drain->add_option("AGENT_ID", inv.target, "Agent id")->required();
  drain->add_flag("--undo", inv.undo, "Let the agent take work again");

  CLI::App* del = add(&app, "delete",
                      "Delete a finished campaign's record (jobs, events, artifact rows; blobs "
                      "stay); admin tokens only",
                      Verb::kDelete);
  del->add_option("CAMPAIGN_ID", inv.target, "Campaign id")->required();
  del->add_flag("--json", inv.json, "Print JSON");

  CLI::App* recompress = add(&app, "recompress",
                             "Resubmit recurring campaigns for a new engine version",
                             Verb::kRecompress);
  recompress->add_option("--engine-version", inv.engine_version, "New engine version")
      ->required();
  recompress->add_option("--engine", inv.engine, "Only this engine (default: every engine)");
  recompress->add_flag("--dry-run", inv.dry_run, "Show what would be submitted");
  recompress->add_flag("--json", inv.json, "Print JSON");

}

// artifacts list|get, costs list|show.
void DeclareCatalogVerbs(CLI::App& app, Invocation& inv, VerbAdder add) {
  CLI::App* artifacts = app.add_subcommand("artifacts", "List or download artifacts");
  artifacts->require_subcommand(1);
  CLI::App* alist = add(artifacts, "list", "List a campaign's artifacts", Verb::kArtifactsList);
  alist->add_option("ID", inv.target, "Campaign id")->required();
  alist->add_flag("--json", inv.json, "Print JSON");
  CLI::App* aget = add(artifacts, "get", "Download and verify an artifact", Verb::kArtifactsGet);
  aget->add_option("DIGEST", inv.target, "sha256 hex digest")->required();
  aget->add_option("-o,--output", inv.output_path, "Destination file")->required();

  CLI::App* costs = app.add_subcommand("costs", "Inspect layer cost tables");
  costs->require_subcommand(1);
  CLI::App* clist = add(costs, "list", "List cost tables", Verb::kCostsList);
  clist->add_option("--device-kind", inv.device_kind, "Only this device kind");
  clist->add_flag("--json", inv.json, "Print JSON");
  CLI::App* cshow = add(costs, "show", "Show one cost table's layer costs", Verb::kCostsShow);
  cshow->add_option("FINGERPRINT", inv.target, "Target fingerprint")->required();
  cshow->add_flag("--json", inv.json, "Print JSON");

}

// tokens create|list|revoke|audit.
void DeclareTokenVerbs(CLI::App& app, Invocation& inv, VerbAdder add) {
  CLI::App* tokens = app.add_subcommand("tokens", "Manage API tokens (admin tokens only)");
  tokens->require_subcommand(1);
  CLI::App* tcreate = add(tokens, "create", "Create a token; prints its secret once",
                          Verb::kTokensCreate);
  tcreate->add_option("--role", inv.role, "submitter, admin or agent")
      ->required()
      ->check(CLI::IsMember({"submitter", "admin", "agent"}));
  tcreate->add_option("--team", inv.team, "The token's team (required for submitters)");
  tcreate->add_option("--description", inv.description, "What the token is for");
  tcreate
      ->add_option_function<std::string>(
          "--expires-in",
          [&inv](const std::string& text) {
            absl::StatusOr<absl::Duration> d = ParseDurationFlag(text);
            if (!d.ok()) {
              throw CLI::ValidationError("--expires-in", std::string(d.status().message()));
            }
            inv.expires_in = *d;
          },
          "Lifetime like 90d, 12h, 30m or 3600s, at most 3650d (default: never expires)")
      ->type_name("DURATION");
  tcreate->add_flag("--json", inv.json, "Print the token and its secret as JSON");
  CLI::App* tlist = add(tokens, "list", "List tokens (never their secrets)", Verb::kTokensList);
  tlist->add_flag("--all", inv.all, "Include revoked and expired tokens");
  tlist->add_flag("--json", inv.json, "Print JSON");
  CLI::App* trevoke = add(tokens, "revoke", "Revoke a token at once", Verb::kTokensRevoke);
  trevoke->add_option("ID", inv.target, "Token id (tok-...)")->required();
  trevoke->add_flag("--json", inv.json, "Print the revoked token as JSON");
  CLI::App* taudit = add(tokens, "audit", "Show the audit log of admin verbs, newest first",
                         Verb::kTokensAudit);
  taudit->add_option("--limit", inv.limit, "At most this many events")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  taudit->add_flag("--json", inv.json, "Print JSON");
}

// Declares every verb on `app`, binding options to `inv`.
Subcommands DeclareVerbs(CLI::App& app, Invocation& inv) {
  Subcommands s;
  VerbAdder add{s};
  DeclareCampaignVerbs(app, inv, add);
  DeclareAdminVerbs(app, inv, add);
  DeclareCatalogVerbs(app, inv, add);
  DeclareTokenVerbs(app, inv, add);
  return s;
}

// Checks CLI11 cannot express. Returns "" when the invocation is fine.
std::string Validate(const Invocation& inv) {
  if (inv.verb == Verb::kArtifactsGet &&
      !IsSha256Hex(absl::AsciiStrToLower(inv.target))) {
    return absl::StrCat("artifacts get: '", inv.target,
                        "' is not a sha256 digest (64 hex characters)");
  }
  if (inv.verb == Verb::kSubmit && !inv.request_id.empty() &&
      !IsSafeToken(inv.request_id, 128)) {
    return absl::StrCat("submit: --request-id '", inv.request_id,
                        "' must be 1..128 characters of [A-Za-z0-9._:-]");
  }
  if (inv.verb == Verb::kTokensCreate && inv.role == "submitter" && inv.team.empty()) {
    return "tokens create: a submitter token needs --team";
  }
  if (inv.verb == Verb::kRecompress && inv.engine_version.empty()) {
    return "recompress: --engine-version must not be empty";
  }
  return "";
}

}  // namespace

ParseOutcome ParseCommandLine(const std::vector<std::string>& args, std::ostream& out,
                              std::ostream& err) {
  ParseOutcome outcome;
  Invocation& inv = outcome.invocation;
  const bool wants_help =
      std::find_if(args.begin(), args.end(), [](const std::string& a) {
        return a == "-h" || a == "--help";
      }) != args.end();
  if (const std::string problem = CheckCommandWords(args); !problem.empty() && !wants_help) {
    outcome.exit_code = ReportUsageError(err, problem);
    return outcome;
  }
  try {
    CLI::App app(kDescription, "tailor");
    // Global options may follow the verb (`tailor status ID --coordinator H:P`).
    app.fallthrough();
    app.require_subcommand(1);
    app.failure_message([](const CLI::App*, const CLI::Error& e) {
      return absl::StrCat("tailor: ", e.what(), "\nRun with --help for more information.\n");
    });
    AddGlobalOptions(app, inv.global);
    const Subcommands subs = DeclareVerbs(app, inv);
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    try {
      app.parse(reversed);
    } catch (const CLI::ParseError& e) {
      const int code = app.exit(e, out, err);
      outcome.exit_code = code == 0 ? kExitOk : kExitUsage;
      return outcome;
    }
    for (const auto& [sub, verb] : subs.verbs) {
      if (sub->parsed()) inv.verb = verb;
    }
  } catch (const std::exception& e) {
    // A CLI11 declaration error is a bug in this file, not the user's fault.
    err << "tailor: internal error parsing the command line: " << e.what() << "\n";
    outcome.exit_code = kExitFailure;
    return outcome;
  }
  if (inv.verb == Verb::kNone) {
    outcome.exit_code = ReportUsageError(err, "no command given");
    return outcome;
  }
  if (const std::string problem = Validate(inv); !problem.empty()) {
    outcome.exit_code = ReportUsageError(err, problem);
    return outcome;
  }
  outcome.run = true;
  return outcome;
}

}  // namespace tailor::cli
