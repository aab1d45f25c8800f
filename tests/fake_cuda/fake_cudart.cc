// The CUDA runtime half of libfake_cuda.so (see fake_device.h).
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "tests/fake_cuda/fake_device.h"

namespace fake_cuda {
namespace {

int DeviceTotal() {
  static const int total = [] {
    const char* text = std::getenv("FAKE_CUDA_DEVICES");
    return text != nullptr ? std::atoi(text) : 1;
  }();
  return total;
}

thread_local int current_device = 0;

struct Block {
  size_t bytes;
  MemoryKind kind;
  int device;
};

std::mutex& BlocksMutex() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::map<uintptr_t, Block>& Blocks() {
  static auto* blocks = new std::map<uintptr_t, Block>;
  return *blocks;
}

void* Allocate(size_t bytes, MemoryKind kind) {
  void* pointer = std::calloc(1, bytes == 0 ? 1 : bytes);
  std::lock_guard<std::mutex> lock(BlocksMutex());
  Blocks()[reinterpret_cast<uintptr_t>(pointer)] = {bytes == 0 ? 1 : bytes, kind, current_device};
  return pointer;
}

cudaError_t Release(void* pointer) {
  if (pointer == nullptr) return cudaSuccess;
  std::lock_guard<std::mutex> lock(BlocksMutex());
  if (Blocks().erase(reinterpret_cast<uintptr_t>(pointer)) == 0) return cudaErrorInvalidValue;
  std::free(pointer);
  return cudaSuccess;
}

// Per-device default streams, made on first use and never destroyed.
FakeStream* DefaultStream(int device) {
  static std::mutex mu;
  static auto* streams = new std::map<int, FakeStream*>;
  std::lock_guard<std::mutex> lock(mu);
  FakeStream*& stream = (*streams)[device];
  if (stream == nullptr) stream = new FakeStream(device);
  return stream;
}

// An event: recordings are numbered; the event is complete once its stream has passed the last.
struct FakeEvent {
  std::mutex mu;
  std::condition_variable changed;
  uint64_t recorded = 0;
  uint64_t reached = 0;
};

}  // namespace

FakeStream::FakeStream(int device) : device_(device), thread_([this] { Run(); }) {}

FakeStream::~FakeStream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void FakeStream::Enqueue(std::function<void()> step) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    steps_.push_back(std::move(step));
    ++enqueued_;
  }
  changed_.notify_all();
}

void FakeStream::Synchronize() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = enqueued_;
  changed_.wait(lock, [&] { return finished_ >= target; });
}

void FakeStream::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    changed_.wait(lock, [this] { return stopping_ || !steps_.empty(); });
    if (steps_.empty()) return;  // Stopping, and everything queued has run.
    std::function<void()> step = std::move(steps_.front());
    steps_.pop_front();
    lock.unlock();
    current_device = device_;
    step();
    lock.lock();
    ++finished_;
    changed_.notify_all();
  }
}

FakeStream* StreamFor(void* handle) {
  return handle == nullptr ? DefaultStream(current_device) : static_cast<FakeStream*>(handle);
}

MemoryKind KindOf(const void* pointer, int* device) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(pointer);
  std::lock_guard<std::mutex> lock(BlocksMutex());
  auto it = Blocks().upper_bound(address);
  if (it == Blocks().begin()) return MemoryKind::kUnregistered;
  --it;
  if (address >= it->first + it->second.bytes) return MemoryKind::kUnregistered;
  *device = it->second.device;
  return it->second.kind;
}

int CurrentDevice() { return current_device; }

}  // namespace fake_cuda

using fake_cuda::FakeStream;
using fake_cuda::MemoryKind;

namespace {
// A cudaEvent_t is a heap-held reference: steps queued on streams hold their own, so an event
// destroyed while a recording is pending (legal in CUDA) stays valid for them.
using EventRef = std::shared_ptr<fake_cuda::FakeEvent>;
EventRef AsEvent(cudaEvent_t event) { return *reinterpret_cast<EventRef*>(event); }
}  // namespace

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    default:
      return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t error) {
  return error == cudaSuccess ? "no error" : "fake CUDA error";
}

