#include "tests/elastic/elastic_peers.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

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
  options.operation_timeout = absl::Seconds(getenv("ELASTIC_OP_TIMEOUT") ? atoi(getenv("ELASTIC_OP_TIMEOUT")) : 60);
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
  return absl::DeadlineExceededError(absl::StrCat("world never formed: ", size.ok() ? *size : -1,
                                                  " of ", world, " peers"));
}

int Fail(int peer, const std::string& what, const absl::Status& status) {
  fprintf(stderr, "peer %d: %s %s\n", peer, what.c_str(), status.ToString().c_str());
  return 1;
}

}  // namespace plexus::elastic
