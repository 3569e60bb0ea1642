#include "apps/step_prediction.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "core/check.h"
#include "core/parse_number.h"

namespace tandem::apps {

std::map<int, ddp::LinkFit> fit_links(const std::vector<report::AllreduceTable>& tables) {
  std::map<int, ddp::LinkFit> out;
  std::map<int, std::string> from;
  for (const report::AllreduceTable& t : tables) {
    TANDEM_CHECK(!from.count(t.world_size), "two all_reduce tables for {} ranks: {} and {}", t.world_size,
                 from[t.world_size], t.path);
    std::vector<ddp::LinkSample> samples;
    // DDP reduces each bucket in place.
    for (const report::AllreduceRow& r : t.rows) samples.push_back({r.bytes, r.in_place_us});
    try {
      out[t.world_size] = ddp::fit_link(t.world_size, samples);
    } catch (const Error& e) {
      TANDEM_FAIL("{}: {}", t.path, e.what());
    }
    from[t.world_size] = t.path;
  }
  return out;
}

ddp::LinkFit link_for(const std::map<int, ddp::LinkFit>& fits, int world) {
  if (world == 1) return ddp::LinkFit{};
  const auto it = fits.find(world);
  if (it != fits.end()) return it->second;
  std::vector<int> have;
  for (const auto& [n, f] : fits) have.push_back(n);
  TANDEM_FAIL(
      "no all_reduce table for {} ranks (--link gives {}); run `tandem launch --nproc-per-node {} -- tandem "
      "bench allreduce` for it",
      world, have.empty() ? std::string("none") : fmt::format("{} ranks", fmt::join(have, ", ")), world);
}

namespace {

// The overheads that come from the buckets, fitted over all of `buckets` at once (see calibrate).
void fit_overheads(const std::vector<BucketObservation>& buckets, ddp::CommOverheads& o) {
  std::vector<double> inside, after, link_ms, idle_ready, idle_gap;
  for (const BucketObservation& b : buckets) {
    inside.push_back(b.inside_ms);
    after.push_back(b.after_ms);
    link_ms.push_back(b.link_ms);
    if (b.found_thread_idle) idle_ready.push_back(b.ready_ms), idle_gap.push_back(b.gap_ms);
  }
  std::tie(o.launch_ms, o.ready_lag) = ddp::fit_launch(idle_ready, idle_gap);
  std::tie(o.scale_during_backward, o.scale_after_backward) = ddp::fit_comm_scales(inside, after, link_ms);
}

// The stolen share, backward's own work and the ready fractions from c.backwards (see average).
void fit_stolen_share(Calibration& c) {
  const std::vector<Calibration::Backward>& bs = c.backwards;
  const double n = static_cast<double>(bs.size());
  double mx = 0, my = 0;
  for (const Calibration::Backward& b : bs) mx += b.busy_ms / n, my += b.measured_ms / n;
  double sxy = 0, sxx = 0;
  for (const Calibration::Backward& b : bs) {
    sxy += (b.busy_ms - mx) * (b.measured_ms - my);
    sxx += (b.busy_ms - mx) * (b.busy_ms - mx);
  }
  // The bound: per ms of link work done (busy / scale_during_backward), the comm thread takes at
  // most the ms a core needed for it on the idle link. Where the thread is busy far longer than
  // its work (waiting for peers that share the cores), it cannot steal much, whatever the
  // scatter of the lengths says (docs/step-model.md).
  const double share = sxx > 0 ? std::clamp(sxy / sxx, 0.0, std::min(0.9, 1 / c.overheads.scale_during_backward)) : 0.0;
  c.overheads.stolen_share = share;
  c.compute.backward_compute_ms = my - share * mx;
  for (ddp::GradientTiming& g : c.gradients) {
    double fraction = 0;
    for (const Calibration::Backward& b : bs) {
      const auto it = b.ready.find(g.name);
      TANDEM_CHECK(it != b.ready.end(), "averaging calibrations whose gradients differ ({} and others)", c.source);
      const auto [ready, busy] = it->second;
      fraction += std::clamp((ready - share * busy) / (b.measured_ms - share * b.busy_ms), 0.0, 1.0) / n;
    }
    g.ready_fraction = fraction;
  }
}

}  // namespace

Calibration calibrate(const report::Profile& p, const ddp::LinkFit& link, const std::string& source) {
  Calibration c;
  c.world_size = p.facts.world_size;
  c.source = source;
  const report::StepSample& m = p.median;
  c.compute = {m.data_wait_ms, m.forward_ms, m.backward_compute_ms, m.optimizer_ms, p.other_ms()};
  if (c.world_size == 1) return c;

  const report::RunFacts& f = p.facts;
  TANDEM_CHECK(!p.gradient_ready_ms.empty() && !p.bucket_ready_ms.empty(),
               "{}: no gradient ready or bucket times ({} ranks); it was measured before they were recorded: run the "
               "bench again",
               source, c.world_size);
  TANDEM_CHECK(link.world_size == c.world_size, "{}: {} ranks, calibrated against a link fit for {}", source,
               c.world_size, link.world_size);
  TANDEM_CHECK(m.backward_compute_ms > 0, "{}: backward compute of {} ms", source, m.backward_compute_ms);
  const double backward = m.backward_compute_ms;
  // The comm thread's busy time inside backward before `t`.
  auto busy_before = [&](double t) {
    double busy = 0;
    for (size_t k = 0; k < f.bucket_bytes.size(); ++k)
      busy += std::max(0.0, std::min({p.bucket_comm_end_ms[k], t, backward}) - p.bucket_comm_start_ms[k]);
    return busy;
  };
  Calibration::Backward measured{backward, busy_before(backward), {}};
  for (size_t i = 0; i < f.gradient_names.size(); ++i) {
    c.gradients.push_back({f.gradient_names[i], static_cast<size_t>(f.gradient_bytes[i]), 0});
    measured.ready[f.gradient_names[i]] = {p.gradient_ready_ms[i], busy_before(p.gradient_ready_ms[i])};
  }
  c.backwards.push_back(measured);

  double prev_end = 0;
  for (size_t k = 0; k < f.bucket_bytes.size(); ++k) {
    const double start = p.bucket_comm_start_ms[k], end = std::max(start, p.bucket_comm_end_ms[k]);
    BucketObservation b;
    b.inside_ms = std::clamp(backward - start, 0.0, end - start);
    b.after_ms = end - start - b.inside_ms;
    b.link_ms = link.time_us(static_cast<double>(f.bucket_bytes[k])) / 1000.0;
    b.ready_ms = p.bucket_ready_ms[k];
    b.gap_ms = std::max(0.0, start - b.ready_ms);
    b.found_thread_idle = b.ready_ms >= prev_end;
    c.buckets.push_back(b);
    prev_end = end;
  }
  try {
    fit_overheads(c.buckets, c.overheads);
  } catch (const Error& e) {
    TANDEM_FAIL("{}: {}", source, e.what());
  }
  fit_stolen_share(c);
  // The whole wait after the autograd pass (backward_ms - backward compute, the exposed part and
  // the end-of-backward work around it) not explained by the last bucket running late.
  c.overheads.tail_ms =
      std::max(0.0, m.backward_ms - m.backward_compute_ms - std::max(0.0, prev_end - m.backward_compute_ms));
  return c;
}

Calibration average(const std::vector<Calibration>& cs) {
  TANDEM_CHECK(!cs.empty(), "averaging no calibrations");
  if (cs.size() == 1) return cs.front();
  Calibration a = cs.front();
  std::vector<std::string> sources;
  const double n = static_cast<double>(cs.size());
  ddp::ComputeTimes& t = a.compute;
  ddp::CommOverheads& o = a.overheads;
  t = {};
  o = {};
  a.buckets.clear();
  a.backwards.clear();
  for (const Calibration& c : cs) {
    TANDEM_CHECK(c.world_size == a.world_size && c.scale == a.scale,
                 "averaging calibrations of {} and {} ranks ({} and {})", a.world_size, c.world_size, cs.front().source,
                 c.source);
    TANDEM_CHECK(c.gradients.size() == a.gradients.size(), "{} has {} gradients, {} has {}", c.source,
                 c.gradients.size(), cs.front().source, a.gradients.size());
    sources.push_back(c.source);
    t.data_wait_ms += c.compute.data_wait_ms / n;
    t.forward_ms += c.compute.forward_ms / n;
    t.optimizer_ms += c.compute.optimizer_ms / n;
    t.other_ms += c.compute.other_ms / n;
    o.tail_ms += c.overheads.tail_ms / n;
    a.buckets.insert(a.buckets.end(), c.buckets.begin(), c.buckets.end());
    a.backwards.insert(a.backwards.end(), c.backwards.begin(), c.backwards.end());
  }
  a.source = fmt::format("mean of {}", fmt::join(sources, ", "));
  if (a.world_size == 1) {
    for (const Calibration& c : cs) t.backward_compute_ms += c.compute.backward_compute_ms / n;
  } else {
    fit_overheads(a.buckets, o);
    fit_stolen_share(a);
  }
  return a;
}

Calibration scale_to_world(const Calibration& c, int world, int cores) {
  if (world == c.world_size) return c;
  TANDEM_CHECK(cores >= 1, "scaling compute: {} cores", cores);
  TANDEM_CHECK(c.world_size >= cores && world >= cores,
               "{}: compute measured at {} ranks cannot be scaled to {} ranks on {} cores (below {} ranks the thread "
               "pool changes size); measure at {} ranks",
               c.source, c.world_size, world, cores, cores, world);
  TANDEM_CHECK(world > 1, "{}: scaling to one rank", c.source);
  Calibration s = c;
  s.world_size = world;
  s.scale = static_cast<double>(world) / c.world_size;
  ddp::ComputeTimes& t = s.compute;
  for (double* x : {&t.data_wait_ms, &t.forward_ms, &t.backward_compute_ms, &t.optimizer_ms, &t.other_ms})
    *x *= s.scale;
  s.overheads.launch_ms *= s.scale;
  s.overheads.tail_ms *= s.scale;
  return s;
}

CapCase parse_cap_case(const std::string& text, double first_cap_mb) {
  if (text == "one" || text == "inf") return {"one bucket", ddp::BucketCaps::from_mb(1e9, 1e9)};
  const std::optional<double> mb = parse_double(text);
  TANDEM_CHECK(mb && *mb > 0, "--caps: '{}' is not a positive size in MB (or 'one')", text);
  return {fmt::format("{:g}", *mb), ddp::BucketCaps::from_mb(first_cap_mb, *mb)};
}

PredictionRow predict_row(const Calibration& c, const ddp::LinkFit& link, const CapCase& cap) {
  TANDEM_CHECK(link.world_size == c.world_size, "predicting {} ranks with a link fit for {}", c.world_size,
               link.world_size);
  PredictionRow r;
  r.world_size = c.world_size;
  r.cap = cap.label;
  r.calibration = c.scale == 1 ? c.source : fmt::format("{} x {:.2f}", c.source, c.scale);
  r.prediction = ddp::predict_step(c.gradients, c.compute, link, cap.caps, c.overheads);
  r.ideal_step_ms = ddp::predict_step(c.gradients, c.compute, link, cap.caps).step_ms;
  return r;
}

PredictionRow predict_measured(const Calibration& c, const ddp::LinkFit& link, const report::Profile& measured,
                               double first_cap_mb) {
  const report::RunFacts& f = measured.facts;
  TANDEM_CHECK(f.world_size == c.world_size, "{}: a calibration for {} ranks used for a case of {}", c.source,
               c.world_size, f.world_size);
  const CapCase cap = f.one_bucket ? parse_cap_case("one", first_cap_mb)
                                   : parse_cap_case(fmt::format("{}", f.bucket_cap_mb), first_cap_mb);
  PredictionRow r = predict_row(c, link, cap);
  r.measured_step_ms = measured.median.step_ms;
  r.measured_exposed_ms = measured.median.exposed_comm_ms;
  if (f.world_size > 1) r.measured_buckets = f.bucket_bytes.size();
  return r;
}

std::string links_markdown(const std::map<int, ddp::LinkFit>& links) {
  std::string out =
      "link fits, t(bytes) = alpha + beta x bytes x 2(n-1)/n (relative least squares):\n\n"
      "| ranks | alpha us | beta us/MB | GB/s | rows | max abs residual | rms residual |\n"
      "|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& [n, f] : links)
    out += fmt::format("| {} | {:.1f} | {:.1f} | {:.2f} | {} | {:.1f} % | {:.1f} % |\n", n, f.alpha_us,
                       f.beta_us_per_byte * (1 << 20), f.beta_us_per_byte > 0 ? 1e-3 / f.beta_us_per_byte : 0.0,
                       f.samples, 100 * f.max_abs_rel_residual, 100 * f.rms_rel_residual);
  return out;
}

std::string calibrations_markdown(const std::map<int, Calibration>& calibrations) {
  std::string out =
      "calibrations (compute ms; overheads against the link fit):\n\n"
      "| ranks | from | forward | backward (own work) | optimizer | data+other | comm scale during / after backward "
      "| stolen share | launch ms | ready lag | tail ms |\n"
      "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& [n, c] : calibrations)
    out += fmt::format(
        "| {} | {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} / {:.2f} | {:.2f} | {:.2f} | {:.3f} | {:.2f} |\n", n,
        c.source, c.compute.forward_ms, c.compute.backward_compute_ms, c.compute.optimizer_ms,
        c.compute.data_wait_ms + c.compute.other_ms, c.overheads.scale_during_backward,
        c.overheads.scale_after_backward, c.overheads.stolen_share, c.overheads.launch_ms, c.overheads.ready_lag,
        c.overheads.tail_ms);
  return out;
}

std::string rows_markdown(const std::vector<PredictionRow>& rows) {
  const bool measured = !rows.empty() && rows.front().measured_step_ms.has_value();
  std::string out = fmt::format("| ranks | cap MB | buckets | exposed ms | step ms | ideal step ms |{} calibration |\n",
                                measured ? " measured buckets | measured exposed | measured step | error |" : "");
  out += fmt::format("|---:|---:|---:|---:|---:|---:|{}---|\n", measured ? "---:|---:|---:|---:|" : "");
  auto opt = [](const auto& v) { return v ? fmt::format("{:.2f}", static_cast<double>(*v)) : std::string("-"); };
  for (const PredictionRow& r : rows) {
    std::string m;
    if (measured)
      m = fmt::format(" {} | {} | {} | {} |", r.measured_buckets ? fmt::format("{}", *r.measured_buckets) : "-",
                      opt(r.measured_exposed_ms), opt(r.measured_step_ms),
                      r.measured_step_ms ? fmt::format("{:+.1f} %", r.error_pct()) : "-");
    out += fmt::format("| {} | {} | {} | {:.2f} | {:.2f} | {:.2f} |{} {} |\n", r.world_size, r.cap,
                       r.prediction.layout.size(), r.prediction.backward.exposed_comm_ms, r.prediction.step_ms,
                       r.ideal_step_ms, m, r.calibration);
  }
  return out;
}

}  // namespace tandem::apps
