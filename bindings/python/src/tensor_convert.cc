#include "bindings/python/src/tensor_convert.h"

#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/core/status_macros.h"

namespace plexus::python {
namespace {

// The DLPack ABI (dlpack.h, v0.x, which torch 1.13 and numpy >= 1.22 produce).
struct DLDevice {
  int32_t device_type;  // 1 = CPU, 2 = CUDA, 3 = CUDA host memory.
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // 0 int, 1 uint, 2 float, 4 bfloat, 5 complex, 6 bool.
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // In elements; null means row-major.
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

absl::Status Invalid(absl::string_view op, absl::string_view name, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", name, " ", what));
}

std::string TypeName(py::handle object) { return Py_TYPE(object.ptr())->tp_name; }

// --- torch ---------------------------------------------------------------------------------

PyObject* TorchTensorType() {
  static PyObject* type = nullptr;  // torch is never unloaded once imported.
  if (type != nullptr) return type;
  PyObject* torch = PyDict_GetItemString(PySys_GetObject("modules"), "torch");
  if (torch == nullptr) return nullptr;
  PyObject* tensor_type = PyObject_GetAttrString(torch, "Tensor");
  if (tensor_type == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  type = tensor_type;
  return type;
}

absl::StatusOr<Tensor> FromTorch(py::handle object, absl::string_view op, absl::string_view name) {
  std::string layout = py::str(object.attr("layout"));
  if (layout != "torch.strided") {
    return Invalid(op, name,
                   absl::StrCat("is a ", layout, " torch tensor; only dense ones can be sent"));
  }
  std::string dtype_name = py::str(object.attr("dtype"));
  absl::string_view short_name = dtype_name;
  absl::ConsumePrefix(&short_name, "torch.");
  absl::StatusOr<DType> dtype = ParseDType(short_name);
  if (!dtype.ok()) {
    return Invalid(op, name,
                   absl::StrCat("has dtype ", dtype_name, ", which plexus does not carry"));
  }
  py::object device = object.attr("device");
  std::string device_type = py::str(device.attr("type"));
  Device where = Device::Cpu();
  if (device_type == "cuda") {
    py::object index = device.attr("index");
    where = Device::Cuda(index.is_none() ? 0 : index.cast<int>());
  } else if (device_type != "cpu") {
    return Invalid(op, name,
                   absl::StrCat("is on device ", device_type, ", which plexus does not serve"));
  }
  Shape shape;
  for (py::handle size : object.attr("shape")) shape.push_back(size.cast<int64_t>());
  Shape strides;
  for (py::handle stride : object.attr("stride")()) strides.push_back(stride.cast<int64_t>());
  auto data = reinterpret_cast<void*>(object.attr("data_ptr")().cast<uintptr_t>());
  Tensor tensor(data, *dtype, std::move(shape), std::move(strides), where);
  RETURN_IF_ERROR(tensor.CheckContiguous(op, name));
  return tensor;
}

// --- buffer protocol -----------------------------------------------------------------------

absl::StatusOr<DType> BufferDType(const Py_buffer& view, absl::string_view op,
                                  absl::string_view name) {
  absl::string_view format = view.format == nullptr ? "B" : view.format;
  if (!format.empty() && (format[0] == '>' || format[0] == '!') && view.itemsize > 1) {
    return Invalid(op, name, absl::StrCat("is big-endian (buffer format '", format, "')"));
  }
  if (!format.empty() && absl::string_view("@=<>!").find(format[0]) != absl::string_view::npos) {
    format.remove_prefix(1);
  }
  if (format.size() == 1) {
    switch (format[0]) {
      case '?':
        return DType::kBool;
      case 'b':
        return DType::kInt8;
      case 'B':
      case 'c':
        return DType::kUInt8;
      case 'h':
        return DType::kInt16;
      case 'e':
        return DType::kFloat16;
      case 'f':
        return DType::kFloat32;
      case 'd':
        return DType::kFloat64;
      case 'i':
      case 'l':
      case 'q':
      case 'n':
        if (view.itemsize == 4) return DType::kInt32;
        if (view.itemsize == 8) return DType::kInt64;
        break;
      default:
        break;
    }
  }
  return Invalid(op, name,
                 absl::StrCat("has element format '", format, "' (", view.itemsize,
                              " bytes), which plexus does not carry; supported: bool, uint8, "
                              "int8, int16, int32, int64, float16, float32, float64"));
}

absl::StatusOr<Tensor> FromBuffer(py::handle object, absl::string_view op, absl::string_view name,
                                  Access access, Keepalive& keepalive) {
  auto* view = new Py_buffer();
  if (PyObject_GetBuffer(object.ptr(), view, PyBUF_STRIDES | PyBUF_FORMAT) != 0) {
    delete view;
    std::string reason = py::error_already_set().what();
    return Invalid(op, name, absl::StrCat("(", TypeName(object), ") cannot be viewed: ", reason));
  }
  // The export stays open until the collective is done.
  keepalive.push_back(py::capsule(view, [](void* pointer) {
    auto* buffer = static_cast<Py_buffer*>(pointer);
    PyBuffer_Release(buffer);
    delete buffer;
  }));
  if (view->readonly && access == Access::kWrite) {
    return Invalid(
        op, name,
        absl::StrCat("(", TypeName(object), ") is read-only, and ", op, " writes into it"));
  }
  ASSIGN_OR_RETURN(DType dtype, BufferDType(*view, op, name));
  Shape shape(view->shape, view->shape + view->ndim);
  Shape strides;
  for (int i = 0; i < view->ndim; ++i) {
    if (view->strides[i] % view->itemsize != 0) {
      return Invalid(op, name,
                     absl::StrCat("(", TypeName(object), ") is not contiguous: stride ",
                                  view->strides[i], " bytes in dimension ", i));
    }
    strides.push_back(view->strides[i] / view->itemsize);
  }
  Tensor tensor(view->buf, dtype, std::move(shape), std::move(strides), Device::Cpu());
  RETURN_IF_ERROR(tensor.CheckContiguous(op, name));
  return tensor;
}

// --- DLPack --------------------------------------------------------------------------------

absl::StatusOr<DType> DLPackDType(const DLDataType& type, absl::string_view op,
                                  absl::string_view name) {
  if (type.lanes == 1) {
    switch (type.code) {
      case 0:
        if (type.bits == 8) return DType::kInt8;
        if (type.bits == 16) return DType::kInt16;
        if (type.bits == 32) return DType::kInt32;
        if (type.bits == 64) return DType::kInt64;
        break;
      case 1:
        if (type.bits == 8) return DType::kUInt8;
        break;
      case 2:
        if (type.bits == 16) return DType::kFloat16;
        if (type.bits == 32) return DType::kFloat32;
        if (type.bits == 64) return DType::kFloat64;
        break;
      case 4:
        if (type.bits == 16) return DType::kBFloat16;
        break;
      case 6:
        if (type.bits == 8) return DType::kBool;
        break;
      default:
        break;
    }
  }
  return Invalid(op, name,
                 absl::StrCat("has DLPack dtype (code ", type.code, ", ", type.bits, " bits, ",
                              type.lanes, " lanes), which plexus does not carry"));
}

absl::StatusOr<Tensor> FromDLPack(py::handle object, absl::string_view op, absl::string_view name,
                                  Keepalive& keepalive) {
  py::object capsule = object.attr("__dlpack__")();
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (managed == nullptr) {
    PyErr_Clear();
    return Invalid(
        op, name,
        absl::StrCat("(", TypeName(object), ") returned no unused DLPack capsule from __dlpack__"));
  }
  // Consumed: the capsule no longer frees it; this keepalive calls the deleter instead.
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  keepalive.push_back(py::capsule(managed, [](void* pointer) {
    auto* tensor = static_cast<DLManagedTensor*>(pointer);
    if (tensor->deleter != nullptr) tensor->deleter(tensor);
  }));
  keepalive.push_back(py::reinterpret_borrow<py::object>(object));
  const DLTensor& dl = managed->dl_tensor;
  ASSIGN_OR_RETURN(DType dtype, DLPackDType(dl.dtype, op, name));
  Device device = Device::Cpu();
  if (dl.device.device_type == 2) {
    device = Device::Cuda(dl.device.device_id);
  } else if (dl.device.device_type != 1 && dl.device.device_type != 3) {
    return Invalid(op, name,
                   absl::StrCat("is on DLPack device type ", dl.device.device_type,
                                ", which plexus does not serve"));
  }
  Shape shape(dl.shape, dl.shape + dl.ndim);
  void* data = static_cast<uint8_t*>(dl.data) + dl.byte_offset;
  Tensor tensor = dl.strides == nullptr
                      ? Tensor(data, dtype, shape, device)
                      : Tensor(data, dtype, shape, Shape(dl.strides, dl.strides + dl.ndim), device);
  RETURN_IF_ERROR(tensor.CheckContiguous(op, name));
  return tensor;
}

}  // namespace

bool IsTorchTensor(py::handle object) {
  PyObject* type = TorchTensorType();
  return type != nullptr && PyObject_IsInstance(object.ptr(), type) == 1;
}

absl::StatusOr<Tensor> ToTensor(py::handle object, absl::string_view op, absl::string_view name,
                                Access access, Keepalive& keepalive) {
  if (object.is_none()) return Invalid(op, name, "is None; a tensor is needed");
  if (IsTorchTensor(object)) {
    keepalive.push_back(py::reinterpret_borrow<py::object>(object));
    return FromTorch(object, op, name);
  }
  if (PyObject_CheckBuffer(object.ptr())) {
    return FromBuffer(object, op, name, access, keepalive);
  }
  if (py::hasattr(object, "__dlpack__")) return FromDLPack(object, op, name, keepalive);
  return Invalid(op, name,
                 absl::StrCat("is a ", TypeName(object),
                              "; expected a torch tensor, a numpy array, an object with "
                              "__dlpack__ or one supporting the buffer protocol"));
}

absl::StatusOr<std::vector<Tensor>> ToTensors(py::handle objects, absl::string_view op,
                                              absl::string_view name, Access access,
                                              Keepalive& keepalive) {
  if (!PySequence_Check(objects.ptr()) || IsTorchTensor(objects) ||
      PyObject_CheckBuffer(objects.ptr())) {
    return Invalid(op, name,
                   absl::StrCat("is a ", TypeName(objects), "; expected a list of tensors"));
  }
  std::vector<Tensor> tensors;
  py::sequence sequence = py::reinterpret_borrow<py::sequence>(objects);
  tensors.reserve(sequence.size());
  for (size_t i = 0; i < sequence.size(); ++i) {
    ASSIGN_OR_RETURN(Tensor tensor,
                     ToTensor(sequence[i], op, absl::StrCat(name, "[", i, "]"), access, keepalive));
    tensors.push_back(tensor);
  }
  return tensors;
}

}  // namespace plexus::python
