#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/net/host_identity.h"
#include "base/net/interfaces.h"
#include "base/net/route.h"
#include "base/net/socket_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace plexus::net {
namespace {

using ::testing::HasSubstr;

TEST(InterfaceFilterTest, PrefixesMatchTheStartOfNames) {
  auto filter = InterfaceFilter::Parse("eth,ib", "PLEXUS_SOCKET_IFNAME");
  ASSERT_TRUE(filter.ok()) << filter.status();
  EXPECT_TRUE(filter->Matches("eth0"));
  EXPECT_TRUE(filter->Matches("ib1"));
  EXPECT_FALSE(filter->Matches("lo"));
  EXPECT_FALSE(filter->Matches("veth0"));
  EXPECT_EQ(filter->description(), "PLEXUS_SOCKET_IFNAME=eth,ib");
}

TEST(InterfaceFilterTest, CaretExcludes) {
  auto filter = InterfaceFilter::Parse("^docker,lo", "X");
  ASSERT_TRUE(filter.ok());
  EXPECT_FALSE(filter->Matches("docker0"));
  EXPECT_FALSE(filter->Matches("lo"));
  EXPECT_TRUE(filter->Matches("eth0"));
}

TEST(InterfaceFilterTest, EqualsMeansExactNames) {
  auto exact = InterfaceFilter::Parse("=eth0", "X");
  ASSERT_TRUE(exact.ok());
  EXPECT_TRUE(exact->Matches("eth0"));
  EXPECT_FALSE(exact->Matches("eth01"));
  auto not_exact = InterfaceFilter::Parse("^=eth0", "X");
  ASSERT_TRUE(not_exact.ok());
  EXPECT_FALSE(not_exact->Matches("eth0"));
  EXPECT_TRUE(not_exact->Matches("eth01"));
}

TEST(InterfaceFilterTest, EmptySpecIsAnErrorNamingTheVariable) {
  for (const char* spec : {"", "^", "=", "^=", " , "}) {
    auto filter = InterfaceFilter::Parse(spec, "PLEXUS_SOCKET_IFNAME");
    ASSERT_FALSE(filter.ok()) << spec;
    EXPECT_THAT(std::string(filter.status().message()), HasSubstr("PLEXUS_SOCKET_IFNAME"));
  }
}

TEST(InterfaceFilterTest, GlooNamesAreExact) {
  InterfaceFilter filter = InterfaceFilter::ExactNames("eth0,eth1", "GLOO_SOCKET_IFNAME");
  EXPECT_TRUE(filter.Matches("eth1"));
  EXPECT_FALSE(filter.Matches("eth10"));
}

TEST(InterfaceFilterTest, FromEnvironmentPrefersPlexusVariable) {
  auto env = [](const std::string& name) -> std::optional<std::string> {
    if (name == "PLEXUS_SOCKET_IFNAME") return std::string("lo");
    if (name == "GLOO_SOCKET_IFNAME") return std::string("eth0");
    return std::nullopt;
  };
  auto filter = InterfaceFilterFromEnvironment(env);
  ASSERT_TRUE(filter.ok());
  ASSERT_TRUE(filter->has_value());
  EXPECT_TRUE((*filter)->Matches("lo"));
  EXPECT_FALSE((*filter)->Matches("eth0"));
  auto none = InterfaceFilterFromEnvironment([](const std::string&) { return std::nullopt; });
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(InterfacesTest, LoopbackIsListedAndNotADefaultCandidate) {
  auto all = ListInterfaceAddresses();
  ASSERT_TRUE(all.ok()) << all.status();
  auto lo = std::find_if(all->begin(), all->end(),
                         [](const InterfaceAddress& a) { return a.address == "127.0.0.1"; });
  ASSERT_NE(lo, all->end()) << DescribeInterfaces(*all);
  EXPECT_TRUE(lo->loopback);
  EXPECT_EQ(lo->family, AF_INET);
  EXPECT_FALSE(IsDefaultCandidate(*lo));
  EXPECT_FALSE(IsDefaultCandidate({"docker0", "172.17.0.1", AF_INET, false}));
  EXPECT_TRUE(IsDefaultCandidate({"eth0", "10.0.0.1", AF_INET, false}));
  EXPECT_THAT(DescribeInterfaces(*all), HasSubstr("127.0.0.1"));
}

TEST(InterfacesTest, CandidatesPutIPv4FirstAndFollowTheFilter) {
  const std::vector<InterfaceAddress> all = {{"lo", "::1", AF_INET6, true},
                                             {"eth0", "fd00::2", AF_INET6, false},
                                             {"lo", "127.0.0.1", AF_INET, true},
                                             {"docker0", "172.17.0.1", AF_INET, false},
                                             {"eth0", "10.0.0.2", AF_INET, false}};
  std::vector<std::string> defaults;
  for (const auto& a : CandidateAddresses(all, std::nullopt)) defaults.push_back(a.address);
  EXPECT_EQ(defaults, (std::vector<std::string>{"10.0.0.2", "fd00::2"}));
  auto only_lo = InterfaceFilter::Parse("=lo", "X");
  ASSERT_TRUE(only_lo.ok());
  std::vector<std::string> filtered;
  for (const auto& a : CandidateAddresses(all, *only_lo)) filtered.push_back(a.address);
  EXPECT_EQ(filtered, (std::vector<std::string>{"127.0.0.1", "::1"}));
}

TEST(InterfacesTest, FilteredInterfaceNamesAreUniqueAndEmptyWithoutAFilter) {
  EXPECT_EQ(FilteredInterfaceNames([](const std::string&) { return std::nullopt; }), "");
  auto lo = [](const std::string& name) -> std::optional<std::string> {
    if (name == "PLEXUS_SOCKET_IFNAME") return std::string("=lo");
    return std::nullopt;
  };
  EXPECT_EQ(FilteredInterfaceNames(lo), "lo");  // lo has 127.0.0.1 and maybe ::1: listed once.
  EXPECT_EQ(MpirunInterfaceArgs(lo),
            (std::vector<std::string>{"--mca", "btl_tcp_if_include", "lo", "--mca",
                                      "oob_tcp_if_include", "lo"}));
}

TEST(RouteTest, AddressClassification) {
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackAddress("127.0.1.1"));
  EXPECT_TRUE(IsLoopbackAddress("::1"));
  EXPECT_TRUE(IsLoopbackAddress("::ffff:127.0.0.1"));
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.1"));
  EXPECT_FALSE(IsLoopbackAddress("1270.0.0.1"));
  EXPECT_TRUE(IsIpLiteral("10.0.0.1"));
  EXPECT_TRUE(IsIpLiteral("fd00::1"));
  EXPECT_FALSE(IsIpLiteral("node001"));
  EXPECT_FALSE(IsIpLiteral("localhost"));
}

TEST(RouteTest, LoopbackRoutesFromLoopback) {
  auto route = RouteTo("127.0.0.1");
  ASSERT_TRUE(route.ok()) << route.status();
  EXPECT_EQ(route->destination, "127.0.0.1");
  EXPECT_EQ(route->local_address, "127.0.0.1");
}

TEST(RouteTest, IPv6LoopbackWhenTheHostHasIt) {
  auto all = ListInterfaceAddresses();
  ASSERT_TRUE(all.ok());
  if (std::none_of(all->begin(), all->end(),
                   [](const InterfaceAddress& a) { return a.address == "::1"; })) {
    GTEST_SKIP() << "no ::1 here";
  }
  auto route = RouteTo("::1");
  ASSERT_TRUE(route.ok()) << route.status();
  EXPECT_EQ(route->local_address, "::1");
}

TEST(RouteTest, UnresolvableHostIsUnavailableAndNamed) {
  auto route = RouteTo("no-such-host.invalid");
  ASSERT_FALSE(route.ok());
  EXPECT_TRUE(absl::IsUnavailable(route.status())) << route.status();
  EXPECT_THAT(std::string(route.status().message()), HasSubstr("no-such-host.invalid"));
}

TEST(HostIdentityTest, StableAndNamesTheNetworkNamespace) {
  const std::string identity = NetworkHostIdentity();
  EXPECT_EQ(identity, NetworkHostIdentity());
  EXPECT_EQ(std::count(identity.begin(), identity.end(), '/'), 2) << identity;
  EXPECT_NE(identity.substr(identity.rfind('/') + 1), "0") << identity;
}

}  // namespace
}  // namespace plexus::net

