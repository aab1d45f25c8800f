#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/core/deadline.h"
#include "base/core/device.h"
#include "base/core/dtype.h"
#include "base/core/environment.h"
#include "base/core/event_journal.h"
#include "base/core/heartbeat.h"
#include "base/core/host_twin.h"
#include "base/core/options.h"
#include "base/core/reduce_op.h"
#include "base/core/status_macros.h"
#include "base/core/tensor.h"
#include "gtest/gtest.h"

namespace plexus {
namespace {

TEST(DTypeTest, SizesMatchCTypes) {
  EXPECT_EQ(DTypeSize(DType::kBool), sizeof(bool));
  EXPECT_EQ(DTypeSize(DType::kInt16), sizeof(int16_t));
  EXPECT_EQ(DTypeSize(DType::kBFloat16), 2u);
  EXPECT_EQ(DTypeSize(DType::kFloat32), sizeof(float));
  EXPECT_EQ(DTypeSize(DType::kInt64), sizeof(int64_t));
  EXPECT_EQ(DTypeSize(DType::kFloat64), sizeof(double));
}

TEST(DTypeTest, NamesRoundTrip) {
  for (DType dtype : kAllDTypes) {
    auto parsed = ParseDType(DTypeName(dtype));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, dtype);
  }
  EXPECT_EQ(*ParseDType("half"), DType::kFloat16);
  EXPECT_EQ(*ParseDType("Float"), DType::kFloat32);
  auto bad = ParseDType("complex512");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("bfloat16"), absl::string_view::npos);
}

TEST(ReduceOpTest, ValidityTable) {
  EXPECT_TRUE(ValidateReduceOp(ReduceOpKind::kSum, DType::kBool).ok());
  EXPECT_TRUE(ValidateReduceOp(ReduceOpKind::kMax, DType::kBFloat16).ok());
  EXPECT_TRUE(ValidateReduceOp(ReduceOpKind::kBxor, DType::kInt64).ok());
  EXPECT_TRUE(ValidateReduceOp(ReduceOpKind::kBand, DType::kBool).ok());
  EXPECT_TRUE(ValidateReduceOp(ReduceOpKind::kAvg, DType::kFloat16).ok());
  EXPECT_TRUE(ValidateReduceOp(ReduceOp::PremulSum(0.5), DType::kFloat64).ok());

  absl::Status bxor = ValidateReduceOp(ReduceOpKind::kBxor, DType::kFloat32);
  EXPECT_EQ(bxor.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bxor.message().find("BXOR"), absl::string_view::npos);
  EXPECT_NE(bxor.message().find("float32"), absl::string_view::npos);
  EXPECT_FALSE(ValidateReduceOp(ReduceOpKind::kAvg, DType::kInt32).ok());
  EXPECT_FALSE(ValidateReduceOp(ReduceOp::PremulSum(2), DType::kUInt8).ok());
}

TEST(ReduceOpTest, EveryPairIsDecided) {
  // Each pair is either valid or rejected with a message naming op and dtype.
  for (ReduceOpKind kind : kAllReduceOpKinds) {
    for (DType dtype : kAllDTypes) {
      absl::Status status = ValidateReduceOp(kind, dtype);
      if (!status.ok()) {
        EXPECT_NE(status.message().find(DTypeName(dtype)), absl::string_view::npos) << status;
      }
    }
  }
  EXPECT_EQ(*ParseReduceOp("prod"), ReduceOpKind::kProduct);
  EXPECT_EQ(*ParseReduceOp("premul_sum"), ReduceOpKind::kPremulSum);
  EXPECT_FALSE(ParseReduceOp("median").ok());
  EXPECT_EQ(ReduceOpName(ReduceOp::PremulSum(0.25)), "PREMUL_SUM(0.25)");
}

TEST(DeviceTest, Parse) {
  EXPECT_EQ(*ParseDevice("cpu"), Device::Cpu());
  EXPECT_EQ(*ParseDevice("cuda"), Device::Cuda(0));
  EXPECT_EQ(*ParseDevice("cuda:3"), Device::Cuda(3));
  EXPECT_EQ(Device::Cuda(3).ToString(), "cuda:3");
  EXPECT_FALSE(ParseDevice("cuda:-1").ok());
  EXPECT_FALSE(ParseDevice("cpu:1").ok());
  auto bad = ParseDevice("tpu:0");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("cpu, cuda"), absl::string_view::npos);
}

