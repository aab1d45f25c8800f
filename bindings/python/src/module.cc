// plexus._plexus: the extension module under the plexus package. The package (plexus/*.py)
// builds the torch.distributed-shaped API on these types.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "backends/interface/backend_registry.h"
#include "base/core/dtype.h"
#include "bindings/python/src/elastic_bindings.h"
#include "bindings/python/src/errors.h"
#include "bindings/python/src/process_group_bindings.h"
#include "bindings/python/src/py_ref.h"
#include "bindings/python/src/python_backend.h"
#include "bindings/python/src/store_bindings.h"
#include "bindings/python/src/work_bindings.h"

namespace py = pybind11;

PYBIND11_MODULE(_plexus, module) {
  module.doc() = "plexus collective communication (C++ core)";
  plexus::python::RegisterErrors(module);
  plexus::python::RegisterStores(module);
  plexus::python::RegisterWork(module);
  plexus::python::RegisterProcessGroup(module);
  plexus::python::RegisterPythonBackends(module);
  plexus::python::RegisterElastic(module);
  py::list dtypes;
  for (plexus::DType dtype : plexus::kAllDTypes) {
    dtypes.append(py::str(std::string(plexus::DTypeName(dtype))));
  }
  module.attr("dtypes") = dtypes;
  module.def("_close_to_plexus_threads", &plexus::python::CloseToPlexusThreads,
             py::arg("limit_seconds") = 2.0,
             "At exit: plexus threads stop calling into Python (registered with atexit).");
}
