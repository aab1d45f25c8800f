// The Python Work: a plexus Work plus the Python objects the operation reads and writes.
// Those stay alive until the operation completes, even when the caller drops the Work first.
#ifndef PLEXUS_BINDINGS_PYTHON_SRC_WORK_BINDINGS_H_
#define PLEXUS_BINDINGS_PYTHON_SRC_WORK_BINDINGS_H_

#include <pybind11/pybind11.h>

#include "base/work/work.h"
#include "bindings/python/src/tensor_convert.h"
#include "devices/cuda/current_stream.h"

namespace plexus::python {

namespace py = pybind11;

class PyWork {
 public:
  // `result` is what result() and the future yield (the list of tensors written);
  // `cuda_device` the CUDA device of the operation's tensors (-1: none). GIL held.
  PyWork(WorkPtr work, Keepalive keepalive, py::object result, int cuda_device = -1);
  ~PyWork();
  PyWork(const PyWork&) = delete;
  PyWork& operator=(const PyWork&) = delete;

  // Waits (GIL released) up to `timeout` (None: the operation's own deadline). Returns True;
  // raises the operation's error, or DeadlineExceededError when the wait ran out. On CUDA
  // tensors with no timeout it only makes torch's current stream wait for the operation, as
  // torch's NCCL Work.wait() does: the host goes on, later work on the stream sees the result.
  bool Wait(py::handle timeout);
  bool IsCompleted() const { return work_->IsCompleted(); }
  // True once completed successfully; False while running or after an error.
  bool IsSuccess() const;
  // The error as an exception instance, or None (running, or succeeded).
  py::object Exception() const;
  py::object Result() const { return result_; }
  // A plexus.Future completed with result() or the error, from the completing thread.
  py::object GetFuture();
  // Calls fn(exception_or_None) once, when complete (now, if it already is).
  void AddDoneCallback(py::object fn);
  int SourceRank() const { return work_->source_rank(); }
  const WorkPtr& work() const { return work_; }

 private:
  WorkPtr work_;
  Keepalive keepalive_;
  py::object result_;
  int cuda_device_;
};

// torch's current CUDA stream for `device`, or nullptr (the legacy default stream) when torch
// is not loaded. GIL held.
cuda::Stream TorchCurrentStream(int device);

void RegisterWork(py::module_& module);

}  // namespace plexus::python

#endif  // PLEXUS_BINDINGS_PYTHON_SRC_WORK_BINDINGS_H_
