#include "ddp/step_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "core/check.h"

namespace tandem::ddp {

double LinkFit::time_us(double bytes) const {
  return world_size > 1 ? alpha_us + beta_us_per_byte * bytes * bus_factor() : 0.0;
}

namespace {

// Weighted least squares y = a + b x with a, b >= 0: where the free fit makes
// one negative, the other is fitted alone (the constrained optimum). The x must
// take at least two distinct values.
std::pair<double, double> fit_nonnegative_line(const std::vector<double>& x, const std::vector<double>& y,
                                               const std::vector<double>& w) {
  double sw = 0, swx = 0, swxx = 0, swy = 0, swxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sw += w[i];
    swx += w[i] * x[i];
    swxx += w[i] * x[i] * x[i];
    swy += w[i] * y[i];
    swxy += w[i] * x[i] * y[i];
  }
  const double det = sw * swxx - swx * swx;
  const double a = (swy * swxx - swx * swxy) / det, b = (sw * swxy - swx * swy) / det;
  if (a < 0) return {0.0, swxy / swxx};  // the best line through the origin
  if (b < 0) return {swy / sw, 0.0};     // a constant
  return {a, b};
}

}  // namespace

LinkFit fit_link(int world_size, const std::vector<LinkSample>& samples) {
  TANDEM_CHECK(world_size >= 2, "link fit: world size {} (an all_reduce needs at least 2 ranks)", world_size);
  std::set<double> sizes;
  for (const LinkSample& s : samples) {
    TANDEM_CHECK(s.bytes > 0 && s.us > 0 && std::isfinite(s.bytes) && std::isfinite(s.us),
                 "link fit ({} ranks): a sample of {} bytes in {} us (both must be positive)", world_size, s.bytes,
                 s.us);
    sizes.insert(s.bytes);
  }
  TANDEM_CHECK(sizes.size() >= 2, "link fit ({} ranks): {} distinct message sizes, need at least 2", world_size,
               sizes.size());
  LinkFit f;
  f.world_size = world_size;
  const double k = f.bus_factor();
  // Weights 1 / t^2: least squares on relative error.
  std::vector<double> x, t, w;
  for (const LinkSample& s : samples) {
    x.push_back(s.bytes * k);
    t.push_back(s.us);
    w.push_back(1.0 / (s.us * s.us));
  }
  const auto [a, b] = fit_nonnegative_line(x, t, w);
  f.alpha_us = a;
  f.beta_us_per_byte = b;
  double sq = 0;
  for (const LinkSample& s : samples) {
    const double rel = (f.time_us(s.bytes) - s.us) / s.us;
    f.max_abs_rel_residual = std::max(f.max_abs_rel_residual, std::abs(rel));
    sq += rel * rel;
  }
  f.samples = samples.size();
  f.rms_rel_residual = std::sqrt(sq / static_cast<double>(samples.size()));
  return f;
}

BucketCaps BucketCaps::from_mb(double first_mb, double mb) {
  TANDEM_CHECK(first_mb >= 0 && mb >= 0, "bucket caps must not be negative ({} MB first, {} MB)", first_mb, mb);
  const size_t bytes = bucket_cap_bytes(mb);
  return {std::min(bucket_cap_bytes(first_mb), bytes), bytes};
}

std::vector<BucketSpec> buckets_for_caps(const std::vector<GradientTiming>& gradients, BucketCaps caps) {
  std::vector<ParamDesc> params;
  for (const GradientTiming& g : gradients) params.push_back({g.bytes, DType::F32, Device::cpu()});
  std::vector<int> order(gradients.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return gradients[static_cast<size_t>(a)].ready_fraction < gradients[static_cast<size_t>(b)].ready_fraction;
  });
  return assign_buckets(params, order, caps.first_bytes, caps.bytes);
}

