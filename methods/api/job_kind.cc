#include "methods/api/job_kind.h"

namespace tailor::methods {

absl::string_view PlacementName(Placement p) {
  return p == Placement::kAgent ? "agent" : "launcher";
}

}  // namespace tailor::methods
