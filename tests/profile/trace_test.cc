// The Chrome trace of one rank (events, lanes, clocks), the merge of several
// ranks, and what a training step puts on the timeline.
#include "profile/trace.h"

#include <gtest/gtest.h>

#include <set>

#include "core/check.h"
#include "profile/step_trace.h"
#include "tests/profile/fake_clock.h"

namespace tandem::profile {
namespace {

using testing::FakeClock;

ClockOrigin origin_at(int64_t unix_us) { return ClockOrigin{FakeClock::at_ms(0), unix_us}; }

std::vector<nlohmann::json> events_of(const nlohmann::json& trace, const std::string& ph) {
  std::vector<nlohmann::json> out;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == ph) out.push_back(e);
  return out;
}

const nlohmann::json* find_event(const nlohmann::json& trace, const std::string& name) {
  for (const auto& e : trace["traceEvents"])
    if (e["name"] == name) return &e;
  return nullptr;
}

std::string lane_name_of(const nlohmann::json& trace, int pid, int tid) {
  for (const auto& e : events_of(trace, "M"))
    if (e["name"] == "thread_name" && e["pid"] == pid && e["tid"] == tid) return e["args"]["name"];
  return "";
}

TEST(Trace, SpansAreCompleteEventsInMicrosecondsFromTheRanksOrigin) {
  Trace t(/*rank=*/1, /*world=*/2, origin_at(1'700'000'000'000'000));
  t.span(lane::kCompute, "forward", FakeClock::at_ms(2), FakeClock::at_ms(2.5), {{"step", 3}});
  nlohmann::json j = t.to_json();
  const nlohmann::json* e = find_event(j, "forward");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ((*e)["ph"], "X");
  EXPECT_EQ((*e)["pid"], 2) << "pid = rank + 1";
  EXPECT_EQ((*e)["tid"], lane::kCompute);
  EXPECT_DOUBLE_EQ((*e)["ts"].get<double>(), 2000.0);
  EXPECT_DOUBLE_EQ((*e)["dur"].get<double>(), 500.0);
  EXPECT_EQ((*e)["args"]["step"], 3);
  EXPECT_EQ(j["otherData"]["rank"], 1);
  EXPECT_EQ(j["otherData"]["world_size"], 2);
  EXPECT_EQ(j["otherData"]["unix_origin_us"], 1'700'000'000'000'000);
  EXPECT_EQ(j["displayTimeUnit"], "ms");
}

TEST(Trace, MetadataNamesTheRankAndEveryLaneUsed) {
  Trace t(0, 1, origin_at(0));
  t.span(lane::kComm, "allreduce bucket 0", FakeClock::at_ms(1), FakeClock::at_ms(2));
  t.span(lane::loader(1), "batch 0", FakeClock::at_ms(0), FakeClock::at_ms(1));
  nlohmann::json j = t.to_json();
  bool named = false;
  for (const auto& e : events_of(j, "M"))
    if (e["name"] == "process_name") named = e["args"]["name"] == "rank 0" && e["pid"] == 1;
  EXPECT_TRUE(named);
  EXPECT_EQ(lane_name_of(j, 1, lane::kComm), "comm");
  EXPECT_EQ(lane_name_of(j, 1, lane::loader(1)), "loader worker 1");
  EXPECT_EQ(lane_name_of(j, 1, lane::kCompute), "") << "no metadata for an empty lane";
}

TEST(Trace, EventsAreSortedByStartWithEnclosingSpansFirst) {
  Trace t(0, 1, origin_at(0));
  t.span(lane::kCompute, "late", FakeClock::at_ms(5), FakeClock::at_ms(6));
  t.span(lane::kCompute, "inner", FakeClock::at_ms(1), FakeClock::at_ms(2));
  t.span(lane::kSteps, "outer", FakeClock::at_ms(1), FakeClock::at_ms(4));
  nlohmann::json j = t.to_json();
  std::vector<std::string> names;
  bool metadata_done = false;
  double last = -1;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M") {
      EXPECT_FALSE(metadata_done) << "metadata comes first";
      continue;
    }
    metadata_done = true;
    EXPECT_GE(e["ts"].get<double>(), last);
    last = e["ts"].get<double>();
    names.push_back(e["name"]);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"outer", "inner", "late"}));
}

