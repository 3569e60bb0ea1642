#include "profile/op_profile.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/check.h"
#include "core/elapsed.h"

namespace tandem::profile {

OpProfile::OpProfile(OpProfileOptions options) : options_(std::move(options)) {
  if (!options_.now) options_.now = [] { return std::chrono::steady_clock::now(); };
}

void OpProfile::begin(std::string_view name, bool backward) {
  TANDEM_CHECK(!open_, "op profile: '{}' began inside another op's scope", name);
  Pending p;
  p.entry = &*totals_.try_emplace(Key{std::string(name), backward}).first;
  if (options_.device_timer) p.begin = options_.device_timer->mark();
  else open_since_ = options_.now();
  pending_.push_back(std::move(p));
  open_ = true;
}

void OpProfile::end() noexcept {
  if (!open_) return;
  open_ = false;
  Pending& p = pending_.back();
  if (!options_.device_timer) {
    p.host_ms = milliseconds_between(open_since_, options_.now());
    return;
  }
  try {
    p.end = options_.device_timer->mark();
  } catch (const std::exception& e) {
    if (failure_.empty()) failure_ = fmt::format("recording the end of '{}' failed: {}", p.entry->first.first, e.what());
  }
}

void OpProfile::end_step() {
  TANDEM_CHECK(!open_, "op profile: the step ended inside '{}'", pending_.back().entry->first.first);
  if (!failure_.empty()) {
    const std::string f = failure_;
    failure_.clear();
    pending_.clear();
    TANDEM_FAIL("op profile: {}", f);
  }
  for (const Pending& p : pending_) {
    double ms = p.host_ms;
    if (options_.device_timer) {
      const std::optional<double> d = DeviceTimer::elapsed_ms(p.begin, p.end);
      TANDEM_CHECK(d.has_value(), "op profile: the events of '{}' have not completed (synchronise before end_step)",
                   p.entry->first.first);
      ms = *d;
    }
    ++p.entry->second.calls;
    p.entry->second.ms += ms;
  }
  pending_.clear();
  ++steps_;
}

std::vector<OpRow> OpProfile::rows() const {
  std::vector<OpRow> out;
  if (steps_ == 0) return out;
  for (const auto& [key, t] : totals_) {
    if (t.calls == 0) continue;
    out.push_back({key.first, key.second, static_cast<double>(t.calls) / steps_, t.ms / steps_});
  }
  std::stable_sort(out.begin(), out.end(), [](const OpRow& a, const OpRow& b) { return a.ms_per_step > b.ms_per_step; });
  return out;
}

double OpProfile::ms_per_step() const {
  if (steps_ == 0) return 0;
  double ms = 0;
  for (const auto& [key, t] : totals_) ms += t.ms;
  return ms / steps_;
}

}  // namespace tandem::profile
