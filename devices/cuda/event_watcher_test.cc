// EventWatcher's host-wait path, over a scripted CUDA runtime: the watcher's own thread never
// sees the event fire, so only a waiting thread's poll can complete a Work.
#include "devices/cuda/event_watcher.h"

#include <atomic>
#include <memory>
#include <thread>

#include "gtest/gtest.h"

namespace plexus::cuda {
namespace {

std::atomic<bool> g_fired{false};
std::atomic<std::thread::id> g_waiter;
int g_event_storage;

cudaError_t GetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t SetDevice(int) { return cudaSuccess; }
cudaError_t EventCreate(cudaEvent_t* event, unsigned int) {
  *event = reinterpret_cast<cudaEvent_t>(&g_event_storage);
  return cudaSuccess;
}
cudaError_t EventDestroy(cudaEvent_t) { return cudaSuccess; }
// Fired only as the waiting thread sees it.
cudaError_t EventQuery(cudaEvent_t) {
  const bool waiter = std::this_thread::get_id() == g_waiter.load();
  return waiter && g_fired.load() ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t GetLastError() { return cudaSuccess; }
const char* ErrorText(cudaError_t) { return "scripted"; }

CudaApi ScriptedApi() {
  CudaApi api{};
  api.GetDevice = &GetDevice;
  api.SetDevice = &SetDevice;
  api.EventCreateWithFlags = &EventCreate;
  api.EventDestroy = &EventDestroy;
  api.EventQuery = &EventQuery;
  api.GetLastError = &GetLastError;
  api.GetErrorName = &ErrorText;
  api.GetErrorString = &ErrorText;
  return api;
}

class EventWatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_fired = false;
    g_waiter = std::this_thread::get_id();
  }

  // A Work watched until `done` fires, with `health` asked along the way.
  WorkPtr Watched(std::function<absl::Status()> health = nullptr) {
    auto work = std::make_shared<Work>("all_reduce", 2, 7);
    EventWatcher::Entry entry;
    entry.work = work;
    entry.done = *CudaEvent::Create(api_, 0);
    entry.description = "all_reduce #7";
    entry.health = std::move(health);
    watcher_.Watch(std::move(entry));
    return work;
  }

  const CudaApi api_ = ScriptedApi();
  EventWatcher watcher_{api_};
};

TEST_F(EventWatcherTest, HostWaitCompletesTheWorkOnTheWaitingThreadOnceTheEventFired) {
  WorkPtr work = Watched();
  std::thread::id completed_on;
  work->OnComplete([&](const absl::Status&) { completed_on = std::this_thread::get_id(); });
  g_fired = true;
  EXPECT_TRUE(work->Wait(absl::Seconds(5)).ok());
  EXPECT_EQ(completed_on, std::this_thread::get_id());
}

TEST_F(EventWatcherTest, HostWaitOnAnEventThatHasNotFiredKeepsToItsTimeout) {
  WorkPtr work = Watched();
  EXPECT_EQ(work->Wait(absl::Milliseconds(20)).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(work->IsCompleted());
  g_fired = true;  // A later wait still finds it.
  EXPECT_TRUE(work->Wait(absl::Seconds(5)).ok());
}

TEST_F(EventWatcherTest, HostWaitLeavesAnUnhealthyOperationToTheWatcher) {
  WorkPtr work = Watched([] { return absl::UnavailableError("a peer was lost"); });
  g_fired = true;
  // The watcher fails it (after its grace for the device); the waiter never calls it good.
  EXPECT_EQ(work->Wait(absl::Milliseconds(20)).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(work->IsCompleted());
}

}  // namespace
}  // namespace plexus::cuda
