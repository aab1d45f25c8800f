#include "bindings/python/src/process_group_bindings.h"

#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/rendezvous/rendezvous.h"
#include "bindings/python/src/durations.h"
#include "bindings/python/src/errors.h"
#include "bindings/python/src/py_ref.h"
#include "bindings/python/src/store_bindings.h"
#include "bindings/python/src/tensor_convert.h"
#include "bindings/python/src/work_bindings.h"
#include "devices/cuda/current_stream.h"
#include "frontend/dispatch/flight_recorder.h"
#include "frontend/dispatch/init.h"
#include "frontend/dispatch/process_group.h"
#include "frontend/dispatch/reconfigure.h"

namespace plexus::python {
namespace {

using Group = std::shared_ptr<ProcessGroup>;

// The handle Python holds. A group's destructor joins its backends' threads, and one of them may
// be waiting for the GIL to run a completion callback: the last reference is therefore dropped
// with the GIL released.
Group ForPython(Group group) {
  if (group == nullptr) return group;
  auto* owner = new Group(std::move(group));
  return Group(owner->get(), [owner](ProcessGroup*) {
    if (InterpreterAlive() && PyGILState_Check()) {
      py::gil_scoped_release release;
      delete owner;
    } else {
      delete owner;
    }
  });
}

// A group made with the GIL released (forming waits on the other ranks), handed to Python.
template <typename Make>
Group MadeWithoutGil(Make&& make) {
  absl::StatusOr<Group> group;
  {
    py::gil_scoped_release release;
    group = make();
  }
  return ForPython(ValueOrThrow(std::move(group)));
}

// Collects the tensors of one call and what keeps them alive, then issues it.
class Call {
 public:
  explicit Call(const char* op) : op_(op) {}

  Tensor One(py::handle object, const char* name, Access access) {
    Tensor tensor = ValueOrThrow(ToTensor(object, op_, name, access, keepalive_));
    Note(tensor);
    return tensor;
  }
  std::vector<Tensor> Many(py::handle objects, const char* name, Access access) {
    std::vector<Tensor> tensors = ValueOrThrow(ToTensors(objects, op_, name, access, keepalive_));
    for (const Tensor& tensor : tensors) Note(tensor);
    return tensors;
  }

  // Runs `issue` without the GIL and wraps its Work; `result` is what the Work yields. A call
  // on CUDA tensors is ordered after torch's current stream for their device.
  template <typename Issue>
  std::unique_ptr<PyWork> Run(Issue&& issue, py::object result) {
    absl::StatusOr<WorkPtr> work;
    cuda::Stream stream = cuda_device_ >= 0 ? TorchCurrentStream(cuda_device_) : nullptr;
    {
      py::gil_scoped_release release;
      std::optional<cuda::StreamGuard> current;
      if (cuda_device_ >= 0) current.emplace(cuda_device_, stream);
      work = issue();
    }
    return std::make_unique<PyWork>(ValueOrThrow(std::move(work)), std::move(keepalive_),
                                    std::move(result), cuda_device_);
  }

 private:
  void Note(const Tensor& tensor) {
    if (tensor.device().type == DeviceType::kCuda && cuda_device_ < 0) {
      cuda_device_ = tensor.device().index;
    }
  }

