// Fuzzes the tcp transport's frame parsing: the input is what a peer writes on its connection
// (headers, payloads, aborts, goodbyes, heartbeats), fed to the event loop, with receives of
// the sizes and tags the input's first bytes choose already posted. Matching, staging, caps and
// peer loss all run; nothing may crash, leak or overflow.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/tcp/tcp_loop.h"

using plexus::tcp::Loop;
using plexus::tcp::Op;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) != 0) abort();
  plexus::ScopedFd writer(fds[1]);
  std::vector<plexus::Connection> peers(2);
  peers[1].fd.Reset(fds[0]);
  plexus::tcp::SendLane lanes[2];
  plexus::ScopedFd epoll(epoll_create1(EPOLL_CLOEXEC));
  std::vector<uint8_t> buffers[4];
  {
    Loop loop(/*rank=*/0, std::move(peers), nullptr, {&lanes[0], &lanes[1]}, epoll.get(),
              /*max_message_bytes=*/1 << 16, /*max_unexpected_bytes=*/1 << 18,
              absl::InfiniteDuration(), [](uint64_t s) { return std::to_string(s); });
    const int receives = data[0] % 4;
    for (int i = 0; i < receives; ++i) {
      auto op = std::make_shared<Op>();
      op->kind = Op::Kind::kRecv;
      op->peer = 1;
      op->tag = {plexus::MakeTag(1, static_cast<uint32_t>(i)), data[1] % 2 ? 0u : 7u};
      buffers[i].resize(static_cast<size_t>(data[1]) * (i + 1));
      op->data = buffers[i].data();
      op->size = buffers[i].size();
      op->timeout = absl::Seconds(60);
      op->deadline = absl::Now() + op->timeout;
      op->work = std::make_shared<plexus::Work>("recv", 2);
      loop.PostRecv(op);
    }
    size_t written = 0;
    const size_t total = size - 2;
    for (int round = 0; round < 1000; ++round) {
      if (written < total) {
        const ssize_t n = write(writer.get(), data + 2 + written, total - written);
        if (n > 0) written += static_cast<size_t>(n);
      }
      if (written == total && writer.valid()) writer.Reset();  // End of file: the peer is gone.
      loop.OnEvent(1, EPOLLIN);
      if (!writer.valid() && loop.Drained()) {
        loop.OnEvent(1, EPOLLIN);
        break;
      }
    }
    loop.ExpireDeadlines(absl::Now());
  }
  return 0;
}
