// TorchCurrentStream against a stand-in for torch's CUDA, on a torch built without it: a
// registered CUDA DeviceGuardImpl keeps each thread's current stream per device, as
// c10::cuda does, and this binary defines c10::cuda::CUDAStream::stream() (exported by
// -rdynamic, as libc10_cuda.so exports it) mapping each stream to a handle of its own. On a
// torch with CUDA the stand-in cannot be installed and the test skips.
#include "bindings/torch/torch_stream.h"

#include <c10/core/Device.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <array>
#include <cstdint>
#include <thread>

#include "gtest/gtest.h"

namespace c10::cuda {
// Only the layout (one c10::Stream) and the member torch_stream.cc calls.
class CUDAStream {
 public:
  void* stream() const;

 private:
  c10::Stream stream_;
};
// A handle that tells device and stream apart: 0x1000 * (device + 1) + stream id.
void* CUDAStream::stream() const {
  return reinterpret_cast<void*>(
      static_cast<uintptr_t>(0x1000 * (stream_.device_index() + 1) + stream_.id()));
}
}  // namespace c10::cuda

namespace plexus::torch_backend {
namespace {

constexpr int kDevices = 2;
thread_local std::array<c10::StreamId, kDevices> current_stream{};  // 0: the default stream.
thread_local c10::DeviceIndex current_device = 0;

class StandInCudaGuard final : public c10::impl::DeviceGuardImplInterface {
 public:
  c10::DeviceType type() const override { return c10::DeviceType::CUDA; }
  c10::Device exchangeDevice(c10::Device device) const override {
    const c10::Device previous = getDevice();
    setDevice(device);
    return previous;
  }
  c10::Device getDevice() const override { return {c10::DeviceType::CUDA, current_device}; }
  void setDevice(c10::Device device) const override { current_device = device.index(); }
  void uncheckedSetDevice(c10::Device device) const noexcept override {
    current_device = device.index();
  }
  c10::Stream getStream(c10::Device device) const noexcept override {
    return c10::Stream(c10::Stream::UNSAFE, device, current_stream.at(device.index()));
  }
  c10::Stream exchangeStream(c10::Stream stream) const noexcept override {
    const c10::Stream previous = getStream(stream.device());
    current_stream.at(stream.device_index()) = stream.id();
    return previous;
  }
  c10::DeviceIndex deviceCount() const noexcept override { return kDevices; }
  // torch 2.14's c10::Stream::native_handle() asks the guard; earlier torch has no such virtual,
  // so this is an override only where the base declares it (hence no `override`).
  void* getStreamNativeHandle(const c10::Stream stream) const {
    return reinterpret_cast<void*>(
        static_cast<uintptr_t>(0x1000 * (stream.device_index() + 1) + stream.id()));
  }
};

bool InstallStandIn() {
  if (c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA)) return false;  // torch has CUDA.
  static StandInCudaGuard guard;
  static c10::impl::DeviceGuardImplRegistrar registrar(c10::DeviceType::CUDA, &guard);
  return true;
}

cuda::Stream Handle(int device, c10::StreamId id) {
  return reinterpret_cast<cuda::Stream>(static_cast<uintptr_t>(0x1000 * (device + 1) + id));
}

TEST(TorchStreamTest, WithoutCudaInTorchTheLegacyDefaultStream) {
  if (c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA)) GTEST_SKIP() << "torch has CUDA";
  EXPECT_EQ(TorchCurrentStream(0), nullptr);
}

TEST(TorchStreamTest, TheCurrentStreamOfEachDeviceAndThread) {
  if (!InstallStandIn()) GTEST_SKIP() << "torch has CUDA: no stand-in can be installed";
  const c10::impl::DeviceGuardImplInterface* impl =
      c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
  EXPECT_EQ(TorchCurrentStream(0), Handle(0, 0));
  // As `with torch.cuda.stream(s)`: the current stream changes for that device only.
  const c10::Stream previous =
      impl->exchangeStream(c10::Stream(c10::Stream::UNSAFE, c10::Device("cuda:1"), 37));
  EXPECT_EQ(TorchCurrentStream(1), Handle(1, 37));
  EXPECT_EQ(TorchCurrentStream(0), Handle(0, 0));
  // Another thread has its own current stream, as in torch.
  cuda::Stream seen_elsewhere = nullptr;
  std::thread([&] { seen_elsewhere = TorchCurrentStream(1); }).join();
  EXPECT_EQ(seen_elsewhere, Handle(1, 0));
  impl->exchangeStream(previous);
  EXPECT_EQ(TorchCurrentStream(1), Handle(1, 0));
}

}  // namespace
}  // namespace plexus::torch_backend
