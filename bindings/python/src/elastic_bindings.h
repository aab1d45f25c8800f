// plexus._plexus elastic types: the master and the communicator of frontend/elastic, for the
// PCCL-shaped package plexus.elastic. Calls that can fail return (result, message, value)
// instead of raising, so the package raises its own PCCLError carrying the result code.
#ifndef PLEXUS_BINDINGS_PYTHON_SRC_ELASTIC_BINDINGS_H_
#define PLEXUS_BINDINGS_PYTHON_SRC_ELASTIC_BINDINGS_H_

#include <pybind11/pybind11.h>

namespace plexus::python {

void RegisterElastic(pybind11::module_& module);

}  // namespace plexus::python

#endif  // PLEXUS_BINDINGS_PYTHON_SRC_ELASTIC_BINDINGS_H_
