// A stand-in for the CUDA runtime and NCCL that runs on the host, for testing plexus's CUDA code
// paths on machines without a GPU. Built as one shared library (libfake_cuda.so) that exports
// the cudart and NCCL functions plexus loads; tests point PLEXUS_CUDART_LIBRARY and
// PLEXUS_NCCL_LIBRARY at it.
//
// Model: "device memory" is host memory tracked by pointer; FAKE_CUDA_DEVICES (default 1)
// devices; each stream is a thread running queued closures in order; events complete when the
// stream reaches them. NCCL communicators of different processes meet in a directory under
// FAKE_NCCL_DIR (default $TEST_TMPDIR) named by the unique id, and exchange data as files; a
// rank waiting on a dead peer (its pid gone) reports ncclRemoteError, and ncclCommAbort ends
// every wait. Semantics are NCCL's; speed is not the point. Two extra functions,
// fakeCudaHoldStream and fakeCudaReleaseStream, let tests hold a stream to observe ordering.
#ifndef PLEXUS_TESTS_FAKE_CUDA_FAKE_DEVICE_H_
#define PLEXUS_TESTS_FAKE_CUDA_FAKE_DEVICE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace fake_cuda {

// An in-order queue of host closures: what a CUDA stream is here.
class FakeStream {
 public:
  explicit FakeStream(int device);
  ~FakeStream();  // Runs what is queued, then stops.
  void Enqueue(std::function<void()> step);
  void Synchronize();  // Returns once everything queued so far has run.
  int device() const { return device_; }

 private:
  void Run();

  const int device_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> steps_;
  uint64_t enqueued_ = 0;
  uint64_t finished_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

// The stream a cudaStream_t names on the current device (nullptr: that device's default).
FakeStream* StreamFor(void* handle);

// Memory kinds, as cudaPointerGetAttributes reports them.
enum class MemoryKind { kUnregistered, kHost, kDevice, kManaged };
MemoryKind KindOf(const void* pointer, int* device);

int CurrentDevice();

}  // namespace fake_cuda

#endif  // PLEXUS_TESTS_FAKE_CUDA_FAKE_DEVICE_H_
