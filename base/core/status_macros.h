// Status propagation macros. Debian's abseil 20220623 ships none, so plexus defines the two
// that every layer uses. Neither hides a goto: each expands to one early `return`.
#ifndef PLEXUS_BASE_CORE_STATUS_MACROS_H_
#define PLEXUS_BASE_CORE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define PLEXUS_STATUS_CONCAT_INNER_(a, b) a##b
#define PLEXUS_STATUS_CONCAT_(a, b) PLEXUS_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status); returns it from the enclosing function if not OK.
#define RETURN_IF_ERROR(expr)                        \
  do {                                               \
    ::absl::Status plexus_status_ = (expr);          \
    if (!plexus_status_.ok()) return plexus_status_; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, MakeX());` evaluates an absl::StatusOr<T>; on error returns its
// status, otherwise moves the value into `lhs` (which may be a declaration).
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  PLEXUS_ASSIGN_OR_RETURN_IMPL_(PLEXUS_STATUS_CONCAT_(plexus_statusor_, __LINE__), lhs, rexpr)

#define PLEXUS_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                  \
  if (!statusor.ok()) return std::move(statusor).status();  \
  lhs = std::move(statusor).value()

#endif  // PLEXUS_BASE_CORE_STATUS_MACROS_H_
