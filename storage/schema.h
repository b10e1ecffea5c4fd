#ifndef TAILOR_STORAGE_SCHEMA_H_
#define TAILOR_STORAGE_SCHEMA_H_

#include <vector>

#include "storage/database.h"

namespace tailor::storage {

// The coordinator's schema as numbered migrations. Append new steps; never edit old ones.
const std::vector<Migration>& CoordinatorMigrations();

}  // namespace tailor::storage

#endif  // TAILOR_STORAGE_SCHEMA_H_
