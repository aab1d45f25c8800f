#include "base/net/interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace plexus::net {

absl::StatusOr<std::vector<InterfaceAddress>> ListInterfaceAddresses() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    return absl::InternalError(absl::StrCat("getifaddrs: ", strerror(errno)));
  }
  std::vector<InterfaceAddress> found;
  for (ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr || !(entry->ifa_flags & IFF_UP)) continue;
    const int family = entry->ifa_addr->sa_family;
    char text[INET6_ADDRSTRLEN] = {0};
    if (family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(entry->ifa_addr)->sin_addr, text,
                sizeof(text));
    } else if (family == AF_INET6) {
      const in6_addr& address = reinterpret_cast<sockaddr_in6*>(entry->ifa_addr)->sin6_addr;
      if (IN6_IS_ADDR_LINKLOCAL(&address)) continue;
      inet_ntop(AF_INET6, &address, text, sizeof(text));
    } else {
      continue;
    }
    found.push_back({entry->ifa_name, text, family, (entry->ifa_flags & IFF_LOOPBACK) != 0});
  }
  freeifaddrs(list);
  return found;
}

std::string DescribeInterfaces(const std::vector<InterfaceAddress>& addresses) {
  if (addresses.empty()) return "none";
  std::string text;
  for (const InterfaceAddress& a : addresses) {
    absl::StrAppend(&text, text.empty() ? "" : ", ", a.interface, " ", a.address);
  }
  return text;
}

absl::StatusOr<InterfaceFilter> InterfaceFilter::Parse(absl::string_view spec,
                                                       absl::string_view variable) {
  InterfaceFilter filter;
  filter.description_ = absl::StrCat(variable, "=", spec);
  absl::string_view rest = spec;
  filter.exclude_ = absl::ConsumePrefix(&rest, "^");
  filter.exact_ = absl::ConsumePrefix(&rest, "=");
  for (absl::string_view name : absl::StrSplit(rest, ',', absl::SkipWhitespace())) {
    filter.names_.emplace_back(absl::StripAsciiWhitespace(name));
  }
  if (filter.names_.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(filter.description_,
                     " names no interface; use prefixes such as eth,ib, ^ to exclude "
                     "(^docker,lo) or = for exact names (=eth0)"));
  }
  return filter;
}

InterfaceFilter InterfaceFilter::ExactNames(absl::string_view names, absl::string_view variable) {
  InterfaceFilter filter;
  filter.description_ = absl::StrCat(variable, "=", names);
  filter.exact_ = true;
  for (absl::string_view name : absl::StrSplit(names, ',', absl::SkipWhitespace())) {
    filter.names_.emplace_back(absl::StripAsciiWhitespace(name));
  }
  return filter;
}

bool InterfaceFilter::Matches(absl::string_view interface) const {
  bool listed = false;
  for (const std::string& name : names_) {
    if (exact_ ? interface == name : absl::StartsWith(interface, name)) {
      listed = true;
      break;
    }
  }
  return listed != exclude_;
}

std::vector<InterfaceAddress> InterfaceFilter::Select(
    const std::vector<InterfaceAddress>& addresses) const {
  std::vector<InterfaceAddress> selected;
  for (const InterfaceAddress& address : addresses) {
    if (Matches(address.interface)) selected.push_back(address);
  }
  return selected;
}

absl::StatusOr<std::optional<InterfaceFilter>> InterfaceFilterFromEnvironment(
    const std::function<std::optional<std::string>(const std::string&)>& env) {
  if (auto spec = env("PLEXUS_SOCKET_IFNAME"); spec.has_value() && !spec->empty()) {
    absl::StatusOr<InterfaceFilter> filter = InterfaceFilter::Parse(*spec, "PLEXUS_SOCKET_IFNAME");
    if (!filter.ok()) return filter.status();
    return std::optional<InterfaceFilter>(*std::move(filter));
  }
  if (auto names = env("GLOO_SOCKET_IFNAME"); names.has_value() && !names->empty()) {
    return std::optional<InterfaceFilter>(
        InterfaceFilter::ExactNames(*names, "GLOO_SOCKET_IFNAME"));
  }
  return std::optional<InterfaceFilter>();
}

std::vector<InterfaceAddress> CandidateAddresses(const std::vector<InterfaceAddress>& addresses,
                                                 const std::optional<InterfaceFilter>& filter) {
  std::vector<InterfaceAddress> candidates;
  for (int family : {AF_INET, AF_INET6}) {
    for (const InterfaceAddress& a : addresses) {
      const bool allowed =
          filter.has_value() ? filter->Matches(a.interface) : IsDefaultCandidate(a);
      if (a.family == family && allowed) candidates.push_back(a);
    }
  }
  return candidates;
}

std::string FilteredInterfaceNames(
    const std::function<std::optional<std::string>(const std::string&)>& env) {
  auto filter = InterfaceFilterFromEnvironment(env);
  auto addresses = ListInterfaceAddresses();
  if (!filter.ok() || !filter->has_value() || !addresses.ok()) return "";
  std::vector<std::string> names;
  for (const InterfaceAddress& a : (*filter)->Select(*addresses)) {
    if (std::find(names.begin(), names.end(), a.interface) == names.end()) {
      names.push_back(a.interface);
    }
  }
  return absl::StrJoin(names, ",");
}

std::vector<std::string> MpirunInterfaceArgs(
    const std::function<std::optional<std::string>(const std::string&)>& env) {
  const std::string names = FilteredInterfaceNames(env);
  if (names.empty()) return {};
  return {"--mca", "btl_tcp_if_include", names, "--mca", "oob_tcp_if_include", names};
}

bool IsDefaultCandidate(const InterfaceAddress& address) {
  return !address.loopback && !absl::StartsWith(address.interface, "docker") &&
         !absl::StartsWith(address.interface, "virbr");
}

}  // namespace plexus::net
