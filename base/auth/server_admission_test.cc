// ServerAdmission driven the way an event-loop server drives it, against the blocking client
// side (TlsContext::Secure, AuthenticateToServer) on a socket pair.
#include "base/auth/server_admission.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/tls_contexts.h"

namespace plexus::auth {
namespace {

using ::testing::HasSubstr;
using Step = ServerAdmission::Step;

constexpr char kSecret[] = "a shared secret of 32 characters";

class ServerAdmissionTest : public ::testing::Test {
 protected:
  static std::shared_ptr<const TlsContext> Context(const std::string& name) {
    return plexus::testing::TestTlsContext(name);
  }

  void SetUp() override {
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
    client_fd_.Reset(fds[0]);
    server_fd_.Reset(fds[1]);
  }

  // The server's loop: TLS, then the challenge over what arrives, by a deadline.
  Step Admit(ServerAdmission& admission) {
    const int fd = server_fd_.get();
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    std::string input, output;
    while (absl::Now() < deadline) {
      if (!admission.secure()) {
        const Step step = admission.AdvanceTls();
        if (step == Step::kRejected) return step;
        if (step == Step::kNeedMore) {
          pollfd ready{fd, static_cast<short>(admission.wants_write() ? POLLOUT : POLLIN), 0};
          poll(&ready, 1, 100);
          continue;
        }
      }
      char buffer[4096];
      TlsSession* tls = admission.session();
      const ssize_t n =
          tls != nullptr ? tls->Read(buffer, sizeof(buffer)) : recv(fd, buffer, sizeof(buffer), 0);
      if (n > 0) input.append(buffer, static_cast<size_t>(n));
      const Step step = admission.Feed(input, output);
      while (!output.empty() || (tls != nullptr && tls->HasPendingOutput())) {
        iovec iov{output.data(), output.size()};
        const ssize_t sent = output.empty()   ? tls->Flush()
                             : tls != nullptr ? tls->Write(&iov, 1)
                                              : send(fd, output.data(), output.size(), 0);
        if (sent > 0) output.erase(0, static_cast<size_t>(sent));
        if (sent < 0 && errno != EAGAIN) break;
        if (sent <= 0) {
          pollfd ready{fd, POLLOUT, 0};
          poll(&ready, 1, 100);
        }
      }
      if (step != Step::kNeedMore) return step;
      if (n == 0) return Step::kRejected;  // The client gave up.
      if (n < 0) {
        pollfd ready{fd, POLLIN, 0};
        poll(&ready, 1, 100);
      }
    }
    return Step::kNeedMore;
  }

  // The client side on another thread: TLS when `tls` is set, then `secret` when non-empty.
  void Connect(std::shared_ptr<const TlsContext> tls, std::string secret) {
    client_ = std::thread([this, tls, secret] {
      const absl::Time deadline = absl::Now() + absl::Seconds(10);
      std::unique_ptr<TlsSession> session;
      if (tls != nullptr) {
        auto secured = tls->Secure(client_fd_.get(), TlsContext::Role::kClient, "test", deadline);
        client_status_ = secured.status();
        if (!secured.ok()) return (void)shutdown(client_fd_.get(), SHUT_RDWR);
        session = std::move(*secured);
      }
      if (!secret.empty()) {
        client_status_ = AuthenticateToServer(client_fd_.get(), secret, Purpose::kStore, "test",
                                              deadline, session.get());
      }
      if (!client_status_.ok()) shutdown(client_fd_.get(), SHUT_RDWR);
    });
  }
  absl::Status Joined() {
    client_.join();
    return client_status_;
  }

  ScopedFd client_fd_, server_fd_;
  std::thread client_;
  absl::Status client_status_;
};

TEST_F(ServerAdmissionTest, InTheClearWithoutASecretAClientIsInAtOnce) {
  auto admission = ServerAdmission::Begin(server_fd_.get(), nullptr, "", Purpose::kStore);
  ASSERT_NE(admission, nullptr);
  EXPECT_TRUE(admission->secure());
  EXPECT_FALSE(admission->authenticating());
  EXPECT_EQ(admission->session(), nullptr);
  std::string input = "the protocol's first bytes", output;
  EXPECT_EQ(admission->Feed(input, output), Step::kDone);
  EXPECT_EQ(input, "the protocol's first bytes");  // Left for the server's protocol.
  EXPECT_TRUE(output.empty());
}

TEST_F(ServerAdmissionTest, TheSecretAdmitsItsHoldersAndRefusesOthers) {
  for (const char* secret : {kSecret, "another secret, also long"}) {
    SetUp();  // A fresh socket pair for each client.
    auto admission = ServerAdmission::Begin(server_fd_.get(), nullptr, kSecret, Purpose::kStore);
    ASSERT_NE(admission, nullptr);
    EXPECT_TRUE(admission->authenticating());
    Connect(nullptr, secret);
    const Step step = Admit(*admission);
    const absl::Status client = Joined();
    if (std::string(secret) == kSecret) {
      EXPECT_EQ(step, Step::kDone) << admission->reason();
      EXPECT_FALSE(admission->authenticating());
      EXPECT_TRUE(client.ok()) << client;
    } else {
      EXPECT_EQ(step, Step::kRejected);
      EXPECT_TRUE(admission->authenticating());
      EXPECT_FALSE(client.ok());
    }
  }
}

TEST_F(ServerAdmissionTest, OverTlsTheChallengeRunsInsideTheChannel) {
  auto admission =
      ServerAdmission::Begin(server_fd_.get(), Context("server").get(), kSecret, Purpose::kStore);
  ASSERT_NE(admission, nullptr);
  ASSERT_NE(admission->session(), nullptr);
  EXPECT_FALSE(admission->secure());
  Connect(Context("client"), kSecret);
  EXPECT_EQ(Admit(*admission), Step::kDone) << admission->reason();
  EXPECT_TRUE(Joined().ok()) << client_status_;
  EXPECT_TRUE(admission->secure());
  EXPECT_FALSE(admission->authenticating());
}

TEST_F(ServerAdmissionTest, AClearTextClientOfATlsServerIsRefusedNamingWhy) {
  auto admission =
      ServerAdmission::Begin(server_fd_.get(), Context("server").get(), kSecret, Purpose::kStore);
  ASSERT_NE(admission, nullptr);
  Connect(nullptr, kSecret);
  EXPECT_EQ(Admit(*admission), Step::kRejected);
  EXPECT_FALSE(admission->reason().empty());
  EXPECT_FALSE(admission->secure());
  shutdown(server_fd_.get(), SHUT_RDWR);  // The server closes it: the client stops waiting.
  EXPECT_FALSE(Joined().ok());
}

}  // namespace
}  // namespace plexus::auth