  const char* op_;
  Keepalive keepalive_;
  int cuda_device_ = -1;  // The CUDA device of the call's tensors, if any.
};

py::list ListOf(py::handle object) {
  py::list list;
  list.append(object);
  return list;
}

absl::Duration Timeout(py::handle timeout) {
  return ToDuration(timeout, kDefaultTimeout, "timeout");
}

std::vector<int64_t> Splits(py::handle splits) {
  if (splits.is_none()) return {};
  return splits.cast<std::vector<int64_t>>();
}

void RegisterReduceOp(py::module_& module) {
  py::class_<ReduceOp> op(module, "ReduceOp",
                          "A reduction: ReduceOp.SUM, PRODUCT, MIN, MAX, AVG, BAND, BOR, BXOR, "
                          "or ReduceOp.premul_sum(scale).");
  for (ReduceOpKind kind : kAllReduceOpKinds) {
    if (kind == ReduceOpKind::kPremulSum) continue;
    op.attr(std::string(ReduceOpName(kind)).c_str()) = ReduceOp(kind);
  }
  op.def_static("premul_sum", &ReduceOp::PremulSum, py::arg("scale"),
                "SUM of each rank's input multiplied by `scale` first (floating point only).")
      .def_static(
          "from_name",
          [](const std::string& name) { return ReduceOp(ValueOrThrow(ParseReduceOp(name))); },
          py::arg("name"), "Parses 'sum', 'MAX', 'band', ... (any case).")
      .def_property_readonly("name", [](const ReduceOp& value) { return ReduceOpName(value.kind); })
      .def_readonly("scale", &ReduceOp::scale)
      .def("__eq__", [](const ReduceOp& a, const ReduceOp& b) { return a == b; })
      .def("__hash__",
           [](const ReduceOp& value) {
             return py::hash(py::make_tuple(static_cast<int>(value.kind), value.scale));
           })
      .def("__repr__", [](const ReduceOp& value) { return "ReduceOp." + ReduceOpName(value); });
}

// The group's identity, state and lifecycle: new_group, abort, shrink, split, shutdown.
void DefineGroupState(py::class_<ProcessGroup, Group>& group) {
  group.def_property_readonly("name", &ProcessGroup::name)
      .def("rank", &ProcessGroup::rank)
      .def("size", &ProcessGroup::size)
      .def_property_readonly("global_ranks", &ProcessGroup::global_ranks)
      .def_property_readonly("backend", &ProcessGroup::backend_string)
      .def_property_readonly("timeout",
                             [](const ProcessGroup& self) { return ToTimedelta(self.timeout()); })
      .def_property_readonly("store", &ProcessGroup::store)
      .def(
          "new_group",
          [](ProcessGroup& self, std::vector<int> ranks, const std::string& backend) {
            return MadeWithoutGil([&] { return self.NewGroup(std::move(ranks), backend); });
          },
          py::arg("ranks"), py::arg("backend") = "")
      .def(
          "abort",
          [](ProcessGroup& self, const std::string& reason) {
            absl::Status status;
            {
              py::gil_scoped_release release;
              status = self.Abort(reason);
            }
            // A backend that could not abort what it runs is reported, not raised: the group
            // refuses new operations regardless.
            return status.ok() ? std::string() : std::string(status.message());
          },
          py::arg("reason"))
      .def_property_readonly("lost_ranks", &ProcessGroup::LostRanks)
      .def(
          "shrink",
          [](ProcessGroup& self, std::optional<std::vector<int>> excluded) {
            return MadeWithoutGil([&] {
              return excluded.has_value() ? self.Shrink(std::move(*excluded)) : self.ShrinkLost();
            });
          },
          py::arg("excluded") = py::none())
      .def(
          "split",
          [](ProcessGroup& self, int color, int key) {
            return MadeWithoutGil([&] { return self.Split(color, key); });
          },
          py::arg("color"), py::arg("key"))
      .def(
          "shutdown",
          [](ProcessGroup& self, py::handle timeout) {
            absl::Duration limit = ToDuration(timeout, self.timeout(), "shutdown timeout");
            py::gil_scoped_release release;
            ThrowIfError(self.Shutdown(limit));
          },
          py::arg("timeout") = py::none());
}

// broadcast, reduce and the all_reduces: in place.
void DefineInPlaceCollectives(py::class_<ProcessGroup, Group>& group) {
  group.def(
      "broadcast",
      [](ProcessGroup& self, py::object tensor, int root, py::handle timeout) {
        Call call("broadcast");
        Tensor t = call.One(tensor, "tensor", Access::kWrite);
        BroadcastOptions options{root, Timeout(timeout)};
        return call.Run([&] { return self.Broadcast(t, options); }, ListOf(tensor));
      },
      py::arg("tensor"), py::arg("root"), py::arg("timeout") = py::none());
  group.def(
      "reduce",
      [](ProcessGroup& self, py::object tensor, int root, const ReduceOp& op, py::handle timeout) {
        Call call("reduce");
        Tensor t = call.One(tensor, "tensor", Access::kWrite);
        ReduceOptions options{op, root, Timeout(timeout)};
        return call.Run([&] { return self.Reduce(t, options); }, ListOf(tensor));
      },
      py::arg("tensor"), py::arg("root"), py::arg("op"), py::arg("timeout") = py::none());
  group.def(
      "all_reduce",
      [](ProcessGroup& self, py::object tensor, const ReduceOp& op, py::handle timeout) {
        Call call("all_reduce");
        Tensor t = call.One(tensor, "tensor", Access::kWrite);
        AllReduceOptions options{op, Timeout(timeout)};
        return call.Run([&] { return self.AllReduce(t, options); }, ListOf(tensor));
      },
      py::arg("tensor"), py::arg("op"), py::arg("timeout") = py::none());
  group.def(
      "all_reduce_coalesced",
      [](ProcessGroup& self, py::object tensors, const ReduceOp& op, py::handle timeout) {
        Call call("all_reduce_coalesced");
        std::vector<Tensor> ts = call.Many(tensors, "tensors", Access::kWrite);
        AllReduceCoalescedOptions options{op, Timeout(timeout)};
        return call.Run([&] { return self.AllReduceCoalesced(ts, options); }, py::list(tensors));
      },
      py::arg("tensors"), py::arg("op"), py::arg("timeout") = py::none());
}

// all_gather (both forms), gather, scatter.
void DefineGathersAndScatters(py::class_<ProcessGroup, Group>& group) {
  group.def(
      "all_gather",
      [](ProcessGroup& self, py::object outputs, py::object input, py::handle timeout) {
        Call call("all_gather");
        std::vector<Tensor> outs = call.Many(outputs, "output_tensor_list", Access::kWrite);
        Tensor in = call.One(input, "input_tensor", Access::kRead);
        AllGatherOptions options{Timeout(timeout)};
        return call.Run([&] { return self.AllGather(outs, in, options); }, py::list(outputs));
      },
      py::arg("outputs"), py::arg("input"), py::arg("timeout") = py::none());
  group.def(
      "all_gather_into_tensor",
      [](ProcessGroup& self, py::object output, py::object input, py::handle timeout) {
        Call call("all_gather_into_tensor");
        Tensor out = call.One(output, "output_tensor", Access::kWrite);
        Tensor in = call.One(input, "input_tensor", Access::kRead);
        AllGatherOptions options{Timeout(timeout)};
        return call.Run([&] { return self.AllGatherIntoTensor(out, in, options); }, ListOf(output));
      },
      py::arg("output"), py::arg("input"), py::arg("timeout") = py::none());
  group.def(
      "gather",
      [](ProcessGroup& self, py::object outputs, py::object input, int root, py::handle timeout) {
        Call call("gather");
        std::vector<Tensor> outs;
        if (!outputs.is_none()) outs = call.Many(outputs, "gather_list", Access::kWrite);
        Tensor in = call.One(input, "tensor", Access::kRead);
        GatherOptions options{root, Timeout(timeout)};
        return call.Run([&] { return self.Gather(outs, in, options); },
                        outputs.is_none() ? py::list() : py::list(outputs));
      },
      py::arg("outputs"), py::arg("input"), py::arg("root"), py::arg("timeout") = py::none());
  group.def(
      "scatter",
      [](ProcessGroup& self, py::object output, py::object inputs, int root, py::handle timeout) {
        Call call("scatter");
        Tensor out = call.One(output, "tensor", Access::kWrite);
        std::vector<Tensor> ins;
        if (!inputs.is_none()) ins = call.Many(inputs, "scatter_list", Access::kRead);
        ScatterOptions options{root, Timeout(timeout)};
        return call.Run([&] { return self.Scatter(out, ins, options); }, ListOf(output));
      },
      py::arg("output"), py::arg("inputs"), py::arg("root"), py::arg("timeout") = py::none());
}

// reduce_scatter (both forms), all_to_all (both forms).
void DefineScatterReductionsAndAllToAll(py::class_<ProcessGroup, Group>& group) {
  group.def(
      "reduce_scatter",
      [](ProcessGroup& self, py::object output, py::object inputs, const ReduceOp& op,
         py::handle timeout) {
        Call call("reduce_scatter");
        Tensor out = call.One(output, "output", Access::kWrite);
        std::vector<Tensor> ins = call.Many(inputs, "input_list", Access::kRead);
        ReduceScatterOptions options{op, Timeout(timeout)};
        return call.Run([&] { return self.ReduceScatter(out, ins, options); }, ListOf(output));
      },
      py::arg("output"), py::arg("inputs"), py::arg("op"), py::arg("timeout") = py::none());
  group.def(
      "reduce_scatter_tensor",
      [](ProcessGroup& self, py::object output, py::object input, const ReduceOp& op,
         py::handle timeout) {
        Call call("reduce_scatter_tensor");
        Tensor out = call.One(output, "output", Access::kWrite);
        Tensor in = call.One(input, "input", Access::kRead);
        ReduceScatterOptions options{op, Timeout(timeout)};
        return call.Run([&] { return self.ReduceScatterTensor(out, in, options); }, ListOf(output));
      },
      py::arg("output"), py::arg("input"), py::arg("op"), py::arg("timeout") = py::none());
  group.def(
      "all_to_all",
      [](ProcessGroup& self, py::object outputs, py::object inputs, py::handle timeout) {
        Call call("all_to_all");
        std::vector<Tensor> outs = call.Many(outputs, "output_tensor_list", Access::kWrite);
        std::vector<Tensor> ins = call.Many(inputs, "input_tensor_list", Access::kRead);
        AllToAllOptions options{Timeout(timeout)};
        return call.Run([&] { return self.AllToAll(outs, ins, options); }, py::list(outputs));
      },
      py::arg("outputs"), py::arg("inputs"), py::arg("timeout") = py::none());
  group.def(
      "all_to_all_single",
      [](ProcessGroup& self, py::object output, py::object input, py::handle output_split_sizes,
         py::handle input_split_sizes, py::handle timeout) {
        Call call("all_to_all_single");
        Tensor out = call.One(output, "output", Access::kWrite);
        Tensor in = call.One(input, "input", Access::kRead);
        std::vector<int64_t> out_splits = Splits(output_split_sizes);
        std::vector<int64_t> in_splits = Splits(input_split_sizes);
        AllToAllOptions options{Timeout(timeout)};
        return call.Run(
            [&] { return self.AllToAllSingle(out, in, out_splits, in_splits, options); },
            ListOf(output));
      },
      py::arg("output"), py::arg("input"), py::arg("output_split_sizes") = py::none(),
      py::arg("input_split_sizes") = py::none(), py::arg("timeout") = py::none());
}

// barrier, send, recv, batch_p2p.
void DefineBarrierAndPointToPoint(py::class_<ProcessGroup, Group>& group) {
  group.def(
      "barrier",
      [](ProcessGroup& self, py::handle timeout) {
        Call call("barrier");
        BarrierOptions options{Timeout(timeout)};
        return call.Run([&] { return self.Barrier(options); }, py::list());
      },
      py::arg("timeout") = py::none());
  group.def(
      "send",
      [](ProcessGroup& self, py::object tensor, int dst, int tag, py::handle timeout) {
        Call call("send");
        Tensor t = call.One(tensor, "tensor", Access::kRead);
        SendOptions options{tag, Timeout(timeout)};
        return call.Run([&] { return self.Send(t, dst, options); }, ListOf(tensor));
      },
      py::arg("tensor"), py::arg("dst"), py::arg("tag") = 0, py::arg("timeout") = py::none());
  group.def(
      "recv",
      [](ProcessGroup& self, py::object tensor, int src, int tag, py::handle timeout) {
        Call call("recv");
        Tensor t = call.One(tensor, "tensor", Access::kWrite);
        RecvOptions options{tag, Timeout(timeout)};
        if (src < 0) {
          return call.Run([&] { return self.RecvAnySource(t, options); }, ListOf(tensor));
        }
        return call.Run([&] { return self.Recv(t, src, options); }, ListOf(tensor));
      },
      py::arg("tensor"), py::arg("src"), py::arg("tag") = 0, py::arg("timeout") = py::none(),
      "Receives from group rank `src`, or from any rank when src < 0.");
  group.def(
      "batch_p2p",
      [](ProcessGroup& self, py::list ops, py::handle timeout) {
        Call call("batch_isend_irecv");
        std::vector<PointToPointOp> batch;
        py::list tensors;
        for (py::handle item : ops) {
          auto entry = item.cast<py::tuple>();  // (is_send, tensor, group peer, tag)
          PointToPointOp op;
          const bool send = entry[0].cast<bool>();
          op.kind = send ? PointToPointOp::Kind::kSend : PointToPointOp::Kind::kRecv;
          op.tensor = call.One(entry[1], "tensor", send ? Access::kRead : Access::kWrite);
          op.peer = entry[2].cast<int>();
          op.tag = entry[3].cast<int>();
          batch.push_back(op);
          tensors.append(entry[1]);
        }
        BatchOptions options{Timeout(timeout)};
        return call.Run([&] { return self.BatchPointToPoint(batch, options); }, tensors);
      },
      py::arg("ops"), py::arg("timeout") = py::none(),
      "Starts (is_send, tensor, group peer, tag) operations together; one Work for all.");
}

// init_process_group and the flight recorder's dumps.
void DefineModuleFunctions(py::module_& module) {
  module.def(
      "init_process_group",
      [](const std::string& backend, const std::string& init_method, int rank, int world_size,
         py::handle timeout, py::handle store, const std::string& group_name,
         std::optional<std::string> secret, std::optional<std::string> device_id) {
        InitOptions options;
        if (device_id.has_value()) options.device_id = ValueOrThrow(ParseDevice(*device_id));
        options.backend = backend;
        options.init_method = init_method;
        options.rank = rank;
        options.world_size = world_size;
        options.timeout = ToDuration(timeout, kDefaultGroupTimeout, "init_process_group timeout");
        if (!store.is_none()) options.store = StoreFromPython(store);
        options.group_name = group_name;
        options.secret = std::move(secret);
        return MadeWithoutGil([&] { return InitProcessGroup(std::move(options)); });
      },
      py::arg("backend"), py::arg("init_method"), py::arg("rank"), py::arg("world_size"),
      py::arg("timeout"), py::arg("store"), py::arg("group_name") = "world",
      py::arg("secret") = py::none(), py::arg("device_id") = py::none());

  module.def(
      "debug_dump",
      [](const std::string& path) {
        absl::StatusOr<std::string> written;
        {
          py::gil_scoped_release release;
          written = DumpFlightRecorders(path, "debug_dump");
        }
        return ValueOrThrow(std::move(written));
      },
      py::arg("path") = "",
      "Writes the flight recorder of every process group of this process as JSON (to `path`, "
      "or PLEXUS_FLIGHT_RECORDER_DIR/plexus_flight_rank<R>_pid<P>.json) and returns the path.");
  module.def(
      "_flight_recorder_json",
      [](const std::string& reason) { return FlightRecordersJson(reason); },
      py::arg("reason") = "requested");
}

// torch 2.14's reconfigure regime for plexus's own API (plexus/_reconfigure.py): this process's
// handle, and groups formed from the handles a coordinator chose.
void DefineReconfigurer(py::module_& module) {
  py::class_<Reconfigurer, std::shared_ptr<Reconfigurer>>(
      module, "Reconfigurer", "Forms groups from the handles of the processes to be in them.")
      .def_property_readonly("handle", &Reconfigurer::handle)
      .def(
          "reconfigure",
          [](Reconfigurer& self, int64_t uuid, std::vector<std::string> handles, bool ordered,
             py::handle timeout) {
            Reconfigurer::Request request{uuid, std::move(handles)};
            request.ordered = ordered;
            if (!timeout.is_none()) {
              request.timeout = ToDuration(timeout, kDefaultGroupTimeout, "reconfigure timeout");
            }
            return MadeWithoutGil([&] { return self.Reconfigure(std::move(request)); });
          },
          py::arg("uuid"), py::arg("handles"), py::arg("ordered"), py::arg("timeout"));
  module.def(
      "make_reconfigurer",
      [](const std::string& backend, const std::string& init_method, int rank, int world_size,
         py::handle timeout, py::handle store, std::optional<std::string> secret) {
        Reconfigurer::Options options;
        options.backend = backend;
        options.timeout = ToDuration(timeout, kDefaultGroupTimeout, "init_process_group timeout");
        options.secret = secret;
        if (!store.is_none()) {
          options.store = StoreFromPython(store);
        } else {
          absl::StatusOr<RendezvousResult> met;
          {
            py::gil_scoped_release release;
            met = Rendezvous(init_method, rank, world_size, options.timeout, GetEnv, secret);
          }
          options.store = ValueOrThrow(std::move(met)).store;
        }
        return std::make_shared<Reconfigurer>(std::move(options));
      },
      py::arg("backend"), py::arg("init_method"), py::arg("rank"), py::arg("world_size"),
      py::arg("timeout"), py::arg("store"), py::arg("secret") = py::none());
  module.def(
      "completed_work",
      [](const std::string& op) {
        return std::make_unique<PyWork>(Work::Finished(absl::OkStatus(), op), Keepalive{},
                                        py::none());
      },
      py::arg("op"), "A Work that has already succeeded (what a synchronous call returns).");
}

}  // namespace

void RegisterProcessGroup(py::module_& module) {
  RegisterReduceOp(module);

  py::class_<ProcessGroup, Group> group(module, "ProcessGroup",
                                        "A group of ranks and the backends serving it.");
  DefineGroupState(group);
  DefineInPlaceCollectives(group);
  DefineGathersAndScatters(group);
  DefineScatterReductionsAndAllToAll(group);
  DefineBarrierAndPointToPoint(group);
  DefineModuleFunctions(module);
  DefineReconfigurer(module);
}

}  // namespace plexus::python