namespace plexus {
namespace {

TEST(HostPortTest, ParsesWhatHostPortWrites) {
  for (const auto& [host, port] : std::vector<std::pair<std::string, int>>{
           {"127.0.0.1", 29500}, {"::1", 0}, {"node-3.cluster", 65535}, {"fe80::1", 1}}) {
    absl::StatusOr<std::pair<std::string, int>> parsed = ParseHostPort(HostPort(host, port));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, std::make_pair(host, port));
  }
}

TEST(HostPortTest, AnythingElseIsAnErrorNamingTheText) {
  for (const char* text : {"nohost", ":29500", "host:", "host:65536", "host:-1", "host:x",
                           "[::1]29500", "[::1", "", "[]:1"}) {
    absl::StatusOr<std::pair<std::string, int>> parsed = ParseHostPort(text);
    ASSERT_FALSE(parsed.ok()) << "'" << text << "'";
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(),
                ::testing::HasSubstr(std::string("'") + text + "' is not host:port"));
  }
}

// A listener whose server closes the first `closes` connections at once, then answers each
// with one byte.
class ClosingServer {
 public:
  explicit ClosingServer(int closes) : closes_(closes) {
    auto listener = ListenTcp("127.0.0.1", 0);
    EXPECT_TRUE(listener.ok()) << listener.status();
    listener_ = std::move(listener).value();
    port_ = LocalPort(listener_.get()).value();
    thread_ = std::thread([this] { Serve(); });
  }
  ~ClosingServer() {
    stop_.store(true);
    thread_.join();
  }
  int port() const { return port_; }
  int accepted() const { return accepted_.load(); }

