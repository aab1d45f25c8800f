#include "bindings/python/src/work_bindings.h"

#include <memory>
#include <utility>
#include <vector>

#include "bindings/python/src/durations.h"
#include "bindings/python/src/errors.h"
#include "bindings/python/src/py_ref.h"

namespace plexus::python {
namespace {

// Works dropped by Python while still running, with the memory they use. Only touched with
// the GIL held; swept of finished entries whenever a Work is created or dropped.
struct Orphan {
  WorkPtr work;
  Keepalive keepalive;
  py::object result;
};
std::vector<Orphan>& Orphans() {
  static auto* orphans = new std::vector<Orphan>();  // Never destroyed: outlives the interpreter.
  return *orphans;
}

void SweepOrphans() {
  std::vector<Orphan>& orphans = Orphans();
  std::vector<Orphan> still_running;
  for (Orphan& orphan : orphans) {
    if (!orphan.work->IsCompleted()) still_running.push_back(std::move(orphan));
  }
  orphans.swap(still_running);
}

}  // namespace

cuda::Stream TorchCurrentStream(int device) {
  // Looked up once (the GIL serialises this): module lookups, torch.cuda.is_available() and
  // the Stream object torch.cuda.current_stream() builds cost more per call, twice per
  // collective, than plexus's whole NCCL launch. Never released: it outlives the interpreter.
  static py::handle current = nullptr;
  static bool returns_raw = false;  // torch._C._cuda_getCurrentRawStream gives the pointer.
  if (!current) {
    py::object modules = py::module_::import("sys").attr("modules");
    if (!modules.contains("torch")) return nullptr;
    py::object torch = modules["torch"];
    // CUDA memory that is not torch's (torch built without CUDA): the legacy stream.
    if (!torch.attr("cuda").attr("is_available")().cast<bool>()) return nullptr;
    py::object bindings = torch.attr("_C");
    returns_raw = py::hasattr(bindings, "_cuda_getCurrentRawStream");
    py::object lookup = returns_raw ? bindings.attr("_cuda_getCurrentRawStream")
                                    : torch.attr("cuda").attr("current_stream");
    current = lookup.release();
  }
  py::object stream = current(device);
  return reinterpret_cast<cuda::Stream>(
      (returns_raw ? stream : stream.attr("cuda_stream")).cast<uintptr_t>());
}

PyWork::PyWork(WorkPtr work, Keepalive keepalive, py::object result, int cuda_device)
    : work_(std::move(work)),
      keepalive_(std::move(keepalive)),
      result_(std::move(result)),
      cuda_device_(cuda_device) {
  if (!Orphans().empty()) SweepOrphans();
}

PyWork::~PyWork() {
  if (!work_->IsCompleted() && !keepalive_.empty()) {
    Orphans().push_back({work_, std::move(keepalive_), std::move(result_)});
  }
  if (!Orphans().empty()) SweepOrphans();
}

bool PyWork::Wait(py::handle timeout) {
  if (cuda_device_ >= 0 && timeout.is_none()) {
    cuda::Stream stream = TorchCurrentStream(cuda_device_);
    absl::Status status;
    {
      py::gil_scoped_release release;
      status = work_->WaitOnStream(cuda_device_, stream);
    }
    ThrowIfError(status);
    return true;
  }
  absl::Duration limit = ToDuration(timeout, absl::InfiniteDuration(), "Work.wait timeout");
  absl::Status status;
  {
    py::gil_scoped_release release;
    status = work_->Wait(limit);
  }
  ThrowIfError(status);
  return true;
}

bool PyWork::IsSuccess() const { return work_->IsCompleted() && work_->status().ok(); }

py::object PyWork::Exception() const {
  if (!work_->IsCompleted() || work_->status().ok()) return py::none();
  return MakeException(work_->status());
}

void PyWork::AddDoneCallback(py::object fn) {
  auto callback = std::make_shared<PyRef>(fn);
  work_->OnCompleteMayBlock([callback](const absl::Status& status) {
    WithGil([&] {
      try {
        callback->get()(status.ok() ? py::none() : MakeException(status));
      } catch (py::error_already_set& error) {
        error.discard_as_unraisable("plexus Work done-callback");
      }
      callback->Reset();
    });
  });
}

py::object PyWork::GetFuture() {
  py::object future = py::module_::import("plexus._future").attr("Future")();
  py::object result = result_;
  AddDoneCallback(py::cpp_function([future, result](py::object error) {
    if (error.is_none()) {
      future.attr("set_result")(result);
    } else {
      future.attr("set_exception")(error);
    }
  }));
  return future;
}

void RegisterWork(py::module_& module) {
  py::class_<Work::Stats>(module, "WorkStats", "Bytes moved and time taken by one operation.")
      .def_readonly("bytes_sent", &Work::Stats::bytes_sent)
      .def_readonly("bytes_received", &Work::Stats::bytes_received)
      .def_property_readonly("duration",
                             [](const Work::Stats& stats) { return ToTimedelta(stats.duration); })
      .def_property_readonly(
          "seconds", [](const Work::Stats& stats) { return absl::ToDoubleSeconds(stats.duration); })
      .def_readonly("world_size", &Work::Stats::world_size)
      .def("__repr__", [](const Work::Stats& stats) {
        return py::str(
                   "WorkStats(bytes_sent={}, bytes_received={}, seconds={:.6f}, "
                   "world_size={})")
            .format(stats.bytes_sent, stats.bytes_received, absl::ToDoubleSeconds(stats.duration),
                    stats.world_size);
      });

  py::class_<PyWork>(module, "Work",
                     "Handle on an asynchronous operation (returned with async_op=True).")
      .def("wait", &PyWork::Wait, py::arg("timeout") = py::none(),
           "Blocks until done or until `timeout` (timedelta or seconds); returns True or raises.")
      .def("is_completed", &PyWork::IsCompleted)
      .def("is_success", &PyWork::IsSuccess)
      .def("exception", &PyWork::Exception)
      .def("result", &PyWork::Result)
      .def("get_future", &PyWork::GetFuture)
      .def("add_done_callback", &PyWork::AddDoneCallback, py::arg("fn"))
      .def("source_rank", &PyWork::SourceRank)
      .def("stats", [](const PyWork& work) { return work.work()->stats(); })
      .def_property_readonly("op", [](const PyWork& work) { return work.work()->op_name(); })
      .def_property_readonly("sequence", [](const PyWork& work) { return work.work()->sequence(); })
      .def("__repr__", [](const PyWork& work) {
        return py::str("<plexus.Work {} #{} {}>")
            .format(work.work()->op_name(), work.work()->sequence(),
                    work.IsCompleted() ? (work.IsSuccess() ? "done" : "failed") : "running");
      });
}

}  // namespace plexus::python
