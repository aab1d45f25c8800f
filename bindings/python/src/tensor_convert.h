// Turning Python tensors into plexus Tensor views without copying: torch tensors (CPU, and
// CUDA for backends that serve it), numpy arrays and other buffer-protocol objects
// (bytearray, memoryview, array.array), and anything with __dlpack__. The caller keeps the
// returned `keepalive` objects until the collective is done; they hold the memory (and any
// buffer or DLPack export) alive.
//
// Errors are InvalidArgument naming the op, the argument and what was wrong: an unsupported
// type or dtype, a non-contiguous layout, or a read-only buffer the collective would write.
#ifndef PLEXUS_BINDINGS_PYTHON_SRC_TENSOR_CONVERT_H_
#define PLEXUS_BINDINGS_PYTHON_SRC_TENSOR_CONVERT_H_

#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/core/tensor.h"

namespace plexus::python {

namespace py = pybind11;

enum class Access {
  kRead,   // The collective only reads it (a send buffer, an all_gather input).
  kWrite,  // The collective writes it (in place, or an output).
};

using Keepalive = std::vector<py::object>;

// The view of `object`; appends what must stay alive to `keepalive`. GIL held.
absl::StatusOr<Tensor> ToTensor(py::handle object, absl::string_view op, absl::string_view name,
                                Access access, Keepalive& keepalive);

// Each element of the sequence `objects` (named "name[i]" in errors). GIL held.
absl::StatusOr<std::vector<Tensor>> ToTensors(py::handle objects, absl::string_view op,
                                              absl::string_view name, Access access,
                                              Keepalive& keepalive);

// True for a torch.Tensor (without importing torch when the caller has not).
bool IsTorchTensor(py::handle object);

}  // namespace plexus::python

#endif  // PLEXUS_BINDINGS_PYTHON_SRC_TENSOR_CONVERT_H_
