#include "base/auth/tls.h"

#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/auth/mutual_auth.h"
#include "gtest/gtest.h"
#include "tests/testing/tls_certificates.h"

namespace plexus::auth {
namespace {

using Role = TlsContext::Role;

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    directory_ = new std::string(std::getenv("TEST_TMPDIR"));
    ASSERT_TRUE(plexus::testing::WriteTlsCertificates(*directory_, {"alice", "bob"}).ok());
  }
  static TlsFiles Files(const std::string& name, bool verify = true) {
    return {Path(name + ".pem"), Path(name + ".key"), verify ? Path("ca.pem") : ""};
  }
  static std::string Path(const std::string& file) { return *directory_ + "/" + file; }

  // A connected socket pair, both ends non-blocking.
  void Pair(ScopedFd& a, ScopedFd& b) {
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
    a.Reset(fds[0]);
    b.Reset(fds[1]);
  }

  // Runs both handshakes at once; their results.
  std::pair<absl::StatusOr<std::unique_ptr<TlsSession>>,
            absl::StatusOr<std::unique_ptr<TlsSession>>>
  Connect(const TlsContext& client, const TlsContext& server, int client_fd, int server_fd) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    absl::StatusOr<std::unique_ptr<TlsSession>> accepted;
    std::thread serving(
        [&] { accepted = server.Secure(server_fd, Role::kServer, "client", deadline); });
    auto connected = client.Secure(client_fd, Role::kClient, "server", deadline);
    if (!connected.ok()) shutdown(client_fd, SHUT_RDWR);  // The server stops waiting.
    serving.join();
    return {std::move(connected), std::move(accepted)};
  }

  struct Linked {
    ScopedFd a, b;  // The client's socket, the server's.
    std::unique_ptr<TlsSession> client, server;
  };
  // alice (client) and bob (server), each verifying the other against the CA, connected.
  void Link(Linked& link) {
    auto alice = TlsContext::Create(Files("alice"));
    auto bob = TlsContext::Create(Files("bob"));
    ASSERT_TRUE(alice.ok() && bob.ok()) << alice.status() << bob.status();
    EXPECT_TRUE((*alice)->verifies_peers());
    Pair(link.a, link.b);
    auto [client, server] = Connect(**alice, **bob, link.a.get(), link.b.get());
    ASSERT_TRUE(client.ok()) << client.status();
    ASSERT_TRUE(server.ok()) << server.status();
    link.client = std::move(client).value();
    link.server = std::move(server).value();
  }

  // What a client whose certificate the server refused is told: by the handshake (TLS 1.2
  // style), or, in TLS 1.3, where its handshake ends first, by its first read.
  static std::string Refusal(absl::StatusOr<std::unique_ptr<TlsSession>>& client, int fd) {
    if (!client.ok()) return std::string(client.status().message());
    char byte;
    while (true) {
      const ssize_t n = (*client)->Read(&byte, 1);
      if (n >= 0 || errno != EAGAIN) {
        return n < 0 ? (*client)->LastError() : "the connection closed cleanly";
      }
      pollfd readable{fd, POLLIN, 0};
      if (poll(&readable, 1, 10000) == 0) return "no alert within 10 s";
    }
  }

  static std::string* directory_;
};

std::string* TlsTest::directory_ = nullptr;

