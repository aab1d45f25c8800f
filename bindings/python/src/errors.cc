#include "bindings/python/src/errors.h"

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace plexus::python {
namespace {

// Created once at import and kept for the life of the process (never decref'd at exit).
PyObject* base_class = nullptr;
absl::flat_hash_map<absl::StatusCode, PyObject*>* classes_by_code = nullptr;

PyObject* NewClass(py::module_& module, const char* name, PyObject* bases, const char* doc) {
  std::string qualified = std::string("plexus.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (cls == nullptr) throw py::error_already_set();
  module.add_object(name, py::reinterpret_borrow<py::object>(cls));
  return cls;
}

}  // namespace

StatusError::StatusError(absl::Status status)
    : std::runtime_error(status.ToString()), status_(std::move(status)) {}

py::object MakeException(const absl::Status& status) {
  PyObject* cls = base_class;
  auto it = classes_by_code->find(status.code());
  if (it != classes_by_code->end()) cls = it->second;
  py::object instance = py::reinterpret_borrow<py::object>(cls)(
      py::str(status.message().data(), status.message().size()));
  instance.attr("code") = py::str(absl::StatusCodeToString(status.code()));
  instance.attr("message") = py::str(std::string(status.message()));
  return instance;
}

absl::Status StatusFromPython(py::error_already_set& error, absl::string_view where,
                              absl::StatusCode otherwise) {
  std::string text = error.what();
  absl::StatusCode code = otherwise;
  py::object value = error.value();
  if (py::hasattr(value, "code") && py::isinstance<py::str>(value.attr("code"))) {
    std::string name = value.attr("code").cast<std::string>();
    for (int i = 1; i <= 16; ++i) {
      if (absl::StatusCodeToString(static_cast<absl::StatusCode>(i)) == name) {
        code = static_cast<absl::StatusCode>(i);
      }
    }
  } else if (error.matches(PyExc_NotImplementedError) || error.matches(PyExc_AttributeError)) {
    code = absl::StatusCode::kUnimplemented;
  } else if (error.matches(PyExc_ValueError) || error.matches(PyExc_TypeError) ||
             error.matches(PyExc_KeyError)) {
    code = absl::StatusCode::kInvalidArgument;
  } else if (error.matches(PyExc_TimeoutError) || absl::StrContains(text, "imeout") ||
             absl::StrContains(text, "timed out")) {
    code = absl::StatusCode::kDeadlineExceeded;
  }
  return absl::Status(code, absl::StrCat(where, ": ", text));
}

void RegisterErrors(py::module_& module) {
  base_class = NewClass(module, "PlexusError", PyExc_RuntimeError,
                        "Base of every plexus error. `code` names the status code "
                        "(e.g. 'UNAVAILABLE'), `message` says what failed.");
  auto derived = [&](const char* name, PyObject* extra_base, const char* doc) {
    // py::tuple on each branch: pybind11 3 gives make_tuple a typed result per arity.
    py::tuple bases =
        extra_base == nullptr
            ? py::tuple(py::make_tuple(py::handle(base_class)))
            : py::tuple(py::make_tuple(py::handle(base_class), py::handle(extra_base)));
    return NewClass(module, name, bases.ptr(), doc);
  };
  classes_by_code = new absl::flat_hash_map<absl::StatusCode, PyObject*>{
      {absl::StatusCode::kDeadlineExceeded,
       derived("DeadlineExceededError", nullptr, "An operation or wait ran past its timeout.")},
      {absl::StatusCode::kUnavailable,
       derived("UnavailableError", nullptr, "A peer was lost or its connection broke.")},
      {absl::StatusCode::kInvalidArgument,
       derived("InvalidArgumentError", PyExc_ValueError,
               "Bad input: a tensor, size, dtype, op or rank that cannot be used.")},
      {absl::StatusCode::kFailedPrecondition,
       derived("FailedPreconditionError", nullptr,
               "Ranks disagree about a collective, or the call is out of place.")},
      {absl::StatusCode::kAborted,
       derived("AbortedError", nullptr, "Aborted by the user or the elastic layer.")},
      {absl::StatusCode::kUnimplemented,
       derived("UnimplementedError", PyExc_NotImplementedError, "The backend cannot do this.")},
      {absl::StatusCode::kUnauthenticated,
       derived("UnauthenticatedError", nullptr, "A connection handshake failed.")},
      {absl::StatusCode::kNotFound, derived("NotFoundError", nullptr, "Nothing by that name.")},
      {absl::StatusCode::kAlreadyExists,
       derived("AlreadyExistsError", nullptr, "The name is already taken.")},
  };
  py::register_exception_translator([](std::exception_ptr pointer) {
    try {
      if (pointer) std::rethrow_exception(pointer);
    } catch (const StatusError& error) {
      py::object instance = MakeException(error.status());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(instance.ptr())), instance.ptr());
    }
  });
}

}  // namespace plexus::python
