#ifndef TAILOR_METHODS_AUTOCOMPRESS_CONTRACT_BUDGETS_H_
#define TAILOR_METHODS_AUTOCOMPRESS_CONTRACT_BUDGETS_H_

// The contract's absolute budgets (the relative ones already resolved into them by the
// coordinator, coordinator/relative_budget.h) as the search core's Budgets: what the settle
// judges rungs against, in the search job (worker) and the measure job (agent) alike. The
// search plans against tightened copies of them (search_job.cc, PlanBudgets).

#include "compression/autocompress/search.h"
#include "tailor/v1/contract.pb.h"

namespace tailor::methods {

inline ::tailor::autocompress::Budgets ContractBudgets(const v1::Budget& b) {
  ::tailor::autocompress::Budgets out;
  if (b.has_latency_ms_max()) out.latency_ms = b.latency_ms_max();
  if (b.has_memory_mib_max()) out.memory_mib = b.memory_mib_max();
  if (b.has_throughput_tokens_per_s_min()) out.throughput = b.throughput_tokens_per_s_min();
  return out;
}

}  // namespace tailor::methods

#endif  // TAILOR_METHODS_AUTOCOMPRESS_CONTRACT_BUDGETS_H_
