#include "backends/gloo/gloo_backend.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/gloo/gloo_transport.h"
#include "backends/interface/backend_registry.h"
#include "base/core/environment.h"
#include "base/core/logging.h"
#include "base/core/status_macros.h"

namespace plexus::gloo_backend {

using algorithms::AlgorithmTable;
using algorithms::CollectiveContext;
using executor::Collectives;

std::string GlooDeviceAddress(const BackendContext& context) {
  if (const char* env = ReadEnvironment("PLEXUS_GLOO_ADDR"); env != nullptr && *env != '\0') {
    return env;
  }
  return context.address;
}

absl::StatusOr<std::shared_ptr<Backend>> GlooBackend::Create(const BackendContext& context) {
  ASSIGN_OR_RETURN(AlgorithmTable table, AlgorithmTable::FromEnvironment());
  const std::string address = GlooDeviceAddress(context);
  if (LogEnabled(LogLevel::kDebug)) {
    Log(LogLevel::kDebug, absl::StrCat("gloo: group '", context.group_name, "' rank ", context.rank,
                                       " listens at ", address));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<GlooTransport> transport,
                   GlooTransport::Connect(context.store, context.rank, context.size, address,
                                          context.timeout, context.group_name));
  ASSIGN_OR_RETURN(const bool native, EnvironmentFlag("PLEXUS_GLOO_NATIVE"));
  auto collectives = std::make_unique<Collectives>(transport, std::move(table));
  return std::shared_ptr<Backend>(
      new GlooBackend(std::move(collectives), std::move(transport), native));
}

BackendCapabilities GlooBackend::capabilities() const {
  BackendCapabilities capabilities = CpuTransportCapabilities();
  capabilities.may_leave_after_failure = true;  // The first failure closes every connection.
  return capabilities;
}

WorkPtr GlooBackend::SubmitNative(GlooPlan plan) {
  return collectives().Submit(
      plan.kind, plan.dtype, plan.count, plan.timeout,
      [transport = transport_, traffic = plan.traffic,
       run = std::move(plan.run)](CollectiveContext& ctx) -> absl::Status {
        RETURN_IF_ERROR(transport->broken());
        const int64_t left_ms = absl::ToInt64Milliseconds(
            absl::Ceil(ctx.deadline() - absl::Now(), absl::Milliseconds(1)));
        if (left_ms <= 0) {
          return absl::DeadlineExceededError(absl::StrCat(
              CollectiveName(ctx.kind()), " #", ctx.sequence(), ": timed out before it started"));
        }
        gloo_native::Call call;
        call.context = transport->context();
        call.tag = static_cast<uint32_t>(ctx.signature() ^ (ctx.signature() >> 32));
        call.timeout = std::chrono::milliseconds(left_ms);
        try {
          run(call, ctx);
        } catch (const std::exception& error) {
          absl::Status status =
              GlooErrorToStatus(error, absl::StrCat("gloo ", CollectiveName(ctx.kind()), " #",
                                                    ctx.sequence(), " on rank ", ctx.rank()));
          // Gloo leaves its pairs unusable after a failed collective.
          transport->Abort(status);
          return status;
        }
        ctx.CountBytes(traffic.sent, traffic.received);
        return absl::OkStatus();
      });
}

namespace {

const BackendRegisterer kRegisterGloo({kGlooBackendName, {DeviceType::kCpu}, &GlooBackend::Create});

}  // namespace
WorkPtr GlooBackend::RunNatively(const Collective& call) {
  if (!native_) return nullptr;
  absl::StatusOr<GlooPlan> plan = PlanGlooCall(call, rank(), size());
  if (absl::IsUnimplemented(plan.status())) return nullptr;  // algorithms/ runs it.
  if (!plan.ok()) return Work::Finished(plan.status(), std::string(call.name()), size());
  return SubmitNative(*std::move(plan));
}

}  // namespace plexus::gloo_backend
