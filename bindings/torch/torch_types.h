// What crosses between torch's c10d types and plexus's: tensors (non-owning views of at::Tensor
// memory), reductions, timeouts, and errors (an absl::Status thrown as the exception torch's
// own backends throw, so Python sees a RuntimeError carrying plexus's message).
// Which torch base class is used: torch_compat.h.
#ifndef PLEXUS_BINDINGS_TORCH_TORCH_TYPES_H_
#define PLEXUS_BINDINGS_TORCH_TORCH_TYPES_H_

#include <chrono>
#include <exception>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/core/reduce_op.h"
#include "base/core/tensor.h"
#include "bindings/torch/torch_compat.h"

#if PLEXUS_TORCH_BACKEND_API
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif

namespace plexus::torch_backend {

#if PLEXUS_TORCH_BACKEND_API
using TorchGroupBase = c10d::Backend;
#else
using TorchGroupBase = c10d::ProcessGroup;
#endif

// A view of `tensor`'s memory; InvalidArgument naming `op` and `which` ("input 2") when it is
// sparse, not contiguous, of a dtype plexus does not carry, or on a device it does not serve.
absl::StatusOr<Tensor> View(const at::Tensor& tensor, absl::string_view op,
                            absl::string_view which);
absl::StatusOr<std::vector<Tensor>> Views(const std::vector<at::Tensor>& tensors,
                                          absl::string_view op, absl::string_view which);

// torch's ReduceOp as plexus's; PREMUL_SUM takes its factor from a double or a one-element
// tensor. InvalidArgument for an op plexus does not have.
absl::StatusOr<ReduceOp> ToReduceOp(const c10d::ReduceOp& op, absl::string_view op_name);

// An options timeout: torch's "unset" (-1 ms) is the group's timeout (plexus's sentinel); zero
// or negative otherwise is already expired (never "forever", as 0 means to torch's stores).
absl::Duration ToTimeout(std::chrono::milliseconds timeout);

// Where an error is raised: this rank, of the plexus group named `group` ("torch:1"; empty
// when there is none yet). Every message starts "[plexus, group 'torch:1', rank R]".
struct Origin {
  int rank = -1;
  std::string group;
};

// The exception torch's backends raise for `status` (not OK), prefixed with its origin:
// c10::Error (RuntimeError in Python; from torch 2.1, c10::DistBackendError, a RuntimeError too,
// for failures while running), c10::NotImplementedError for Unimplemented. Bad arguments are
// RuntimeErrors as Gloo's are. A timeout's message says "Timed out", as Gloo's does.
std::exception_ptr ToException(const absl::Status& status, const Origin& origin);
[[noreturn]] void Throw(const absl::Status& status, const Origin& origin);

template <typename T>
T ValueOrThrow(absl::StatusOr<T> value, const Origin& origin) {
  if (!value.ok()) Throw(value.status(), origin);
  return *std::move(value);
}

}  // namespace plexus::torch_backend

#endif  // PLEXUS_BINDINGS_TORCH_TORCH_TYPES_H_
