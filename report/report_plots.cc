// The report's SVG plots from bench results and training runs.
#include "report/report_plots.h"

#include <fmt/format.h>

#include <algorithm>

#include "report/number_format.h"
#include "report/svg_chart.h"

namespace tandem::report {

namespace {

std::string rank_label(int world_size) { return fmt::format("{} rank{}", world_size, world_size > 1 ? "s" : ""); }

// Stacked phases of a step, one bar per profile.
BarChart breakdown_chart(const std::string& title, const std::string& x_label, const std::vector<Profile>& cases,
                         const std::vector<std::string>& categories) {
  BarChart c;
  c.title = title;
  c.x_label = x_label;
  c.y_label = "milliseconds per step (median)";
  c.categories = categories;
  c.stacked = true;
  c.value_format = "{:.1f}";
  Series data{"DataLoader wait", {}, {}}, fwd{"forward", {}, {}}, bwd{"backward (autograd)", {}, {}},
      exposed{"exposed all-reduce", {}, {}}, opt{"optimizer", {}, {}}, other{"other", {}, {}};
  for (const Profile& p : cases) {
    const StepSample& m = p.median;
    data.y.push_back(m.data_wait_ms);
    fwd.y.push_back(m.forward_ms);
    // backward_ms holds the autograd pass and the wait for the last all-reduce.
    const double exposed_part = std::min(m.exposed_comm_ms, m.backward_ms);
    bwd.y.push_back(std::max(0.0, m.backward_ms - exposed_part));
    exposed.y.push_back(exposed_part);
    opt.y.push_back(m.optimizer_ms);
    other.y.push_back(p.other_ms());
  }
  c.bars = {data, fwd, bwd, exposed, opt, other};
  return c;
}

BarChart precision_throughput(const StepBench& s, bool with_ranks) {
  std::vector<std::string> categories;
  Series sps{"samples/s", {}, {}};
  for (const Profile& p : s.cases) {
    categories.push_back(with_ranks ? fmt::format("{} ({}r)", p.facts.precision, p.facts.world_size)
                                    : p.facts.precision);
    sps.y.push_back(p.samples_per_second);
  }
  return BarChart{
      "Throughput by precision", "precision", "samples per second", categories, {sps}, false, {}, {}, "{:.0f}"};
}

}  // namespace

std::vector<Plot> scaling_plots(const ScalingBench& s, const StepBench* step, bool have_runs, const Thresholds& t) {
  const std::vector<ScalingRow> rows = scaling_table(s.cases);
  std::vector<Profile> sorted = s.cases;
  std::sort(sorted.begin(), sorted.end(),
            [](const Profile& x, const Profile& y) { return x.facts.world_size < y.facts.world_size; });
  std::vector<std::string> cats;
  Series speedup{"measured", {}, {}}, ideal{"ideal (N)", {}, {}, true}, eff{"efficiency", {}, {}},
      sps{"samples/s", {}, {}};
  for (const ScalingRow& r : rows) {
    cats.push_back(rank_label(r.world_size));
    speedup.y.push_back(r.speedup);
    ideal.y.push_back(r.world_size);
    eff.y.push_back(100 * r.efficiency);
    sps.y.push_back(r.samples_per_second);
  }
  std::vector<Plot> out;
  BarChart sc{"Speedup",     "world size", "speedup (samples/s vs 1 rank)", cats, {speedup}, false, {ideal},
              {{1.0, "1x"}}, "{:.2f}"};
  BarChart ec{"Efficiency",
              "world size",
              "efficiency (%)",
              cats,
              {eff},
              false,
              {},
              {{100, "ideal"}, {100 * t.poor_efficiency, "poor < " + bound_pct(t.poor_efficiency)}},
              "{:.0f}"};
  out.push_back({"speedup_efficiency.svg", render_svg({sc, ec})});
  std::vector<Chart> tp{
      BarChart{"Throughput", "world size", "samples per second (all ranks)", cats, {sps}, false, {}, {}, "{:.0f}"}};
  if (step && !step->cases.empty()) tp.push_back(precision_throughput(*step, /*with_ranks=*/true));
  out.push_back({"throughput.svg", render_svg(tp)});
  out.push_back({"step_breakdown.svg",
                 render_svg({breakdown_chart("Where a step's time goes", "world size", sorted, cats)}, 720, 440)});
  if (!have_runs) {  // with runs, training_plots draws the measured epoch times instead
    Series est{"estimated epoch time", {}, {}};
    for (const ScalingRow& r : rows) est.y.push_back(r.epoch_seconds);
    out.push_back({"epoch_time.svg", render_svg({BarChart{"Epoch time (estimated: epoch examples / throughput)",
                                                          "world size",
                                                          "seconds",
                                                          cats,
                                                          {est},
                                                          false,
                                                          {},
                                                          {},
                                                          "{:.1f}"}})});
  }
  return out;
}

std::vector<Plot> step_plots(const StepBench& s, bool have_scaling) {
  std::vector<Plot> out;
  if (s.cases.empty()) return out;
  if (!have_scaling) out.push_back({"throughput.svg", render_svg({precision_throughput(s, /*with_ranks=*/false)})});
  std::vector<std::string> categories;
  Series mem{"peak MiB", {}, {}};
  for (const Profile& p : s.cases) {
    categories.push_back(p.facts.precision);
    mem.y.push_back(static_cast<double>(p.peak_memory_bytes) / (1 << 20));
  }
  out.push_back({"memory.svg",
                 render_svg({BarChart{
                     "Peak tensor memory per rank", "precision", "MiB", categories, {mem}, false, {}, {}, "{:.1f}"}})});
  return out;
}

std::vector<Plot> bucket_plots(const BucketsBench& b) {
  std::vector<std::string> cats;
  Series overlap{"overlap %", {}, {}};
  for (const Profile& p : b.cases) {
    cats.push_back(fmt::format("{} ({})",
                               p.facts.one_bucket ? std::string("one") : fmt::format("{:g}", p.facts.bucket_cap_mb),
                               p.facts.bucket_bytes.size()));
    overlap.y.push_back(100 * overlap_fraction(p));
  }
  BarChart oc{"All-reduce overlapped with backward",
              "bucket_cap_mb (buckets)",
              "overlap (% of all-reduce time)",
              cats,
              {overlap},
              false,
              {},
              {},
              "{:.0f}"};
  return {{"buckets.svg",
           render_svg({breakdown_chart("Step time by bucket size", "bucket_cap_mb (buckets)", b.cases, cats), oc}, 640,
                      440)}};
}

std::vector<Plot> training_plots(const std::vector<TrainingRun>& runs) {
  if (runs.empty()) return {};
  LineChart acc{"Evaluation accuracy", "epoch", "accuracy", {}, false, {}, false, {}};
  LineChart et{"Epoch time", "epoch", "seconds (one evaluation included)", {}, false, {}, true, {}};
  for (const TrainingRun& r : runs) {
    Series a{r.label, {}, {}}, e{r.label, {}, {}};
    for (const EvalPoint& p : r.evals) {
      a.x.push_back(p.epoch);
      a.y.push_back(p.accuracy);
    }
    for (const auto& [epoch, s] : r.epoch_seconds()) {
      e.x.push_back(epoch);
      e.y.push_back(s);
    }
    acc.series.push_back(a);
    et.series.push_back(e);
  }
  return {{"accuracy.svg", render_svg({acc})}, {"epoch_time.svg", render_svg({et})}};
}

}  // namespace tandem::report
