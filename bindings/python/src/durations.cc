#include "bindings/python/src/durations.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "bindings/python/src/errors.h"

namespace plexus::python {

absl::Duration ToDuration(py::handle value, absl::Duration if_none, absl::string_view what) {
  if (value.is_none()) return if_none;
  double seconds = 0;
  if (py::hasattr(value, "total_seconds")) {
    seconds = value.attr("total_seconds")().cast<double>();
  } else if (PyFloat_Check(value.ptr()) || PyLong_Check(value.ptr())) {
    seconds = value.cast<double>();
  } else {
    throw StatusError(absl::InvalidArgumentError(absl::StrCat(
        what, ": expected a datetime.timedelta or seconds, got ", Py_TYPE(value.ptr())->tp_name)));
  }
  if (std::isnan(seconds) || seconds < 0) {
    throw StatusError(absl::InvalidArgumentError(
        absl::StrCat(what, ": must not be negative, got ", seconds, " s")));
  }
  if (std::isinf(seconds)) return absl::InfiniteDuration();
  return absl::Seconds(seconds);
}

py::object ToTimedelta(absl::Duration duration) {
  py::object timedelta = py::module_::import("datetime").attr("timedelta");
  if (duration == absl::InfiniteDuration()) return timedelta.attr("max");
  return timedelta(py::arg("microseconds") = absl::ToInt64Microseconds(duration));
}

}  // namespace plexus::python