TEST_F(TlsTest, MutualTlsCarriesDataBothWaysAndAgreesOnTheChannelBinding) {
  Linked link;
  ASSERT_NO_FATAL_FAILURE(Link(link));
  ScopedFd& a = link.a;
  ScopedFd& b = link.b;
  std::unique_ptr<TlsSession>& client = link.client;
  std::unique_ptr<TlsSession>& server = link.server;
  EXPECT_EQ(client->ChannelBinding(), server->ChannelBinding());
  EXPECT_EQ(client->ChannelBinding().size(), 32u);

  // 4 MiB one way while 4 MiB come back: the socket fills, records are left half sent, and
  // every byte still arrives once and in order.
  const size_t size = 4 << 20;
  std::string out(size, '\0'), back(size, '\0');
  for (size_t i = 0; i < size; ++i) {
    out[i] = static_cast<char>(i * 131 + 7);
    back[i] = static_cast<char>(i * 17 + 3);
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  std::string received_by_server(size, '\0');
  absl::Status serving;
  std::thread server_side([&] {
    serving = RecvExact(b.get(), server.get(), received_by_server.data(), size, deadline);
    if (serving.ok()) serving = SendAll(b.get(), server.get(), back, deadline);
  });
  ASSERT_TRUE(SendAll(a.get(), client.get(), out, deadline).ok());
  EXPECT_FALSE(client->HasPendingOutput());
  std::string received_by_client(size, '\0');
  ASSERT_TRUE(RecvExact(a.get(), client.get(), received_by_client.data(), size, deadline).ok());
  server_side.join();
  ASSERT_TRUE(serving.ok()) << serving;
  EXPECT_TRUE(received_by_server == out);
  EXPECT_TRUE(received_by_client == back);
}

TEST_F(TlsTest, FramesWrittenPieceByPieceArriveWhole) {
  Linked link;
  ASSERT_NO_FATAL_FAILURE(Link(link));
  TlsSession* client = link.client.get();
  TlsSession* server = link.server.get();
  // A header and payload in two pieces, the way the transport writes frames.
  std::string header(32, 'h'), payload(100000, 'p');
  size_t written = 0;
  const size_t total = header.size() + payload.size();
  std::string received;
  char buffer[65536];
  while (written < total || received.size() < total) {
    if (written < total) {
      iovec iov[2];
      int count = 0;
      if (written < header.size()) {
        iov[count++] = {header.data() + written, header.size() - written};
        iov[count++] = {payload.data(), payload.size()};
      } else {
        iov[count++] = {payload.data() + written - header.size(), total - written};
      }
      const ssize_t n = client->Write(iov, count);
      if (n > 0) written += static_cast<size_t>(n);
    } else if (client->HasPendingOutput()) {
      client->Flush();
    }
    const ssize_t n = server->Read(buffer, sizeof(buffer));
    if (n > 0) received.append(buffer, static_cast<size_t>(n));
  }
  EXPECT_EQ(received, header + payload);
}

TEST_F(TlsTest, ACertificateFromAnotherAuthorityIsRefused) {
  auto trusted = TlsContext::Create(Files("alice"));
  auto rogue = TlsContext::Create(Files("rogue"));
  ASSERT_TRUE(trusted.ok() && rogue.ok());
  ScopedFd a, b;
  Pair(a, b);
  auto [client, server] = Connect(**rogue, **trusted, a.get(), b.get());
  EXPECT_FALSE(client.ok() && server.ok());
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kUnauthenticated);
  // The refusing side names the certificate it refused, why, and the CA file it checked.
  const std::string refused(server.status().message());
  EXPECT_NE(refused.find("this side refused the peer's certificate (subject CN=rogue"),
            std::string::npos)
      << refused;
  EXPECT_NE(refused.find("unable to get local issuer certificate"), std::string::npos) << refused;
  EXPECT_NE(refused.find("checked against " + Path("ca.pem")), std::string::npos) << refused;
  // The refused side learns it from the alert, and names its own certificate file.
  const std::string told = Refusal(client, a.get());
  EXPECT_NE(told.find("alert unknown ca"), std::string::npos) << told;
  EXPECT_NE(told.find("the peer refused this side's certificate " + Path("rogue.pem") +
                      " (subject CN=rogue"),
            std::string::npos)
      << told;
}

TEST_F(TlsTest, AnExpiredCertificateIsRefusedNamingItsExpiry) {
  auto trusted = TlsContext::Create(Files("alice"));
  auto expired = TlsContext::Create(Files("expired"));
  ASSERT_TRUE(trusted.ok() && expired.ok()) << trusted.status() << expired.status();
  ScopedFd a, b;
  Pair(a, b);
  auto [client, server] = Connect(**expired, **trusted, a.get(), b.get());
  ASSERT_FALSE(server.ok());
  const std::string refused(server.status().message());
  EXPECT_NE(refused.find("certificate has expired"), std::string::npos) << refused;
  EXPECT_NE(refused.find("subject CN=expired"), std::string::npos) << refused;
  EXPECT_NE(refused.find("valid until "), std::string::npos) << refused;
  const std::string told = Refusal(client, a.get());
  EXPECT_NE(told.find("alert certificate expired"), std::string::npos) << told;
  EXPECT_NE(told.find("the peer refused this side's certificate " + Path("expired.pem")),
            std::string::npos)
      << told;
}

