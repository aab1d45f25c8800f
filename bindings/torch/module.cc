// plexus._plexus_torch: the Python face of the C++ c10d backend. It adds ProcessGroupPlexus, a
// subclass of torch's own ProcessGroup (Backend on torch 2.x) type, so every method torch binds
// on that type - each call shape and default torch.distributed and DDP use - reaches the C++
// overrides directly. plexus.torch registers it with torch.distributed.
//
// Linked against _plexus.so (one copy of plexus per process): import plexus first.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bindings/torch/process_group_plexus.h"

namespace plexus::torch_backend {
namespace {

namespace py = pybind11;

using Group = c10::intrusive_ptr<ProcessGroupPlexus>;

Group Wrap(absl::StatusOr<std::shared_ptr<plexus::ProcessGroup>> group, const Origin& origin) {
  std::shared_ptr<plexus::ProcessGroup> made = ValueOrThrow(std::move(group), origin);
  if (made == nullptr) return Group();
  return c10::make_intrusive<ProcessGroupPlexus>(std::move(made));
}

using GroupClass = py::class_<ProcessGroupPlexus, TorchGroupBase, Group>;

// Forming a group: at once over torch's store, or in torch's reconfigure regime.
void DefineCreation(GroupClass& group) {
  group
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout, const std::string& backend,
                       const std::string& name) {
             return ProcessGroupPlexus::Create(store, rank, size, timeout, backend, name);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::arg("backend"), py::arg("name") = "torch", py::call_guard<py::gil_scoped_release>(),
           "Forms the group over torch's store (every rank calls it); `backend` is a plexus "
           "backend string, `name` what dumps and timeout messages call the group.")
      .def_static(
          "reconfigurable",
          [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
             std::chrono::milliseconds timeout, const std::string& backend,
             const std::string& name) {
            return ProcessGroupPlexus::CreateReconfigurable(store, rank, size, timeout, backend,
                                                            name);
          },
          py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
          py::arg("backend"), py::arg("name") = "torch",
          "torch's reconfigure regime (enable_reconfigure=True): no members until reconfigure "
          "names them by their handles (docs/fault_tolerance.md).");
}

// What the group is, and what survives a failure: abort, shrink, split.
void DefineMembership(GroupClass& group) {
  group
      .def_property_readonly(
          "backend",
          [](const ProcessGroupPlexus& self) { return self.plexus_group()->backend_string(); },
          "The plexus backend string the group runs on.")
      .def_property_readonly(
          "plexus_group",
          [](const ProcessGroupPlexus& self) { return py::cast(self.plexus_group()); },
          "The underlying plexus.ProcessGroup.")
      .def_property_readonly(
          "lost_ranks",
          [](const ProcessGroupPlexus& self) { return self.plexus_group()->LostRanks(); },
          "Ranks of this group its backends have found gone.")
      .def(
          "abort",
          [](ProcessGroupPlexus& self, const std::string& reason) {
            absl::Status status = self.Abort(reason);
            // A backend that could not abort what it runs is reported, not raised: the group
            // refuses new operations regardless.
            return status.ok() ? std::string() : std::string(status.message());
          },
          py::arg("reason") = "abort() was called", py::call_guard<py::gil_scoped_release>(),
          "Fails every pending and later operation with the reason; returns what could not be "
          "aborted ('' when everything was). Created with enable_reconfigure=True: a revoke, "
          "which the next reconfigure with a fresh uuid undoes.")
      .def(
          "shrink",
          [](ProcessGroupPlexus& self, std::optional<std::vector<int>> excluded) {
            plexus::ProcessGroup& group = *self.plexus_group();
            return Wrap(
                excluded.has_value() ? group.Shrink(std::move(*excluded)) : group.ShrinkLost(),
                Origin{group.rank(), group.name()});
          },
          py::arg("excluded") = py::none(), py::call_guard<py::gil_scoped_release>(),
          "The group of the survivors (without `excluded`, or without the ranks found lost).")
#if PLEXUS_TORCH_SHRINK
      // torch.distributed.shrink_group's call (c10d::Backend's binding, which the one above
      // hides): the same shrink, with torch's flags and options.
      .def(
          "shrink",
          [](ProcessGroupPlexus& self, const std::vector<int64_t>& ranks_to_exclude,
             int shrink_flags, const c10::intrusive_ptr<c10d::Backend::Options>& opts_override) {
            return self.shrink(ranks_to_exclude, shrink_flags, opts_override);
          },
          py::arg("ranks_to_exclude"), py::arg("shrink_flags") = 0,
          py::arg("opts_override") = nullptr,
          "torch's shrink: the survivors' backend without `ranks_to_exclude` (SHRINK_DEFAULT 0 "
          "or SHRINK_ABORT 1).")
#endif
      .def(
          "split",
          [](ProcessGroupPlexus& self, int color, int key) {
            plexus::ProcessGroup& group = *self.plexus_group();
            return Wrap(group.Split(color, key), Origin{group.rank(), group.name()});
          },
          py::arg("color"), py::arg("key"), py::call_guard<py::gil_scoped_release>(),
          "MPI_Comm_split: this rank's group among those passing the same color (None for a "
          "negative color).");
}

}  // namespace

PYBIND11_MODULE(_plexus_torch, module) {
  module.doc() = "plexus's torch.distributed backend (C++ c10d ProcessGroup); see plexus.torch.";
  module.attr("TORCH_BACKEND_API") = PLEXUS_TORCH_BACKEND_API;
  module.attr("BUILT_FOR_TORCH") = TORCH_VERSION;

  GroupClass group(
      module, "ProcessGroupPlexus",
      "A torch.distributed process group whose collectives run on a plexus ProcessGroup.");
  DefineCreation(group);
  DefineMembership(group);

#if PLEXUS_TORCH_BACKEND_API
  py::class_<NamedProcessGroup, c10d::ProcessGroup, c10::intrusive_ptr<NamedProcessGroup>>(
      module, "NamedProcessGroup",
      "torch's ProcessGroup over a ProcessGroupPlexus for CPU and CUDA, named \"plexus\".")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store,
                       const c10::intrusive_ptr<ProcessGroupPlexus>& backend) {
             return c10::make_intrusive<NamedProcessGroup>(store, backend);
           }),
           py::arg("store"), py::arg("backend"));
#endif
}

}  // namespace plexus::torch_backend
