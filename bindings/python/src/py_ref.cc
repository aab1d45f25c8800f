#include "bindings/python/src/py_ref.h"

#include <chrono>
#include <thread>

namespace plexus::python {

void CloseToPlexusThreads(double limit_seconds) {
  PythonClosing().store(true, std::memory_order_release);
  py::gil_scoped_release release;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_seconds);
  while (ThreadsEnteringPython().load(std::memory_order_acquire) > 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace plexus::python
