#ifndef TAILOR_METHODS_BLOCK_REMOVAL_BLOCK_REMOVAL_H_
#define TAILOR_METHODS_BLOCK_REMOVAL_BLOCK_REMOVAL_H_

#include <memory>

#include "methods/api/method.h"

namespace tailor::methods {

// BLOCK_REMOVAL: QUBO block removal (docs/blockremoval.md).
std::unique_ptr<Method> MakeBlockRemovalMethod();

}  // namespace tailor::methods

#endif  // TAILOR_METHODS_BLOCK_REMOVAL_BLOCK_REMOVAL_H_
