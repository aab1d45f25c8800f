// FlightRecorder: a bounded ring of the latest operations, numbered per kind, valid JSON.
#include "frontend/dispatch/flight_recorder.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace plexus {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

FlightRecorder::Operation AllReduce(int64_t count) {
  return {"all_reduce", DType::kFloat32, count, -1, -1, "SUM", absl::Seconds(30)};
}

TEST(FlightRecorderTest, KeepsTheLatestEntriesNumberedPerKind) {
  FlightRecorder recorder({"world", 1, 4, {0, 1, 2, 3}, "cpu:tcp"}, /*capacity=*/3);
  for (int64_t i = 0; i < 5; ++i) {
    recorder.Finish(recorder.Record(AllReduce(100 + i), false), absl::OkStatus());
  }
  const uint64_t send =
      recorder.Record({"send", DType::kInt8, 7, -1, 2, "", absl::Seconds(1)}, true);
  const std::string json = recorder.ToJson();
  // Three slots: collectives #3 and #4 and the send, which is the first point-to-point.
  EXPECT_THAT(json, Not(HasSubstr("\"count\": 102")));
  EXPECT_THAT(json, HasSubstr("{\"sequence\": 3, \"kind\": \"collective\""));
  EXPECT_THAT(json, HasSubstr("{\"sequence\": 4, \"kind\": \"collective\""));
  EXPECT_THAT(json, HasSubstr("{\"sequence\": 0, \"kind\": \"p2p\", \"op\": \"send\""));
  EXPECT_THAT(json, HasSubstr("\"peer\": 2"));
  EXPECT_THAT(json, HasSubstr("\"state\": \"issued\", \"issued_unix_us\""));
  EXPECT_THAT(json, HasSubstr("\"finished_unix_us\": null"));
  recorder.Finish(send, absl::UnavailableError("rank 1 lost rank 2: \"quoted\"\n"));
  const std::string failed = recorder.ToJson();
  EXPECT_THAT(failed, HasSubstr("\"state\": \"failed\""));
  EXPECT_THAT(failed, HasSubstr("lost rank 2: \\\"quoted\\\"\\n"));
}

TEST(FlightRecorderTest, AFinishForAnOverwrittenEntryChangesNothing) {
  FlightRecorder recorder({"world", 0, 1, {0}, "cpu:tcp"}, /*capacity=*/1);
  const uint64_t old = recorder.Record(AllReduce(1), false);
  recorder.Record(AllReduce(2), false);
  recorder.Finish(old, absl::OkStatus());
  EXPECT_THAT(recorder.ToJson(), HasSubstr("\"count\": 2"));
  EXPECT_THAT(recorder.ToJson(), HasSubstr("\"state\": \"issued\""));
}

}  // namespace
}  // namespace plexus
