// FlightRecorder: a bounded ring of the latest operations, numbered per kind, valid JSON.
#include "frontend/dispatch/flight_recorder.h"

#include <atomic>
#include <regex>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/core/event_journal.h"
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

// Recording takes no lock: a dump running beside it must still show each entry whole, never
// one operation's fields mixed with another's.
TEST(FlightRecorderTest, ADumpBesideRecordingShowsOnlyWholeEntries) {
  constexpr int64_t kOperations = 200000;
  FlightRecorder recorder({"world", 0, 2, {0, 1}, "cpu:tcp"}, /*capacity=*/4);
  std::atomic<bool> dumping{false};
  std::atomic<bool> done{false};
  std::thread issuer([&] {
    while (!dumping.load()) std::this_thread::yield();
    for (int64_t i = 0; i < kOperations; ++i) {
      // The count and timeout repeat the sequence number, so a torn entry shows.
      const uint64_t handle = recorder.Record(
          {"all_reduce", DType::kFloat32, i, -1, -1, "SUM", absl::Seconds(i % 7 + 1)}, false);
      if (i % 2 == 0) recorder.Finish(handle, absl::OkStatus());
      if (i % 3 == 0) recorder.Finish(handle, absl::InternalError(absl::StrCat("failed ", i)));
    }
    done.store(true);
  });
  const std::regex entry(
      "\\{\"sequence\": (\\d+), [^}]*\"count\": (\\d+), [^}]*\"timeout_s\": (\\d+), "
      "\"state\": \"(\\w+)\"[^}]*\"error\": \"([^\"]*)\"\\}");
  // Checks every entry of a dump; returns how many there were.
  auto check = [&](const std::string& json) {
    int entries = 0;
    for (auto it = std::sregex_iterator(json.begin(), json.end(), entry);
         it != std::sregex_iterator(); ++it) {
      const int64_t sequence = std::stoll((*it)[1]);
      ++entries;
      EXPECT_EQ(std::stoll((*it)[2]), sequence) << it->str();
      EXPECT_EQ(std::stoll((*it)[3]), sequence % 7 + 1) << it->str();
      const std::string state = (*it)[4];
      // The first outcome is the one kept: completed when even, else failed when a multiple
      // of three, else still issued.
      const std::string outcome = sequence % 2 == 0   ? "completed"
                                  : sequence % 3 == 0 ? "failed"
                                                      : "issued";
      if (state != "issued") {
        EXPECT_EQ(state, outcome) << it->str();
      }
      if (state == "failed") {
        EXPECT_EQ((*it)[5], absl::StrCat("INTERNAL: failed ", sequence)) << it->str();
      }
    }
    return entries;
  };
  dumping.store(true);
  while (!done.load() && !::testing::Test::HasFailure()) check(recorder.ToJson());
  issuer.join();
  // Once recording stops, the last four are there, in order.
  const std::string last = recorder.ToJson();
  EXPECT_EQ(check(last), 4);
  EXPECT_THAT(last, HasSubstr("{\"sequence\": 199996, "));
  EXPECT_THAT(last, HasSubstr("{\"sequence\": 199999, "));
  EXPECT_LT(last.find("\"sequence\": 199998, "), last.find("\"sequence\": 199999, "));
}

TEST(FlightRecorderTest, ADumpCarriesTheClockOffsetAndTheEventJournal) {
  auto recorder = FlightRecorder::Create({"clocked", 0, 1, {0}, "cpu:tcp"});
  ASSERT_NE(recorder, nullptr);
  EXPECT_THAT(FlightRecordersJson(), HasSubstr("\"clock\": null"));
  SetFlightRecorderClock({-1'234'567'000, 2'500}, "store server on host-a");
  NoteEvent("abort", "process group 'clocked' (rank 0) was aborted: \"test\"");
  const std::string json = FlightRecordersJson("test");
  EXPECT_THAT(json, HasSubstr("\"clock\": {\"offset_us\": -1234567, \"error_us\": 3, "
                              "\"reference\": \"store server on host-a\"}"));
  EXPECT_THAT(json, HasSubstr("\"kind\": \"abort\", \"detail\": \"process group 'clocked' "
                              "(rank 0) was aborted: \\\"test\\\"\"}"));
  EXPECT_THAT(json, HasSubstr("{\"name\": \"clocked\""));
}

}  // namespace
}  // namespace plexus