TEST(TraceMerge, RanksKeepTheirPidsAndMoveToTheEarliestWallClock) {
  // Rank 1 started 250 us of wall-clock time after rank 0.
  Trace r0(0, 2, origin_at(1'000'000)), r1(1, 2, origin_at(1'000'250));
  r0.span(lane::kCompute, "r0 forward", FakeClock::at_ms(1), FakeClock::at_ms(2));
  r1.span(lane::kCompute, "r1 forward", FakeClock::at_ms(1), FakeClock::at_ms(2));
  r1.span(lane::kComm, "r1 early", FakeClock::at_ms(0), FakeClock::at_ms(0.5));
  nlohmann::json m = merge_traces({{"b.json", r1.to_json()}, {"a.json", r0.to_json()}});
  EXPECT_DOUBLE_EQ((*find_event(m, "r0 forward"))["ts"].get<double>(), 1000.0);
  EXPECT_DOUBLE_EQ((*find_event(m, "r1 forward"))["ts"].get<double>(), 1250.0);
  EXPECT_EQ((*find_event(m, "r0 forward"))["pid"], 1);
  EXPECT_EQ((*find_event(m, "r1 forward"))["pid"], 2);
  EXPECT_EQ(m["otherData"]["ranks"], (std::vector<int>{0, 1}));
  EXPECT_EQ(m["otherData"]["unix_origin_us"], 1'000'000);
  double last = -1;
  std::set<int> process_names;
  for (const auto& e : m["traceEvents"]) {
    if (e["ph"] == "M") {
      if (e["name"] == "process_name") process_names.insert(e["pid"].get<int>());
      continue;
    }
    EXPECT_GE(e["ts"].get<double>(), last);
    last = e["ts"].get<double>();
  }
  EXPECT_EQ(process_names, (std::set<int>{1, 2}));
}

