#ifndef TAILOR_METHODS_ENTROPY_CODE_ENTROPY_CODE_H_
#define TAILOR_METHODS_ENTROPY_CODE_ENTROPY_CODE_H_

#include <memory>
#include <string>
#include <vector>

#include "methods/api/method.h"

namespace tailor::methods {

// Most candidates per entropy.* list (docs/operations.md "Input limits").
inline constexpr int kMaxCandidates = 16;

// ENTROPY_CODE: lossless entropy coding of a model's weights (docs/entropy.md).
std::unique_ptr<Method> MakeEntropyCodeMethod();

// The optional packaging step of a packageable method (package.entropy_code): tune the codes
// on the target after the job keyed `after`, select under the weight budget, verify the
// package on the target. A no-op when the contract does not ask for it.
void PlanEntropyTail(const v1::DeploymentContract& contract, const std::string& after,
                     GraphBuilder& graph);

// The job kinds ENTROPY_CODE and the tail plan that carry a detail: autotune, select, and
// verify, whose output holds a PackageVerifyResult when it verified a package (a verify of a
// plain model carries none). A packageable method lists these among its JobKinds().
std::vector<JobKind> EntropyTailJobKinds();

}  // namespace tailor::methods

#endif  // TAILOR_METHODS_ENTROPY_CODE_ENTROPY_CODE_H_
