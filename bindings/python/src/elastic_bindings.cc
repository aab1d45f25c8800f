#include "bindings/python/src/elastic_bindings.h"

#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/core/host_twin.h"
#include "bindings/python/src/tensor_convert.h"
#include "bindings/python/src/work_bindings.h"
#include "devices/cuda/current_stream.h"
#include "frontend/elastic/communicator.h"
#include "frontend/elastic/master_node.h"

namespace plexus::python {
namespace {

namespace py = pybind11;
using elastic::Communicator;
using elastic::MasterNode;
using elastic::ReduceDescriptor;
using elastic::Result;

// (result code, message, value): what every fallible call returns to the package.
template <typename T>
py::tuple Outcome(const absl::StatusOr<T>& value) {
  if (!value.ok()) {
    return py::make_tuple(static_cast<int>(elastic::ResultOf(value.status())),
                          std::string(value.status().ToString()), py::none());
  }
  return py::make_tuple(0, std::string(), py::cast(*value));
}

py::tuple Outcome(const absl::Status& status) {
  return py::make_tuple(static_cast<int>(elastic::ResultOf(status)),
                        status.ok() ? std::string() : status.ToString(), py::none());
}

// Runs `call` (a blocking communicator call) without the GIL and returns its outcome.
template <typename Call>
py::tuple OutcomeWithoutGil(Call&& call) {
  auto result = [&] {
    py::gil_scoped_release release;
    return call();
  }();
  return Outcome(result);
}

absl::Duration Seconds(double seconds) {
  return seconds < 0 ? absl::InfiniteDuration() : absl::Seconds(seconds);
}

// A reduction as the package describes it: (count, dtype name, op, tag, quantization algorithm,
// quantized dtype name).
using Spec = std::tuple<int64_t, std::string, int, uint64_t, int, std::string>;

absl::StatusOr<ReduceDescriptor> ToDescriptor(const Spec& spec) {
  ReduceDescriptor d;
  d.count = std::get<0>(spec);
  auto dtype = ParseDType(std::get<1>(spec));
  if (!dtype.ok()) return dtype.status();
  d.dtype = *dtype;
  const int op = std::get<2>(spec);
  const ReduceOpKind ops[] = {ReduceOpKind::kSum, ReduceOpKind::kAvg, ReduceOpKind::kProduct,
                              ReduceOpKind::kMax, ReduceOpKind::kMin};
  if (op < 0 || op >= 5) return absl::InvalidArgumentError(absl::StrCat("unknown ReduceOp ", op));
  d.op = ops[op];
  d.tag = std::get<3>(spec);
  const int quantization = std::get<4>(spec);
  if (quantization < 0 || quantization > 2) {
    return absl::InvalidArgumentError(absl::StrCat("unknown QuantizationAlgorithm ", quantization));
  }
  d.quantization.algorithm = static_cast<elastic::QuantizationAlgorithm>(quantization);
  if (d.quantization.algorithm != elastic::QuantizationAlgorithm::kNone) {
    const std::string& code = std::get<5>(spec);
    if (code != "uint8" && code != "uint16") {
      return absl::InvalidArgumentError(absl::StrCat("all_reduce: quantization to ", code,
                                                     " is not supported (UINT8 or UINT16)"));
    }
    d.quantization.quantized_dtype =
        code == "uint8" ? elastic::QuantizedType::kUInt8 : elastic::QuantizedType::kUInt16;
  }
  return d;
}

// Device tensors (CUDA) go through host twins (base/core/host_twin.h): read into the twin
// before the call, on the caller's current stream (torch's), and written back after the call
// succeeded. A failed call writes nothing back, so the device tensor stays as it was.
class Staged {
 public:
  // The host pointer the communicator uses for `tensor`; `copy_in`: the twin starts with the
  // tensor's bytes; `write_back`: CopyBack() writes the twin into the tensor. Needs the GIL.
  absl::StatusOr<void*> HostPointer(const Tensor& tensor, bool copy_in, bool write_back,
                                    const std::string& what) {
    if (tensor.device().type == DeviceType::kCpu) return tensor.data();
    const int device = tensor.device().index;
    cuda::StreamGuard stream(device, TorchCurrentStream(device));
    auto twin = MakeHostTwin(tensor, copy_in, what);
    if (!twin.ok()) return twin.status();
    void* host = (*twin)->data();
    if (write_back) write_back_.push_back(twin->get());
    twins_.push_back(std::move(twin).value());
    return host;
  }
  absl::Status CopyBack() {
    for (HostTwin* twin : write_back_) {
      if (absl::Status copied = twin->CopyBack(); !copied.ok()) return copied;
    }
    return absl::OkStatus();
  }

