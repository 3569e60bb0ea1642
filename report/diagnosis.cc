// The diagnosis rules of diagnosis.h, each a function from the measured profile to an optional finding.
#include "report/diagnosis.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "report/number_format.h"

namespace tandem::report {

const char* finding_name(Finding f) {
  switch (f) {
    case Finding::CommBound: return "comm-bound";
    case Finding::DataBound: return "data-bound";
    case Finding::SyncPoints: return "sync points";
    case Finding::SmallBatch: return "small batch";
    case Finding::NegativeScaling: return "negative scaling";
    case Finding::PoorScaling: return "poor scaling";
    case Finding::Oversubscribed: return "oversubscribed cores";
    case Finding::Balanced: return "balanced";
    case Finding::Noisy: return "noisy measurement";
  }
  return "?";
}

double exposed_comm_fraction(const Profile& p) {
  return p.median.step_ms > 0 ? p.median.exposed_comm_ms / p.median.step_ms : 0;
}

double compute_comm_ratio(const Profile& p) {
  return p.median.comm_ms > 0 ? p.compute_ms() / p.median.comm_ms : std::numeric_limits<double>::infinity();
}

double data_wait_fraction(const Profile& p) {
  return p.median.step_ms > 0 ? p.median.data_wait_ms / p.median.step_ms : 0;
}

double overlap_fraction(const Profile& p) {
  return p.median.comm_ms > 0 ? p.median.overlap_ms / p.median.comm_ms : std::nan("");
}

namespace {

std::string mb(double v) {
  std::string s = fmt::format("{:g}", v);
  return s;
}

std::optional<Advice> comm_bound(const DiagnosisInput& in, const Thresholds& t) {
  const Profile& p = in.profile;
  const RunFacts& f = p.facts;
  if (f.world_size <= 1 || p.median.comm_ms <= 0) return std::nullopt;
  const double exposed = exposed_comm_fraction(p), ratio = compute_comm_ratio(p);
  if (exposed <= t.comm_exposed_fraction && ratio >= t.compute_comm_ratio) return std::nullopt;
  Advice a{Finding::CommBound,
           fmt::format("All-reduce takes {:.1f} ms per step against {:.1f} ms of compute (compute/comm {:.2f}); "
                       "{:.1f} ms ({}) of the {:.1f} ms step is exposed, not hidden behind backward "
                       "({:.0f}% of the all-reduce overlapped).",
                       p.median.comm_ms, p.compute_ms(), ratio, p.median.exposed_comm_ms, pct(exposed),
                       p.median.step_ms, 100 * overlap_fraction(p)),
           {}};
  if (in.buckets) {
    const BucketSweepFacts& b = *in.buckets;
    const double gain = b.current_step_ms > 0 ? (b.current_step_ms - b.best_step_ms) / b.current_step_ms : 0;
    if (b.current_step_ms > 0 && b.best_cap_mb != b.current_cap_mb && gain > t.bucket_gain &&
        b.current_step_ms - b.best_step_ms > b.noise_ms) {
      a.suggestions.push_back(
          {"ddp_bucket_cap_mb", b.best_label == "one bucket" ? mb(b.best_cap_mb) : b.best_label,
           fmt::format("the bucket sweep's fastest ({}: {:.1f} ms vs {:.1f} ms at {} MB, {} faster)", b.best_label,
                       b.best_step_ms, b.current_step_ms, mb(b.current_cap_mb), pct(gain))});
    } else {
      a.suggestions.push_back(
          {"ddp_bucket_cap_mb", "",
           fmt::format("keep {} MB: the sweep's fastest size ({}) is within {} or the noise of it, so bucket size "
                       "is not the lever here",
                       mb(b.current_cap_mb), b.best_label, bound_pct(t.bucket_gain))});
    }
  } else {
    a.suggestions.push_back({"ddp_bucket_cap_mb", "",
                             "run `tandem bench buckets` for this config: bucket size sets how early all-reduce "
                             "starts and how many messages are sent"});
  }
  if (f.comm_hook == "allreduce")
    a.suggestions.push_back(
        {"ddp_comm_hook", "bf16",
         std::string("compress gradients to 16 bits for the all-reduce: half the bytes (bf16 "
                     "autocast alone does not shrink them: gradients stay f32)") +
             (f.device == "cpu" ? "; on a CPU the conversion takes cores from compute: measure it" : "")});
  if (f.per_device_batch >= t.small_batch) {  // below it, the small-batch finding has the batch advice
    a.suggestions.push_back({"per_device_train_batch_size", std::to_string(2 * f.per_device_batch),
                             "more compute per all-reduce (the gradient size does not grow with the batch)"});
    a.suggestions.push_back({"gradient_accumulation_steps", std::to_string(2 * f.gradient_accumulation_steps),
                             "when a larger batch does not fit: micro-steps under no_sync skip the all-reduce, one "
                             "all-reduce per k micro-batches"});
  }
  if (f.embedding_share() > t.embedding_share)
    a.suggestions.push_back(
        {"data.vocab_max_size", std::to_string(std::max<int64_t>(1000, f.vocab_size / 4)),
         fmt::format("the token embedding ({} x {}) is {} of the gradients, and its gradient is the last one "
                     "backward produces, so its all-reduce cannot overlap the backward pass; a smaller vocabulary "
                     "shrinks what is sent",
                     f.vocab_size, f.d_model, pct(f.embedding_share()))});
  if (f.num_parameters > 0 && f.num_parameters < t.small_model_parameters)
    a.suggestions.push_back(
        {"model size", "",
         fmt::format("the model is small ({:.2f} M parameters): its forward and backward are too short to hide "
                     "the all-reduce; DDP pays off with more compute per gradient byte (longer model.max_seq_len, "
                     "larger model.d_model / model.num_layers), or train it on fewer ranks",
                     static_cast<double>(f.num_parameters) / 1e6)});
  return a;
}

std::optional<Advice> data_bound(const DiagnosisInput& in, const Thresholds& t) {
  const Profile& p = in.profile;
  const double frac = data_wait_fraction(p);
  if (frac <= t.data_wait_fraction) return std::nullopt;
  const RunFacts& f = p.facts;
  Advice a{Finding::DataBound,
           fmt::format("The training loop waits {:.1f} ms per step for the DataLoader ({} of the {:.1f} ms step) "
                       "with dataloader_num_workers = {}.",
                       p.median.data_wait_ms, pct(frac), p.median.step_ms, f.dataloader_num_workers),
           {}};
  const int64_t workers = std::max<int64_t>(2, 2 * f.dataloader_num_workers);
  a.suggestions.push_back({"dataloader_num_workers", std::to_string(workers),
                           in.host_cores > 0
                               ? fmt::format("build batches on more threads ({} cores on this host, shared by {} "
                                             "rank(s))",
                                             in.host_cores, f.world_size)
                               : "build batches on more threads ahead of the loop"});
  if (f.device == "cuda" && !f.dataloader_pin_memory)
    a.suggestions.push_back(
        {"dataloader_pin_memory", "true", "page-locked buffers make host-to-device copies asynchronous"});
  return a;
}

std::optional<Advice> sync_points(const DiagnosisInput& in, const Thresholds& t) {
  const Profile& p = in.profile;
  const RunFacts& f = p.facts;
  Advice a{Finding::SyncPoints, "", {}};
  std::vector<std::string> found;
  if (p.logging_overhead_ms >= 0 && f.logging_steps > 0 && p.median.step_ms > 0) {
    const double frac = std::max(0.0, p.logging_overhead_ms) / static_cast<double>(f.logging_steps) / p.median.step_ms;
    if (frac > t.sync_fraction) {
      found.push_back(
          fmt::format("a logging step takes {:.1f} ms more than a plain one; every {} steps that is {} "
                      "of the training time",
                      p.logging_overhead_ms, f.logging_steps, pct(frac)));
      const double target = std::ceil(p.logging_overhead_ms / (t.sync_target_fraction * p.median.step_ms));
      a.suggestions.push_back({"logging_steps", fmt::format("{:.0f}", std::max<double>(target, 2.0 * f.logging_steps)),
                               fmt::format("each logging step reads the loss back to the host and drains the "
                                           "pipeline; keep that under {} of the time",
                                           bound_pct(t.sync_target_fraction))});
    }
  } else if (f.device == "cuda" && f.logging_steps > 0 && f.logging_steps < t.cuda_min_logging_steps) {
    found.push_back(
        fmt::format("logging_steps = {} reads the loss back to the host every {} step(s), a "
                    "synchronisation that stops the host from queueing work ahead of the GPU",
                    f.logging_steps, f.logging_steps));
    a.suggestions.push_back({"logging_steps", "50", "log less often: the loss is still averaged over the window"});
  }
  if (p.checkpoint_ms > 0 && f.save_steps > 0 && p.median.step_ms > 0) {
    const double frac = p.checkpoint_ms / (static_cast<double>(f.save_steps) * p.median.step_ms);
    if (frac > t.sync_fraction) {
      found.push_back(
          fmt::format("one checkpoint takes {:.0f} ms; every {} steps that is {} of the training time "
                      "(the other ranks wait at the next all-reduce)",
                      p.checkpoint_ms, f.save_steps, pct(frac)));
      const double target = std::ceil(p.checkpoint_ms / (t.sync_target_fraction * p.median.step_ms));
      a.suggestions.push_back({"save_steps", fmt::format("{:.0f}", std::max<double>(target, 2.0 * f.save_steps)),
                               "checkpoint less often (save_total_limit only bounds the disk space)"});
    }
  }
  if (found.empty()) return std::nullopt;
  a.summary = "Synchronisation points: " + found.front();
  for (size_t i = 1; i < found.size(); ++i) a.summary += "; " + found[i];
  a.summary += ".";
  return a;
}

std::optional<Advice> small_batch(const DiagnosisInput& in, const Thresholds& t, bool comm_is_bound) {
  const RunFacts& f = in.profile.facts;
  if (f.per_device_batch >= t.small_batch) return std::nullopt;
  if (!comm_is_bound && f.gradient_accumulation_steps <= 1) return std::nullopt;
  Advice a{Finding::SmallBatch,
           fmt::format("{} sequences per device per micro-step{}: little work per kernel and per all-reduce.",
                       f.per_device_batch,
                       f.gradient_accumulation_steps > 1
                           ? fmt::format(", accumulated {} times", f.gradient_accumulation_steps)
                           : ""),
           {}};
  const std::string fits = in.max_batch_that_fits > 0
                               ? fmt::format("find-batch-size says up to {} fits", in.max_batch_that_fits)
                               : "`tandem find-batch-size` finds the largest that fits";
  if (f.gradient_accumulation_steps > 1) {
    // Trade accumulation for batch at the same effective batch: batch x d with accumulation / d,
    // d a divisor of the accumulation steps; the smallest d reaching the small-batch bar, within
    // what fits in memory.
    const int64_t k = f.gradient_accumulation_steps;
    int64_t best = 1;
    for (int64_t d = 2; d <= k; ++d) {
      if (k % d) continue;
      const int64_t b = f.per_device_batch * d;
      if (in.max_batch_that_fits > 0 && b > in.max_batch_that_fits) break;
      best = d;
      if (b >= t.small_batch) break;
    }
    if (best > 1) {
      a.suggestions.push_back({"per_device_train_batch_size", std::to_string(f.per_device_batch * best), fits});
      a.suggestions.push_back({"gradient_accumulation_steps", std::to_string(k / best),
                               fmt::format("the same effective batch ({} x {} x {} ranks) in fewer, larger "
                                           "micro-steps",
                                           f.per_device_batch * best, k / best, f.world_size)});
      return a;
    }
  }
  int64_t target = t.small_batch;
  if (in.max_batch_that_fits > 0) target = std::min(target, in.max_batch_that_fits);
  if (target <= f.per_device_batch) return std::nullopt;  // nothing larger fits
  a.suggestions.push_back({"per_device_train_batch_size", std::to_string(target), fits});
  return a;
}

// Where the step time added by more ranks went, largest part first: "compute +26.1 ms, ...".
std::string step_growth(const Profile& one, const Profile& n, bool cpu) {
  const StepSample& a = one.median;
  const StepSample& b = n.median;
  std::vector<std::pair<double, std::string>> parts = {
      {n.compute_ms() - one.compute_ms(), cpu ? "compute (ranks share the cores)" : "compute"},
      {b.exposed_comm_ms - a.exposed_comm_ms, "exposed all-reduce"},
      {b.optimizer_ms - a.optimizer_ms, "optimizer"},
      {b.data_wait_ms - a.data_wait_ms, "DataLoader wait"}};
  std::sort(parts.begin(), parts.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  std::string out = fmt::format("the step grew from {:.1f} ms on 1 rank to {:.1f} ms on {}:", a.step_ms, b.step_ms,
                                n.facts.world_size);
  for (size_t i = 0; i < parts.size(); ++i)
    out += fmt::format("{} {} {:+.1f} ms", i ? "," : "", parts[i].second, parts[i].first);
  return out;
}

std::optional<Advice> scaling(const DiagnosisInput& in, const Thresholds& t) {
  if (!in.scaling || in.scaling->world_size <= 1) return std::nullopt;
  const ScalingFacts& s = *in.scaling;
  const std::string growth = in.baseline && in.baseline->facts.world_size == 1 &&
                                     in.baseline->facts.per_device_batch == in.profile.facts.per_device_batch
                                 ? "; " + step_growth(*in.baseline, in.profile, in.profile.facts.device == "cpu")
                                 : "";
  if (s.speedup < 1) {
    return Advice{Finding::NegativeScaling,
                  fmt::format("Negative scaling: {} ranks process {:.2f}x the samples per second of one rank "
                              "(efficiency {}); adding ranks makes training slower{}.",
                              s.world_size, s.speedup, pct(s.efficiency), growth),
                  {}};
  }
  if (s.efficiency < t.poor_efficiency) {
    return Advice{Finding::PoorScaling,
                  fmt::format("Poor scaling: {:.2f}x speedup on {} ranks (efficiency {}, below {}){}.", s.speedup,
                              s.world_size, pct(s.efficiency), bound_pct(t.poor_efficiency), growth),
                  {}};
  }
  return std::nullopt;
}

std::optional<Advice> oversubscribed(const DiagnosisInput& in) {
  const RunFacts& f = in.profile.facts;
  if (f.device != "cpu" || in.host_cores <= 0) return std::nullopt;
  // Busy threads: each rank computes on one thread, builds batches on its loader
  // workers, and (with more than one rank) runs its all-reduces on a comm thread.
  const int64_t per_rank = 1 + f.dataloader_num_workers + (f.world_size > 1 ? 1 : 0);
  const int64_t threads = per_rank * f.world_size;
  if (threads <= in.host_cores) return std::nullopt;
  return Advice{Finding::Oversubscribed,
                fmt::format("{} CPU ranks run {} busy threads (compute, {} loader worker(s), comm) on {} cores: "
                            "ranks take cores from each other, so step times measure core sharing as much as DDP.",
                            f.world_size, threads, f.dataloader_num_workers, in.host_cores),
                {{"dataloader_num_workers", "0", "on a CPU host with few cores, build batches on the training thread"},
                 {"--nproc-per-node", std::to_string(std::max(1, in.host_cores / 2)),
                  "no more ranks than the cores can run alongside their comm threads"}}};
}

std::optional<Advice> noisy(const DiagnosisInput& in, const Thresholds& t) {
  const Profile& p = in.profile;
  std::vector<std::string> why;
  if (p.step_ms.median > 0 && (p.step_ms.p90 - p.step_ms.p10) > t.noisy_spread * p.step_ms.median)
    why.push_back(fmt::format("step times spread from {:.1f} to {:.1f} ms (p10-p90) around a median of {:.1f} ms",
                              p.step_ms.p10, p.step_ms.p90, p.step_ms.median));
  if (in.host_cores > 0 && in.load_average >= t.busy_load * in.host_cores)
    why.push_back(fmt::format("the machine's load average was {:.1f} on {} cores when the run started (other work)",
                              in.load_average, in.host_cores));
  if (why.empty()) return std::nullopt;
  std::string summary = "Noisy measurement: " + why.front();
  for (size_t i = 1; i < why.size(); ++i) summary += "; " + why[i];
  summary += ". Differences smaller than the spread are not findings.";
  return Advice{Finding::Noisy,
                summary,
                {{"--rounds", "", "repeat the sweep more times (interleaved) or run on an idle machine"}}};
}

}  // namespace

std::vector<Advice> diagnose(const DiagnosisInput& in, const Thresholds& t) {
  std::vector<Advice> out;
  auto add = [&](std::optional<Advice> a) {
    if (a) out.push_back(std::move(*a));
  };
  std::optional<Advice> comm = comm_bound(in, t);
  const bool is_comm_bound = comm.has_value();
  add(std::move(comm));
  add(data_bound(in, t));
  add(sync_points(in, t));
  add(small_batch(in, t, is_comm_bound));
  add(oversubscribed(in));
  const bool bottleneck = !out.empty();
  add(scaling(in, t));
  if (!bottleneck) {
    const Profile& p = in.profile;
    Advice a{Finding::Balanced,
             fmt::format("Balanced: compute is {:.1f} of {:.1f} ms per step, exposed all-reduce {}, DataLoader wait "
                         "{}; no bottleneck above the thresholds.",
                         p.compute_ms(), p.median.step_ms, pct(exposed_comm_fraction(p)), pct(data_wait_fraction(p))),
             {}};
    if (p.facts.device == "cuda" && p.facts.precision == "fp32")
      a.suggestions.push_back({"bf16", "true", "compute-bound on a GPU: bf16 tensor-core GEMMs are the next lever"});
    out.insert(out.begin(), std::move(a));
  }
  add(noisy(in, t));
  return out;
}

std::string describe_thresholds(const Thresholds& t) {
  // A negative speedup is below 1x by definition, not by a threshold.
  return fmt::format(
      "Thresholds (report/diagnosis.h): comm-bound when exposed all-reduce > {} of the step or compute/comm < {:g}; "
      "data-bound when DataLoader wait > {}; sync points when logging or checkpointing costs > {}; small batch "
      "below {} per device; poor scaling below {} efficiency, negative below 1x.\n",
      bound_pct(t.comm_exposed_fraction), t.compute_comm_ratio, bound_pct(t.data_wait_fraction),
      bound_pct(t.sync_fraction), t.small_batch, bound_pct(t.poor_efficiency));
}

std::string format_advice(const std::vector<Advice>& advice) {
  std::string out;
  for (const Advice& a : advice) {
    out += fmt::format("[{}] {}\n", finding_name(a.finding), a.summary);
    for (const Suggestion& s : a.suggestions)
      out += s.value.empty() ? fmt::format("    - {}: {}\n", s.knob, s.why)
                             : fmt::format("    - {} = {}: {}\n", s.knob, s.value, s.why);
  }
  return out;
}

}  // namespace tandem::report
