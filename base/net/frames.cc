#include "base/net/frames.h"

#include "absl/base/internal/endian.h"
#include "absl/strings/str_cat.h"
#include "base/core/status_macros.h"

namespace plexus {

std::string Framed(absl::string_view payload) {
  std::string frame(kFrameLengthBytes, '\0');
  absl::little_endian::Store64(frame.data(), payload.size());
  frame.append(payload.data(), payload.size());
  return frame;
}

uint64_t FrameLength(const char* header) { return absl::little_endian::Load64(header); }

FrameAtFront PeekFrame(absl::string_view bytes, uint64_t max_payload) {
  if (bytes.size() < kFrameLengthBytes) return {FrameAtFront::State::kPartial};
  const uint64_t length = FrameLength(bytes.data());
  if (length > max_payload) return {FrameAtFront::State::kOversized, length};
  if (bytes.size() - kFrameLengthBytes < length) return {FrameAtFront::State::kPartial, length};
  return {FrameAtFront::State::kWhole, length, bytes.substr(kFrameLengthBytes, length)};
}

absl::StatusOr<std::string> ReceiveFrame(int fd, StreamCipher* cipher, uint64_t max_payload,
                                         absl::Time deadline) {
  char header[kFrameLengthBytes];
  RETURN_IF_ERROR(RecvExact(fd, cipher, header, sizeof(header), deadline));
  const uint64_t length = FrameLength(header);
  if (length > max_payload) {
    return absl::InvalidArgumentError(OversizedFrame(length, max_payload));
  }
  std::string payload(length, '\0');
  RETURN_IF_ERROR(RecvExact(fd, cipher, payload.data(), payload.size(), deadline));
  return payload;
}

std::string OversizedFrame(uint64_t length, uint64_t max_payload) {
  return absl::StrCat("a frame of ", length, " bytes, over the cap of ", max_payload);
}

}  // namespace plexus