std::pair<double, double> fit_comm_scales(const std::vector<double>& inside_ms, const std::vector<double>& after_ms,
                                          const std::vector<double>& link_ms) {
  TANDEM_CHECK(inside_ms.size() == after_ms.size() && after_ms.size() == link_ms.size(),
               "comm scales: {} inside times, {} after times, {} link times", inside_ms.size(), after_ms.size(),
               link_ms.size());
  // Normal equations for (u, v) = (1 / s_during, 1 / s_after) in sum (i u + o v - w)^2.
  double sii = 0, soo = 0, sio = 0, siw = 0, sow = 0, time = 0, work = 0;
  for (size_t k = 0; k < link_ms.size(); ++k) {
    const double i = inside_ms[k], o = after_ms[k], w = link_ms[k];
    TANDEM_CHECK(i >= 0 && o >= 0 && w >= 0, "comm scales: bucket {} has a negative time", k);
    sii += i * i, soo += o * o, sio += i * o, siw += i * w, sow += o * w;
    time += i + o, work += w;
  }
  TANDEM_CHECK(time > 0 && work > 0, "comm scales: the buckets took no time");
  const double overall = time / work;
  if (sii == 0 || soo == 0) return {overall, overall};  // one phase only: the other cannot be told apart
  const double det = sii * soo - sio * sio;
  if (det <= 1e-12 * sii * soo) return {overall, overall};
  const double u = (siw * soo - sow * sio) / det, v = (sow * sii - siw * sio) / det;
  if (u <= 0 || v <= 0) return {overall, overall};
  return {1 / u, 1 / v};
}

std::pair<double, double> fit_launch(const std::vector<double>& ready_ms, const std::vector<double>& gap_ms) {
  TANDEM_CHECK(ready_ms.size() == gap_ms.size(), "launch fit: {} ready times and {} gaps", ready_ms.size(),
               gap_ms.size());
  if (ready_ms.empty()) return {0.0, 0.0};
  for (size_t k = 0; k < ready_ms.size(); ++k)
    TANDEM_CHECK(ready_ms[k] >= 0 && gap_ms[k] >= 0, "launch fit: bucket ready at {} ms waited {} ms", ready_ms[k],
                 gap_ms[k]);
  if (std::set<double>(ready_ms.begin(), ready_ms.end()).size() < 2) {  // one ready time: no slope to fit
    return {std::accumulate(gap_ms.begin(), gap_ms.end(), 0.0) / static_cast<double>(gap_ms.size()), 0.0};
  }
  return fit_nonnegative_line(ready_ms, gap_ms, std::vector<double>(ready_ms.size(), 1.0));
}

