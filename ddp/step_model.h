// A model of a DDP training step, to predict its time for any bucket cap and
// world size from measurements taken once (docs/step-model.md).
//
// Inputs: the link, as an alpha-beta fit of the all_reduce time per world size
// (from `tandem bench allreduce`), and the compute of a step: its phase times
// and when each gradient became ready during backward, as a fraction of the
// backward pass. For a cap, the gradients are grouped into buckets by DDP's own
// assign_buckets (in ready order, as after DDP's rebuild), and one comm thread
// is simulated: bucket k starts when it is ready and the previous bucket is
// done, and takes the link's time for its bytes. What runs past the end of
// backward is the exposed communication; the step is the compute phases plus
// that.
//
// Everything here is a pure function of its inputs: no clocks, no files.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "ddp/bucket_assignment.h"

namespace tandem::ddp {

// One all_reduce measurement: message bytes and the time of one operation.
struct LinkSample {
  double bytes = 0;
  double us = 0;
};

// t(bytes) = alpha + beta * bytes * 2(n-1)/n: a ring all_reduce moves 2(n-1)/n
// of the message over each rank's link (the same factor nccl-tests' busbw uses),
// so beta is seconds per byte of the link itself and comparable across n.
struct LinkFit {
  int world_size = 1;
  double alpha_us = 0;
  double beta_us_per_byte = 0;
  double max_abs_rel_residual = 0;  // over the samples fitted: max |fit - measured| / measured
  double rms_rel_residual = 0;
  size_t samples = 0;

