// GlooBackend: registered as "gloo" (cpu tensors), over Debian's libgloo. A Gloo context per
// group, built from the group's store (GlooStoreAdapter) and Gloo's TCP transport. Gloo's own
// algorithms run what gloo_plans.h plans (every dtype and op: Gloo reduces with plexus's
// kernels); algorithms/ over a GlooTransport (Gloo's unbound buffers) runs the rest.
// PLEXUS_GLOO_NATIVE=0 sends everything through algorithms/. See docs/backends.md.
#ifndef PLEXUS_BACKENDS_GLOO_GLOO_BACKEND_H_
#define PLEXUS_BACKENDS_GLOO_GLOO_BACKEND_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "backends/common/collectives_backend.h"
#include "backends/common/nominal_traffic.h"
#include "backends/gloo/gloo_native.h"
#include "backends/gloo/gloo_plans.h"
#include "backends/gloo/gloo_transport.h"
#include "backends/interface/backend.h"

namespace plexus::gloo_backend {

inline constexpr char kGlooBackendName[] = "gloo";

class GlooBackend : public CollectivesBackend {
 public:
  // Connects the group's Gloo full mesh (collective over the group).
  static absl::StatusOr<std::shared_ptr<Backend>> Create(const BackendContext& context);

  std::string name() const override { return kGlooBackendName; }
  BackendCapabilities capabilities() const override;

 private:
  WorkPtr RunNatively(const Collective& call) override;

  GlooBackend(std::unique_ptr<executor::Collectives> collectives,
              std::shared_ptr<GlooTransport> transport, bool native)
      : CollectivesBackend(std::move(collectives)),
        transport_(std::move(transport)),
        native_(native) {}

  // Queues `plan` as the next collective. Its run gets the Gloo call (context, a tag derived
  // from the operation's signature so that mismatched calls never pair up, the time left); a
  // Gloo exception breaks the transport and fails the Work with the mapped status. On success
  // the Work's stats get the plan's traffic (Gloo counts no bytes).
  WorkPtr SubmitNative(GlooPlan plan);

  const std::shared_ptr<GlooTransport> transport_;
  const bool native_;
};

// The address Gloo's device binds to and advertises: $PLEXUS_GLOO_ADDR, else the address the
// dispatcher resolved for this rank (BackendContext::address).
std::string GlooDeviceAddress(const BackendContext& context);

// Sets SIGPIPE to ignored if it still has its default action (which would kill the process on
// a write to a dead peer, since Gloo does not pass MSG_NOSIGNAL). A handler the application
// installed is left alone.
void IgnoreSigpipeUnlessHandled();

}  // namespace plexus::gloo_backend

#endif  // PLEXUS_BACKENDS_GLOO_GLOO_BACKEND_H_