TEST_F(TlsTest, WithoutACaTrafficIsEncryptedButAnyCertificateIsAccepted) {
  auto alice = TlsContext::Create(Files("alice", /*verify=*/false));
  auto rogue = TlsContext::Create(Files("rogue", /*verify=*/false));
  ASSERT_TRUE(alice.ok() && rogue.ok());
  EXPECT_FALSE((*alice)->verifies_peers());
  ScopedFd a, b;
  Pair(a, b);
  auto [client, server] = Connect(**rogue, **alice, a.get(), b.get());
  EXPECT_TRUE(client.ok() && server.ok());
}

TEST_F(TlsTest, AClearTextPeerIsRefusedNotDowngraded) {
  auto alice = TlsContext::Create(Files("alice"));
  ScopedFd a, b;
  Pair(a, b);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  std::thread clear_text_client([&] {
    ASSERT_TRUE(
        SendAll(a.get(), "PLXA\x01\x01\x00\x00 not a TLS client hello at all", deadline).ok());
  });
  auto server = (*alice)->Secure(b.get(), Role::kServer, "a clear-text client", deadline);
  clear_text_client.join();
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(server.status().message().find("a clear-text client"), std::string::npos);

  ScopedFd c, d;
  Pair(c, d);
  d.Reset();  // A server that hangs up on a TLS hello.
  auto client = (*alice)->Secure(c.get(), Role::kClient, "a clear-text server", deadline);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnauthenticated) << client.status();
}

TEST_F(TlsTest, TheSharedSecretExchangeRunsInsideTheChannelAndIsBoundToIt) {
  Linked link;
  ASSERT_NO_FATAL_FAILURE(Link(link));
  const std::string secret = "a secret both sides know well";
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  absl::Status accepted;
  std::thread serving([&] {
    accepted = AuthenticateClient(link.b.get(), secret, Purpose::kStore, "client", deadline,
                                  link.server.get());
  });
  EXPECT_TRUE(AuthenticateToServer(link.a.get(), secret, Purpose::kStore, "server", deadline,
                                   link.client.get())
                  .ok());
  serving.join();
  EXPECT_TRUE(accepted.ok()) << accepted;

  // A proof computed for another channel (here: none) does not pass on this one.
  ServerHandshake bound(secret, Purpose::kStore, link.server->ChannelBinding());
  ServerHandshake unbound(secret, Purpose::kStore, "");
  std::string hello =
      std::string(kHelloMagic) + std::string("\x01\x01\x00\x00", 4) + std::string(kNonceBytes, 'n');
  std::string input = hello, output_bound, output_unbound;
  bound.Feed(input, output_bound);
  input = hello;
  unbound.Feed(input, output_unbound);
  EXPECT_NE(output_bound.substr(kNonceBytes), output_unbound.substr(kNonceBytes));
}

TEST_F(TlsTest, BadConfigurationsNameTheFile) {
  auto missing = TlsContext::Create({Path("absent.pem"), Path("alice.key"), ""});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("absent.pem"), std::string::npos);
  auto no_key = TlsContext::Create({Path("alice.pem"), Path("absent.key"), ""});
  ASSERT_FALSE(no_key.ok());
  EXPECT_NE(no_key.status().message().find("cannot use private key " + Path("absent.key")),
            std::string::npos)
      << no_key.status();
  auto no_ca = TlsContext::Create({Path("alice.pem"), Path("alice.key"), Path("absent_ca.pem")});
  ASSERT_FALSE(no_ca.ok());
  EXPECT_NE(no_ca.status().message().find("cannot load CA bundle " + Path("absent_ca.pem")),
            std::string::npos)
      << no_ca.status();
  auto mismatched = TlsContext::Create({Path("alice.pem"), Path("bob.key"), ""});
  ASSERT_FALSE(mismatched.ok());
  EXPECT_NE(mismatched.status().message().find("bob.key"), std::string::npos);
  EXPECT_NE(mismatched.status().message().find("mismatch"), std::string::npos)
      << mismatched.status();
  setenv("PLEXUS_TLS_CA", Path("ca.pem").c_str(), 1);
  unsetenv("PLEXUS_TLS_CERT");
  EXPECT_FALSE(TlsFilesFromEnvironment().ok());
  unsetenv("PLEXUS_TLS_CA");
  auto none = TlsContext::Resolve(std::nullopt);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
}

}  // namespace
}  // namespace plexus::auth
