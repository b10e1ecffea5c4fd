#include "cli/parse.h"

#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tailor::cli {
namespace {

using ::testing::HasSubstr;

const char kDigest[] = "ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12";

struct Parsed {
  ParseOutcome outcome;
  std::string out;
  std::string err;
};

Parsed Parse(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  Parsed p;
  p.outcome = ParseCommandLine(args, out, err);
  p.out = out.str();
  p.err = err.str();
  return p;
}

// Parses a line that must be valid and returns its invocation.
Invocation Ok(const std::vector<std::string>& args) {
  Parsed p = Parse(args);
  EXPECT_TRUE(p.outcome.run) << p.err;
  EXPECT_EQ(p.outcome.exit_code, 0);
  EXPECT_EQ(p.err, "");
  return p.outcome.invocation;
}

// Parses a line that must be a usage error (exit 2, message on stderr, nothing to run).
std::string Usage(const std::vector<std::string>& args) {
  Parsed p = Parse(args);
  EXPECT_FALSE(p.outcome.run);
  EXPECT_EQ(p.outcome.exit_code, 2);
  EXPECT_THAT(p.err, HasSubstr("tailor: "));
  EXPECT_THAT(p.err, HasSubstr("--help"));
  return p.err;
}

TEST(ParseTest, Submit) {
  Invocation inv = Ok({"submit", "npc.textproto", "--wait", "--request-id", "nightly-42"});
  EXPECT_EQ(inv.verb, Verb::kSubmit);
  EXPECT_EQ(inv.target, "npc.textproto");
  EXPECT_TRUE(inv.wait);
  EXPECT_EQ(inv.request_id, "nightly-42");
  EXPECT_FALSE(inv.json);
  inv = Ok({"submit", "c.json", "--json"});
  EXPECT_TRUE(inv.json);
  EXPECT_FALSE(inv.wait);
  EXPECT_EQ(inv.request_id, "");
  EXPECT_THAT(Usage({"submit"}), HasSubstr("FILE is required"));
  EXPECT_THAT(Usage({"submit", "c.textproto", "--request-id", "has space"}),
              HasSubstr("--request-id"));
  Usage({"submit", "c.textproto", "--request-id", std::string(129, 'a')});
}

TEST(ParseTest, StatusWatchReportCancel) {
  Invocation inv = Ok({"status", "cmp-1", "--json"});
  EXPECT_EQ(inv.verb, Verb::kStatus);
  EXPECT_EQ(inv.target, "cmp-1");
  EXPECT_TRUE(inv.json);
  Usage({"status"});

  inv = Ok({"watch", "cmp-1", "--from-seq", "7"});
  EXPECT_EQ(inv.verb, Verb::kWatch);
  EXPECT_EQ(inv.from_seq, 7);
  EXPECT_EQ(Ok({"watch", "cmp-1"}).from_seq, 0);
  Usage({"watch", "cmp-1", "--from-seq", "-1"});
  Usage({"watch", "cmp-1", "--from-seq", "soon"});
  Usage({"watch"});

  inv = Ok({"report", "cmp-1", "--json"});
  EXPECT_EQ(inv.verb, Verb::kReport);
  EXPECT_TRUE(inv.json);
  Usage({"report"});

  inv = Ok({"cancel", "cmp-1", "--reason", "wrong budget"});
  EXPECT_EQ(inv.verb, Verb::kCancel);
  EXPECT_EQ(inv.reason, "wrong budget");
  Usage({"cancel"});
}

TEST(ParseTest, ListQueueAgentsDrain) {
  Invocation inv = Ok({"list", "--team", "ml", "--json"});
  EXPECT_EQ(inv.verb, Verb::kList);
  EXPECT_EQ(inv.team, "ml");
  EXPECT_TRUE(inv.json);
  EXPECT_EQ(Ok({"list"}).team, "");

  inv = Ok({"queue", "--json"});
  EXPECT_EQ(inv.verb, Verb::kQueue);
  EXPECT_TRUE(inv.json);

  inv = Ok({"agents", "--all", "--json"});
  EXPECT_EQ(inv.verb, Verb::kAgents);
  EXPECT_TRUE(inv.all);
  EXPECT_FALSE(Ok({"agents"}).all);

  inv = Ok({"drain", "agt-1", "--undo"});
  EXPECT_EQ(inv.verb, Verb::kDrain);
  EXPECT_EQ(inv.target, "agt-1");
  EXPECT_TRUE(inv.undo);
  Usage({"drain"});
  Usage({"list", "extra-positional"});
}

TEST(ParseTest, Artifacts) {
  Invocation inv = Ok({"artifacts", "list", "cmp-1", "--json"});
  EXPECT_EQ(inv.verb, Verb::kArtifactsList);
  EXPECT_EQ(inv.target, "cmp-1");
  EXPECT_TRUE(inv.json);

  inv = Ok({"artifacts", "get", kDigest, "-o", "/tmp/model.safetensors"});
  EXPECT_EQ(inv.verb, Verb::kArtifactsGet);
  EXPECT_EQ(inv.target, kDigest);
  EXPECT_EQ(inv.output_path, "/tmp/model.safetensors");
  EXPECT_EQ(Ok({"artifacts", "get", kDigest, "--output", "x"}).output_path, "x");

  Usage({"artifacts"});
  Usage({"artifacts", "list"});
  Usage({"artifacts", "get", kDigest});  // -o is required
  EXPECT_THAT(Usage({"artifacts", "get", "abc", "-o", "x"}), HasSubstr("not a sha256 digest"));
}

TEST(ParseTest, Costs) {
  Invocation inv = Ok({"costs", "list", "--device-kind", "NVIDIA H200", "--json"});
  EXPECT_EQ(inv.verb, Verb::kCostsList);
  EXPECT_EQ(inv.device_kind, "NVIDIA H200");
  EXPECT_TRUE(inv.json);
  inv = Ok({"costs", "show", "3f2a", "--json"});
  EXPECT_EQ(inv.verb, Verb::kCostsShow);
  EXPECT_EQ(inv.target, "3f2a");
  Usage({"costs"});
  Usage({"costs", "show"});
}

TEST(ParseTest, LogsAndRecompress) {
  Invocation inv = Ok({"logs", "job-1", "--follow"});
  EXPECT_EQ(inv.verb, Verb::kLogs);
  EXPECT_EQ(inv.target, "job-1");
  EXPECT_TRUE(inv.follow);
  EXPECT_TRUE(Ok({"logs", "job-1", "-f"}).follow);
  EXPECT_FALSE(Ok({"logs", "job-1"}).follow);
  Usage({"logs"});

  inv = Ok({"recompress", "--engine-version", "2", "--engine", "vllm", "--dry-run", "--json"});
  EXPECT_EQ(inv.verb, Verb::kRecompress);
  EXPECT_EQ(inv.engine_version, "2");
  EXPECT_EQ(inv.engine, "vllm");
  EXPECT_TRUE(inv.dry_run);
  EXPECT_TRUE(inv.json);
  Usage({"recompress"});
  Usage({"recompress", "--engine-version", ""});
}

TEST(ParseTest, GlobalOptionsBeforeOrAfterTheVerb) {
  Invocation inv = Ok({"--coordinator", "h:1", "--token", "t0k", "--timeout", "2.5", "status",
                       "cmp-1"});
  EXPECT_EQ(inv.global.coordinator, "h:1");
  EXPECT_EQ(inv.global.token, "t0k");
  EXPECT_DOUBLE_EQ(inv.global.timeout_s, 2.5);
  inv = Ok({"status", "cmp-1", "--coordinator", "h:2", "--json"});
  EXPECT_EQ(inv.global.coordinator, "h:2");
  EXPECT_DOUBLE_EQ(inv.global.timeout_s, 30);
  inv = Ok({"artifacts", "list", "cmp-1", "--coordinator", "h:3"});
  EXPECT_EQ(inv.global.coordinator, "h:3");
  Usage({"--timeout", "0", "status", "cmp-1"});
  Usage({"--timeout", "-3", "status", "cmp-1"});
  Usage({"--ca-cert", "/nonexistent/ca.pem", "status", "cmp-1"});
}

TEST(ParseTest, UnknownVerbsAndOptions) {
  EXPECT_THAT(Usage({}), HasSubstr("subcommand is required"));
  EXPECT_EQ(Usage({"frobnicate"}),
            "tailor: unknown command 'frobnicate'; commands are agents, artifacts, cancel, "
            "costs, delete, drain, list, logs, queue, recompress, report, status, submit, "
            "tokens, watch\n"
            "Run with --help for more information.\n");
  EXPECT_THAT(Usage({"--coordinator", "h:1", "frobnicate"}), HasSubstr("'frobnicate'"));
  EXPECT_THAT(Usage({"artifacts", "put", "x"}),
              HasSubstr("unknown command 'artifacts put'; use artifacts list or get"));
  EXPECT_THAT(Usage({"status", "cmp-1", "--bogus"}), HasSubstr("--bogus"));
  EXPECT_THAT(Usage({"tokens", "mint"}),
              HasSubstr("unknown command 'tokens mint'; use tokens create or list or revoke or "
                        "audit"));
  EXPECT_THAT(Usage({"status"}), HasSubstr("ID is required"));
}

TEST(ParseTest, Tokens) {
  Invocation inv = Ok({"tokens", "create", "--role", "submitter", "--team", "vision",
                       "--description", "CI"});
  EXPECT_EQ(inv.verb, Verb::kTokensCreate);
  EXPECT_EQ(inv.role, "submitter");
  EXPECT_EQ(inv.team, "vision");
  EXPECT_EQ(inv.description, "CI");
  EXPECT_EQ(Ok({"tokens", "create", "--role", "admin"}).verb, Verb::kTokensCreate);
  EXPECT_THAT(Usage({"tokens", "create", "--role", "submitter"}),
              HasSubstr("a submitter token needs --team"));
  EXPECT_THAT(Usage({"tokens", "create", "--role", "root"}), HasSubstr("--role"));
  EXPECT_THAT(Usage({"tokens", "create"}), HasSubstr("--role is required"));
  inv = Ok({"tokens", "list", "--all", "--json"});
  EXPECT_EQ(inv.verb, Verb::kTokensList);
  EXPECT_TRUE(inv.all);
  EXPECT_TRUE(inv.json);
  inv = Ok({"tokens", "revoke", "tok-1", "--token", "secret"});
  EXPECT_EQ(inv.verb, Verb::kTokensRevoke);
  EXPECT_EQ(inv.target, "tok-1");
  EXPECT_EQ(inv.global.token, "secret");
  inv = Ok({"tokens", "audit", "--limit", "5"});
  EXPECT_EQ(inv.verb, Verb::kTokensAudit);
  EXPECT_EQ(inv.limit, 5);
  EXPECT_THAT(Usage({"tokens", "audit", "--limit", "0"}), HasSubstr("--limit"));
}

TEST(ParseTest, TokensCreateExpiresIn) {
  EXPECT_EQ(Ok({"tokens", "create", "--role", "admin"}).expires_in, std::nullopt);
  EXPECT_EQ(Ok({"tokens", "create", "--role", "admin", "--expires-in", "90d"}).expires_in,
            absl::Hours(24 * 90));
  EXPECT_EQ(Ok({"tokens", "create", "--role", "admin", "--expires-in", "12h"}).expires_in,
            absl::Hours(12));
  EXPECT_EQ(Ok({"tokens", "create", "--role", "agent", "--expires-in", "30m"}).expires_in,
            absl::Minutes(30));
  EXPECT_EQ(Ok({"tokens", "create", "--role", "submitter", "--team", "t", "--expires-in",
                "3600s"})
                .expires_in,
            absl::Seconds(3600));
  // Zero and out-of-range values parse: the coordinator judges the range (INVALID_ARGUMENT
  // naming expires_in), so every client gets the same answer.
  EXPECT_EQ(Ok({"tokens", "create", "--role", "admin", "--expires-in", "0s"}).expires_in,
            absl::ZeroDuration());
  EXPECT_EQ(Ok({"tokens", "create", "--role", "admin", "--expires-in", "3651d"}).expires_in,
            absl::Hours(24 * 3651));
  for (const std::string bad : {"-5d", "+5d", "1.5h", "90", "d", "1h30m", "5w", " 5d", "5D"}) {
    EXPECT_EQ(Usage({"tokens", "create", "--role", "admin", "--expires-in", bad}),
              absl::StrCat("tailor: --expires-in: '", bad,
                           "' is not a duration like 90d, 12h, 30m or 3600s\n"
                           "Run with --help for more information.\n"))
        << bad;
  }
  EXPECT_THAT(Usage({"tokens", "list", "--expires-in", "1d"}), HasSubstr("--expires-in"));
}

TEST(ParseTest, NumericOptionsSayWhatTheyExpect) {
  EXPECT_THAT(Usage({"--timeout", "0", "status", "cmp-1"}),
              HasSubstr("'0' is not a positive number of seconds"));
  EXPECT_THAT(Usage({"--timeout", "soon", "status", "cmp-1"}),
              HasSubstr("'soon' is not a positive number of seconds"));
  EXPECT_THAT(Usage({"watch", "cmp-1", "--from-seq", "-4"}),
              HasSubstr("'-4' is not a sequence number"));
}

TEST(ParseTest, HelpExitsZeroOnStdout) {
  Parsed p = Parse({"--help"});
  EXPECT_FALSE(p.outcome.run);
  EXPECT_EQ(p.outcome.exit_code, 0);
  EXPECT_THAT(p.out, HasSubstr("submit"));
  EXPECT_THAT(p.out, HasSubstr("recompress"));
  EXPECT_EQ(p.err, "");
  p = Parse({"status", "--help"});
  EXPECT_EQ(p.outcome.exit_code, 0);
  EXPECT_THAT(p.out, HasSubstr("Campaign id"));
}

}  // namespace
}  // namespace tailor::cli
