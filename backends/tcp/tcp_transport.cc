#include "backends/tcp/tcp_transport.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/tcp/tcp_connect.h"
#include "backends/tcp/tcp_loop.h"
#include "frontend/core/status_macros.h"

namespace plexus {

class TcpTransport::Loop : public tcp::Loop {
 public:
  using tcp::Loop::Loop;
};

namespace {

constexpr uint64_t kWakeupId = ~uint64_t{0};

}  // namespace

std::string DefaultTcpAddress() {
  if (const char* env = std::getenv("PLEXUS_TCP_ADDR"); env != nullptr && *env != '\0') {
    return env;
  }
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) == 0) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* result = nullptr;
    if (getaddrinfo(host, nullptr, &hints, &result) == 0) {
      std::string found;
      for (addrinfo* ai = result; ai != nullptr && found.empty(); ai = ai->ai_next) {
        char text[INET_ADDRSTRLEN] = {0};
        auto* in = reinterpret_cast<sockaddr_in*>(ai->ai_addr);
        if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) != nullptr &&
            std::strncmp(text, "127.", 4) != 0) {
          found = text;
        }
      }
      freeaddrinfo(result);
      if (!found.empty()) return found;
    }
  }
  return "127.0.0.1";
}

absl::StatusOr<std::unique_ptr<TcpTransport>> TcpTransport::Create(TcpTransportOptions options) {
  if (options.store == nullptr || options.size < 1 || options.rank < 0 ||
      options.rank >= options.size) {
    return absl::InvalidArgumentError(absl::StrCat("tcp transport: bad rank ", options.rank,
                                                   " / size ", options.size, " or no store"));
  }
  std::string address = options.address.empty() ? DefaultTcpAddress() : options.address;
  tcp::MeshOptions mesh{options.store.get(), options.rank,    options.size,
                        options.group_name,  address,         options.connect_timeout};
  ASSIGN_OR_RETURN(std::vector<ScopedFd> peers, tcp::ConnectMesh(mesh));
  return std::unique_ptr<TcpTransport>(new TcpTransport(std::move(options), std::move(peers)));
}

TcpTransport::TcpTransport(TcpTransportOptions options, std::vector<ScopedFd> peers)
    : options_(std::move(options)) {
  ScopedFd epoll(epoll_create1(EPOLL_CLOEXEC));
  wakeup_.Reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = kWakeupId;
  epoll_ctl(epoll.get(), EPOLL_CTL_ADD, wakeup_.get(), &event);
  const int epoll_fd = epoll.Release();
  std::vector<tcp::SendLane*> lanes;
  for (int i = 0; i < options_.size; ++i) {
    lanes_.push_back(std::make_unique<tcp::SendLane>());
    lanes.push_back(lanes_.back().get());
  }
  Loop::SignatureDescriber describe = options_.describe_signature;
  if (!describe) {
    describe = [](uint64_t signature) { return absl::StrCat("signature 0x", absl::Hex(signature)); };
  }
  loop_ = std::make_unique<Loop>(options_.rank, std::move(peers), std::move(lanes), epoll_fd,
                                 options_.max_message_bytes, options_.max_unexpected_bytes,
                                 std::move(describe));
  thread_ = std::thread([this, epoll_fd] {
    ScopedFd owned_epoll(epoll_fd);
    epoll_event events[64];
    absl::Time close_deadline = absl::InfiniteFuture();
    int timeout_ms = 0;
    while (true) {
      {
        std::lock_guard<std::recursive_mutex> lock(loop_mu_);
        if (stopping_.load(std::memory_order_acquire)) {
          // Say goodbye, then give the frames still queued a bounded time to leave.
          if (close_deadline == absl::InfiniteFuture()) {
            close_deadline = absl::Now() + absl::Seconds(5);
            loop_->SayGoodbye();
          }
          if (loop_->Drained() || absl::Now() >= close_deadline) break;
        }
        timeout_ms = stopping_.load(std::memory_order_acquire) ? 10 : loop_->NextTimeoutMs();
        next_wake_.store(absl::ToUnixNanos(absl::Now() + absl::Milliseconds(timeout_ms)),
                         std::memory_order_release);
      }
      int n = epoll_wait(epoll_fd, events, 64, timeout_ms);
      std::lock_guard<std::recursive_mutex> lock(loop_mu_);
      for (int i = 0; i < n; ++i) {
        if (events[i].data.u64 == kWakeupId) {
          uint64_t count;
          [[maybe_unused]] ssize_t r = read(wakeup_.get(), &count, sizeof(count));
          continue;
        }
        loop_->OnEvent(static_cast<int>(events[i].data.u64), events[i].events);
      }
      std::vector<std::function<void(Loop&)>> commands;
      {
        std::lock_guard<std::mutex> inbox_lock(inbox_mu_);
        commands.swap(inbox_);
      }
      for (auto& command : commands) command(*loop_);
      loop_->ExpireDeadlines();
    }
    std::lock_guard<std::recursive_mutex> lock(loop_mu_);
    loop_.reset();  // Fails whatever is still pending.
  });
}

