// Errors crossing into Python: an absl::Status becomes an exception of a class chosen by its
// code, so a timeout (DeadlineExceededError) is told apart from a lost peer (UnavailableError).
// Every class derives from plexus.PlexusError, itself a RuntimeError as torch.distributed's
// errors are; `code` holds the status code name ("DEADLINE_EXCEEDED") and `message` the text.
#ifndef PLEXUS_BINDINGS_PYTHON_SRC_ERRORS_H_
#define PLEXUS_BINDINGS_PYTHON_SRC_ERRORS_H_

#include <pybind11/pybind11.h>

#include <stdexcept>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace plexus::python {

namespace py = pybind11;

// Carries a non-OK status through C++ frames to the translator registered by RegisterErrors.
class StatusError : public std::runtime_error {
 public:
  explicit StatusError(absl::Status status);
  const absl::Status& status() const { return status_; }

 private:
  absl::Status status_;
};

inline void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) throw StatusError(status);
}

template <typename T>
T ValueOrThrow(absl::StatusOr<T> value) {
  if (!value.ok()) throw StatusError(value.status());
  return *std::move(value);
}

// The exception instance for a non-OK `status` (to raise, or to store in a future). GIL held.
py::object MakeException(const absl::Status& status);

// The status a Python exception stands for, prefixed with `where`: a plexus error keeps its
// code; NotImplementedError/AttributeError are Unimplemented; ValueError/TypeError/KeyError
// InvalidArgument; TimeoutError, or a message that mentions a timeout (as torch's stores
// raise), DeadlineExceeded; anything else `otherwise`. GIL held.
absl::Status StatusFromPython(py::error_already_set& error, absl::string_view where,
                              absl::StatusCode otherwise);

// Creates the exception classes in `module` and the StatusError translator.
void RegisterErrors(py::module_& module);

}  // namespace plexus::python

#endif  // PLEXUS_BINDINGS_PYTHON_SRC_ERRORS_H_
