#ifndef TAILOR_METHODS_AUTOCOMPRESS_AUTOCOMPRESS_H_
#define TAILOR_METHODS_AUTOCOMPRESS_AUTOCOMPRESS_H_

#include <memory>

#include "methods/api/method.h"

namespace tailor::methods {

// AUTOCOMPRESS: hardware-guided structured compression (docs/autocompress.md).
std::unique_ptr<Method> MakeAutocompressMethod();

}  // namespace tailor::methods

#endif  // TAILOR_METHODS_AUTOCOMPRESS_AUTOCOMPRESS_H_
