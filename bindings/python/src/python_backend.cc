#include "bindings/python/src/python_backend.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/interface/backend_registry.h"
#include "base/work/callback_runner.h"
#include "bindings/python/src/durations.h"
#include "bindings/python/src/errors.h"
#include "bindings/python/src/py_ref.h"

namespace plexus::python {
namespace {

// A numpy view of `tensor` (no copy; the array does not own the memory).
py::array NumpyView(const Tensor& tensor) {
  const char* format = "B";
  switch (tensor.dtype()) {
    case DType::kBool:
      format = "?";
      break;
    case DType::kUInt8:
      format = "B";
      break;
    case DType::kInt8:
      format = "b";
      break;
    case DType::kInt16:
      format = "h";
      break;
    case DType::kInt32:
      format = "i";
      break;
    case DType::kInt64:
      format = "q";
      break;
    case DType::kFloat16:
      format = "e";
      break;
    case DType::kBFloat16:
      format = "H";
      break;  // No numpy bfloat16: the bit patterns.
    case DType::kFloat32:
      format = "f";
      break;
    case DType::kFloat64:
      format = "d";
      break;
  }
  std::vector<py::ssize_t> shape(tensor.shape().begin(), tensor.shape().end());
  std::vector<py::ssize_t> strides;
  for (int64_t stride : tensor.strides()) {
    strides.push_back(stride * static_cast<py::ssize_t>(tensor.element_size()));
  }
  static int anchor = 0;  // A non-null base keeps pybind11 from copying.
  return py::array(py::dtype(format), shape, strides, tensor.data(),
                   py::capsule(&anchor, [](void*) {}));
}

py::list NumpyViews(absl::Span<const Tensor> tensors) {
  py::list views;
  for (const Tensor& tensor : tensors) views.append(NumpyView(tensor));
  return views;
}

class PythonBackend : public Backend {
 public:
  using PyCall = std::function<py::object(py::object& impl)>;

  PythonBackend(std::string name, py::object impl, BackendCapabilities capabilities, int size)
      : name_(std::move(name)),
        impl_(impl),
        capabilities_(std::move(capabilities)),
        size_(size),
        worker_([this] { Worker(); }) {}

  ~PythonBackend() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    ready_.notify_all();
    if (PyGILState_Check()) {
      py::gil_scoped_release release;  // The worker may be waiting for the GIL.
      worker_.join();
    } else {
      worker_.join();
    }
  }

  std::string name() const override { return name_; }
  BackendCapabilities capabilities() const override { return capabilities_; }

