// The caller's current CUDA stream, per thread and device, as torch keeps it.
//
// A collective on CUDA tensors is ordered after the work already queued on the calling thread's
// current stream for the tensors' device, and Work::WaitOnStream orders later work after it.
// The default is the device's legacy default stream. C++ callers set another with StreamGuard;
// the Python bindings set torch's current stream for each call.
#ifndef PLEXUS_DEVICES_CUDA_CURRENT_STREAM_H_
#define PLEXUS_DEVICES_CUDA_CURRENT_STREAM_H_

struct CUstream_st;

namespace plexus::cuda {

using Stream = CUstream_st*;  // cudaStream_t, without the runtime's headers.

// This thread's current stream for `device` (nullptr: the legacy default stream).
Stream CurrentStream(int device);

// Makes `stream` this thread's current stream for `device` until destroyed (scopes nest).
class StreamGuard {
 public:
  StreamGuard(int device, Stream stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  int device_;
  Stream previous_;
};

}  // namespace plexus::cuda

#endif  // PLEXUS_DEVICES_CUDA_CURRENT_STREAM_H_
