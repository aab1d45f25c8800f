#include "devices/cuda/current_stream.h"

#include "absl/container/flat_hash_map.h"

namespace plexus::cuda {
namespace {

absl::flat_hash_map<int, Stream>& ThreadStreams() {
  thread_local absl::flat_hash_map<int, Stream> streams;
  return streams;
}

}  // namespace

Stream CurrentStream(int device) {
  const auto& streams = ThreadStreams();
  auto it = streams.find(device);
  return it == streams.end() ? nullptr : it->second;
}

StreamGuard::StreamGuard(int device, Stream stream) : device_(device) {
  previous_ = CurrentStream(device);
  ThreadStreams()[device] = stream;
}

StreamGuard::~StreamGuard() { ThreadStreams()[device_] = previous_; }

}  // namespace plexus::cuda
