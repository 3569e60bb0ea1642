// From bench results to the step model (ddp/step_model.h) and back: link fits
// from `tandem bench allreduce` tables, a calibration of the model's compute
// inputs and overheads from one measured profile, and predictions for the
// caps and world sizes asked, next to a measurement where one is given.
//
// A calibration profile must come from a run that recorded gradient ready
// times and bucket times (multi-rank bench buckets/scaling from this version
// on); the prediction for a case never reads that case's own samples unless
// the caller passes the same profile as calibration and as measurement, which
// `tandem bench predict` refuses.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ddp/step_model.h"
#include "report/allreduce_table.h"
#include "report/profile.h"

namespace tandem::apps {

// One fit per world size; two tables for one world size are an error naming both files.
std::map<int, ddp::LinkFit> fit_links(const std::vector<report::AllreduceTable>& tables);
// The fit for `world` (a trivial one for a single rank); an error naming the world sizes there are fits for.
ddp::LinkFit link_for(const std::map<int, ddp::LinkFit>& fits, int world);

// One measured bucket, as the overheads are fitted from it.
struct BucketObservation {
  double inside_ms = 0;  // of its all_reduce, before the end of backward compute
  double after_ms = 0;   // ... and after it
  double link_ms = 0;    // the link fit's time for its bytes
  double ready_ms = 0;
  double gap_ms = 0;  // start - ready
  // Whether the comm thread had finished the previous bucket when this one became ready.
  bool found_thread_idle = false;
};

// What one measured profile gives the model at its world size.
struct Calibration {
  int world_size = 1;
  std::string source;  // where it came from, for the output: "b2/buckets.json, case 1"
  ddp::ComputeTimes compute;
  std::vector<ddp::GradientTiming> gradients;  // empty for one rank
  ddp::CommOverheads overheads;                // measured against `link`
  std::vector<BucketObservation> buckets;      // what the overheads were fitted on
  // What the stolen share was fitted on, one per measured case: backward's measured length, the
  // comm thread's busy time inside it, and for each gradient (by name) its ready time and the busy
  // time before it.
  struct Backward {
    double measured_ms = 0;
    double busy_ms = 0;
    std::map<std::string, std::pair<double, double>> ready;
  };
  std::vector<Backward> backwards;
  double scale = 1;                            // compute scaled from another world size (scale_to_world)
};

// compute: the profile's median phases (other = step - data - forward - backward - optimizer);
// gradients: ready time / backward compute (one case cannot tell a stolen share: 0); overheads,
// over the profile's buckets:
//   the comm scales during and after backward and the cost per bucket = ddp::fit_comm_costs over
//     the buckets' measured all_reduce times, split at the end of backward compute, against the
//     link's times for their bytes,
//   launch_ms and ready_lag = ddp::fit_launch over the buckets that found the comm thread idle
//     (ready after the previous bucket's end; a bucket queued behind another says nothing about
//     how long a launch takes),
//   tail_ms    = (backward - backward compute) - max(0, last end - backward compute) (not below 0),
// so that the model reproduces the step time of its own calibration case when the link's times
// are exact.
Calibration calibrate(const report::Profile& p, const ddp::LinkFit& link, const std::string& source);

// Several calibrations at one world size as one (several cases of a sweep): the mean of the
// compute phases and of the tail; the stolen share is the slope of backward's measured length
// against the comm thread's busy time inside it, over the cases (least squares, in [0, 0.9] and
// at most 1 / scale_during_backward: per ms of link work done it takes no more than a core's ms;
// 0 when the busy times are all alike), backward's own work the mean of
// measured - share x busy, and each gradient's ready fraction (matched by name) the mean of
// (ready - share x busy before it) / that case's own work; the comm scales and the launch are
// fitted once over all their buckets together (a case with one bucket, or
// with no bucket that found the thread idle late in backward, cannot fit them alone); its source
// lists theirs. Pooling cases measured in one interleaved run halves the noise of a single
// case on a busy machine. Throws Error for none, mixed world sizes, or gradients that differ.
Calibration average(const std::vector<Calibration>& calibrations);

// A calibration at m ranks used for n ranks on the same `cores`: when m and n
// both have at least as many ranks as cores, every rank gets cores/ranks of
// the CPU, so compute, launch and tail take n/m as long (the comm scales are
// ratios to each world size's own link, and are kept). Below `cores`
// ranks the thread pool's size changes with the world size: not modelled, an
// error.
Calibration scale_to_world(const Calibration& c, int world, int cores);

// A cap as `tandem bench buckets` takes it: MB, or "one" for one bucket.
struct CapCase {
  std::string label;
  ddp::BucketCaps caps;
};
CapCase parse_cap_case(const std::string& text, double first_cap_mb);

struct PredictionRow {
  int world_size = 1;
  std::string cap;
  ddp::StepPrediction prediction;
  double ideal_step_ms = 0;  // the same model without the measured overheads (comm scales 1, no launch, no tail)
  std::string calibration;   // Calibration::source (and its scale, if scaled)
  std::optional<double> measured_step_ms, measured_exposed_ms;
  std::optional<size_t> measured_buckets;

  double error_pct() const { return measured_step_ms ? 100 * (prediction.step_ms / *measured_step_ms - 1) : 0; }
};

PredictionRow predict_row(const Calibration& c, const ddp::LinkFit& link, const CapCase& cap);
// The row for a measured case: its cap (one bucket, or bucket_cap_mb with `first_cap_mb`) predicted,
// and its median step, exposed time and bucket count as the measurement.
PredictionRow predict_measured(const Calibration& c, const ddp::LinkFit& link, const report::Profile& measured,
                               double first_cap_mb);

// Markdown tables: the link fits with their residuals; the calibrations; the rows (with the
// measured columns and the error when the first row has a measurement).
std::string links_markdown(const std::map<int, ddp::LinkFit>& links);
std::string calibrations_markdown(const std::map<int, Calibration>& calibrations);
std::string rows_markdown(const std::vector<PredictionRow>& rows);

}  // namespace tandem::apps