TEST(TraceMerge, ARankTwiceOrAForeignFileIsAnErrorNamingTheFile) {
  Trace r0(0, 2, origin_at(0));
  auto error_of = [](const std::vector<std::pair<std::string, nlohmann::json>>& in) -> std::string {
    try {
      merge_traces(in);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  std::string twice = error_of({{"x/trace_rank0.json", r0.to_json()}, {"y/trace_rank0.json", r0.to_json()}});
  EXPECT_NE(twice.find("rank 0 appears twice"), std::string::npos) << twice;
  EXPECT_NE(twice.find("y/trace_rank0.json"), std::string::npos) << twice;
  nlohmann::json negative = r0.to_json();
  negative["otherData"]["rank"] = -1;
  std::string bad_rank = error_of({{"neg.json", negative}});
  EXPECT_NE(bad_rank.find("trace merge: neg.json: otherData.rank must be >= 0, got -1"), std::string::npos) << bad_rank;
  nlohmann::json future = r0.to_json();
  future["otherData"]["tandem_trace_version"] = 99;
  std::string newer = error_of({{"future.json", future}});
  EXPECT_NE(newer.find("trace merge: future.json is trace version 99, newer than this tandem reads"),
            std::string::npos)
      << newer;
  std::string foreign = error_of({{"chrome.json", {{"traceEvents", nlohmann::json::array()}}}});
  EXPECT_NE(foreign.find("chrome.json is not a Tandem trace"), std::string::npos) << foreign;
}

TEST(StepTrace, EachBucketAllReduceIsOneCommEventWithItsContents) {
  ddp::IterationStats st;
  st.synchronized = true;
  st.backward_start = FakeClock::at_ms(10);
  for (int i = 0; i < 2; ++i) {
    ddp::BucketStats b;
    b.bytes = 1000u * static_cast<size_t>(i + 1);
    b.num_params = i + 1;
    b.ready_ms = 1.0 + i;
    b.comm_start_ms = 1.5 + 2 * i;
    b.comm_end_ms = 2.5 + 2 * i;
    st.buckets.push_back(b);
  }
  Trace t(0, 2, origin_at(0));
  trace_buckets(t, 7, st, {{"fc2.bias"}, {"fc1.weight", "fc1.bias"}});
  nlohmann::json j = t.to_json();
  const nlohmann::json* b1 = find_event(j, "allreduce bucket 1");
  ASSERT_NE(b1, nullptr) << j.dump(1);
  EXPECT_EQ((*b1)["tid"], lane::kComm);
  EXPECT_DOUBLE_EQ((*b1)["ts"].get<double>(), 13500.0);  // backward start 10 ms + 3.5 ms
  EXPECT_DOUBLE_EQ((*b1)["dur"].get<double>(), 1000.0);
  EXPECT_EQ((*b1)["args"]["bucket"], 1);
  EXPECT_EQ((*b1)["args"]["bytes"], 2000);
  EXPECT_EQ((*b1)["args"]["num_params"], 2);
  EXPECT_EQ((*b1)["args"]["params"], (std::vector<std::string>{"fc1.weight", "fc1.bias"}));
  EXPECT_EQ((*b1)["args"]["step"], 7);
  EXPECT_DOUBLE_EQ((*b1)["args"]["queued_ms"].get<double>(), 1.5);
  EXPECT_NE(find_event(j, "allreduce bucket 0"), nullptr);

  Trace none(0, 2, origin_at(0));
  st.synchronized = false;
  trace_buckets(none, 8, st, {});
  EXPECT_EQ(none.size(), 0u) << "a no_sync iteration reduces nothing";
}

TEST(StepTrace, PhasesGoToTheirLanesOnACpuRun) {
  StepRecord r;
  r.step = 4;
  r.detailed = true;
  r.start = FakeClock::at_ms(0);
  r.end = FakeClock::at_ms(6);
  const Phase phases[] = {Phase::DataWait, Phase::Forward, Phase::BackwardCompute, Phase::CommWait, Phase::Optimizer,
                          Phase::Logging};
  for (int i = 0; i < 6; ++i)
    r.spans.push_back(PhaseSpan{phases[i], FakeClock::at_ms(i), FakeClock::at_ms(i + 1), false});
  Trace t(0, 1, origin_at(0));
  trace_step(t, r);
  nlohmann::json j = t.to_json();
  EXPECT_EQ((*find_event(j, "step 4"))["tid"], lane::kSteps);
  EXPECT_EQ((*find_event(j, "data_wait"))["tid"], lane::kHost);
  EXPECT_EQ((*find_event(j, "forward"))["tid"], lane::kCompute);
  EXPECT_EQ((*find_event(j, "backward_compute"))["tid"], lane::kCompute);
  EXPECT_EQ((*find_event(j, "comm_wait"))["tid"], lane::kCompute);
  EXPECT_EQ((*find_event(j, "optimizer"))["tid"], lane::kOptimizer);
  EXPECT_EQ((*find_event(j, "logging"))["tid"], lane::kHost);
}

TEST(StepTrace, OnAGpuRunHostSpansGoToTheHostLaneAndDeviceSpansToTheirStreams) {
  StepRecord r;
  r.step = 1;
  r.device_timed = true;
  r.start = FakeClock::at_ms(0);
  r.end = FakeClock::at_ms(4);
  r.spans = {PhaseSpan{Phase::Forward, FakeClock::at_ms(0), FakeClock::at_ms(1), false},
             PhaseSpan{Phase::Forward, FakeClock::at_ms(1), FakeClock::at_ms(3), true},
             PhaseSpan{Phase::H2D, FakeClock::at_ms(0), FakeClock::at_ms(0.5), true}};
  Trace t(0, 1, origin_at(0));
  trace_step(t, r);
  std::multiset<std::pair<int, std::string>> where;
  for (const auto& e : events_of(t.to_json(), "X")) where.emplace(e["tid"].get<int>(), e["args"].value("clock", ""));
  EXPECT_EQ(where.count({lane::kHost, "host"}), 1u);
  EXPECT_EQ(where.count({lane::kCompute, "device"}), 1u);
  EXPECT_EQ(where.count({lane::kCopy, "device"}), 1u);
}

TEST(StepTrace, ABatchGoesOnItsWorkersLane) {
  data::Batch b;
  b.worker = 1;
  b.index = 5;
  b.build_start = FakeClock::at_ms(1);
  b.build_end = FakeClock::at_ms(2);
  data::Batch inline_batch = b;
  inline_batch.worker = -1;
  Trace t(0, 1, origin_at(0));
  trace_batch(t, b);
  trace_batch(t, inline_batch);
  trace_batch(t, data::Batch{});  // not from a loader: nothing
  std::multiset<int> lanes;
  for (const auto& e : events_of(t.to_json(), "X")) lanes.insert(e["tid"].get<int>());
  EXPECT_EQ(lanes, (std::multiset<int>{lane::loader(1), lane::kLoaderInline}));
}

}  // namespace
}  // namespace tandem::profile
