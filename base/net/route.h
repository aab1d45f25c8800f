// Asking the kernel which local address reaches a host: a UDP socket connected to the host
// (no packet is sent) reports, through getsockname, the source address of the route.
#ifndef PLEXUS_BASE_NET_ROUTE_H_
#define PLEXUS_BASE_NET_ROUTE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace plexus::net {

// 127.0.0.0/8, ::1 and IPv4-mapped 127.x.
bool IsLoopbackAddress(absl::string_view address);
// A numeric IPv4 or IPv6 address (not a name).
bool IsIpLiteral(absl::string_view host);

struct Route {
  std::string destination;    // The address `host` resolved to.
  std::string local_address;  // This host's source address towards it.
};

// The route to `host` (a name or a literal; each resolved address is tried in order).
// Unavailable, naming the host and why, when none is routable (for instance, only loopback
// exists and the host is elsewhere) or the name does not resolve.
absl::StatusOr<Route> RouteTo(const std::string& host);

}  // namespace plexus::net

#endif  // PLEXUS_BASE_NET_ROUTE_H_