  WorkPtr Broadcast(const Tensor& tensor, const BroadcastOptions& options) override {
    return Enqueue("broadcast", [=](py::object& impl) {
      return impl.attr("broadcast")(NumpyView(tensor), options.root_rank,
                                    py::arg("timeout") = ToTimedelta(options.timeout));
    });
  }
  WorkPtr Reduce(const Tensor& tensor, const ReduceOptions& options) override {
    return Enqueue("reduce", [=](py::object& impl) {
      return impl.attr("reduce")(NumpyView(tensor), options.root_rank, options.op,
                                 py::arg("timeout") = ToTimedelta(options.timeout));
    });
  }
  WorkPtr AllReduce(const Tensor& tensor, const AllReduceOptions& options) override {
    return Enqueue("all_reduce", [=](py::object& impl) {
      return impl.attr("all_reduce")(NumpyView(tensor), options.op,
                                     py::arg("timeout") = ToTimedelta(options.timeout));
    });
  }
  WorkPtr AllReduceCoalesced(absl::Span<const Tensor> tensors,
                             const AllReduceCoalescedOptions& options) override {
    std::vector<Tensor> copy(tensors.begin(), tensors.end());
    return Enqueue("all_reduce_coalesced", [=](py::object& impl) {
      return impl.attr("all_reduce_coalesced")(NumpyViews(copy), options.op,
                                               py::arg("timeout") = ToTimedelta(options.timeout));
    });
  }
  WorkPtr AllGather(absl::Span<const Tensor> outputs, const Tensor& input,
                    const AllGatherOptions& options) override {
    std::vector<Tensor> outs(outputs.begin(), outputs.end());
    return Enqueue("all_gather", [=](py::object& impl) {
      return impl.attr("all_gather")(NumpyViews(outs), NumpyView(input),
                                     py::arg("timeout") = ToTimedelta(options.timeout));
    });
  }
  WorkPtr AllGatherIntoTensor(const Tensor& output, const Tensor& input,
                              const AllGatherOptions& options) override {
    return Enqueue("all_gather_into_tensor", [=](py::object& impl) {
      return impl.attr("all_gather_into_tensor")(NumpyView(output), NumpyView(input),
                                                 py::arg("timeout") = ToTimedelta(options.timeout));
    });
  }
  WorkPtr Gather(absl::Span<const Tensor> outputs, const Tensor& input,
                 const GatherOptions& options) override {
    std::vector<Tensor> outs(outputs.begin(), outputs.end());
    return Enqueue("gather", [=](py::object& impl) {
      return impl.attr("gather")(NumpyViews(outs), NumpyView(input), options.root_rank,
                                 py::arg("timeout") = ToTimedelta(options.timeout));
    });
  }
  WorkPtr Scatter(const Tensor& output, absl::Span<const Tensor> inputs,
                  const ScatterOptions& options) override {
    std::vector<Tensor> ins(inputs.begin(), inputs.end());
    return Enqueue("scatter", [=](py::object& impl) {
      return impl.attr("scatter")(NumpyView(output), NumpyViews(ins), options.root_rank,
                                  py::arg("timeout") = ToTimedelta(options.timeout));
    });
  }
  WorkPtr ReduceScatter(const Tensor& output, absl::Span<const Tensor> inputs,
                        const ReduceScatterOptions& options) override {
    std::vector<Tensor> ins(inputs.begin(), inputs.end());
    return Enqueue("reduce_scatter", [=](py::object& impl) {
      return impl.attr("reduce_scatter")(NumpyView(output), NumpyViews(ins), options.op,
                                         py::arg("timeout") = ToTimedelta(options.timeout));
    });
  }
  WorkPtr ReduceScatterTensor(const Tensor& output, const Tensor& input,
                              const ReduceScatterOptions& options) override {
    return Enqueue("reduce_scatter_tensor", [=](py::object& impl) {
      return impl.attr("reduce_scatter_tensor")(NumpyView(output), NumpyView(input), options.op,
                                                py::arg("timeout") = ToTimedelta(options.timeout));
    });
  }
  WorkPtr AllToAll(absl::Span<const Tensor> outputs, absl::Span<const Tensor> inputs,
                   const AllToAllOptions& options) override {
    std::vector<Tensor> outs(outputs.begin(), outputs.end());
    std::vector<Tensor> ins(inputs.begin(), inputs.end());
    return Enqueue("all_to_all", [=](py::object& impl) {
      return impl.attr("all_to_all")(NumpyViews(outs), NumpyViews(ins),
                                     py::arg("timeout") = ToTimedelta(options.timeout));
    });
  }
  WorkPtr AllToAllSingle(const Tensor& output, const Tensor& input,
                         absl::Span<const int64_t> output_split_sizes,
                         absl::Span<const int64_t> input_split_sizes,
                         const AllToAllOptions& options) override {
    std::vector<int64_t> out_splits(output_split_sizes.begin(), output_split_sizes.end());
    std::vector<int64_t> in_splits(input_split_sizes.begin(), input_split_sizes.end());
    return Enqueue("all_to_all_single", [=](py::object& impl) {
      return impl.attr("all_to_all_single")(NumpyView(output), NumpyView(input), out_splits,
                                            in_splits,
                                            py::arg("timeout") = ToTimedelta(options.timeout));
    });
  }
  WorkPtr Barrier(const BarrierOptions& options) override {
    return Enqueue("barrier", [=](py::object& impl) {
      return impl.attr("barrier")(py::arg("timeout") = ToTimedelta(options.timeout));
    });
  }
  WorkPtr Send(const Tensor& tensor, int dst_rank, const SendOptions& options) override {
    return Enqueue("send", [=](py::object& impl) {
      return impl.attr("send")(NumpyView(tensor), dst_rank, options.tag,
                               py::arg("timeout") = ToTimedelta(options.timeout));
    });
  }
  WorkPtr Recv(const Tensor& tensor, int src_rank, const RecvOptions& options) override {
    return Enqueue("recv", [=](py::object& impl) {
      return impl.attr("recv")(NumpyView(tensor), src_rank, options.tag,
                               py::arg("timeout") = ToTimedelta(options.timeout));
    });
  }
  WorkPtr RecvAnySource(const Tensor& /*tensor*/, const RecvOptions& /*options*/) override {
    return Work::Finished(absl::UnimplementedError(absl::StrCat(
                              name_, ": Python-defined backends cannot receive from any source")),
                          "recv", size_);
  }

