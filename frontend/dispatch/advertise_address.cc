#include "frontend/dispatch/advertise_address.h"

#include <sys/socket.h>

#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/core/logging.h"
#include "base/core/status_macros.h"
#include "base/net/host_identity.h"
#include "base/net/interfaces.h"
#include "base/net/route.h"

namespace plexus {
namespace {

constexpr char kOverrideHint[] =
    "set PLEXUS_SOCKET_IFNAME to the interface the ranks share (e.g. =eth0, or a prefix such as "
    "eth,ib) or PLEXUS_TCP_ADDR to this rank's address";

struct Choice {
  std::string address;
  std::string reason;
};

// An address from the interfaces the user's filter allows, preferring the route to the store.
absl::StatusOr<Choice> FromFilter(const net::InterfaceFilter& filter,
                                  const std::optional<net::Route>& route, int rank) {
  ASSIGN_OR_RETURN(std::vector<net::InterfaceAddress> all, net::ListInterfaceAddresses());
  std::vector<net::InterfaceAddress> allowed = filter.Select(all);
  if (allowed.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, ": ", filter.description(),
                                                   " matches no interface with an address; "
                                                   "interfaces here: ",
                                                   net::DescribeInterfaces(all)));
  }
  const std::string why = absl::StrCat("interface from ", filter.description());
  if (route.has_value()) {
    for (const net::InterfaceAddress& a : allowed) {
      if (a.address == route->local_address) {
        return Choice{a.address,
                      absl::StrCat(why, " (", a.interface, ", on the route to the store)")};
      }
    }
  }
  // Same family as the store's route when known, IPv4 otherwise; real interfaces first.
  const int family =
      route.has_value() && route->local_address.find(':') != std::string::npos ? AF_INET6 : AF_INET;
  for (bool same_family : {true, false}) {
    for (const net::InterfaceAddress& a : allowed) {
      if (!a.loopback && (a.family == family || !same_family)) {
        return Choice{a.address, absl::StrCat(why, " (", a.interface, ")")};
      }
    }
  }
  return Choice{allowed.front().address, absl::StrCat(why, " (", allowed.front().interface, ")")};
}

// The first interface address that is neither loopback nor a container bridge; `described`
// receives the host's interfaces, for messages.
std::optional<std::string> FirstDefaultInterface(std::string* described) {
  auto all = net::ListInterfaceAddresses();
  if (!all.ok()) return std::nullopt;
  *described = net::DescribeInterfaces(*all);
  std::vector<net::InterfaceAddress> candidates = net::CandidateAddresses(*all, std::nullopt);
  if (candidates.empty()) return std::nullopt;
  return candidates.front().address;
}

// The route this host takes to the store, when the store's host is known.
absl::StatusOr<std::optional<net::Route>> RouteToStore(const AdvertiseAddressOptions& options) {
  if (options.store_host.empty()) return std::nullopt;
  absl::StatusOr<net::Route> found = net::RouteTo(options.store_host);
  if (found.ok()) return *found;
  std::string interfaces;
  FirstDefaultInterface(&interfaces);
  return absl::UnavailableError(absl::StrCat(
      "rank ", options.rank, " cannot reach the store at '", options.store_host,
      "': ", found.status().message(), "; interfaces here: ", interfaces, "; ", kOverrideHint));
}

// What a rank chooses without its peers: PLEXUS_TCP_ADDR, the user's interface filter, or the
// route to the store when that is not loopback.
absl::StatusOr<std::optional<Choice>> ChooseAlone(const AdvertiseAddressOptions& options,
                                                  const EnvLookup& env,
                                                  const std::optional<net::Route>& route) {
  ASSIGN_OR_RETURN(std::optional<net::InterfaceFilter> filter,
                   net::InterfaceFilterFromEnvironment(env));
  if (auto fixed = env("PLEXUS_TCP_ADDR"); fixed.has_value() && !fixed->empty()) {
    return Choice{*fixed, "PLEXUS_TCP_ADDR"};
  }
  if (filter.has_value()) return FromFilter(*filter, route, options.rank);
  if (route.has_value() && !net::IsLoopbackAddress(route->local_address)) {
    return Choice{route->local_address,
                  absl::StrCat("the route to the store at ", options.store_host, " (",
                               route->destination, ")")};
  }
  return std::nullopt;
}