 private:
  std::vector<std::unique_ptr<HostTwin>> twins_;
  std::vector<HostTwin*> write_back_;
};

// Host pointers for send and recv, checked against the descriptor.
absl::Status Bind(py::handle send, py::handle recv, const ReduceDescriptor& d, void*& send_data,
                  void*& recv_data, Keepalive& keepalive, Staged& staged) {
  auto s = ToTensor(send, "all_reduce", "send", Access::kRead, keepalive);
  if (!s.ok()) return s.status();
  auto r = ToTensor(recv, "all_reduce", "recv", Access::kWrite, keepalive);
  if (!r.ok()) return r.status();
  if (s->dtype() != r->dtype() || s->numel() != r->numel()) {
    return absl::InvalidArgumentError(
        absl::StrCat("all_reduce: send is ", s->numel(), " ", DTypeName(s->dtype()), ", recv ",
                     r->numel(), " ", DTypeName(r->dtype()), "; they must match"));
  }
  if (s->dtype() != d.dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat("all_reduce: the tensors are ", DTypeName(s->dtype()),
                     " but the operand descriptor says ", DTypeName(d.dtype)));
  }
  if (d.count != r->numel()) {
    return absl::InvalidArgumentError(absl::StrCat("all_reduce: count ", d.count,
                                                   " but the "
                                                   "tensors hold ",
                                                   r->numel(), " elements"));
  }
  const std::string what = absl::StrCat("all_reduce with tag ", d.tag);
  const bool in_place = s->data() == r->data() && s->device() == r->device();
  auto recv_host = staged.HostPointer(*r, /*copy_in=*/in_place, /*write_back=*/true, what);
  if (!recv_host.ok()) return recv_host.status();
  recv_data = *recv_host;
  if (in_place) {
    send_data = recv_data;
    return absl::OkStatus();
  }
  auto send_host = staged.HostPointer(*s, /*copy_in=*/true, /*write_back=*/false, what);
  if (!send_host.ok()) return send_host.status();
  send_data = *send_host;
  return absl::OkStatus();
}

class Handle {
 public:
  Handle(WorkPtr work, Keepalive keepalive, std::unique_ptr<Staged> staged)
      : work_(std::move(work)), keepalive_(std::move(keepalive)), staged_(std::move(staged)) {}
  // (is_success, result code, (local_world_size, tx, rx), message); waits without the GIL.
  py::tuple Wait() {
    absl::Status status;
    {
      py::gil_scoped_release release;
      status = work_->Wait(absl::InfiniteDuration());
      if (status.ok() && staged_) status = staged_->CopyBack();
    }
    staged_.reset();
    keepalive_.clear();
    const Work::Stats stats = work_->stats();
    return py::make_tuple(status.ok(), static_cast<int>(elastic::ResultOf(status)),
                          py::make_tuple(stats.world_size, stats.bytes_sent, stats.bytes_received),
                          status.ok() ? std::string() : status.ToString());
  }
  bool done() const { return work_->IsCompleted(); }