TEST(TensorTest, ContiguityAndSizes) {
  std::vector<float> data(12);
  Tensor t(data.data(), DType::kFloat32, Shape{3, 4});
  EXPECT_EQ(t.numel(), 12);
  EXPECT_EQ(t.nbytes(), 48u);
  EXPECT_TRUE(t.IsContiguous());
  EXPECT_TRUE(t.CheckContiguous("all_reduce", "input").ok());

  Tensor transposed(data.data(), DType::kFloat32, Shape{4, 3}, Shape{1, 4}, Device::Cpu());
  EXPECT_FALSE(transposed.IsContiguous());
  absl::Status status = transposed.CheckContiguous("all_reduce", "input");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("all_reduce: input is not contiguous"), absl::string_view::npos);
  EXPECT_NE(status.message().find("strides [1, 4]"), absl::string_view::npos);

  // Size-1 dimensions may carry any stride.
  Tensor unit(data.data(), DType::kFloat32, Shape{1, 12}, Shape{99, 1}, Device::Cpu());
  EXPECT_TRUE(unit.IsContiguous());

  Tensor empty(nullptr, DType::kInt8, Shape{0});
  EXPECT_TRUE(empty.CheckContiguous("broadcast", "tensor").ok());
  Tensor null_data(nullptr, DType::kInt8, Shape{5});
  EXPECT_FALSE(null_data.CheckContiguous("broadcast", "tensor").ok());

  Tensor slice = t.Slice(4, 4);
  EXPECT_EQ(slice.data(), data.data() + 4);
  EXPECT_EQ(slice.numel(), 4);
  EXPECT_EQ(t.DebugString(), "float32[3, 4] on cpu");
}

TEST(OptionsTest, TimeoutResolution) {
  AllReduceOptions options;
  EXPECT_EQ(ResolveTimeout(options.timeout, absl::Seconds(7)), absl::Seconds(7));
  options.timeout = absl::Milliseconds(5);
  EXPECT_EQ(ResolveTimeout(options.timeout, absl::Seconds(7)), absl::Milliseconds(5));
}

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int half, Half(x));
  ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

absl::Status CheckEven(int x) {
  RETURN_IF_ERROR(Half(x).status());
  return absl::OkStatus();
}

TEST(StatusMacrosTest, PropagateErrorsAndValues) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_FALSE(CheckEven(3).ok());
}

