// Timeouts between Python and absl: Python callers pass a datetime.timedelta (as
// torch.distributed does), a number of seconds, or None for "the default".
#ifndef PLEXUS_BINDINGS_PYTHON_SRC_DURATIONS_H_
#define PLEXUS_BINDINGS_PYTHON_SRC_DURATIONS_H_

#include <pybind11/pybind11.h>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace plexus::python {

namespace py = pybind11;

// None -> `if_none`; a timedelta or a number of seconds -> that duration. A negative or
// non-numeric value raises InvalidArgumentError naming `what`. GIL held.
absl::Duration ToDuration(py::handle value, absl::Duration if_none, absl::string_view what);

// A datetime.timedelta; InfiniteDuration() becomes timedelta.max. GIL held.
py::object ToTimedelta(absl::Duration duration);

}  // namespace plexus::python

#endif  // PLEXUS_BINDINGS_PYTHON_SRC_DURATIONS_H_
