// Backends written in Python, registered by plexus.Backend.register_backend(name, creator).
//
// The creator is called as creator(store, rank, world_size, timeout) when a group using the
// backend is built, and returns an object with a method per collective (all_reduce, broadcast,
// ... as in plexus's API, with group ranks). A C++ Backend wraps that object: each call is
// queued to one worker thread per instance (so calls run in issue order), which takes the GIL
// and calls the method with numpy views of the tensors (bfloat16 as uint16 bit patterns). The
// method finishes the operation before returning, or returns an object whose wait() does. An
// exception fails the Work with the exception's plexus code, or Unknown.
#ifndef PLEXUS_BINDINGS_PYTHON_SRC_PYTHON_BACKEND_H_
#define PLEXUS_BINDINGS_PYTHON_SRC_PYTHON_BACKEND_H_

#include <pybind11/pybind11.h>

namespace plexus::python {

namespace py = pybind11;

// Adds register_backend / unregister_backend / registered_backends to `module`.
void RegisterPythonBackends(py::module_& module);

}  // namespace plexus::python

#endif  // PLEXUS_BINDINGS_PYTHON_SRC_PYTHON_BACKEND_H_