 private:
  void Serve() {
    while (!stop_.load()) {
      pollfd ready{listener_.get(), POLLIN, 0};
      if (poll(&ready, 1, 20) <= 0) continue;
      ScopedFd fd(accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!fd.valid()) continue;
      if (accepted_.fetch_add(1) >= closes_)
        (void)SendAll(fd.get(), "!", absl::Now() + absl::Seconds(1));
    }
  }

  const int closes_;
  ScopedFd listener_;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

absl::Status ReadOneByte(int fd) {
  char byte;
  return RecvExact(fd, &byte, 1, absl::Now() + absl::Seconds(5));
}

TEST(ConnectWithHandshakeTest, AConnectionClosedBeforeAnAnswerIsTriedAgain) {
  ClosingServer server(/*closes=*/3);
  auto fd = ConnectWithHandshake("127.0.0.1", server.port(), absl::Now() + absl::Seconds(10),
                                 ReadOneByte);
  ASSERT_TRUE(fd.ok()) << fd.status();
  EXPECT_EQ(server.accepted(), 4);
}

TEST(ConnectWithHandshakeTest, AServerThatClosesEveryTryIsReportedSoonWithTheCount) {
  ClosingServer server(/*closes=*/1 << 30);
  const absl::Time start = absl::Now();
  auto fd = ConnectWithHandshake("127.0.0.1", server.port(), absl::Now() + absl::Seconds(60),
                                 ReadOneByte);
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kUnavailable) << fd.status();
  EXPECT_THAT(fd.status().message(), ::testing::HasSubstr("connections, each closed before"));
  EXPECT_LT(absl::Now() - start, kRetryClosedHandshakesFor + absl::Seconds(2));
}

TEST(ConnectWithHandshakeTest, OtherFailuresAreNotTriedAgain) {
  ClosingServer server(/*closes=*/0);
  int tries = 0;
  auto fd = ConnectWithHandshake("127.0.0.1", server.port(), absl::Now() + absl::Seconds(10),
                                 [&tries](int) {
                                   ++tries;
                                   return absl::UnauthenticatedError("wrong proof");
                                 });
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(tries, 1);
}

}  // namespace
}  // namespace plexus
