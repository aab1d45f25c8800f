#include "devices/cuda/dynamic_library.h"

#include <dlfcn.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace plexus::cuda {

absl::StatusOr<DynamicLibrary> DynamicLibrary::OpenFirst(
    absl::string_view what, const std::vector<std::string>& candidates) {
  std::vector<std::string> reasons;
  for (const std::string& candidate : candidates) {
    if (candidate.find('/') == std::string::npos) {
      if (void* loaded = dlopen(candidate.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
        return DynamicLibrary(loaded, candidate + " (already loaded)");
      }
    }
    if (void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      return DynamicLibrary(handle, candidate);
    }
    const char* error = dlerror();
    reasons.push_back(error != nullptr ? error : candidate + ": cannot be opened");
  }
  return absl::FailedPreconditionError(
      absl::StrCat(what, " library not found (", absl::StrJoin(reasons, "; "), ")"));
}

DynamicLibrary::DynamicLibrary(DynamicLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), path_(std::move(other.path_)) {}

DynamicLibrary::~DynamicLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

void* DynamicLibrary::Symbol(const char* name) const {
  return handle_ == nullptr ? nullptr : dlsym(handle_, name);
}

void* SymbolLoader::Resolve(const char* name) {
  void* symbol = library_.Symbol(name);
  if (symbol == nullptr) missing_.push_back(name);
  return symbol;
}

absl::Status SymbolLoader::status() const {
  if (missing_.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(library_.path(), " lacks ", absl::StrJoin(missing_, ", ")));
}

}  // namespace plexus::cuda
