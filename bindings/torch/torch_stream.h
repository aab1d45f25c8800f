// torch's current CUDA stream for a device, as the raw cudaStream_t plexus orders its work
// after (devices/cuda/current_stream.h), read through c10's device-generic interface so this
// extension needs none of torch's CUDA headers and builds against a CPU-only torch.
#ifndef PLEXUS_BINDINGS_TORCH_TORCH_STREAM_H_
#define PLEXUS_BINDINGS_TORCH_TORCH_STREAM_H_

#include "devices/cuda/current_stream.h"

namespace plexus::torch_backend {

// The calling thread's current torch stream on CUDA device `device`: c10::Stream's
// native_handle() where torch has it, else c10::cuda::CUDAStream::stream() found in the loaded
// libc10_cuda.so (1.13, 2.6). nullptr (the legacy default stream) where torch has no CUDA.
cuda::Stream TorchCurrentStream(int device);

}  // namespace plexus::torch_backend

#endif  // PLEXUS_BINDINGS_TORCH_TORCH_STREAM_H_
