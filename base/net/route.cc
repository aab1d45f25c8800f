#include "base/net/route.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace plexus::net {
namespace {

std::string AddressText(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = {0};
  if (address->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(address)->sin_addr, text,
              sizeof(text));
  } else if (address->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr, text,
              sizeof(text));
  }
  return text;
}

}  // namespace

bool IsLoopbackAddress(absl::string_view address) {
  return absl::StartsWith(address, "127.") || address == "::1" ||
         absl::StartsWithIgnoreCase(address, "::ffff:127.");
}

bool IsIpLiteral(absl::string_view host) {
  const std::string text(host);
  in_addr v4;
  in6_addr v6;
  return inet_pton(AF_INET, text.c_str(), &v4) == 1 || inet_pton(AF_INET6, text.c_str(), &v6) == 1;
}

absl::StatusOr<Route> RouteTo(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* results = nullptr;
  // Any port will do: connect() on a UDP socket only picks the route.
  const int rc = getaddrinfo(host.c_str(), "9", &hints, &results);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve '", host, "': ", gai_strerror(rc)));
  }
  std::string last_error = "no address";
  absl::StatusOr<Route> route = absl::UnavailableError("");
  for (addrinfo* ai = results; ai != nullptr; ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      last_error = strerror(errno);
      continue;
    }
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0) {
      last_error = absl::StrCat(AddressText(ai->ai_addr), ": ", strerror(errno));
      close(fd);
      continue;
    }
    close(fd);
    route = Route{AddressText(ai->ai_addr), AddressText(reinterpret_cast<sockaddr*>(&local))};
    break;
  }
  freeaddrinfo(results);
  if (!route.ok()) {
    return absl::UnavailableError(
        absl::StrCat("no route from this host to '", host, "' (", last_error, ")"));
  }
  return route;
}

}  // namespace plexus::net
