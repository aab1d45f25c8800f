// TCPStore over TLS: clients with certificates from the job's CA get in and their traffic is
// encrypted on the wire; clear-text clients, clients with certificates from another CA and
// TLS clients of a clear-text server are refused while the server keeps serving.
#include <sys/socket.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/auth/tls.h"
#include "base/net/socket_util.h"
#include "base/store/tcp_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/recording_relay.h"
#include "tests/testing/tls_certificates.h"

namespace plexus {
namespace {

using ::testing::HasSubstr;

class TCPStoreTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    directory_ = new std::string(std::getenv("TEST_TMPDIR"));
    ASSERT_TRUE(plexus::testing::WriteTlsCertificates(*directory_, {"server", "worker"}).ok());
  }
  static auth::TlsFiles Files(const std::string& name) {
    return {Path(name + ".pem"), Path(name + ".key"), Path("ca.pem")};
  }
  static std::string Path(const std::string& file) { return *directory_ + "/" + file; }

  static std::unique_ptr<TCPStore> Server(std::optional<auth::TlsFiles> tls,
                                          std::string secret = "") {
    TCPStoreOptions options;
    options.is_server = true;
    options.wait_for_workers = false;
    options.timeout = absl::Seconds(10);
    options.tls = std::move(tls);
    options.secret = std::move(secret);
    auto store = TCPStore::Create(options);
    EXPECT_TRUE(store.ok()) << store.status();
    return std::move(store).value();
  }
  static absl::StatusOr<std::unique_ptr<TCPStore>> Client(int port,
                                                          std::optional<auth::TlsFiles> tls,
                                                          std::string secret = "") {
    TCPStoreOptions options;
    options.port = port;
    options.timeout = absl::Seconds(5);
    options.tls = std::move(tls);
    options.secret = std::move(secret);
    return TCPStore::Create(options);
  }

  static std::string* directory_;
};

std::string* TCPStoreTlsTest::directory_ = nullptr;

TEST_F(TCPStoreTlsTest, ClientsOfTheJobsCaWorkAndTheirTrafficIsEncrypted) {
  const std::string secret = "the job's shared secret, long enough";
  auto server = Server(Files("server"), secret);
  plexus::testing::RecordingRelay relay(server->port());
  auto client = Client(relay.port(), Files("worker"), secret);
  ASSERT_TRUE(client.ok()) << client.status();
  const std::string value(100000, 'V');  // Large: several records, some sent in pieces.
  ASSERT_TRUE((*client)->Set("plain-looking-key", value).ok());
  EXPECT_EQ(*(*client)->Get("plain-looking-key"), value);
  EXPECT_EQ(*(*client)->Add("counter", 5), 5);
  // Parked requests work, and concurrent clients too.
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(4);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      auto worker = Client(server->port(), Files("worker"), secret);
      if (!worker.ok()) {
        results[i] = worker.status();
        return;
      }
      results[i] = (*worker)->Wait({"go"}, absl::Seconds(10));
      if (results[i].ok()) results[i] = (*worker)->Add("arrived", 1).status();
    });
  }
  ASSERT_TRUE((*client)->Set("go", "1").ok());
  for (auto& thread : threads) thread.join();
  for (const absl::Status& result : results) EXPECT_TRUE(result.ok()) << result;
  EXPECT_EQ(*(*client)->Add("arrived", 0), 4);
  const std::string carried = relay.Carried();
  EXPECT_GT(carried.size(), value.size());
  EXPECT_EQ(carried.find("plain-looking-key"), std::string::npos);
  EXPECT_EQ(carried.find(std::string(64, 'V')), std::string::npos);
  EXPECT_EQ(carried.find("PLXA"), std::string::npos);  // The secret's exchange is inside too.
}

TEST_F(TCPStoreTlsTest, ClearTextClientsAndForeignCertificatesAreRefused) {
  auto server = Server(Files("server"));
  auto good = Client(server->port(), Files("worker"));
  ASSERT_TRUE(good.ok()) << good.status();

  auto clear_text = Client(server->port(), auth::TlsFiles{});
  ASSERT_FALSE(clear_text.ok());
  EXPECT_EQ(clear_text.status().code(), absl::StatusCode::kUnauthenticated) << clear_text.status();
  EXPECT_THAT(clear_text.status().message(), HasSubstr("PLEXUS_TLS_CERT"));

  auto foreign = Client(server->port(), Files("rogue"));
  ASSERT_FALSE(foreign.ok());
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kUnauthenticated) << foreign.status();

  // Bytes that are not TLS at all: closed, nothing answered.
  auto raw = ConnectTcpWithRetry("127.0.0.1", server->port(), absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(raw.ok());
  ASSERT_TRUE(SendAll(raw->get(), std::string(1000, 'x'), absl::Now() + absl::Seconds(5)).ok());
  char byte;
  EXPECT_FALSE(RecvExact(raw->get(), &byte, 1, absl::Now() + absl::Seconds(5)).ok());

  // A TLS client at a clear-text server is refused too, never downgraded.
  auto open_server = Server(auth::TlsFiles{});
  auto stray = Client(open_server->port(), Files("worker"));
  ASSERT_FALSE(stray.ok());
  EXPECT_EQ(stray.status().code(), absl::StatusCode::kUnauthenticated) << stray.status();

  ASSERT_TRUE((*good)->Set("still", "serving").ok());
  EXPECT_EQ(*(*good)->Get("still"), "serving");
}

// An on-path attacker that changes one byte breaks the connection: the client is told it lost
// the store, and never reads a changed value.
TEST_F(TCPStoreTlsTest, AByteChangedOnTheWireBreaksTheConnectionNotTheData) {
  auto server = Server(Files("server"));
  plexus::testing::RecordingRelay relay(server->port());
  auto client = Client(relay.port(), Files("worker"));
  ASSERT_TRUE(client.ok()) << client.status();
  const std::string value(5000, 'x');
  ASSERT_TRUE((*client)->Set("key", value).ok());
  relay.CorruptAt(relay.Carried().size() + 2000);  // Inside the next request's record.
  absl::Status set = (*client)->Set("key", std::string(5000, 'y'));
  absl::StatusOr<std::string> got = (*client)->Get("key");
  EXPECT_FALSE(set.ok() && got.ok()) << "the changed record was accepted";
  if (got.ok()) {
    EXPECT_TRUE(*got == value || *got == std::string(5000, 'y'));
  }
  // The server is unharmed: a fresh client reads the value the tampered request did not set.
  auto fresh = Client(server->port(), Files("worker"));
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(*(*fresh)->Get("key"), value);
}

}  // namespace
}  // namespace plexus
