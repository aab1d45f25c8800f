#include "backends/tcp/tcp_frame.h"

#include "absl/base/internal/endian.h"

namespace plexus::tcp {

void EncodeHeader(char* out, FrameType type, uint64_t tag, uint64_t signature, uint64_t size) {
  absl::little_endian::Store32(out, static_cast<uint32_t>(type));
  absl::little_endian::Store32(out + 4, 0);
  absl::little_endian::Store64(out + 8, tag);
  absl::little_endian::Store64(out + 16, signature);
  absl::little_endian::Store64(out + 24, size);
}

FrameHeader DecodeHeader(const char* in) {
  FrameHeader header;
  header.type = absl::little_endian::Load32(in);
  header.tag = absl::little_endian::Load64(in + 8);
  header.signature = absl::little_endian::Load64(in + 16);
  header.size = absl::little_endian::Load64(in + 24);
  return header;
}

}  // namespace plexus::tcp
