// PyRef: a reference to a Python object held by C++ code that may drop it on any thread -
// a backend's completion thread, a worker, or a static destructor after the interpreter has
// gone. Dropping takes the GIL when needed; once the interpreter is finalizing the reference
// is leaked instead, since touching a dead interpreter would crash the process at exit.
#ifndef PLEXUS_BINDINGS_PYTHON_SRC_PY_REF_H_
#define PLEXUS_BINDINGS_PYTHON_SRC_PY_REF_H_

#include <pybind11/pybind11.h>

#include <atomic>
#include <utility>

namespace plexus::python {

namespace py = pybind11;

// Set by plexus's atexit hook (CloseToPlexusThreads): from then on no plexus thread enters
// Python. A thread that blocks for the GIL while the interpreter finalizes is ended with
// pthread_exit, which aborts a C++ thread; so entries are counted and the hook waits them out.
inline std::atomic<bool>& PythonClosing() {
  static std::atomic<bool> closing{false};
  return closing;
}
inline std::atomic<int>& ThreadsEnteringPython() {
  static std::atomic<int> count{0};
  return count;
}

// Whether the interpreter is finalizing: Python 3.13 made the call public and removed the
// private one older versions have.
inline bool InterpreterFinalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

// True while Python objects may still be touched (the interpreter is up and not finalizing).
inline bool InterpreterAlive() {
  return !PythonClosing().load(std::memory_order_acquire) && Py_IsInitialized() &&
         !InterpreterFinalizing();
}

// Runs `fn` holding the GIL from any thread; returns false without running it once the
// interpreter is shutting down.
template <typename Fn>
bool WithGil(Fn&& fn) {
  ThreadsEnteringPython().fetch_add(1, std::memory_order_acq_rel);
  if (!InterpreterAlive()) {
    ThreadsEnteringPython().fetch_sub(1, std::memory_order_acq_rel);
    return false;
  }
  {
    py::gil_scoped_acquire gil;
    // Keep this thread's Python thread state between calls: creating and destroying one per
    // callback costs more than the callback.
    thread_local bool state_kept = false;
    if (!state_kept) {
      gil.inc_ref();
      state_kept = true;
    }
    fn();
  }
  ThreadsEnteringPython().fetch_sub(1, std::memory_order_acq_rel);
  return true;
}

// Stops plexus threads from entering Python and waits (GIL released, at most `limit`) for
// those already entering to leave. Called once, from an atexit hook; GIL held.
void CloseToPlexusThreads(double limit_seconds);

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

  // Drops the reference from any thread (leaks it once the interpreter is shutting down).
  void Reset() {
    PyObject* object = std::exchange(object_, nullptr);
    if (object != nullptr) WithGil([object] { Py_DECREF(object); });
  }

 private:
  PyObject* object_ = nullptr;
};

}  // namespace plexus::python

#endif  // PLEXUS_BINDINGS_PYTHON_SRC_PY_REF_H_
