// The Transport contract (base/transport/transport.h), checked against UnderTest(): message
// sizes from 0 bytes to past a MiB between every pair, send order within a tag, tags matched
// independently, size and signature mismatches refused without writing outside the buffer,
// receive-from-any, deadlines, AbortOperation reaching every rank, Abort, a lost peer named,
// many threads at once, and host and arena information that agrees across ranks.
#include "tests/transport/contract.h"

#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/core/status_macros.h"
#include "base/store/file_store.h"
#include "base/store/hash_store.h"
#include "gtest/gtest.h"
#include "tests/testing/mpirun.h"
#include "tests/testing/subprocess.h"

namespace plexus::testing {
namespace {

constexpr int kSize = 3;
constexpr absl::Duration kTimeout = absl::Seconds(30);
constexpr char kStoreDirVariable[] = "PLEXUS_CONTRACT_STORE_DIR";

using Body = std::function<absl::Status(Member& me, Store& store, int rank)>;

// Bytes only `seed` gives, so a message delivered to the wrong buffer shows.
std::vector<uint8_t> Pattern(size_t bytes, uint64_t seed) {
  std::vector<uint8_t> data(bytes);
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (uint8_t& byte : data) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    byte = static_cast<uint8_t>(state);
  }
  return data;
}

uint64_t Seed(int from, int to, uint64_t what) { return (what << 16) | (from << 8) | to; }

// A store every rank of one group shares: in memory for threads, a file under mpirun.
std::shared_ptr<Store> GroupStore() {
  static std::atomic<int> groups{0};
  const int group = groups++;
  if (!UnderTest().launched_by_mpirun) return std::make_shared<HashStore>(kTimeout);
  const char* dir = std::getenv(kStoreDirVariable);
  auto store =
      FileStore::Open(absl::StrCat(dir == nullptr ? "/tmp" : dir, "/group-", group), kTimeout);
  if (!store.ok()) return nullptr;
  return std::shared_ptr<Store>(std::move(store).value());
}

absl::Status Barrier(Store& store, const std::string& name, int ranks) {
  std::vector<std::string> keys;
  for (int rank = 0; rank < ranks; ++rank) keys.push_back(absl::StrCat(name, "/", rank));
  return store.Wait(keys, kTimeout);
}

absl::Status Arrive(Store& store, const std::string& name, int rank) {
  return store.Set(absl::StrCat(name, "/", rank), "1");
}

// Forms a group of kSize ranks and runs `body` on each (threads; under mpirun, this process's
// rank). Every rank stays until all are done, so no transport goes while a peer still uses it.
absl::Status RunRanks(const Body& body) {
  const TransportUnderTest& under = UnderTest();
  const int world = kSize + under.idle_ranks;
  std::shared_ptr<Store> store = GroupStore();
  if (store == nullptr) return absl::InternalError("no store for the group");
  auto run_rank = [&](int world_rank) -> absl::Status {
    absl::StatusOr<Member> made = under.make(store, world_rank, world);
    if (!made.ok()) {
      // Arrive anyway, so the ranks that formed their transport end now and name this cause.
      (void)Arrive(*store, "done", world_rank);
      return made.status();
    }
    Member& me = *made;
    absl::Status result;
    if (me.transport != nullptr) {
      const int rank = me.transport->rank();
      result = body(me, *store, rank);
      if (!result.ok()) {
        result = absl::Status(result.code(), absl::StrCat("rank ", rank, ": ", result.message()));
      }
    }
    RETURN_IF_ERROR(Arrive(*store, "done", world_rank));
    RETURN_IF_ERROR(Barrier(*store, "done", world));
    return result;
  };
  if (under.launched_by_mpirun) {
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
    return run_rank(rank == nullptr ? 0 : std::atoi(rank));
  }
  std::vector<absl::Status> results(world);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] { results[rank] = run_rank(rank); });
  }
  for (std::thread& thread : threads) thread.join();
  std::vector<std::string> failures;
  for (const absl::Status& result : results) {
    if (!result.ok()) failures.push_back(result.ToString());
  }
  if (failures.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrJoin(failures, "; "));
}

