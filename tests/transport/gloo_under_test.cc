// Gloo's point-to-point buffers under the contract, as the gloo backend forms them.
#include "backends/gloo/gloo_transport.h"
#include "base/core/status_macros.h"
#include "tests/transport/contract.h"

namespace plexus::testing {

using gloo_backend::GlooTransport;

const TransportUnderTest& UnderTest() {
  static const TransportUnderTest* const under = new TransportUnderTest{
      .name = "gloo",
      .unchecked_mismatches =
          "gloo: a message larger than its receive ends the process inside Gloo's pair "
          "(gloo::EnforceNotMet), and no signature travels with a message",
      .abort_operation_breaks_all =
          "gloo: Gloo cannot cancel one operation's buffers, so "
          "AbortOperation breaks the whole transport",
      .make = [](std::shared_ptr<Store> store, int rank, int world) -> absl::StatusOr<Member> {
        ASSIGN_OR_RETURN(std::shared_ptr<GlooTransport> transport,
                         GlooTransport::Connect(std::move(store), rank, world, "127.0.0.1",
                                                absl::Seconds(60), "contract"));
        return Member{transport, nullptr};
      }};
  return *under;
}

}  // namespace plexus::testing
