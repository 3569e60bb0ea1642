#include "profile/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/check.h"
#include "core/elapsed.h"

namespace tandem::profile {

namespace {

constexpr int kTraceVersion = 1;

double round_ns(double us) { return std::round(us * 1000.0) / 1000.0; }

nlohmann::json metadata(const char* what, int pid, int tid, nlohmann::json args) {
  return {{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

// Metadata first, then events by start time; an enclosing span (same start, longer) before what it encloses.
void sort_events(std::vector<nlohmann::json>& events) {
  std::stable_sort(events.begin(), events.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    const bool ma = a["ph"] == "M", mb = b["ph"] == "M";
    if (ma != mb) return ma;
    if (ma) return false;
    const double ta = a["ts"].get<double>(), tb = b["ts"].get<double>();
    if (ta != tb) return ta < tb;
    return a.value("dur", 0.0) > b.value("dur", 0.0);
  });
}

}  // namespace

ClockOrigin ClockOrigin::now() {
  ClockOrigin o;
  o.steady = std::chrono::steady_clock::now();
  o.unix_us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
                  .count();
  return o;
}

std::string lane::name(int l) {
  switch (l) {
    case kSteps: return "steps";
    case kHost: return "host";
    case kCompute: return "compute";
    case kComm: return "comm";
    case kOptimizer: return "optimizer";
    case kCopy: return "h2d copy";
    case kLoaderInline: return "loader (inline)";
    default: return l >= 100 ? fmt::format("loader worker {}", l - 100) : fmt::format("lane {}", l);
  }
}

Trace::Trace(int rank, int world_size, ClockOrigin origin) : rank_(rank), world_size_(world_size), origin_(origin) {}

void Trace::span(int l, std::string name, TimePoint start, TimePoint end, nlohmann::json args) {
  const double ts = microseconds_between(origin_.steady, start);
  const double dur = microseconds_between(start, end);
  spans_.push_back(Span{l, std::move(name), round_ns(ts), round_ns(std::max(0.0, dur)), std::move(args)});
}

nlohmann::json Trace::to_json() const {
  const int pid = rank_ + 1;
  std::vector<nlohmann::json> events;
  events.push_back(metadata("process_name", pid, 0, {{"name", fmt::format("rank {}", rank_)}}));
  events.push_back(metadata("process_sort_index", pid, 0, {{"sort_index", rank_}}));
  std::set<int> lanes;
  for (const Span& s : spans_) lanes.insert(s.lane);
  for (int l : lanes) {
    events.push_back(metadata("thread_name", pid, l, {{"name", lane::name(l)}}));
    events.push_back(metadata("thread_sort_index", pid, l, {{"sort_index", l}}));
  }
  for (const Span& s : spans_) {
    nlohmann::json e = {{"ph", "X"}, {"name", s.name}, {"pid", pid}, {"tid", s.lane}, {"ts", s.ts_us},
                        {"dur", s.dur_us}};
    if (!s.args.is_null()) e["args"] = s.args;
    events.push_back(std::move(e));
  }
  sort_events(events);
  return {{"traceEvents", events},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"tandem_trace_version", kTraceVersion},
            {"rank", rank_},
            {"world_size", world_size_},
            {"unix_origin_us", origin_.unix_us}}}};
}

nlohmann::json merge_traces(const std::vector<std::pair<std::string, nlohmann::json>>& traces) {
  TANDEM_CHECK(!traces.empty(), "trace merge: no traces to merge");
  struct Input {
    const std::string* file;
    const nlohmann::json* trace;
    int rank;
    int64_t origin;
  };
  std::vector<Input> inputs;
  std::map<int, std::string> seen;
  int world_size = 0;
  for (const auto& [file, t] : traces) {
    const bool ok = t.is_object() && t.contains("traceEvents") && t["traceEvents"].is_array() &&
                    t.contains("otherData") && t["otherData"].is_object() &&
                    t["otherData"].value("rank", nlohmann::json()).is_number_integer() &&
                    t["otherData"].value("unix_origin_us", nlohmann::json()).is_number_integer();
    TANDEM_CHECK(ok,
                 "trace merge: {} is not a Tandem trace (needs traceEvents and otherData.rank / "
                 "otherData.unix_origin_us)",
                 file);
    const int rank = t["otherData"]["rank"].get<int>();
    TANDEM_CHECK(rank >= 0, "trace merge: {}: otherData.rank must be >= 0, got {}", file, rank);
    const int version = t["otherData"].value("tandem_trace_version", kTraceVersion);
    TANDEM_CHECK(version <= kTraceVersion,
                 "trace merge: {} is trace version {}, newer than this tandem reads ({}): merge it with the tandem "
                 "that wrote it",
                 file, version, kTraceVersion);
    auto [it, fresh] = seen.emplace(rank, file);
    TANDEM_CHECK(fresh, "trace merge: rank {} appears twice ({} and {})", rank, it->second, file);
    world_size = std::max(world_size, t["otherData"].value("world_size", rank + 1));
    inputs.push_back(Input{&file, &t, rank, t["otherData"]["unix_origin_us"].get<int64_t>()});
  }
  int64_t origin = inputs.front().origin;
  for (const Input& in : inputs) origin = std::min(origin, in.origin);
  std::vector<nlohmann::json> events;
  std::vector<int> ranks;
  for (const Input& in : inputs) {
    ranks.push_back(in.rank);
    const double shift = static_cast<double>(in.origin - origin);
    for (const nlohmann::json& e : (*in.trace)["traceEvents"]) {
      TANDEM_CHECK(e.is_object() && e.contains("ph") && e.contains("pid"), "trace merge: {} has a malformed event: {}",
                   *in.file, e.dump().substr(0, 200));
      nlohmann::json copy = e;
      copy["pid"] = in.rank + 1;
      if (copy["ph"] != "M") {
        TANDEM_CHECK(copy.contains("ts") && copy["ts"].is_number(), "trace merge: {} has an event without ts: {}",
                     *in.file, e.dump().substr(0, 200));
        copy["ts"] = round_ns(copy["ts"].get<double>() + shift);
      }
      events.push_back(std::move(copy));
    }
  }
  sort_events(events);
  std::sort(ranks.begin(), ranks.end());
  return {{"traceEvents", events},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"tandem_trace_version", kTraceVersion},
            {"ranks", ranks},
            {"world_size", world_size},
            {"unix_origin_us", origin}}}};
}

}  // namespace tandem::profile
