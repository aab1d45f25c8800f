// PyRef: a reference to a Python object held by C++ code that may drop it on any thread -
// a backend's completion thread, a worker, or a static destructor after the interpreter has
// gone. Dropping takes the GIL when needed; once the interpreter is finalizing the reference
// is leaked instead, since touching a dead interpreter would crash the process at exit.
#ifndef PLEXUS_BINDINGS_PYTHON_SRC_PY_REF_H_
#define PLEXUS_BINDINGS_PYTHON_SRC_PY_REF_H_

#include <pybind11/pybind11.h>

#include <utility>

namespace plexus::python {

namespace py = pybind11;

// True while Python objects may still be touched (the interpreter is up and not finalizing).
inline bool InterpreterAlive() { return Py_IsInitialized() && !_Py_IsFinalizing(); }

class PyRef {
 public:
  PyRef() = default;
  // Takes a new reference; the caller holds the GIL.
  explicit PyRef(const py::handle& object) : object_(object.ptr()) { Py_XINCREF(object_); }
  PyRef(PyRef&& other) noexcept : object_(std::exchange(other.object_, nullptr)) {}
  PyRef& operator=(PyRef&& other) noexcept {
    if (this != &other) {
      Reset();
      object_ = std::exchange(other.object_, nullptr);
    }
    return *this;
  }
  PyRef(const PyRef&) = delete;
  PyRef& operator=(const PyRef&) = delete;
  ~PyRef() { Reset(); }

  // A new strong reference; the caller holds the GIL.
  py::object get() const { return py::reinterpret_borrow<py::object>(object_); }
  explicit operator bool() const { return object_ != nullptr; }

  // Drops the reference from any thread.
  void Reset() {
    PyObject* object = std::exchange(object_, nullptr);
    if (object == nullptr || !InterpreterAlive()) return;
    PyGILState_STATE state = PyGILState_Ensure();
    Py_DECREF(object);
    PyGILState_Release(state);
  }

 private:
  PyObject* object_ = nullptr;
};

// Runs `fn` holding the GIL from any thread; returns false without running it when the
// interpreter is finalizing.
template <typename Fn>
bool WithGil(Fn&& fn) {
  if (!InterpreterAlive()) return false;
  py::gil_scoped_acquire gil;
  fn();
  return true;
}

}  // namespace plexus::python

#endif  // PLEXUS_BINDINGS_PYTHON_SRC_PY_REF_H_
