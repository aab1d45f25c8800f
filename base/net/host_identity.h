// Which "host" this process is on, as far as the network is concerned: ranks with the same
// identity share a network stack, so loopback reaches between them. Network namespaces on one
// machine count as different hosts.
#ifndef PLEXUS_BASE_NET_HOST_IDENTITY_H_
#define PLEXUS_BASE_NET_HOST_IDENTITY_H_

#include <string>

namespace plexus::net {

// "<hostname>/<boot id>/<network namespace inode>"; stable for the life of the process.
std::string NetworkHostIdentity();

}  // namespace plexus::net

#endif  // PLEXUS_BASE_NET_HOST_IDENTITY_H_
