// The stores in Python (Store, TCPStore, FileStore, HashStore, PrefixStore) with c10d's
// method names, and a Store over any Python object with those methods (a torch.distributed
// store, or a user's), so plexus can rendezvous through a store it did not create.
#ifndef PLEXUS_BINDINGS_PYTHON_SRC_STORE_BINDINGS_H_
#define PLEXUS_BINDINGS_PYTHON_SRC_STORE_BINDINGS_H_

#include <pybind11/pybind11.h>

#include <memory>

#include "base/store/store.h"

namespace plexus::python {

namespace py = pybind11;

// `object` itself when it is a plexus store; otherwise a Store calling its set/get/add/
// compare_set/wait/check/delete_key/num_keys methods (taking the GIL on each call). GIL held.
std::shared_ptr<Store> StoreFromPython(py::handle object);

void RegisterStores(py::module_& module);

}  // namespace plexus::python

#endif  // PLEXUS_BINDINGS_PYTHON_SRC_STORE_BINDINGS_H_
