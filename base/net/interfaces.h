// The host's network interfaces and their addresses, and the interface filter users know from
// NCCL_SOCKET_IFNAME: "eth,ib" (name prefixes), "^docker,lo" (every interface but those),
// "=eth0" (exact names), "^=eth0" (every interface but exactly those).
#ifndef PLEXUS_BASE_NET_INTERFACES_H_
#define PLEXUS_BASE_NET_INTERFACES_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace plexus::net {

struct InterfaceAddress {
  std::string interface;  // "eth0"
  std::string address;    // "10.0.0.1", "fd00::1"
  int family = 0;         // AF_INET or AF_INET6
  bool loopback = false;
};

// Addresses of interfaces that are up, IPv4 and IPv6 (IPv6 link-local addresses are left out:
// they need a scope to be dialled), in the kernel's order.
absl::StatusOr<std::vector<InterfaceAddress>> ListInterfaceAddresses();

// "lo 127.0.0.1, eth0 10.0.0.1" for error messages.
std::string DescribeInterfaces(const std::vector<InterfaceAddress>& addresses);

class InterfaceFilter {
 public:
  // Parses NCCL's syntax; InvalidArgument names `variable` when the spec is empty.
  static absl::StatusOr<InterfaceFilter> Parse(absl::string_view spec, absl::string_view variable);
  // torch's GLOO_SOCKET_IFNAME: a comma-separated list of exact names.
  static InterfaceFilter ExactNames(absl::string_view names, absl::string_view variable);

  bool Matches(absl::string_view interface) const;
  // The addresses whose interface matches, in order.
  std::vector<InterfaceAddress> Select(const std::vector<InterfaceAddress>& addresses) const;
  // "PLEXUS_SOCKET_IFNAME=^docker", for messages.
  const std::string& description() const { return description_; }

 private:
  std::vector<std::string> names_;
  bool exclude_ = false;
  bool exact_ = false;
  std::string description_;
};

// The filter the environment sets: PLEXUS_SOCKET_IFNAME (NCCL's syntax), else torch's
// GLOO_SOCKET_IFNAME (exact names); nullopt when neither is set.
absl::StatusOr<std::optional<InterfaceFilter>> InterfaceFilterFromEnvironment(
    const std::function<std::optional<std::string>(const std::string&)>& env);

// The addresses a rank may offer, IPv4 before IPv6: those `filter` allows, or without a filter
// those IsDefaultCandidate accepts.
std::vector<InterfaceAddress> CandidateAddresses(const std::vector<InterfaceAddress>& addresses,
                                                 const std::optional<InterfaceFilter>& filter);

// The names of this host's interfaces that the environment's filter allows, comma-separated, as
// Open MPI's btl_tcp_if_include / oob_tcp_if_include take them; "" when no filter is set or
// nothing matches.
std::string FilteredInterfaceNames(
    const std::function<std::optional<std::string>(const std::string&)>& env);

// mpirun arguments that keep Open MPI's TCP traffic on those interfaces: {"--mca",
// "btl_tcp_if_include", names, "--mca", "oob_tcp_if_include", names}; empty without them.
std::vector<std::string> MpirunInterfaceArgs(
    const std::function<std::optional<std::string>(const std::string&)>& env);

// The interfaces plexus picks from when nothing says otherwise: not loopback and not the
// bridges container runtimes create (docker*, virbr*), as NCCL does.
bool IsDefaultCandidate(const InterfaceAddress& address);

}  // namespace plexus::net

#endif  // PLEXUS_BASE_NET_INTERFACES_H_
