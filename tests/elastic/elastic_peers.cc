#include "tests/elastic/elastic_peers.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "frontend/elastic/master_node.h"
#include "gtest/gtest.h"

namespace plexus::elastic {

std::unique_ptr<testing::ChildServer> StartMaster(absl::Duration heartbeat,
                                                  const std::string& address) {
  auto server = testing::ChildServer::Start(
      [heartbeat, address](const std::function<void(int)>& report) {
        MasterNodeOptions options;
        options.listen_address = address;
        options.heartbeat_timeout = heartbeat;
        auto master = MasterNode::Create(options);
        if (!master.ok() || !(*master)->Run().ok()) return;
        report((*master)->port());
        (void)(*master)->AwaitTermination();
      },
      absl::Seconds(30));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(server).value() : nullptr;
}

std::unique_ptr<Communicator> MakePeer(int port) {
  CommunicatorOptions options;
  options.master_address = absl::StrCat("127.0.0.1:", port);
  options.operation_timeout =
      absl::Seconds(getenv("ELASTIC_OP_TIMEOUT") ? atoi(getenv("ELASTIC_OP_TIMEOUT")) : 60);
  options.accept_timeout = absl::Seconds(60);
  auto comm = Communicator::Create(options);
  return comm.ok() ? std::move(comm).value() : nullptr;
}

absl::Status JoinWorld(Communicator& comm, int world) {
  if (absl::Status s = comm.Connect(absl::Seconds(60)); !s.ok()) return s;
  return GrowWorld(comm, world);
}

absl::Status GrowWorld(Communicator& comm, int world) {
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline) {
    auto size = comm.GetAttribute(Attribute::kGlobalWorldSize);
    if (!size.ok()) return size.status();
    if (*size >= world) return absl::OkStatus();
    if (absl::Status s = comm.UpdateTopology(); !s.ok()) return s;
    usleep(2000);
  }
  auto size = comm.GetAttribute(Attribute::kGlobalWorldSize);
  return absl::DeadlineExceededError(
      absl::StrCat("world never formed: ", size.ok() ? *size : -1, " of ", world, " peers"));
}

absl::Status RunJoinedPeers(int port, int world,
                            const std::function<int(int, std::unique_ptr<Communicator>&)>& body,
                            absl::Duration timeout) {
  return testing::RunInChildren(
      world,
      [&](int peer) {
        std::unique_ptr<Communicator> comm = MakePeer(port);
        if (absl::Status s = JoinWorld(*comm, world); !s.ok()) return Fail(peer, "join", s);
        return body(peer, comm);
      },
      timeout);
}

void ExpectSameOnEveryPeer(const std::string& dir, int world) {
  std::string first;
  for (int p = 0; p < world; ++p) {
    std::ifstream in(absl::StrCat(dir, "/", p));
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_FALSE(all.empty()) << "peer " << p << " wrote nothing";
    if (p == 0) first = all;
    EXPECT_EQ(all, first) << "peer " << p << " has different results than peer 0";
  }
}

int Fail(int peer, const std::string& what, const absl::Status& status) {
  fprintf(stderr, "peer %d: %s %s\n", peer, what.c_str(), status.ToString().c_str());
  return 1;
}

}  // namespace plexus::elastic
