// torch's current CUDA stream for a device, as the raw cudaStream_t plexus orders its work
// after (devices/cuda/current_stream.h), read through c10's device-generic interface so this
// extension needs none of torch's CUDA headers.
#ifndef PLEXUS_BINDINGS_TORCH_TORCH_STREAM_H_
#define PLEXUS_BINDINGS_TORCH_TORCH_STREAM_H_

#include "devices/cuda/current_stream.h"

namespace plexus::torch_backend {

// The calling thread's current torch stream on CUDA device `device`. Where c10::Stream has no
// native_handle() (1.13, 2.6; see torch_compat.h), the device's legacy default stream
// (nullptr), which orders after all other work on the device (correct, less concurrent).
cuda::Stream TorchCurrentStream(int device);

}  // namespace plexus::torch_backend

#endif  // PLEXUS_BINDINGS_TORCH_TORCH_STREAM_H_