cudaError_t cudaGetLastError(void) { return cudaSuccess; }
cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = 13000;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* version) {
  *version = 13000;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int* count) {
  *count = fake_cuda::DeviceTotal();
  return *count == 0 ? cudaErrorNoDevice : cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = fake_cuda::current_device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= fake_cuda::DeviceTotal()) return cudaErrorInvalidDevice;
  fake_cuda::current_device = device;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr, int) {
  *value = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  *least = 0;
  *greatest = -5;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  fake_cuda::DefaultStream(fake_cuda::current_device)->Synchronize();
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned int, int) {
  *stream = reinterpret_cast<cudaStream_t>(new FakeStream(fake_cuda::current_device));
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  delete reinterpret_cast<FakeStream*>(stream);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  fake_cuda::StreamFor(stream)->Synchronize();
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  *event = reinterpret_cast<cudaEvent_t>(new EventRef(std::make_shared<fake_cuda::FakeEvent>()));
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete reinterpret_cast<EventRef*>(event);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  EventRef fake = AsEvent(event);
  uint64_t number;
  {
    std::lock_guard<std::mutex> lock(fake->mu);
    number = ++fake->recorded;
  }
  fake_cuda::StreamFor(stream)->Enqueue([fake, number] {
    std::lock_guard<std::mutex> lock(fake->mu);
    if (fake->reached < number) fake->reached = number;
    fake->changed.notify_all();
  });
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  EventRef fake = AsEvent(event);
  std::lock_guard<std::mutex> lock(fake->mu);
  return fake->reached >= fake->recorded ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  EventRef fake = AsEvent(event);
  std::unique_lock<std::mutex> lock(fake->mu);
  const uint64_t target = fake->recorded;
  fake->changed.wait(lock, [&] { return fake->reached >= target; });
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) {
  *ms = 0;
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  EventRef fake = AsEvent(event);
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(fake->mu);
    target = fake->recorded;  // Waits for the recording made before this call, as CUDA does.
  }
  fake_cuda::StreamFor(stream)->Enqueue([fake, target] {
    std::unique_lock<std::mutex> lock(fake->mu);
    fake->changed.wait(lock, [&] { return fake->reached >= target; });
  });
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  *pointer = fake_cuda::Allocate(bytes, MemoryKind::kDevice);
  return cudaSuccess;
}

cudaError_t cudaMallocManaged(void** pointer, size_t bytes, unsigned int) {
  *pointer = fake_cuda::Allocate(bytes, MemoryKind::kManaged);
  return cudaSuccess;
}

cudaError_t cudaFree(void* pointer) { return fake_cuda::Release(pointer); }

cudaError_t cudaHostAlloc(void** pointer, size_t bytes, unsigned int) {
  *pointer = fake_cuda::Allocate(bytes, MemoryKind::kHost);
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* pointer) { return fake_cuda::Release(pointer); }

cudaError_t cudaMemcpy(void* to, const void* from, size_t bytes, cudaMemcpyKind) {
  FakeStream* stream = fake_cuda::StreamFor(nullptr);
  stream->Synchronize();  // cudaMemcpy is ordered after the legacy default stream.
  if (bytes > 0) std::memmove(to, from, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* to, const void* from, size_t bytes, cudaMemcpyKind,
                            cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  fake_cuda::StreamFor(stream)->Enqueue([to, from, bytes] { std::memmove(to, from, bytes); });
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* to, int value, size_t bytes, cudaStream_t stream) {
  fake_cuda::StreamFor(stream)->Enqueue([to, value, bytes] { std::memset(to, value, bytes); });
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* pointer) {
  std::memset(attributes, 0, sizeof(*attributes));
  int device = -2;
  switch (fake_cuda::KindOf(pointer, &device)) {
    case MemoryKind::kUnregistered:
      attributes->type = cudaMemoryTypeUnregistered;
      attributes->device = -2;
      return cudaSuccess;
    case MemoryKind::kHost:
      attributes->type = cudaMemoryTypeHost;
      break;
    case MemoryKind::kDevice:
      attributes->type = cudaMemoryTypeDevice;
      break;
    case MemoryKind::kManaged:
      attributes->type = cudaMemoryTypeManaged;
      break;
  }
  attributes->device = device;
  attributes->devicePointer = const_cast<void*>(pointer);
  attributes->hostPointer = const_cast<void*>(pointer);
  return cudaSuccess;
}

// --- Test hooks (not CUDA functions): hold a stream at its current end until released ---

namespace {
struct Gate {
  std::mutex mu;
  std::condition_variable opened;
  bool open = false;
};
}  // namespace

extern "C" void* fakeCudaHoldStream(cudaStream_t stream) {
  auto gate = std::make_shared<Gate>();
  fake_cuda::StreamFor(stream)->Enqueue([gate] {
    std::unique_lock<std::mutex> lock(gate->mu);
    gate->opened.wait(lock, [&] { return gate->open; });
  });
  return new std::shared_ptr<Gate>(gate);
}

extern "C" void fakeCudaReleaseStream(void* handle) {
  auto* gate = static_cast<std::shared_ptr<Gate>*>(handle);
  {
    std::lock_guard<std::mutex> lock((*gate)->mu);
    (*gate)->open = true;
  }
  (*gate)->opened.notify_all();
  delete gate;
}