absl::Status Expect(bool condition, const std::string& what) {
  return condition ? absl::OkStatus() : absl::InternalError(what);
}

absl::Status ExpectCode(const absl::Status& status, absl::StatusCode code,
                        const std::string& what) {
  if (status.code() == code) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": expected ", absl::StatusCodeToString(code),
                                          ", got ", status.ToString()));
}

// Runs `body` on every rank (RunRanks) and fails the test with what went wrong where.
void ExpectRanksOk(const Body& body) {
  absl::Status status = RunRanks(body);
  EXPECT_TRUE(status.ok()) << status;
}

TEST(TransportContractTest, EveryPairExchangesMessagesFromEmptyToPastAMebibyte) {
  const std::vector<size_t> sizes = {0, 1, 4097, (size_t{1} << 20) + 3};
  ExpectRanksOk([&](Member& me, Store&, int rank) -> absl::Status {
    Transport& transport = *me.transport;
    for (size_t step = 0; step < sizes.size(); ++step) {
      const MessageTag tag{MakeTag(1, step), 0};
      std::vector<std::vector<uint8_t>> sent(kSize), received(kSize);
      std::vector<WorkPtr> works;
      for (int peer = 0; peer < kSize; ++peer) {
        if (peer == rank) continue;
        received[peer].assign(sizes[step], 0);
        sent[peer] = Pattern(sizes[step], Seed(rank, peer, step));
        works.push_back(
            transport.Recv(peer, tag, {received[peer].data(), received[peer].size()}, kTimeout));
        works.push_back(
            transport.Send(peer, tag, {sent[peer].data(), sent[peer].size()}, kTimeout));
      }
      for (WorkPtr& work : works) RETURN_IF_ERROR(work->Wait(kTimeout));
      for (int peer = 0; peer < kSize; ++peer) {
        if (peer == rank) continue;
        RETURN_IF_ERROR(
            Expect(received[peer] == Pattern(sizes[step], Seed(peer, rank, step)),
                   absl::StrCat(sizes[step], " bytes from rank ", peer, " arrived changed")));
      }
    }
    return absl::OkStatus();
  });
}

