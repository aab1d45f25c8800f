#include "frontend/elastic/master_protocol.h"

#include <iterator>

#include "absl/base/internal/endian.h"
#include "absl/strings/str_cat.h"
#include "base/net/frames.h"

namespace plexus::elastic {

std::string EncodeFrame(const Message& message) {
  std::string payload(1 + 8 + 8 * message.ints.size() + 4 + message.text.size(), '\0');
  char* out = payload.data();
  *out++ = static_cast<char>(message.type);
  absl::little_endian::Store64(out, message.ints.size());
  out += 8;
  for (int64_t value : message.ints) {
    absl::little_endian::Store64(out, static_cast<uint64_t>(value));
    out += 8;
  }
  absl::little_endian::Store32(out, static_cast<uint32_t>(message.text.size()));
  out += 4;
  message.text.copy(out, message.text.size());
  return Framed(payload);
}

absl::StatusOr<Message> DecodePayload(absl::string_view payload) {
  Message message;
  if (payload.size() < 1 + 8 + 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("elastic frame of ", payload.size(), " bytes is too short"));
  }
  message.type = static_cast<MessageType>(payload[0]);
  const uint64_t count = absl::little_endian::Load64(payload.data() + 1);
  if (count > static_cast<uint64_t>(kMaxInts) || 1 + 8 + 8 * count + 4 > payload.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("elastic frame announces ", count, " integers in ", payload.size(), " bytes"));
  }
  const char* in = payload.data() + 9;
  message.ints.resize(count);
  for (uint64_t i = 0; i < count; ++i, in += 8) {
    message.ints[i] = static_cast<int64_t>(absl::little_endian::Load64(in));
  }
  const uint32_t text = absl::little_endian::Load32(in);
  in += 4;
  if (text != payload.size() - (1 + 8 + 8 * count + 4)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "elastic frame's text of ", text, " bytes does not fill its ", payload.size(), " bytes"));
  }
  message.text.assign(in, text);
  return message;
}

void AppendOpKey(const OpKey& key, std::vector<int64_t>& ints) {
  ints.insert(ints.end(), {key.group, key.epoch, key.tag, key.instance});
}

OpKey ReadOpKey(const std::vector<int64_t>& ints, size_t at) {
  OpKey key;
  if (ints.size() < at + kOpKeyInts) return key;
  key.group = ints[at];
  key.epoch = ints[at + 1];
  key.tag = ints[at + 2];
  key.instance = ints[at + 3];
  return key;
}

std::vector<int64_t> OpSignatureInts(const ReduceDescriptor& d) {
  return {d.count, static_cast<int64_t>(d.dtype), static_cast<int64_t>(d.op),
          static_cast<int64_t>(d.quantization.algorithm),
          d.quantization.algorithm == QuantizationAlgorithm::kNone
              ? -1
              : static_cast<int64_t>(d.quantization.quantized_dtype)};
}

int64_t ArenaTurnsWanted(const std::vector<int64_t>& signature) {
  if (signature.empty()) return 0;
  const int64_t turns = signature.back();
  const auto one = static_cast<int64_t>(OpSignatureInts(ReduceDescriptor{}).size());
  if (turns < 1 || turns > kMaxInts / one) return 0;
  return static_cast<int64_t>(signature.size()) == turns * one + 1 ? turns : 0;
}

std::vector<int64_t> TopologyInts(const Topology& t) {
  std::vector<int64_t> ints = {t.group,      t.epoch,         t.global_world_size,
                               t.num_groups, t.largest_group, static_cast<int64_t>(t.ring.size())};
  ints.insert(ints.end(), t.ring.begin(), t.ring.end());
  return ints;
}

absl::StatusOr<Topology> ReadTopology(const std::vector<int64_t>& ints) {
  if (ints.size() < 6 || ints[5] < 0 || static_cast<size_t>(ints[5]) != ints.size() - 6) {
    return absl::InvalidArgumentError("malformed topology from the master");
  }
  Topology t;
  t.group = ints[0];
  t.epoch = ints[1];
  t.global_world_size = ints[2];
  t.num_groups = ints[3];
  t.largest_group = ints[4];
  t.ring.assign(ints.begin() + 6, ints.end());
  return t;
}

void AppendBallot(const SyncBallot& ballot, std::vector<int64_t>& ints, std::string& text) {
  ints.push_back(static_cast<int64_t>(ballot.revision));
  ints.push_back(static_cast<int64_t>(ballot.strategy));
  ints.push_back(static_cast<int64_t>(ballot.tensors.size()));
  for (const SyncBallot::Tensor& t : ballot.tensors) {
    ints.insert(ints.end(), {t.count, t.dtype, static_cast<int64_t>(t.hash),
                             t.allow_content_inequality ? 1 : 0});
    if (!text.empty()) text.push_back('\0');
    text += t.name;
  }
}

absl::StatusOr<SyncBallot> ReadBallot(const std::vector<int64_t>& ints, size_t at,
                                      const std::string& text) {
  if (ints.size() < at + 3) return absl::InvalidArgumentError("malformed shared-state ballot");
  SyncBallot ballot;
  ballot.revision = static_cast<uint64_t>(ints[at]);
  const int64_t strategy = ints[at + 1];
  const int64_t n = ints[at + 2];
  if (strategy < 0 || strategy > static_cast<int64_t>(SyncStrategy::kSendOnly) || n < 1 ||
      n > static_cast<int64_t>(kMaxSharedTensors) ||
      ints.size() != at + 3 + static_cast<size_t>(n) * 4) {
    return absl::InvalidArgumentError("malformed shared-state ballot");
  }
  ballot.strategy = static_cast<SyncStrategy>(strategy);
  size_t name_at = 0;
  for (int64_t i = 0; i < n; ++i) {
    const size_t base = at + 3 + static_cast<size_t>(i) * 4;
    SyncBallot::Tensor t;
    t.count = ints[base];
    t.dtype = ints[base + 1];
    t.hash = static_cast<uint64_t>(ints[base + 2]);
    t.allow_content_inequality = ints[base + 3] != 0;
    if (name_at > text.size()) return absl::InvalidArgumentError("shared-state names missing");
    size_t end = text.find('\0', name_at);
    if (end == std::string::npos) end = text.size();
    t.name = text.substr(name_at, end - name_at);
    name_at = end + 1;
    if (t.count < 0 || t.dtype < 0 || t.dtype >= static_cast<int64_t>(std::size(kAllDTypes)) ||
        t.name.empty()) {
      return absl::InvalidArgumentError("malformed shared-state ballot entry");
    }
    ballot.tensors.push_back(std::move(t));
  }
  if (name_at < text.size()) return absl::InvalidArgumentError("extra shared-state names");
  return ballot;
}

absl::Status StatusFromWire(int64_t code, const std::string& text) {
  if (code == 0) return absl::OkStatus();
  if (code < 0 || code > static_cast<int64_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::InternalError(text);
  }
  return absl::Status(static_cast<absl::StatusCode>(code), text);
}

}  // namespace plexus::elastic