SimulatedBackward simulate_comm(const std::vector<size_t>& bytes, const std::vector<double>& ready_work_ms,
                                const std::vector<double>& link_ms, double backward_work_ms,
                                const CommOverheads& o) {
  TANDEM_CHECK(bytes.size() == ready_work_ms.size() && ready_work_ms.size() == link_ms.size(),
               "comm simulation: {} bucket sizes, {} ready times, {} link times", bytes.size(), ready_work_ms.size(),
               link_ms.size());
  TANDEM_CHECK(backward_work_ms >= 0 && o.launch_ms >= 0 && o.tail_ms >= 0 && o.ready_lag >= 0,
               "comm simulation: backward of {} ms, launch {} ms, tail {} ms, ready lag {} (none may be negative)",
               backward_work_ms, o.launch_ms, o.tail_ms, o.ready_lag);
  TANDEM_CHECK(o.scale_during_backward > 0 && o.scale_after_backward > 0,
               "comm simulation: comm scales {} and {} (must be positive)", o.scale_during_backward,
               o.scale_after_backward);
  TANDEM_CHECK(o.stolen_share >= 0 && o.stolen_share < 1, "comm simulation: stolen share {} (must be in [0, 1))",
               o.stolen_share);
  const size_t n = bytes.size();
  for (size_t k = 0; k < n; ++k) {
    TANDEM_CHECK(ready_work_ms[k] >= 0 && link_ms[k] >= 0, "comm simulation: bucket {} ready at {} ms, link time {} ms",
                 k, ready_work_ms[k], link_ms[k]);
    TANDEM_CHECK(k == 0 || ready_work_ms[k] >= ready_work_ms[k - 1],
                 "comm simulation: bucket {} is ready at {} ms, before bucket {} ({} ms): buckets are launched in "
                 "order",
                 k, ready_work_ms[k], k - 1, ready_work_ms[k - 1]);
  }
  SimulatedBackward out;
  out.buckets.resize(n);
  for (size_t k = 0; k < n; ++k) out.buckets[k].bytes = bytes[k];
  // Events in time: backward reaching a bucket's ready work or its own end, the
  // running bucket's start or end. Between two events every pace is constant.
  // Ready work past backward's end is reached at pace 1 after it.
  double t = 0, work = 0;   // now, and backward's own work done by now
  bool backward_done = backward_work_ms == 0;
  size_t readied = 0;       // buckets whose ready work has been reached
  size_t running = 0;       // the comm thread's bucket, running once its start is set and reached
  bool scheduled = false;   // whether bucket `running` has its start time
  double left = n ? link_ms[0] : 0, free_at = 0;
  auto reach = [&] {
    for (; readied < n && work >= ready_work_ms[readied]; ++readied) out.buckets[readied].ready_ms = t;
    if (!backward_done && work >= backward_work_ms) backward_done = true, out.backward_compute_ms = t;
  };
  reach();
  while (running < n || !backward_done) {
    if (running < n && !scheduled && running < readied) {
      SimulatedBucket& b = out.buckets[running];
      b.start_ms = std::max(b.ready_ms * (1 + o.ready_lag) + o.launch_ms, free_at);
      scheduled = true;
    }
    const bool busy = running < n && scheduled && out.buckets[running].start_ms <= t;
    double target = backward_done ? std::numeric_limits<double>::infinity() : backward_work_ms;
    if (readied < n) target = std::min(target, ready_work_ms[readied]);
    const double compute_pace = busy && !backward_done ? 1 - o.stolen_share : 1;
    const double comm_pace = busy ? 1 / (backward_done ? o.scale_after_backward : o.scale_during_backward) : 0;
    double dt = (target - work) / compute_pace;  // infinite when nothing is left to reach
    if (running < n && scheduled && !busy) dt = std::min(dt, out.buckets[running].start_ms - t);
    if (busy) dt = std::min(dt, left / comm_pace);
    TANDEM_CHECK(std::isfinite(dt), "comm simulation: no next event at {} ms", t);
    t += dt;
    // What reaches its event now is set to it exactly, so rounding cannot stall the loop.
    work = dt == (target - work) / compute_pace ? target : work + compute_pace * dt;
    if (busy) left = dt == left / comm_pace ? 0.0 : left - comm_pace * dt;
    reach();
    if (busy && left <= 0) {
      out.buckets[running].end_ms = free_at = t;
      out.comm_busy_ms += t - out.buckets[running].start_ms;
      if (++running < n) left = link_ms[running];
      scheduled = false;
    }
  }
  out.exposed_comm_ms = n == 0 ? 0.0 : std::max(0.0, free_at - out.backward_compute_ms) + o.tail_ms;
  return out;
}

StepPrediction predict_step(const std::vector<GradientTiming>& gradients, const ComputeTimes& compute,
                            const LinkFit& link, BucketCaps caps, const CommOverheads& overheads) {
  StepPrediction p;
  p.world_size = link.world_size;
  p.caps = caps;
  p.backward.backward_compute_ms = compute.backward_compute_ms;
  if (link.world_size > 1) {
    TANDEM_CHECK(!gradients.empty(), "step model: no gradient ready times to form buckets from");
    p.layout = buckets_for_caps(gradients, caps);
    std::vector<size_t> bytes;
    std::vector<double> ready, link_ms;
    for (const BucketSpec& b : p.layout) {
      double last = 0;  // a bucket is ready with its last gradient
      for (int i : b.params) last = std::max(last, gradients[static_cast<size_t>(i)].ready_fraction);
      bytes.push_back(b.bytes);
      ready.push_back(std::min(last, 1.0) * compute.backward_compute_ms);
      link_ms.push_back(link.time_us(static_cast<double>(b.bytes)) / 1000.0);
    }
    p.backward = simulate_comm(bytes, ready, link_ms, compute.backward_compute_ms, overheads);
  }
  p.step_ms =
      compute.total() - compute.backward_compute_ms + p.backward.backward_compute_ms + p.backward.exposed_comm_ms;
  return p;
}

}  // namespace tandem::ddp