 private:
  WorkPtr work_;
  Keepalive keepalive_;
  std::unique_ptr<Staged> staged_;  // Kept until the wait: the operation reads its twins.
};

// A shared-state tensor as the package describes it: (name, tensor or None, data pointer, numel,
// dtype name, allow_content_inequality); the tensor, when given, is the authority.
using SharedTensorSpec = std::tuple<std::string, py::object, uintptr_t, int64_t, std::string, bool>;

absl::StatusOr<elastic::TensorInfo> ToTensorInfo(const SharedTensorSpec& spec, Keepalive& keepalive,
                                                 Staged& staged) {
  elastic::TensorInfo info;
  info.name = std::get<0>(spec);
  info.allow_content_inequality = std::get<5>(spec);
  const py::object& tensor = std::get<1>(spec);
  if (!tensor.is_none()) {
    auto view = ToTensor(tensor, "sync_shared_state", info.name.c_str(), Access::kWrite, keepalive);
    if (!view.ok()) return view.status();
    auto host = staged.HostPointer(*view, /*copy_in=*/true, /*write_back=*/true,
                                   absl::StrCat("sync_shared_state: tensor '", info.name, "'"));
    if (!host.ok()) return host.status();
    info.data = *host;
    info.count = view->numel();
    info.dtype = view->dtype();
    return info;
  }
  auto dtype = ParseDType(std::get<4>(spec));
  if (!dtype.ok()) return dtype.status();
  info.data = reinterpret_cast<void*>(std::get<2>(spec));
  info.count = std::get<3>(spec);
  info.dtype = *dtype;
  return info;
}

// The master: create, run, interrupt, await_termination, port.
void DefineMaster(py::module_& module) {
  py::class_<MasterNode>(module, "_ElasticMaster")
      .def_static("create",
                  [](const std::string& address, double heartbeat_s,
                     std::optional<std::string> secret) -> py::tuple {
                    elastic::MasterNodeOptions options;
                    options.listen_address = address;
                    options.heartbeat_timeout = absl::Seconds(heartbeat_s);
                    options.secret = std::move(secret);
                    auto made = MasterNode::Create(options);
                    if (!made.ok()) return Outcome(made.status());
                    return py::make_tuple(0, std::string(), py::cast(std::move(made).value()));
                  })
      .def("run", [](MasterNode& m) { return Outcome(m.Run()); })
      .def("interrupt", &MasterNode::Interrupt)
      .def("await_termination",
           [](MasterNode& m, double timeout_s) {
             return OutcomeWithoutGil([&] { return m.AwaitTermination(Seconds(timeout_s)); });
           })
      .def_property_readonly("port", &MasterNode::port);
}

// A communicator's membership: create, connect, the topology, its attributes.
void DefineCommunicatorMembership(py::class_<Communicator>& communicator) {
  communicator
      .def_static("create",
                  [](const std::string& address, int64_t group, double operation_timeout_s,
                     double accept_timeout_s, int64_t probe_bytes,
                     std::optional<std::string> secret) -> py::tuple {
                    elastic::CommunicatorOptions options;
                    options.secret = std::move(secret);
                    options.master_address = address;
                    options.peer_group = group;
                    options.bandwidth_probe_bytes = probe_bytes;
                    // Negative: unset (PLEXUS_ELASTIC_TIMEOUT or the default decides).
                    if (operation_timeout_s >= 0)
                      options.operation_timeout = absl::Seconds(operation_timeout_s);
                    if (accept_timeout_s >= 0)
                      options.accept_timeout = absl::Seconds(accept_timeout_s);
                    auto made = Communicator::Create(options);
                    if (!made.ok()) return Outcome(made.status());
                    return py::make_tuple(0, std::string(), py::cast(std::move(made).value()));
                  })
      .def("connect",
           [](Communicator& c, double timeout_s) {
             return OutcomeWithoutGil([&] { return c.Connect(Seconds(timeout_s)); });
           })
      .def("update_topology",
           [](Communicator& c) { return OutcomeWithoutGil([&] { return c.UpdateTopology(); }); })
      .def("optimize_topology",
           [](Communicator& c) { return OutcomeWithoutGil([&] { return c.OptimizeTopology(); }); })
      .def("ring", &Communicator::Ring)
      .def("peer_id", &Communicator::peer_id)
      .def("shared_memory_peers", &Communicator::SharedMemoryPeers,
           py::call_guard<py::gil_scoped_release>())
      .def("are_peers_pending",
           [](Communicator& c) { return OutcomeWithoutGil([&] { return c.ArePeersPending(); }); })
      .def("get_attribute", [](Communicator& c, int attribute, bool announced) {
        if (attribute < 0 || attribute > 3) {
          return Outcome(absl::StatusOr<int64_t>(absl::InvalidArgumentError("unknown attribute")));
        }
        const auto which = static_cast<elastic::Attribute>(attribute);
        return Outcome(announced ? c.AnnouncedAttribute(which) : c.GetAttribute(which));
      });
}

// The communicator's operations, as the Python layer calls them: (code, message, result).
py::tuple AllReduceAsync(Communicator& c, py::handle send, py::handle recv, const Spec& spec) {
  auto d = ToDescriptor(spec);
  if (!d.ok()) return Outcome(d.status());
  Keepalive keepalive;
  auto staged = std::make_unique<Staged>();
  void* s = nullptr;
  void* r = nullptr;
  if (absl::Status bound = Bind(send, recv, *d, s, r, keepalive, *staged); !bound.ok()) {
    return Outcome(bound);
  }
  WorkPtr work = c.AllReduceAsync(s, r, *d);
  return py::make_tuple(
      0, std::string(),
      py::cast(std::make_unique<Handle>(std::move(work), std::move(keepalive), std::move(staged))));
}

py::tuple SyncSharedState(Communicator& c, const std::vector<SharedTensorSpec>& tensors,
                          uint64_t revision, int strategy) {
  if (strategy < 0 || strategy > 2) {
    return Outcome(
        absl::InvalidArgumentError(absl::StrCat("unknown SharedStateSyncStrategy ", strategy)));
  }
  Keepalive keepalive;
  Staged staged;
  elastic::SharedState state;
  state.revision = revision;
  for (const SharedTensorSpec& spec : tensors) {
    auto info = ToTensorInfo(spec, keepalive, staged);
    if (!info.ok()) return Outcome(info.status());
    state.tensors.push_back(std::move(info).value());
  }
  absl::StatusOr<elastic::SyncInfo> info;
  {
    py::gil_scoped_release release;
    info = c.SyncSharedState(state, static_cast<elastic::SyncStrategy>(strategy));
    if (info.ok()) {
      if (absl::Status copied = staged.CopyBack(); !copied.ok()) info = copied;
    }
  }
  if (!info.ok()) return Outcome(info.status());
  return py::make_tuple(0, std::string(),
                        py::make_tuple(state.revision, info->tx_bytes, info->rx_bytes));
}

py::tuple AllReduceMultipleWithRetry(Communicator& c, const py::list& ops, int max_in_flight) {
  Keepalive keepalive;
  Staged staged;
  std::vector<elastic::ReduceOpDescriptor> descriptors;
  for (py::handle item : ops) {
    auto entry = item.cast<std::tuple<py::object, py::object, Spec>>();
    auto d = ToDescriptor(std::get<2>(entry));
    if (!d.ok()) return Outcome(d.status());
    void* s = nullptr;
    void* r = nullptr;
    absl::Status bound = Bind(std::get<0>(entry), std::get<1>(entry), *d, s, r, keepalive, staged);
    if (!bound.ok()) return Outcome(bound);
    descriptors.push_back({s, r, *d});
  }
  absl::StatusOr<elastic::ReduceInfo> info;
  {
    py::gil_scoped_release release;
    info = c.AllReduceMultipleWithRetry(descriptors, max_in_flight);
    if (info.ok()) {
      if (absl::Status copied = staged.CopyBack(); !copied.ok()) info = copied;
    }
  }
  if (!info.ok()) return Outcome(info.status());
  return py::make_tuple(0, std::string(),
                        py::make_tuple(info->local_world_size, info->tx_bytes, info->rx_bytes));
}

void DefineCommunicatorOperations(py::class_<Communicator>& communicator) {
  communicator.def("all_reduce_async", &AllReduceAsync)
      .def("sync_shared_state", &SyncSharedState)
      .def("all_reduce_multiple_with_retry", &AllReduceMultipleWithRetry);
}

}  // namespace

void RegisterElastic(py::module_& module) {
  DefineMaster(module);
  py::class_<Handle>(module, "_ElasticHandle")
      .def("wait", &Handle::Wait)
      .def("done", &Handle::done);
  py::class_<Communicator> communicator(module, "_ElasticCommunicator");
  DefineCommunicatorMembership(communicator);
  DefineCommunicatorOperations(communicator);
}

}  // namespace plexus::python
