// Every PLEXUS_* environment variable plexus reads, in one table: name, type, default, meaning
// and the page that explains it. C++ code reads them through ReadEnvironment, which refuses
// nothing but logs a name missing from the table; docs/environment.md is generated from the
// table (bazel run //tools:environment_doc), and //tools:environment_doc_test keeps the page,
// the table and the names the sources use (C++, Python, shell) in step.
#ifndef PLEXUS_BASE_CORE_ENVIRONMENT_H_
#define PLEXUS_BASE_CORE_ENVIRONMENT_H_

#include "absl/strings/string_view.h"
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

}  // namespace plexus

#endif  // PLEXUS_BASE_CORE_ENVIRONMENT_H_
