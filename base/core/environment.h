// Every PLEXUS_* environment variable plexus reads, in one table: name, type, default, meaning
// and the page that explains it. C++ code reads numbers and flags through the typed readers
// below, which parse the value by the table's type and fall back to the table's default, so a
// default is written once; strings through ReadEnvironment. Both log a name missing from the
// table; docs/environment.md is generated from the
// table (bazel run //tools:environment_doc), and //tools:environment_doc_test keeps the page,
// the table and the names the sources use (C++, Python, shell) in step.
#ifndef PLEXUS_BASE_CORE_ENVIRONMENT_H_
#define PLEXUS_BASE_CORE_ENVIRONMENT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace plexus {

struct EnvironmentVariable {
  const char* name;
  const char* type;           // "string", "integer", "bytes", "duration", "path", "0 or 1", ...
  const char* default_value;  // What applies when it is unset.
  const char* meaning;        // One or two sentences.
  const char* details;        // The doc page (and section) that says more.
};

// The table, sorted by name.
absl::Span<const EnvironmentVariable> EnvironmentVariables();

// The table's entry for `name`; null when it has none.
const EnvironmentVariable* FindEnvironmentVariable(absl::string_view name);

// std::getenv for a variable of the table: null when unset. A name missing from the table is
// a plexus bug: it is logged (once per name) and read anyway.
const char* ReadEnvironment(const char* name);

// Typed reads of a table variable of that type ("integer", "seconds", "bytes ...", "0 or 1"):
// the value when set and not empty, else the table's default. A value that does not parse is
// InvalidArgument naming the variable, the value and what was expected.
absl::StatusOr<int64_t> EnvironmentInteger(const char* name);
absl::StatusOr<absl::Duration> EnvironmentSeconds(const char* name);  // Positive, fractional.
absl::StatusOr<uint64_t> EnvironmentBytes(const char* name);          // ParseByteSize's syntax.
absl::StatusOr<bool> EnvironmentFlag(const char* name);

// For readers that cannot fail: a value that does not parse is logged and the default used.
int64_t EnvironmentIntegerOrDefault(const char* name);
bool EnvironmentFlagOrDefault(const char* name);

}  // namespace plexus

#endif  // PLEXUS_BASE_CORE_ENVIRONMENT_H_