TEST(HeartbeatTest, ParsesDurationsSecondsAndOff) {
  EXPECT_EQ(*ParseHeartbeat("5s"), absl::Seconds(5));
  EXPECT_EQ(*ParseHeartbeat("500ms"), absl::Milliseconds(500));
  EXPECT_EQ(*ParseHeartbeat(" 2.5 "), absl::Milliseconds(2500));
  EXPECT_EQ(*ParseHeartbeat("off"), absl::InfiniteDuration());
  EXPECT_EQ(*ParseHeartbeat("0"), absl::InfiniteDuration());
  absl::StatusOr<absl::Duration> bad = ParseHeartbeat("soon");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'soon'"), absl::string_view::npos);
  absl::StatusOr<absl::Duration> tiny = ParseHeartbeat("10ms");
  EXPECT_EQ(tiny.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(tiny.status().message().find("minimum"), absl::string_view::npos);
}

TEST(ClockTest, TimespecsConvertAsAbseilConvertsThem) {
  for (const timespec t : {timespec{0, 0}, timespec{1, 999999999}, timespec{1764121000, 123456789},
                           timespec{4102444800, 1}}) {
    EXPECT_EQ(TimeOf(t), absl::TimeFromTimespec(t)) << t.tv_sec << "." << t.tv_nsec;
  }
  const absl::Time fast = FastNow();
  const absl::Time now = absl::Now();
  EXPECT_LE(fast, now);
  EXPECT_LT(now - fast, absl::Seconds(1));
}

TEST(HostTwinTest, ADeviceWithoutSupportIsAClearError) {
  float data[4] = {};
  const Tensor tensor = Tensor::Flat(data, DType::kFloat32, 4, Device::Cuda(0));
  auto twin = MakeHostTwin(tensor, /*copy_in=*/true, "sync_shared_state: tensor 'w'");
  ASSERT_FALSE(twin.ok());
  EXPECT_EQ(twin.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(twin.status().message().find("sync_shared_state: tensor 'w': a cuda:0 tensor"),
            std::string::npos)
      << twin.status();
  auto cpu = MakeHostTwin(Tensor::Flat(data, DType::kFloat32, 4), true, "x");
  EXPECT_EQ(cpu.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(EventJournalTest, KeepsTheLatestEventsInOrderWithTheirTimes) {
  const int64_t before = UnixNanos();
  for (size_t i = 0; i < kJournalCapacity + 5; ++i) NoteEvent("test", std::to_string(i));
  const int64_t after = UnixNanos();
  std::vector<JournalEvent> events = JournalEvents();
  ASSERT_EQ(events.size(), kJournalCapacity);
  EXPECT_EQ(events.front().detail, "5");
  EXPECT_EQ(events.back().detail, std::to_string(kJournalCapacity + 4));
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].kind, "test");
    EXPECT_GE(events[i].unix_ns, before);
    EXPECT_LE(events[i].unix_ns, after);
    if (i > 0) {
      EXPECT_GE(events[i].unix_ns, events[i - 1].unix_ns);
    }
  }
}

TEST(EnvironmentTest, TheTableIsSortedCompleteAndReadThrough) {
  absl::Span<const EnvironmentVariable> table = EnvironmentVariables();
  ASSERT_GE(table.size(), 25u);
  for (size_t i = 0; i < table.size(); ++i) {
    const EnvironmentVariable& variable = table[i];
    EXPECT_EQ(std::string(variable.name).rfind("PLEXUS_", 0), 0u) << variable.name;
    for (const char* field :
         {variable.type, variable.default_value, variable.meaning, variable.details}) {
      EXPECT_NE(std::string(field), "") << variable.name;
    }
    if (i > 0) {
      EXPECT_LT(std::string(table[i - 1].name), std::string(variable.name));
    }
    EXPECT_EQ(FindEnvironmentVariable(variable.name), &variable);
  }
  EXPECT_EQ(FindEnvironmentVariable("PLEXUS_NOT_A_VARIABLE"), nullptr);
  setenv("PLEXUS_HOST_ID", "test-host", 1);
  EXPECT_STREQ(ReadEnvironment("PLEXUS_HOST_ID"), "test-host");
  unsetenv("PLEXUS_HOST_ID");
  EXPECT_EQ(ReadEnvironment("PLEXUS_HOST_ID"), nullptr);
}

// Every typed variable's default parses as its type, so a reader never restates it.
TEST(EnvironmentTest, TypedReadersTakeTheTablesDefaultAndNameABadValue) {
  int typed = 0;
  for (const EnvironmentVariable& variable : EnvironmentVariables()) {
    const std::string type = variable.type;
    if (!getenv(variable.name)) {
      if (type == "integer") {
        ++typed;
        EXPECT_TRUE(EnvironmentInteger(variable.name).ok()) << variable.name;
      } else if (type == "seconds") {
        ++typed;
        EXPECT_TRUE(EnvironmentSeconds(variable.name).ok()) << variable.name;
      } else if (type.rfind("bytes", 0) == 0) {
        ++typed;
        EXPECT_TRUE(EnvironmentBytes(variable.name).ok()) << variable.name;
      } else if (type == "0 or 1" && std::string(variable.default_value).size() == 1) {
        ++typed;
        EXPECT_TRUE(EnvironmentFlag(variable.name).ok()) << variable.name;
      }
    }
  }
  EXPECT_GE(typed, 6);
  EXPECT_EQ(*EnvironmentSeconds("PLEXUS_ELASTIC_TIMEOUT"), absl::Seconds(600));
  EXPECT_EQ(*EnvironmentBytes("PLEXUS_SHM_RING_BYTES"), uint64_t{4} << 20);
  EXPECT_EQ(EnvironmentIntegerOrDefault("PLEXUS_FLIGHT_RECORDER"), 2000);
  setenv("PLEXUS_ELASTIC_TIMEOUT", "2.5", 1);
  EXPECT_EQ(*EnvironmentSeconds("PLEXUS_ELASTIC_TIMEOUT"), absl::Milliseconds(2500));
  setenv("PLEXUS_ELASTIC_TIMEOUT", "-3", 1);
  absl::StatusOr<absl::Duration> negative = EnvironmentSeconds("PLEXUS_ELASTIC_TIMEOUT");
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(negative.status().message(),
            "PLEXUS_ELASTIC_TIMEOUT='-3' is not a positive number of seconds");
  unsetenv("PLEXUS_ELASTIC_TIMEOUT");
  setenv("PLEXUS_GLOO_NATIVE", "yes", 1);
  EXPECT_FALSE(EnvironmentFlag("PLEXUS_GLOO_NATIVE").ok());
  EXPECT_TRUE(EnvironmentFlagOrDefault("PLEXUS_GLOO_NATIVE"));  // Logged; the default, 1.
  setenv("PLEXUS_GLOO_NATIVE", "0", 1);
  EXPECT_FALSE(*EnvironmentFlag("PLEXUS_GLOO_NATIVE"));
  unsetenv("PLEXUS_GLOO_NATIVE");
  setenv("PLEXUS_FLIGHT_RECORDER", "many", 1);
  EXPECT_EQ(EnvironmentIntegerOrDefault("PLEXUS_FLIGHT_RECORDER"), 2000);
  unsetenv("PLEXUS_FLIGHT_RECORDER");
}

}  // namespace
}  // namespace plexus
