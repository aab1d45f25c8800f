// Fuzzes the elastic master's message handling: the input is a stream of frames (8-byte length,
// payload) from two joined peers, decoded and handled as the master's loop does, shared-state
// ballots and topology votes included. Protocol errors are fine; crashes, leaks and undefined
// behaviour are not.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "frontend/elastic/master_protocol.h"
#include "frontend/elastic/master_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace plexus::elastic;
  MasterState state(/*store_port=*/1, absl::Seconds(5));
  const int64_t peers[2] = {state.Join(0, "10.0.0.1:1"), state.Join(0, "10.0.0.2:1")};
  bool alive[2] = {true, true};
  absl::string_view rest(reinterpret_cast<const char*>(data), size);
  int turn = 0;
  while (rest.size() >= kHeaderBytes + 1) {
    const int who = static_cast<uint8_t>(rest[0]) & 1;
    rest.remove_prefix(1);
    const uint64_t length = PayloadLength(rest.data());
    rest.remove_prefix(kHeaderBytes);
    if (length > kMaxFrameBytes || length > rest.size()) break;  // The loop closes here.
    absl::StatusOr<Message> message = DecodePayload(rest.substr(0, length));
    rest.remove_prefix(length);
    if (!alive[who]) continue;
    if (!message.ok() || !state.Handle(peers[who], *message).ok()) {
      state.Drop(peers[who], "protocol error");
      alive[who] = false;
    }
    state.TakeOutgoing();
    if (++turn > 256) break;
  }
  return 0;
}
