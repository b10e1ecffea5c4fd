#ifndef TAILOR_CLI_COMMANDS_H_
#define TAILOR_CLI_COMMANDS_H_

#include <string>

#include "absl/status/statusor.h"
#include "cli/env.h"
#include "cli/parse.h"
#include "tailor/v1/campaign.pb.h"

namespace tailor::cli {

// Runs a parsed invocation against env's stubs; returns the process exit code. Output goes to
// env.out, errors (with hints) to env.err.
int Execute(const Invocation& invocation, const CliEnv& env);

// The verbs, one function each (Execute dispatches). All return exit codes.
int RunSubmit(const Invocation& inv, const CliEnv& env);
int RunStatus(const Invocation& inv, const CliEnv& env);
int RunList(const Invocation& inv, const CliEnv& env);
int RunQueue(const Invocation& inv, const CliEnv& env);
int RunAgents(const Invocation& inv, const CliEnv& env);
int RunDrain(const Invocation& inv, const CliEnv& env);
int RunCancel(const Invocation& inv, const CliEnv& env);
int RunArtifactsList(const Invocation& inv, const CliEnv& env);
int RunArtifactsGet(const Invocation& inv, const CliEnv& env);
int RunCostsList(const Invocation& inv, const CliEnv& env);
int RunCostsShow(const Invocation& inv, const CliEnv& env);
int RunReport(const Invocation& inv, const CliEnv& env);
int RunLogs(const Invocation& inv, const CliEnv& env);
int RunRecompress(const Invocation& inv, const CliEnv& env);
// cli/tokens.cc
int RunTokensCreate(const Invocation& inv, const CliEnv& env);
int RunTokensList(const Invocation& inv, const CliEnv& env);
int RunTokensRevoke(const Invocation& inv, const CliEnv& env);
int RunTokensAudit(const Invocation& inv, const CliEnv& env);

// GetCampaign with env's deadline and token.
absl::StatusOr<v1::Campaign> FetchCampaign(const CliEnv& env, const std::string& id);

}  // namespace tailor::cli

#endif  // TAILOR_CLI_COMMANDS_H_