void TcpTransport::PostReceive(const std::shared_ptr<tcp::Op>& op) {
  {
    std::lock_guard<std::recursive_mutex> lock(loop_mu_);
    if (loop_ == nullptr) {
      op->work->Complete(absl::AbortedError("transport destroyed"));
      return;
    }
    loop_->PostRecv(op);
    if (op->done) return;
  }
  // The loop sleeps until its own next deadline; wake it only if this one comes sooner.
  if (absl::ToUnixNanos(op->deadline) < next_wake_.load(std::memory_order_acquire)) Wake();
}

void TcpTransport::Wake() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wakeup_.get(), &one, sizeof(one));
}

TcpTransport::~TcpTransport() {
  stopping_.store(true, std::memory_order_release);
  Wake();
  thread_.join();
}

void TcpTransport::Post(std::function<void(Loop&)> command) {
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    inbox_.push_back(std::move(command));
  }
  Wake();
}

namespace {

tcp::OpPtr MakeOp(tcp::Op::Kind kind, int peer, MessageTag tag, uint8_t* data, size_t size,
                  absl::Duration timeout, const char* name, int world) {
  auto op = std::make_shared<tcp::Op>();
  op->kind = kind;
  op->peer = peer;
  op->tag = tag;
  op->data = data;
  op->size = size;
  op->timeout = timeout;
  op->deadline = absl::Now() + timeout;
  op->work = std::make_shared<Work>(name, world);
  if (kind == tcp::Op::Kind::kSend) {
    tcp::EncodeHeader(op->header, tcp::FrameType::kData, tag.tag, tag.signature, size);
    op->payload = data;
  }
  return op;
}

}  // namespace

WorkPtr TcpTransport::Send(int peer, MessageTag tag, absl::Span<const uint8_t> data,
                           absl::Duration timeout) {
  auto op = MakeOp(tcp::Op::Kind::kSend, peer, tag, const_cast<uint8_t*>(data.data()),
                   data.size(), timeout, "send", options_.size);
  // Fast path: nothing queued for this peer, so write from this thread.
  if (peer >= 0 && peer < options_.size && peer != options_.rank &&
      tcp::TrySendDirect(*lanes_[peer], *op)) {
    op->done = true;
    op->work->AddBytesSent(static_cast<int64_t>(op->size));
    op->work->Complete(absl::OkStatus());
    return op->work;
  }
  Post([op](Loop& loop) { loop.PostSend(op); });
  return op->work;
}

WorkPtr TcpTransport::Recv(int peer, MessageTag tag, absl::Span<uint8_t> data,
                           absl::Duration timeout) {
  auto op = MakeOp(tcp::Op::Kind::kRecv, peer, tag, data.data(), data.size(), timeout, "recv",
                   options_.size);
  PostReceive(op);
  return op->work;
}

WorkPtr TcpTransport::RecvFromAny(MessageTag tag, absl::Span<uint8_t> data,
                                  absl::Duration timeout) {
  auto op = MakeOp(tcp::Op::Kind::kRecvAny, -1, tag, data.data(), data.size(), timeout,
                   "recv_any_source", options_.size);
  PostReceive(op);
  return op->work;
}

void TcpTransport::AbortOperation(uint64_t operation, absl::Status reason) {
  Post([operation, reason](Loop& loop) { loop.AbortOperation(operation, reason, true); });
}

void TcpTransport::Abort(absl::Status reason) {
  Post([reason](Loop& loop) { loop.AbortAll(reason); });
}

}  // namespace plexus
