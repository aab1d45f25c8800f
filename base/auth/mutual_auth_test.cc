// Mutual authentication over socket pairs: the same secret passes both ways; a wrong secret,
// no authentication at all, or another purpose is refused, each side saying why.
#include "base/auth/mutual_auth.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "base/net/socket_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace plexus::auth {
namespace {

using ::testing::HasSubstr;

constexpr absl::string_view kSecret = "correct horse battery staple";

struct Outcome {
  absl::Status client;
  absl::Status server;
};

Outcome Exchange(absl::string_view client_secret, absl::string_view server_secret,
                 Purpose client_purpose = Purpose::kStore,
                 Purpose server_purpose = Purpose::kStore) {
  int fds[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  ScopedFd client_fd(fds[0]);
  ScopedFd server_fd(fds[1]);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  Outcome outcome;
  std::thread server([&] {
    outcome.server =
        AuthenticateClient(server_fd.get(), server_secret, server_purpose, "client", deadline);
    server_fd.Reset();  // As a server does after a refusal.
  });
  outcome.client =
      AuthenticateToServer(client_fd.get(), client_secret, client_purpose, "server", deadline);
  server.join();
  return outcome;
}

TEST(MutualAuthTest, TheSameSecretPassesBothWays) {
  Outcome outcome = Exchange(kSecret, kSecret);
  EXPECT_TRUE(outcome.client.ok()) << outcome.client;
  EXPECT_TRUE(outcome.server.ok()) << outcome.server;
}

TEST(MutualAuthTest, AWrongSecretIsRefusedOnBothSides) {
  Outcome outcome = Exchange("another secret of enough bytes", kSecret);
  EXPECT_EQ(outcome.client.code(), absl::StatusCode::kUnauthenticated) << outcome.client;
  EXPECT_THAT(outcome.client.message(), HasSubstr("server does not know the shared secret"));
  EXPECT_EQ(outcome.server.code(), absl::StatusCode::kUnauthenticated) << outcome.server;
}

// A server that says nothing (overloaded, out of descriptors, or no plexus server) is not a
// refusal: the client reports the deadline and the likely causes.
TEST(MutualAuthTest, ASilentServerIsADeadlineNotARefusal) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  ScopedFd client_fd(fds[0]);
  ScopedFd silent(fds[1]);
  absl::Status status = AuthenticateToServer(client_fd.get(), kSecret, Purpose::kMaster, "master",
                                             absl::Now() + absl::Milliseconds(200));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_THAT(status.message(), HasSubstr("no answer in time"));
  EXPECT_THAT(status.message(), HasSubstr("out of file descriptors"));
}

// A server that closes before its challenge never judged the secret (it may have shed the
// connection to make room): Unavailable, which ConnectWithHandshake tries again, and no word
// about a wrong secret.
TEST(MutualAuthTest, ACloseBeforeTheChallengeIsUnavailableNotARefusal) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  ScopedFd client_fd(fds[0]);
  ScopedFd server_fd(fds[1]);
  std::thread server([&] {  // Reads the hello, then closes as a server shedding it does.
    char hello[kClientHelloBytes];
    (void)RecvExact(server_fd.get(), hello, sizeof(hello), absl::Now() + absl::Seconds(10));
    server_fd.Reset();
  });
  absl::Status status = AuthenticateToServer(client_fd.get(), kSecret, Purpose::kMaster, "master",
                                             absl::Now() + absl::Seconds(10));
  server.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(status.message(), HasSubstr("before its challenge"));
  EXPECT_THAT(status.message(), HasSubstr("out of file descriptors"));
  EXPECT_THAT(status.message(), ::testing::Not(HasSubstr("does not know")));
}

TEST(MutualAuthTest, AClientSpeakingTheProtocolDirectlyIsRefusedAtOnce) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  ScopedFd client(fds[0]);
  ScopedFd server(fds[1]);
  ASSERT_TRUE(SendAll(client.get(), "PLXS\x02\0\0\0", absl::Now() + absl::Seconds(1)).ok());
  const absl::Time start = absl::Now();
  absl::Status status = AuthenticateClient(server.get(), kSecret, Purpose::kStore, "10.0.0.9:5555",
                                           absl::Now() + absl::Seconds(10));
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(status.message(), HasSubstr("10.0.0.9:5555: sent no authentication"));
}

TEST(MutualAuthTest, AProofForAnotherKindOfConnectionIsRefused) {
  Outcome outcome = Exchange(kSecret, kSecret, Purpose::kData, Purpose::kStore);
  EXPECT_EQ(outcome.server.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(outcome.server.message(), HasSubstr("another kind of connection"));
  EXPECT_EQ(outcome.client.code(), absl::StatusCode::kUnauthenticated);
}

TEST(MutualAuthTest, TheEventLoopSideAcceptsBytesOneAtATime) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  ScopedFd client_fd(fds[0]);
  ScopedFd server_fd(fds[1]);
  absl::Status client;
  std::thread client_thread([&] {
    client = AuthenticateToServer(client_fd.get(), kSecret, Purpose::kMaster, "master",
                                  absl::Now() + absl::Seconds(10));
  });
  ServerHandshake handshake{std::string(kSecret), Purpose::kMaster};
  std::string input;
  std::string output;
  ServerHandshake::Step step = ServerHandshake::Step::kNeedMore;
  while (step == ServerHandshake::Step::kNeedMore) {
    char byte;
    ASSERT_TRUE(RecvExact(server_fd.get(), &byte, 1, absl::Now() + absl::Seconds(10)).ok());
    input.push_back(byte);
    step = handshake.Feed(input, output);
    if (!output.empty()) {
      ASSERT_TRUE(SendAll(server_fd.get(), output, absl::Now() + absl::Seconds(10)).ok());
      output.clear();
    }
  }
  client_thread.join();
  EXPECT_EQ(step, ServerHandshake::Step::kAccepted) << handshake.reason();
  EXPECT_TRUE(input.empty());
  EXPECT_TRUE(client.ok()) << client;
}

TEST(MutualAuthTest, SecretsComeFromTheEnvironmentOrAFileAndMustBeLongEnough) {
  unsetenv("PLEXUS_SECRET");
  unsetenv("PLEXUS_SECRET_FILE");
  EXPECT_EQ(*SecretFromEnvironment(), "");
  setenv("PLEXUS_SECRET", "short", 1);
  EXPECT_EQ(SecretFromEnvironment().status().code(), absl::StatusCode::kInvalidArgument);
  unsetenv("PLEXUS_SECRET");
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/secret";
  std::ofstream(path) << "sixteen or more bytes here\n";
  setenv("PLEXUS_SECRET_FILE", path.c_str(), 1);
  EXPECT_EQ(*SecretFromEnvironment(), "sixteen or more bytes here");
  setenv("PLEXUS_SECRET_FILE", "/nonexistent/secret", 1);
  EXPECT_THAT(SecretFromEnvironment().status().message(), HasSubstr("cannot read"));
  unsetenv("PLEXUS_SECRET_FILE");
}

}  // namespace
}  // namespace plexus::auth