// The route to the first rank on another host that published a reachable address; the ranks
// on other hosts are added to `remote_ranks` up to it.
std::optional<Choice> RouteToRemoteRank(const std::vector<std::string>& entries,
                                        const std::string& identity,
                                        std::vector<int>& remote_ranks) {
  for (int r = 0; r < static_cast<int>(entries.size()); ++r) {
    const size_t space = entries[r].find(' ');
    if (space == std::string::npos || entries[r].substr(0, space) == identity) continue;
    remote_ranks.push_back(r);
    const std::string address = entries[r].substr(space + 1);
    if (address.empty() || net::IsLoopbackAddress(address)) continue;
    auto to_peer = net::RouteTo(address);
    if (to_peer.ok() && !net::IsLoopbackAddress(to_peer->local_address)) {
      return Choice{to_peer->local_address,
                    absl::StrCat("the route to rank ", r, " at ", address,
                                 " (the store is on loopback here, other ranks are not)")};
    }
  }
  return std::nullopt;
}

// A rank left with loopback after the exchange: loopback when every rank is on this host,
// else the route to a rank elsewhere, else the first interface that is not loopback.
absl::StatusOr<Choice> ChooseFromPeers(Store& store, const AdvertiseAddressOptions& options,
                                       const std::string& identity,
                                       const std::optional<net::Route>& route) {
  ASSIGN_OR_RETURN(int64_t local_ranks, store.Add(absl::StrCat("net/host/", identity), 0));
  if (local_ranks == options.size) {
    return Choice{route.has_value() ? route->local_address : "127.0.0.1",
                  absl::StrCat("every one of the ", options.size, " ranks runs on this host")};
  }
  std::vector<std::string> keys;
  for (int r = 0; r < options.size; ++r) keys.push_back(absl::StrCat("net/rank/", r));
  ASSIGN_OR_RETURN(std::vector<std::string> entries, store.MultiGet(keys));
  std::vector<int> remote_ranks;
  if (std::optional<Choice> to_peer = RouteToRemoteRank(entries, identity, remote_ranks)) {
    return *to_peer;
  }
  std::string interfaces;
  if (std::optional<std::string> any = FirstDefaultInterface(&interfaces)) {
    return Choice{*any,
                  "the first interface that is not loopback (ranks run on several hosts and the "
                  "store's host is unknown)"};
  }
  std::string message = absl::StrCat("rank ", options.rank, ": ");
  if (remote_ranks.size() == 1) {
    absl::StrAppend(&message, "rank ", remote_ranks[0], " runs");
  } else {
    absl::StrAppend(&message, "ranks ", absl::StrJoin(remote_ranks, ", "), " run");
  }
  absl::StrAppend(&message, " on another host, but the only address here is loopback (interfaces: ",
                  interfaces, "), which they cannot reach; ", kOverrideHint);
  return absl::FailedPreconditionError(message);
}

}  // namespace

absl::StatusOr<std::string> ResolveAdvertiseAddress(Store& store,
                                                    const AdvertiseAddressOptions& options,
                                                    const EnvLookup& env) {
  const int rank = options.rank;
  ASSIGN_OR_RETURN(std::optional<net::Route> route, RouteToStore(options));
  ASSIGN_OR_RETURN(std::optional<Choice> choice, ChooseAlone(options, env, route));

  // Every rank publishes where it is and what it would use, so ranks left with loopback can
  // tell whether anyone else needs to reach them.
  const std::string identity = net::NetworkHostIdentity();
  std::string tentative;
  if (choice.has_value()) {
    tentative = choice->address;
  } else if (route.has_value()) {
    tentative = route->local_address;
  }
  RETURN_IF_ERROR(
      store.Set(absl::StrCat("net/rank/", rank), absl::StrCat(identity, " ", tentative)));
  RETURN_IF_ERROR(store.Add(absl::StrCat("net/host/", identity), 1).status());
  RETURN_IF_ERROR(StoreBarrier(store, "net", rank, options.size, options.timeout));

  if (!choice.has_value()) {
    ASSIGN_OR_RETURN(choice, ChooseFromPeers(store, options, identity, route));
  }
  if (LogEnabled(LogLevel::kDebug)) {
    Log(LogLevel::kDebug,
        absl::StrCat("rank ", rank, " advertises ", choice->address, ": ", choice->reason));
  }
  return choice->address;
}

}  // namespace plexus
