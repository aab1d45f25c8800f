// The process group in Python (`plexus._plexus.ProcessGroup`): every collective of the C++
// ProcessGroup taking Python tensors, returning a Work. Ranks here are group ranks; the
// torch.distributed-shaped functions in plexus/_api.py translate global ranks and defaults.
// Tensors are converted with the GIL held; the call itself runs with it released.
#ifndef PLEXUS_BINDINGS_PYTHON_SRC_PROCESS_GROUP_BINDINGS_H_
#define PLEXUS_BINDINGS_PYTHON_SRC_PROCESS_GROUP_BINDINGS_H_

#include <pybind11/pybind11.h>

namespace plexus::python {

namespace py = pybind11;

void RegisterProcessGroup(py::module_& module);

}  // namespace plexus::python

#endif  // PLEXUS_BINDINGS_PYTHON_SRC_PROCESS_GROUP_BINDINGS_H_
