// Every difference between the torch versions plexus builds against (1.13 on Debian 12, 2.6 on
// Debian 13, 2.14 on Debian forky, pip's 2.x), settled once here. Members whose name changed
// between versions are found by what the headers declare, not by a version number.
#ifndef PLEXUS_BINDINGS_TORCH_TORCH_COMPAT_H_
#define PLEXUS_BINDINGS_TORCH_TORCH_COMPAT_H_

#include <c10/core/Stream.h>
#include <torch/csrc/api/include/torch/version.h>

#include <chrono>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <type_traits>
#include <utility>

#define PLEXUS_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||         \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// c10d::Backend (2.x) is the class a third-party backend implements; 1.13 takes a ProcessGroup.
#if PLEXUS_TORCH_AT_LEAST(2, 0)
#define PLEXUS_TORCH_BACKEND_API 1
#else
#define PLEXUS_TORCH_BACKEND_API 0
#endif

// c10d::Backend::supportsShrinking and shrink (torch.distributed.shrink_group): torch added
// them in 2.10; 2.14 is the first torch plexus builds against that has them.
#define PLEXUS_TORCH_SHRINK PLEXUS_TORCH_AT_LEAST(2, 14)

// c10d::Backend::supportsCoalescing, which batch_isend_irecv and _abort_process_group ask
// before opening a coalescing region (2.6 has startCoalescing and endCoalescing, not it).
#define PLEXUS_TORCH_SUPPORTS_COALESCING PLEXUS_TORCH_AT_LEAST(2, 14)

// c10::DistBackendError (2.1+): what torch's backends raise for a failure while running.
#define PLEXUS_TORCH_DIST_BACKEND_ERROR PLEXUS_TORCH_AT_LEAST(2, 1)

namespace plexus::torch_backend::compat {

template <typename S, typename = void>
struct HasNativeHandle : std::false_type {};
template <typename S>
struct HasNativeHandle<S, std::void_t<decltype(std::declval<const S&>().native_handle())>>
    : std::true_type {};

// The device's own handle for `stream` (a cudaStream_t), or nullptr where this torch's
// c10::Stream cannot say (1.13, 2.6: torch_stream.cc then asks libc10_cuda.so).
template <typename S = c10::Stream>
void* NativeStreamHandle(const S& stream) {
  if constexpr (HasNativeHandle<S>::value) {
    return reinterpret_cast<void*>(stream.native_handle());
  } else {
    (void)stream;
    return nullptr;
  }
}

template <typename T, typename = void>
struct HasTensorFactors : std::false_type {};
template <typename T>
struct HasTensorFactors<T, std::void_t<decltype(std::declval<const T&>().tensor_factors)>>
    : std::true_type {};

// PREMUL_SUM's tensor factor, or nullptr when it has a double instead: 1.13 holds a list
// (`tensor_factors`), 2.x one tensor (`tensor_factor`).
template <typename T = c10d::NCCLPreMulSumSupplement>
const at::Tensor* PremulSumTensor(const T& supplement) {
  if constexpr (HasTensorFactors<T>::value) {
    return supplement.tensor_factors.empty() ? nullptr : &supplement.tensor_factors.front();
  } else {
    return supplement.tensor_factor.defined() ? &supplement.tensor_factor : nullptr;
  }
}

template <typename Group, typename = void>
struct DeclaresSetSequenceNumber : std::false_type {};
template <typename Group>
using SetSequenceNumberMember = decltype(&Group::setSequenceNumberForGroup);
template <typename Group>
struct DeclaresSetSequenceNumber<Group, std::void_t<SetSequenceNumberMember<Group>>>
    : std::true_type {};

// `Group` (torch's c10d::ProcessGroup), passing setSequenceNumberForGroup to its default
// backend where Group declares it: up to 2.6 torch's own asks only gloo, NCCL and UCC backends
// and refuses the rest; 2.14's has no such method.
template <typename Group, bool = DeclaresSetSequenceNumber<Group>::value>
class SequenceNumberForwarding : public Group {
 public:
  using Group::Group;
};
template <typename Group>
class SequenceNumberForwarding<Group, true> : public Group {
 public:
  using Group::Group;
  void setSequenceNumberForGroup() override {
    this->getDefaultBackend()->setSequenceNumberForGroup();
  }
};

#if PLEXUS_TORCH_BACKEND_API
// A steady_clock time as torch's WorkInfo (completion hooks) holds times: system_clock up to
// 2.6, steady_clock in 2.14.
template <typename Info = c10d::WorkInfo>
auto AsWorkInfoTime(std::chrono::steady_clock::time_point time) {
  using Clock = typename decltype(std::declval<Info>().timeStarted)::clock;
  if constexpr (std::is_same_v<Clock, std::chrono::steady_clock>) {
    return time;
  } else {
    return std::chrono::time_point_cast<typename Clock::duration>(
        Clock::now() - (std::chrono::steady_clock::now() - time));
  }
}
#endif

}  // namespace plexus::torch_backend::compat

#endif  // PLEXUS_BINDINGS_TORCH_TORCH_COMPAT_H_