 private:
  struct Task {
    std::string op;
    WorkPtr work;
    PyCall call;
  };

  // The operation's timeout goes to the Python method; Python code cannot be interrupted here.
  WorkPtr Enqueue(const char* op, PyCall call) {
    auto work = std::make_shared<Work>(op, size_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) {
        work->Complete(absl::AbortedError(absl::StrCat(op, ": backend ", name_, " is shut down")));
        return work;
      }
      tasks_.push_back({op, work, std::move(call)});
    }
    ready_.notify_one();
    return work;
  }

  void Worker() {
    ProgressScope progress;  // The backend's later calls wait on this thread.
    while (true) {
      Task task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        ready_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
        if (stopping_) {
          for (Task& pending : tasks_) {
            pending.work->Complete(absl::AbortedError(
                absl::StrCat(pending.op, ": backend ", name_, " shut down before it ran")));
          }
          tasks_.clear();
          return;
        }
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      absl::Status status =
          absl::AbortedError(absl::StrCat(task.op, ": the Python interpreter is shutting down"));
      WithGil([&] {
        try {
          py::object impl = impl_.get();
          py::object result = task.call(impl);
          if (!result.is_none() && py::hasattr(result, "wait")) result.attr("wait")();
          status = absl::OkStatus();
        } catch (py::error_already_set& error) {
          status = StatusFromPython(error, absl::StrCat(name_, " ", task.op),
                                    absl::StatusCode::kUnknown);
        } catch (const std::exception& error) {
          status = absl::InternalError(absl::StrCat(name_, " ", task.op, ": ", error.what()));
        }
        task.call = nullptr;  // Drops Python objects while the GIL is held.
      });
      task.work->Complete(status);
    }
  }

  const std::string name_;
  PyRef impl_;
  const BackendCapabilities capabilities_;
  const int size_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<Task> tasks_;
  bool stopping_ = false;
  std::thread worker_;  // Last: starts after everything it reads.
};

BackendCapabilities CapabilitiesOf(py::handle impl, const std::vector<DeviceType>& devices) {
  BackendCapabilities capabilities;
  capabilities.devices = devices;
  if (py::hasattr(impl, "dtypes")) {
    for (py::handle name : impl.attr("dtypes")) {
      capabilities.dtypes.push_back(ValueOrThrow(ParseDType(py::str(name).cast<std::string>())));
    }
  } else {
    capabilities.dtypes.assign(std::begin(kAllDTypes), std::end(kAllDTypes));
  }
  return capabilities;
}

}  // namespace

void RegisterPythonBackends(py::module_& module) {
  module.def(
      "register_backend",
      [](const std::string& name, py::object creator, const std::vector<std::string>& devices) {
        std::vector<DeviceType> device_types;
        for (const std::string& device : devices) {
          device_types.push_back(ValueOrThrow(ParseDeviceType(device)));
        }
        auto creator_ref = std::make_shared<PyRef>(creator);
        BackendRegistration registration;
        registration.name = name;
        registration.devices = device_types;
        registration.factory =
            [name, creator_ref, device_types](
                const BackendContext& context) -> absl::StatusOr<std::shared_ptr<Backend>> {
          absl::StatusOr<std::shared_ptr<Backend>> backend = absl::AbortedError(
              absl::StrCat("backend ", name, ": the Python interpreter is shutting down"));
          WithGil([&] {
            try {
              py::object impl = creator_ref->get()(context.store, context.rank, context.size,
                                                   ToTimedelta(context.timeout));
              backend = std::make_shared<PythonBackend>(
                  name, impl, CapabilitiesOf(impl, device_types), context.size);
            } catch (py::error_already_set& error) {
              backend = StatusFromPython(error, absl::StrCat("creating backend ", name),
                                         absl::StatusCode::kUnknown);
            } catch (const StatusError& error) {
              backend = error.status();
            }
          });
          return backend;
        };
        ThrowIfError(BackendRegistry::Global().Register(std::move(registration)));
      },
      py::arg("name"), py::arg("creator"), py::arg("devices"));
  module.def(
      "unregister_backend",
      [](const std::string& name) { return BackendRegistry::Global().Unregister(name); },
      py::arg("name"));
  module.def("registered_backends", [] { return BackendRegistry::Global().Names(); });
}

}  // namespace plexus::python
