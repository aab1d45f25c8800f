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
#include "base/core/mutex.h"
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
      MutexLock lock(mu_);
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

  // The Python object's method named after the kind, with its arguments in the order of
  // torch.distributed's: outputs, inputs (unless in place), splits, root, op, peer and tag.
  WorkPtr Run(const Collective& call) override {
    if (call.kind == CollectiveKind::kRecvAnySource) {
      return Work::Finished(absl::UnimplementedError(absl::StrCat(
                                name_, ": Python-defined backends cannot receive from any source")),
                            "recv", size_);
    }
    const CollectiveTraits& traits = call.traits();
    const bool in_place = traits.in_place();
    return Enqueue(
        traits.name.data(),
        [=, outputs = Owned(call.outputs),
         inputs = in_place ? std::vector<Tensor>() : Owned(call.inputs),
         output_splits = std::vector<int64_t>(call.output_splits.begin(), call.output_splits.end()),
         input_splits = std::vector<int64_t>(call.input_splits.begin(), call.input_splits.end())](
            py::object& impl) {
          py::list args;
          AddTensors(args, outputs, traits.output_list());
          AddTensors(args, inputs, traits.input_list());
          if (call.kind == CollectiveKind::kAllToAllSingle) {
            args.append(py::cast(output_splits));
            args.append(py::cast(input_splits));
          }
          if (traits.rooted()) args.append(call.root);
          if (traits.reduces()) args.append(py::cast(call.op));
          if (traits.point_to_point()) {
            args.append(call.peer);
            args.append(call.tag);
          }
          return impl.attr(traits.name.data())(*py::tuple(args),
                                               py::arg("timeout") = ToTimedelta(call.timeout));
        });
  }

 private:
  static std::vector<Tensor> Owned(absl::Span<const Tensor> tensors) {
    return std::vector<Tensor>(tensors.begin(), tensors.end());
  }
  // A list argument as a list of views; a single one as a view, or nothing when absent (a
  // send has no output, a receive no input).
  static void AddTensors(py::list& args, const std::vector<Tensor>& tensors, bool list) {
    if (list) {
      args.append(NumpyViews(tensors));
    } else if (!tensors.empty()) {
      args.append(NumpyView(tensors[0]));
    }
  }

  struct Task {
    std::string op;
    WorkPtr work;
    PyCall call;
  };

  // The operation's timeout goes to the Python method; Python code cannot be interrupted here.
  WorkPtr Enqueue(const char* op, PyCall call) {
    auto work = std::make_shared<Work>(op, size_);
    {
      MutexLock lock(mu_);
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
        UniqueLock lock(mu_);
        ready_.wait(lock, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || !tasks_.empty();
        });
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
  Mutex mu_;
  std::condition_variable ready_;
  std::deque<Task> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
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
