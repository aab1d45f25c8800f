#include "base/store/tcp_store_protocol.h"

#include <algorithm>

#include "absl/base/internal/endian.h"
#include "absl/strings/str_cat.h"
#include "base/core/status_macros.h"
#include "base/net/frames.h"

namespace plexus::tcp_store {

std::string HandshakeBytes(uint16_t field) {
  char bytes[kHandshakeBytes];
  absl::little_endian::Store32(bytes, kMagic);
  absl::little_endian::Store16(bytes + 4, kProtocolVersion);
  absl::little_endian::Store16(bytes + 6, field);
  return std::string(bytes, kHandshakeBytes);
}

absl::Status ParseHandshake(absl::string_view bytes, uint16_t* field) {
  if (bytes.size() != kHandshakeBytes) {
    return absl::InvalidArgumentError("short handshake");
  }
  const uint32_t magic = absl::little_endian::Load32(bytes.data());
  if (magic != kMagic) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad magic 0x", absl::Hex(magic), " (not a plexus TCPStore peer)"));
  }
  const uint16_t version = absl::little_endian::Load16(bytes.data() + 4);
  if (version != kProtocolVersion) {
    return absl::InvalidArgumentError(absl::StrCat("protocol version ", version,
                                                   " is not supported (this side speaks ",
                                                   kProtocolVersion, ")"));
  }
  *field = absl::little_endian::Load16(bytes.data() + 6);
  return absl::OkStatus();
}

uint16_t BeatField(absl::Duration period) {
  if (period == absl::InfiniteDuration()) return 0;
  const int64_t units = absl::IDivDuration(period, kBeatUnit, &period);
  return static_cast<uint16_t>(std::clamp<int64_t>(units, 1, 0xffff));
}

absl::Duration BeatPeriod(uint16_t field) {
  return field == 0 ? absl::InfiniteDuration() : field * kBeatUnit;
}

std::string HeartbeatFrame() { return Framed({}); }

Encoder& Encoder::U8(uint8_t value) {
  payload_.push_back(static_cast<char>(value));
  return *this;
}

Encoder& Encoder::I64(int64_t value) {
  char bytes[8];
  absl::little_endian::Store64(bytes, static_cast<uint64_t>(value));
  payload_.append(bytes, 8);
  return *this;
}

Encoder& Encoder::Str(absl::string_view value) {
  char bytes[4];
  absl::little_endian::Store32(bytes, static_cast<uint32_t>(value.size()));
  payload_.append(bytes, 4);
  payload_.append(value.data(), value.size());
  return *this;
}

Encoder& Encoder::StrList(absl::Span<const std::string> values) {
  char bytes[4];
  absl::little_endian::Store32(bytes, static_cast<uint32_t>(values.size()));
  payload_.append(bytes, 4);
  for (const std::string& value : values) Str(value);
  return *this;
}

std::string Encoder::Frame() const { return Framed(payload_); }

absl::Status Decoder::Need(size_t bytes, absl::string_view what) const {
  if (rest_.size() >= bytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("truncated frame: ", what, " needs ", bytes,
                                                 " bytes but ", rest_.size(), " remain"));
}

absl::StatusOr<uint8_t> Decoder::U8() {
  RETURN_IF_ERROR(Need(1, "u8"));
  uint8_t value = static_cast<uint8_t>(rest_[0]);
  rest_.remove_prefix(1);
  return value;
}

absl::StatusOr<int64_t> Decoder::I64() {
  RETURN_IF_ERROR(Need(8, "int64"));
  int64_t value = static_cast<int64_t>(absl::little_endian::Load64(rest_.data()));
  rest_.remove_prefix(8);
  return value;
}

absl::StatusOr<std::string> Decoder::Str() {
  RETURN_IF_ERROR(Need(4, "string length"));
  const uint32_t length = absl::little_endian::Load32(rest_.data());
  rest_.remove_prefix(4);
  RETURN_IF_ERROR(Need(length, "string"));
  std::string value(rest_.substr(0, length));
  rest_.remove_prefix(length);
  return value;
}

absl::StatusOr<std::vector<std::string>> Decoder::StrList() {
  RETURN_IF_ERROR(Need(4, "list count"));
  const uint32_t count = absl::little_endian::Load32(rest_.data());
  rest_.remove_prefix(4);
  // Each element takes at least 4 bytes, which bounds the count before reserving.
  RETURN_IF_ERROR(Need(static_cast<size_t>(count) * 4, "list"));
  std::vector<std::string> values;
  values.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(std::string value, Str());
    values.push_back(std::move(value));
  }
  return values;
}

absl::Status Decoder::Done() const {
  if (rest_.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(rest_.size(), " unexpected trailing bytes"));
}

}  // namespace plexus::tcp_store
