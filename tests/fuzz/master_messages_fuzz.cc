// Fuzzes the elastic master's message handling: the input is a stream of frames (8-byte length,
// payload) from two joined peers, decoded and handled as the master's loop does, shared-state
// ballots and topology votes included. Protocol errors are fine; crashes, leaks and undefined
// behaviour are not.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "base/net/frames.h"
#include "frontend/elastic/master_protocol.h"
#include "frontend/elastic/master_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace plexus::elastic;
  MasterState state(/*store_port=*/1, absl::Seconds(5));
  const int64_t peers[2] = {state.Join(0, "10.0.0.1:1"), state.Join(0, "10.0.0.2:1")};
  bool alive[2] = {true, true};
  absl::string_view rest(reinterpret_cast<const char*>(data), size);
  int turn = 0;
  while (!rest.empty()) {
    const int who = static_cast<uint8_t>(rest[0]) & 1;
    rest.remove_prefix(1);
    const plexus::FrameAtFront frame = plexus::PeekFrame(rest, kMaxFrameBytes);
    if (frame.state != plexus::FrameAtFront::State::kWhole) break;  // The loop closes or waits.
    absl::StatusOr<Message> message = DecodePayload(frame.payload);
    rest.remove_prefix(frame.size());
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