TEST(TransportContractTest, MessagesWithOneTagArriveInSendOrderFromEachSender) {
  constexpr int kMessages = 64;
  ExpectRanksOk([&](Member& me, Store& store, int rank) -> absl::Status {
    Transport& transport = *me.transport;
    const MessageTag tag{MakeTag(2, 0), 0};
    if (rank == 1) {  // Half the receives wait before the sends, half find their message early.
      std::vector<std::vector<uint64_t>> got(kSize, std::vector<uint64_t>(kMessages));
      std::vector<WorkPtr> works;
      auto post = [&](int from, int first, int last) {
        for (int i = first; i < last; ++i) {
          works.push_back(transport.Recv(
              from, tag, {reinterpret_cast<uint8_t*>(&got[from][i]), sizeof(uint64_t)}, kTimeout));
        }
      };
      post(0, 0, kMessages / 2);
      post(2, 0, kMessages / 2);
      RETURN_IF_ERROR(Arrive(store, "posted", 1));
      RETURN_IF_ERROR(store.Wait({"sent/0", "sent/2"}, kTimeout));
      post(0, kMessages / 2, kMessages);
      post(2, kMessages / 2, kMessages);
      for (WorkPtr& work : works) RETURN_IF_ERROR(work->Wait(kTimeout));
      for (int from : {0, 2}) {
        for (int i = 0; i < kMessages; ++i) {
          RETURN_IF_ERROR(
              Expect(got[from][i] == static_cast<uint64_t>(from * 1000 + i),
                     absl::StrCat("receive ", i, " from rank ", from, " got message ",
                                  got[from][i] % 1000, " of rank ", got[from][i] / 1000)));
        }
      }
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(store.Wait({"posted/1"}, kTimeout));
    std::vector<uint64_t> values(kMessages);
    std::vector<WorkPtr> works;
    for (int i = 0; i < kMessages; ++i) {
      values[i] = rank * 1000 + i;
      works.push_back(transport.Send(
          1, tag, {reinterpret_cast<const uint8_t*>(&values[i]), sizeof(uint64_t)}, kTimeout));
    }
    // Issued, not yet awaited: a transport may hold a send until its receive is posted.
    RETURN_IF_ERROR(Arrive(store, "sent", rank));
    for (WorkPtr& work : works) RETURN_IF_ERROR(work->Wait(kTimeout));
    return absl::OkStatus();
  });
}

TEST(TransportContractTest, TagsAreMatchedIndependentlyOfArrivalOrder) {
  ExpectRanksOk([&](Member& me, Store&, int rank) -> absl::Status {
    Transport& transport = *me.transport;
    const MessageTag first{MakeTag(3, 0), 0}, second{MakeTag(3, 1), 0}, other{MakeTag(4, 0), 0};
    if (rank == 0) {
      const std::vector<uint8_t> a = Pattern(300, 1), b = Pattern(70000, 2), c = Pattern(5, 3);
      WorkPtr sends[] = {transport.Send(1, first, {a.data(), a.size()}, kTimeout),
                         transport.Send(1, other, {c.data(), c.size()}, kTimeout),
                         transport.Send(1, second, {b.data(), b.size()}, kTimeout)};
      for (WorkPtr& work : sends) RETURN_IF_ERROR(work->Wait(kTimeout));
    } else if (rank == 1) {  // In the opposite order.
      std::vector<uint8_t> a(300), b(70000), c(5);
      RETURN_IF_ERROR(transport.Recv(0, second, {b.data(), b.size()}, kTimeout)->Wait(kTimeout));
      RETURN_IF_ERROR(transport.Recv(0, other, {c.data(), c.size()}, kTimeout)->Wait(kTimeout));
      RETURN_IF_ERROR(transport.Recv(0, first, {a.data(), a.size()}, kTimeout)->Wait(kTimeout));
      RETURN_IF_ERROR(Expect(a == Pattern(300, 1) && b == Pattern(70000, 2) && c == Pattern(5, 3),
                             "a message reached the receive of another tag"));
    }
    return absl::OkStatus();
  });
}

TEST(TransportContractTest, ASizeMismatchFailsNamingBothAndWritesNothingOutsideTheBuffer) {
  if (!UnderTest().unchecked_mismatches.empty()) GTEST_SKIP() << UnderTest().unchecked_mismatches;
  ExpectRanksOk([&](Member& me, Store&, int rank) -> absl::Status {
    Transport& transport = *me.transport;
    const MessageTag tag{MakeTag(5, 0), 0};
    if (rank == 0) {
      const std::vector<uint8_t> data = Pattern(100, 5);
      // The send may succeed or fail; only the receiver's side is promised.
      (void)transport.Send(1, tag, {data.data(), data.size()}, kTimeout)->Wait(kTimeout);
    } else if (rank == 1) {
      std::vector<uint8_t> buffer(128, 0xEE);
      absl::Status status = transport.Recv(0, tag, {buffer.data(), 64}, kTimeout)->Wait(kTimeout);
      RETURN_IF_ERROR(ExpectCode(status, absl::StatusCode::kFailedPrecondition,
                                 "100 bytes into a 64-byte receive"));
      RETURN_IF_ERROR(Expect(
          absl::StrContains(status.message(), "100") && absl::StrContains(status.message(), "64"),
          absl::StrCat("the error does not name both sizes: ", status.message())));
      for (size_t i = 64; i < buffer.size(); ++i) {
        RETURN_IF_ERROR(
            Expect(buffer[i] == 0xEE, absl::StrCat("byte ", i, " past the buffer written")));
      }
    }
    return absl::OkStatus();
  });
}

TEST(TransportContractTest, ASignatureMismatchFailsAndAZeroSignatureMatchesAny) {
  if (!UnderTest().unchecked_mismatches.empty()) GTEST_SKIP() << UnderTest().unchecked_mismatches;
  ExpectRanksOk([&](Member& me, Store&, int rank) -> absl::Status {
    Transport& transport = *me.transport;
    const std::vector<uint8_t> data = Pattern(48, 6);
    std::vector<uint8_t> buffer(48);
    if (rank == 0) {
      (void)transport.Send(1, {MakeTag(6, 0), 0x1111}, {data.data(), data.size()}, kTimeout)
          ->Wait(kTimeout);
      RETURN_IF_ERROR(
          transport.Send(2, {MakeTag(7, 0), 0x3333}, {data.data(), data.size()}, kTimeout)
              ->Wait(kTimeout));
    } else if (rank == 1) {
      absl::Status status =
          transport.Recv(0, {MakeTag(6, 0), 0x2222}, {buffer.data(), buffer.size()}, kTimeout)
              ->Wait(kTimeout);
      RETURN_IF_ERROR(ExpectCode(status, absl::StatusCode::kFailedPrecondition,
                                 "a receive whose signature differs from the message's"));
    } else {
      RETURN_IF_ERROR(
          transport.Recv(0, {MakeTag(7, 0), 0}, {buffer.data(), buffer.size()}, kTimeout)
              ->Wait(kTimeout));
      RETURN_IF_ERROR(Expect(buffer == data, "the message arrived changed"));
    }
    return absl::OkStatus();
  });
}

TEST(TransportContractTest, AReceiveFromAnyPeerNamesTheSender) {
  if (!UnderTest().receives_from_any) GTEST_SKIP() << UnderTest().name << " has no RecvFromAny";
  ExpectRanksOk([&](Member& me, Store&, int rank) -> absl::Status {
    Transport& transport = *me.transport;
    const MessageTag tag{MakeTag(8, 0), 0};
    if (rank != 0) {
      const std::vector<uint8_t> data = Pattern(4000, Seed(rank, 0, 8));
      return transport.Send(0, tag, {data.data(), data.size()}, kTimeout)->Wait(kTimeout);
    }
    std::set<int> senders;
    for (int i = 1; i < kSize; ++i) {
      std::vector<uint8_t> buffer(4000);
      WorkPtr work = transport.RecvFromAny(tag, {buffer.data(), buffer.size()}, kTimeout);
      RETURN_IF_ERROR(work->Wait(kTimeout));
      const int from = work->source_rank();
      RETURN_IF_ERROR(Expect(from > 0 && from < kSize, absl::StrCat("source_rank() ", from)));
      RETURN_IF_ERROR(Expect(buffer == Pattern(4000, Seed(from, 0, 8)),
                             absl::StrCat("the message credited to rank ", from, " is not its")));
      senders.insert(from);
    }
    return Expect(senders.size() == kSize - 1, "one sender was named twice");
  });
}

TEST(TransportContractTest, AReceiveNobodyAnswersEndsAtItsDeadline) {
  ExpectRanksOk([&](Member& me, Store&, int rank) -> absl::Status {
    const absl::Time start = absl::Now();
    std::vector<uint8_t> buffer(16);
    absl::Status status = me.transport
                              ->Recv((rank + 1) % kSize, {MakeTag(9, 0), 0},
                                     {buffer.data(), buffer.size()}, absl::Milliseconds(300))
                              ->Wait(kTimeout);
    RETURN_IF_ERROR(
        ExpectCode(status, absl::StatusCode::kDeadlineExceeded, "an unanswered receive"));
    return Expect(absl::Now() - start < absl::Seconds(10),
                  absl::StrCat("the 300 ms deadline ended after ",
                               absl::FormatDuration(absl::Now() - start)));
  });
}

TEST(TransportContractTest, AbortOperationEndsItOnEveryRankAndSparesOthers) {
  if (!UnderTest().local_aborts.empty()) GTEST_SKIP() << UnderTest().local_aborts;
  ExpectRanksOk([&](Member& me, Store& store, int rank) -> absl::Status {
    Transport& transport = *me.transport;
    std::vector<uint8_t> buffer(1024);
    if (rank == 0) {
      RETURN_IF_ERROR(store.Wait({"posted/1", "posted/2"}, kTimeout));
      transport.AbortOperation(10, absl::AbortedError("contract: operation 10 given up"));
    } else {
      WorkPtr pending =
          transport.Recv(0, {MakeTag(10, 0), 0}, {buffer.data(), buffer.size()}, kTimeout);
      RETURN_IF_ERROR(Arrive(store, "posted", rank));
      const absl::Time start = absl::Now();
      absl::Status status = pending->Wait(kTimeout);
      RETURN_IF_ERROR(Expect(!status.ok(), "the aborted operation's receive succeeded"));
      RETURN_IF_ERROR(
          Expect(absl::Now() - start < absl::Seconds(10),
                 absl::StrCat("the abort reached rank ", rank, " only after ",
                              absl::FormatDuration(absl::Now() - start), ": ", status.ToString())));
    }
    if (!UnderTest().abort_operation_breaks_all.empty()) return absl::OkStatus();
    // Another operation still works between every pair.
    const MessageTag tag{MakeTag(11, 0), 0};
    std::vector<WorkPtr> works;
    std::vector<std::vector<uint8_t>> sent(kSize), received(kSize, std::vector<uint8_t>(512));
    for (int peer = 0; peer < kSize; ++peer) {
      if (peer == rank) continue;
      sent[peer] = Pattern(512, Seed(rank, peer, 11));
      works.push_back(transport.Recv(peer, tag, {received[peer].data(), 512}, kTimeout));
      works.push_back(transport.Send(peer, tag, {sent[peer].data(), 512}, kTimeout));
    }
    for (WorkPtr& work : works) RETURN_IF_ERROR(work->Wait(kTimeout));
    for (int peer = 0; peer < kSize; ++peer) {
      if (peer != rank && received[peer] != Pattern(512, Seed(peer, rank, 11))) {
        return absl::InternalError(
            absl::StrCat("after the abort, rank ", peer, "'s message changed"));
      }
    }
    return absl::OkStatus();
  });
}

TEST(TransportContractTest, AbortFailsWhatIsPendingAndWhatComesLater) {
  ExpectRanksOk([&](Member& me, Store&, int rank) -> absl::Status {
    if (rank != 0) return absl::OkStatus();  // The others leave rank 0 alone.
    Transport& transport = *me.transport;
    std::vector<uint8_t> buffer(64);
    WorkPtr pending =
        transport.Recv(1, {MakeTag(12, 0), 0}, {buffer.data(), buffer.size()}, kTimeout);
    transport.Abort(absl::CancelledError("contract: shut down"));
    RETURN_IF_ERROR(
        ExpectCode(pending->Wait(kTimeout), absl::StatusCode::kCancelled, "a pending receive"));
    absl::Status later =
        transport.Send(2, {MakeTag(13, 0), 0}, {buffer.data(), buffer.size()}, kTimeout)
            ->Wait(kTimeout);
    return ExpectCode(later, absl::StatusCode::kCancelled, "a send after the abort");
  });
}

TEST(TransportContractTest, ALostPeerFailsPendingOperationsNamingIt) {
  if (!UnderTest().finds_lost_peers) {
    GTEST_SKIP() << UnderTest().name << ": its launcher ends the whole job when a rank goes";
  }
  ExpectRanksOk([&](Member& me, Store& store, int rank) -> absl::Status {
    if (rank == 2) {
      RETURN_IF_ERROR(store.Wait({"posted/0", "posted/1"}, kTimeout));
      me = Member{};  // Gone: its connections close as a crashed process's would.
      return absl::OkStatus();
    }
    std::vector<uint8_t> buffer(64);
    WorkPtr pending =
        me.transport->Recv(2, {MakeTag(14, 0), 0}, {buffer.data(), buffer.size()}, kTimeout);
    RETURN_IF_ERROR(Arrive(store, "posted", rank));
    const absl::Time start = absl::Now();
    absl::Status status = pending->Wait(kTimeout);
    RETURN_IF_ERROR(
        ExpectCode(status, absl::StatusCode::kUnavailable, "a receive from a lost peer"));
    RETURN_IF_ERROR(Expect(absl::StrContains(status.message(), "2"),
                           absl::StrCat("the error does not name rank 2: ", status.message())));
    RETURN_IF_ERROR(Expect(absl::Now() - start < absl::Seconds(15), "the loss was found late"));
    const std::vector<int> lost = me.transport->LostPeers();
    return Expect(lost.empty() || lost == std::vector<int>{2},
                  absl::StrCat("LostPeers() is {", absl::StrJoin(lost, ","), "}"));
  });
}

TEST(TransportContractTest, ThreadsSharingATransportKeepTheirMessagesApart) {
  constexpr int kThreads = 4, kMessages = 40;
  ExpectRanksOk([&](Member& me, Store&, int rank) -> absl::Status {
    Transport& transport = *me.transport;
    const int next = (rank + 1) % kSize, previous = (rank + kSize - 1) % kSize;
    std::vector<absl::Status> results(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kMessages; ++i) {
          const MessageTag tag{MakeTag(20 + t, i), 0};
          const size_t bytes = 1000 + 997 * t + i;
          const std::vector<uint8_t> sent = Pattern(bytes, Seed(rank, t, i));
          std::vector<uint8_t> received(bytes);
          WorkPtr recv = transport.Recv(previous, tag, {received.data(), bytes}, kTimeout);
          WorkPtr send = transport.Send(next, tag, {sent.data(), bytes}, kTimeout);
          absl::Status status = send->Wait(kTimeout);
          if (status.ok()) status = recv->Wait(kTimeout);
          if (status.ok() && received != Pattern(bytes, Seed(previous, t, i))) {
            status = absl::InternalError(absl::StrCat("thread ", t, " message ", i, " changed"));
          }
          if (!status.ok()) {
            results[t] = status;
            return;
          }
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (const absl::Status& result : results) RETURN_IF_ERROR(result);
    return absl::OkStatus();
  });
}

TEST(TransportContractTest, HostsAndTheSharedArenaAgreeAcrossRanks) {
  ExpectRanksOk([&](Member& me, Store& store, int rank) -> absl::Status {
    Transport& transport = *me.transport;
    const absl::Span<const int> hosts = transport.host_of();
    RETURN_IF_ERROR(Expect(hosts.empty() || static_cast<int>(hosts.size()) == kSize,
                           absl::StrCat("host_of() has ", hosts.size(), " entries")));
    const std::string mine = absl::StrJoin(hosts, ",");
    RETURN_IF_ERROR(store.Set(absl::StrCat("hosts/", rank), mine));
    for (int peer = 0; peer < kSize; ++peer) {
      ASSIGN_OR_RETURN(std::string theirs, store.Get(absl::StrCat("hosts/", peer)));
      RETURN_IF_ERROR(Expect(theirs == mine, absl::StrCat("host_of() is {", mine, "} here, {",
                                                          theirs, "} on rank ", peer)));
    }
    // An arena is offered only where every rank is on one host.
    if (transport.shared_arena() != nullptr && !hosts.empty()) {
      for (int host : hosts) RETURN_IF_ERROR(Expect(host == hosts[0], "an arena across hosts"));
    }
    return absl::OkStatus();
  });
}

}  // namespace
}  // namespace plexus::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const plexus::testing::TransportUnderTest& under = plexus::testing::UnderTest();
  if (!under.launched_by_mpirun || plexus::testing::MpirunWorldSize() > 0) return RUN_ALL_TESTS();
  // Not under mpirun yet: run this binary as an MPI job of kSize ranks sharing a file store.
  const std::string dir = plexus::testing::TempPath("contract-stores");
  if (mkdir(dir.c_str(), 0700) != 0) return 1;
  setenv(plexus::testing::kStoreDirVariable, dir.c_str(), 1);
  absl::Status launched =
      plexus::testing::RunUnderMpirun(plexus::testing::kSize, argv[0], {}, absl::Seconds(400));
  fprintf(stderr, "[%s] mpirun -np %d: %s\n", under.name.c_str(), plexus::testing::kSize,
          launched.ToString().c_str());
  return launched.ok() ? 0 : 1;
}
