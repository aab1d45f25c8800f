// GlooBackend: registered as "gloo" (cpu tensors), over Debian's libgloo. A Gloo context per
// group, built from the group's store (GlooStoreAdapter) and Gloo's TCP transport; every
// collective runs through algorithms/ over a GlooTransport (Gloo's unbound buffers), so all
// collectives, dtypes and ops are served. See docs/backends.md.
#ifndef PLEXUS_BACKENDS_GLOO_GLOO_BACKEND_H_
#define PLEXUS_BACKENDS_GLOO_GLOO_BACKEND_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "backends/common/collectives_backend.h"
#include "frontend/dispatch/backend.h"

namespace plexus {

inline constexpr char kGlooBackendName[] = "gloo";

class GlooBackend : public CollectivesBackend {
 public:
  // Connects the group's Gloo full mesh (collective over the group).
  static absl::StatusOr<std::shared_ptr<Backend>> Create(const BackendContext& context);

  std::string name() const override { return kGlooBackendName; }
  BackendCapabilities capabilities() const override;

 private:
  using CollectivesBackend::CollectivesBackend;
};

// The address Gloo's device binds to: $PLEXUS_GLOO_ADDR, else $PLEXUS_TCP_ADDR, else this
// host's name (Gloo resolves it).
std::string GlooDeviceHostname();

// Sets SIGPIPE to ignored if it still has its default action (which would kill the process on
// a write to a dead peer, since Gloo does not pass MSG_NOSIGNAL). A handler the application
// installed is left alone.
void IgnoreSigpipeUnlessHandled();

}  // namespace plexus

#endif  // PLEXUS_BACKENDS_GLOO_GLOO_BACKEND_H_