  double bus_factor() const { return world_size > 1 ? 2.0 * (world_size - 1) / world_size : 0.0; }
  // The fit's time for one all_reduce of `bytes` (0 for one rank: nothing is sent).
  double time_us(double bytes) const;
};

// Least squares on relative error (each sample weighted by 1 / measured^2), so
// the small messages, whose time is mostly alpha, count as much as the large
// ones, whose time is mostly beta: bucket sizes span both. alpha and beta are
// kept non-negative (where the free fit makes one negative, the other is fitted
// alone: the constrained optimum). Throws Error for a world size below 2, fewer
// than two distinct sizes, or a size or time that is not positive.
LinkFit fit_link(int world_size, const std::vector<LinkSample>& samples);

// A gradient as measured: its bytes and when it became ready, as a fraction of
// backward's own work (0 = its start, 1 = the end of the autograd pass).
struct GradientTiming {
  std::string name;
  size_t bytes = 0;
  double ready_fraction = 0;
};

// Caps in bytes, as DistributedDataParallel turns its options into them.
struct BucketCaps {
  size_t first_bytes = 1 << 20;
  size_t bytes = 25 << 20;
  // first_bucket_cap_mb and bucket_cap_mb; the first cap is never above the other (as in DDP).
  static BucketCaps from_mb(double first_mb, double mb);
};

// The buckets DDP forms for `caps` after its rebuild: assign_buckets over the
// gradients in ready order (ties keep the given order). Indices refer to `gradients`.
std::vector<BucketSpec> buckets_for_caps(const std::vector<GradientTiming>& gradients, BucketCaps caps);

// One bucket on the simulated comm thread, ms from the start of backward.
struct SimulatedBucket {
  size_t bytes = 0;
  double ready_ms = 0;
  double start_ms = 0;
  double end_ms = 0;
};

struct SimulatedBackward {
  std::vector<SimulatedBucket> buckets;
  double backward_compute_ms = 0;  // when the autograd pass ends (its own work, plus what comm took from it)
  double exposed_comm_ms = 0;      // max(0, last end - backward_compute_ms) + tail
  double comm_busy_ms = 0;         // sum of the buckets' comm times
};

// What a real step adds to the ideal comm thread, measured from a profile
// (apps/step_prediction.h); the defaults are the ideal thread. On a CPU the
// ring's comm thread shares the cores with backward, so an all_reduce runs
// slower while backward computes than after it: two scales, not one.
struct CommOverheads {
  double scale_during_backward = 1;  // in-step time / link time while backward is computing
  double scale_after_backward = 1;   // ... and after the autograd pass has ended
  // A bucket ready at r on this rank starts no earlier than r * (1 + ready_lag) + launch_ms:
  // the slowest rank reaches r later (its backward runs behind by a share of the time
  // elapsed), and the backend needs launch_ms to start. A bucket queued behind a
  // running one starts when that one ends, if its peers are ready by then.
  double launch_ms = 0;
  double tail_ms = 0;    // exposed time past the last bucket's end (copying the averages back)
  double ready_lag = 0;  // see launch_ms
  // The share of backward's pace the comm thread takes while it reduces a bucket during
  // backward: on a CPU where each rank has about one core, the two threads share it, so
  // backward's own work (ComputeTimes::backward_compute_ms) stretches by stolen_share x the
  // comm thread's busy time inside it. In [0, 1).
  double stolen_share = 0;
};

// The comm scales that explain measured buckets: bucket k spent inside_ms[k]
// of its all_reduce while backward was computing and after_ms[k] after it, and
// the link would have taken link_ms[k]. Least squares on
// inside_k / s_during + after_k / s_after = link_k (the link's work done at
// each phase's pace). A phase no bucket ran in takes the other's scale; when
// the fit is not positive, both take the overall ratio sum(time) / sum(link).
// Throws Error on mismatched sizes or no time at all.
std::pair<double, double> fit_comm_scales(const std::vector<double>& inside_ms, const std::vector<double>& after_ms,
                                          const std::vector<double>& link_ms);

// launch_ms and ready_lag from buckets that started after the comm thread was
// free, each ready at ready_ms[k] and started gap_ms[k] later: least squares on
// gap = launch + ready_lag * ready, both kept non-negative (where the free fit
// makes one negative, the other is fitted alone). With fewer than two distinct
// ready times the lag is 0 and launch the mean gap; with none, both are 0.
std::pair<double, double> fit_launch(const std::vector<double>& ready_ms, const std::vector<double>& gap_ms);

// Backward and the comm thread over buckets in launch order, in time. Backward
// has backward_work_ms of its own work, done at pace 1, or 1 - stolen_share
// while a bucket is being reduced; bucket k becomes ready when backward has done
// ready_work_ms[k] of it, starts at max(ready_k * (1 + ready_lag) + launch_ms,
// end_{k-1}) (ready_k its time), and does link_ms[k] of the link's work, at
// 1/scale_during_backward of the link's pace until backward ends and at
// 1/scale_after_backward after it; exposed = max(0, end_last - backward end) +
// tail_ms (tail only when a bucket was reduced). With no stolen share, ready
// times are the ready work and backward ends at backward_work_ms. Throws Error
// on mismatched sizes, negative times or scales, or ready work out of launch order.
SimulatedBackward simulate_comm(const std::vector<size_t>& bytes, const std::vector<double>& ready_work_ms,
                                const std::vector<double>& link_ms, double backward_work_ms,
                                const CommOverheads& overheads = {});

// A step's phases other than communication, ms, at one world size.
struct ComputeTimes {
  double data_wait_ms = 0;
  double forward_ms = 0;
  double backward_compute_ms = 0;
  double optimizer_ms = 0;
  double other_ms = 0;  // step time in no named phase (glue, logging, waiting for a slower rank)
  double total() const { return data_wait_ms + forward_ms + backward_compute_ms + optimizer_ms + other_ms; }
};

struct StepPrediction {
  int world_size = 1;
  BucketCaps caps;
  std::vector<BucketSpec> layout;  // empty for one rank
  SimulatedBackward backward;
  // compute.total() with backward's own work replaced by its simulated length, + backward.exposed_comm_ms
  double step_ms = 0;
};

// The whole model: buckets for `caps`, each ready when its last gradient is
// (backward has done ready_fraction x compute.backward_compute_ms of its own
// work), reduced on the simulated comm thread with `link`'s times and
// `overheads`. One rank (link.world_size == 1) has no buckets and no
// communication.
StepPrediction predict_step(const std::vector<GradientTiming>& gradients, const ComputeTimes& compute,
                            const LinkFit& link, BucketCaps caps, const CommOverheads& overheads = {});

}  // namespace tandem::ddp
