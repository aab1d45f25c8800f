// DynamicLibrary: a shared library opened at run time, and SymbolLoader, which resolves a list of
// functions from it and reports every missing one at once.
#ifndef PLEXUS_DEVICES_CUDA_DYNAMIC_LIBRARY_H_
#define PLEXUS_DEVICES_CUDA_DYNAMIC_LIBRARY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace plexus::cuda {

class DynamicLibrary {
 public:
  // Opens the first of `candidates` that loads. A bare file name is first looked up among the
  // libraries the process has already loaded, so the copy a framework brought is shared.
  // FailedPrecondition naming `what` and each candidate with the loader's reason otherwise.
  static absl::StatusOr<DynamicLibrary> OpenFirst(absl::string_view what,
                                                  const std::vector<std::string>& candidates);

  DynamicLibrary(DynamicLibrary&& other) noexcept;
  DynamicLibrary& operator=(DynamicLibrary&&) = delete;
  ~DynamicLibrary();

  void* Symbol(const char* name) const;  // nullptr when absent.
  const std::string& path() const { return path_; }
  // Keeps the library loaded after this object is gone.
  void Leak() { handle_ = nullptr; }

 private:
  DynamicLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}

  void* handle_;
  std::string path_;
};

// Resolves symbols into typed function pointers; status() lists every name that was missing.
class SymbolLoader {
 public:
  explicit SymbolLoader(const DynamicLibrary& library) : library_(library) {}

  template <typename Function>
  void operator()(const char* name, Function* target) {
    *target = reinterpret_cast<Function>(Resolve(name));
  }
  absl::Status status() const;

 private:
  void* Resolve(const char* name);

  const DynamicLibrary& library_;
  std::vector<std::string> missing_;
};

}  // namespace plexus::cuda

#endif  // PLEXUS_DEVICES_CUDA_DYNAMIC_LIBRARY_H_
