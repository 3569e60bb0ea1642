// The diagnosis on synthetic profiles: each kind of bottleneck gets its own
// finding and names the knobs a user would turn.
#include "report/diagnosis.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

#include "report/stats.h"

namespace tandem::report {
namespace {

// A 2-rank CPU profile; callers set the phases.
Profile profile(double step, double data, double fwd, double bwd_compute, double comm, double exposed, double overlap) {
  Profile p;
  p.facts.world_size = 2;
  p.facts.device = "cpu";
  p.facts.backend = "ring";
  p.facts.per_device_batch = 64;
  p.facts.gradient_accumulation_steps = 1;
  p.facts.logging_steps = 50;
  p.facts.dataloader_num_workers = 2;
  p.facts.num_parameters = 50'000'000;
  p.median.step_ms = step;
  p.median.data_wait_ms = data;
  p.median.forward_ms = fwd;
  p.median.backward_compute_ms = bwd_compute;
  p.median.backward_ms = bwd_compute + exposed;
  p.median.comm_ms = comm;
  p.median.exposed_comm_ms = exposed;
  p.median.overlap_ms = overlap;
  p.median.optimizer_ms = step - data - fwd - bwd_compute - exposed;
  return p;
}

DiagnosisInput input(Profile p) {
  DiagnosisInput in;
  in.profile = std::move(p);
  in.host_cores = 64;
  return in;
}

bool has(const std::vector<Advice>& advice, Finding f) {
  return std::any_of(advice.begin(), advice.end(), [&](const Advice& a) { return a.finding == f; });
}

// Copies: the advice vectors in these tests are temporaries.
Advice get(const std::vector<Advice>& advice, Finding f) {
  auto it = std::find_if(advice.begin(), advice.end(), [&](const Advice& a) { return a.finding == f; });
  if (it == advice.end()) {
    ADD_FAILURE() << finding_name(f) << " missing in:\n" << format_advice(advice);
    return Advice{f, "", {}};
  }
  return *it;
}

std::optional<Suggestion> knob(const Advice& a, const std::string& name) {
  for (const Suggestion& s : a.suggestions)
    if (s.knob == name) return s;
  return std::nullopt;
}

// Seed 001's AG News numbers: ~25 ms of compute against ~45 ms of gradient sync.
Profile comm_bound_profile() { return profile(80, 1, 10, 15, 45, 40, 5); }

TEST(Diagnosis, CommBoundProfileIsCommBoundWithBucketHookAndModelAdvice) {
  const auto advice = diagnose(input(comm_bound_profile()));
  EXPECT_FALSE(has(advice, Finding::DataBound));
  EXPECT_FALSE(has(advice, Finding::Balanced));
  const Advice a = get(advice, Finding::CommBound);
  EXPECT_NE(knob(a, "ddp_bucket_cap_mb"), std::nullopt);
  ASSERT_NE(knob(a, "ddp_comm_hook"), std::nullopt);
  EXPECT_EQ(knob(a, "ddp_comm_hook")->value, "bf16");
  EXPECT_NE(knob(a, "gradient_accumulation_steps"), std::nullopt);
  EXPECT_NE(knob(a, "per_device_train_batch_size"), std::nullopt);
  EXPECT_EQ(knob(a, "model size"), std::nullopt) << "50 M parameters is not a small model";
}

TEST(Diagnosis, ComputeToCommRatioBelowOneIsCommBoundEvenWhenHidden) {
  // All-reduce fully overlapped (nothing exposed) but longer than the compute.
  Profile p = profile(60, 1, 10, 15, 40, 0, 25);
  EXPECT_LT(compute_comm_ratio(p), 1.0);
  EXPECT_TRUE(has(diagnose(input(p)), Finding::CommBound));
}

TEST(Diagnosis, SmallCommBoundModelGetsModelSizeAdvice) {
  Profile p = comm_bound_profile();
  p.facts.num_parameters = 3'000'000;
  const Advice a = get(diagnose(input(p)), Finding::CommBound);
  EXPECT_NE(knob(a, "model size"), std::nullopt);
}

TEST(Diagnosis, EmbeddingDominatedGradientsSuggestASmallerVocabulary) {
  Profile p = comm_bound_profile();
  p.facts.vocab_size = 30000;  // seed 001's AG News: 30000 x 128 of ~4.2 M parameters
  p.facts.d_model = 128;
  p.facts.num_parameters = 4'200'000;
  const std::optional<Suggestion> s = knob(get(diagnose(input(p)), Finding::CommBound), "data.vocab_max_size");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->value, "7500");
  p.facts.num_parameters = 40'000'000;  // the embedding is a tenth: not the lever
  EXPECT_FALSE(knob(get(diagnose(input(p)), Finding::CommBound), "data.vocab_max_size").has_value());
}

TEST(Diagnosis, CompressedHookIsNotSuggestedTwice) {
  Profile p = comm_bound_profile();
  p.facts.comm_hook = "bf16";
  EXPECT_EQ(knob(get(diagnose(input(p)), Finding::CommBound), "ddp_comm_hook"), std::nullopt);
}

TEST(Diagnosis, BucketSweepWinnerBecomesTheBucketAdvice) {
  DiagnosisInput in = input(comm_bound_profile());
  in.buckets = BucketSweepFacts{25, "5", 5, 60, 80, 2};
  const std::optional<Suggestion> s = knob(get(diagnose(in), Finding::CommBound), "ddp_bucket_cap_mb");
  ASSERT_NE(s, std::nullopt);
  EXPECT_EQ(s->value, "5");
}

TEST(Diagnosis, BucketSweepWithinNoiseSaysBucketSizeIsNotTheLever) {
  DiagnosisInput in = input(comm_bound_profile());
  in.buckets = BucketSweepFacts{25, "5", 5, 78, 80, 4};  // 2 ms better, 4 ms of noise
  const std::optional<Suggestion> s = knob(get(diagnose(in), Finding::CommBound), "ddp_bucket_cap_mb");
  ASSERT_NE(s, std::nullopt);
  EXPECT_EQ(s->value, "");
  EXPECT_NE(s->why.find("not the lever"), std::string::npos);
}

TEST(Diagnosis, DataBoundProfileGetsWorkerAdviceAndNoCommAdvice) {
  Profile p = profile(100, 40, 25, 30, 6, 1, 5);
  p.facts.dataloader_num_workers = 1;
  const auto advice = diagnose(input(p));
  EXPECT_FALSE(has(advice, Finding::CommBound));
  EXPECT_FALSE(has(advice, Finding::Balanced));
  const std::optional<Suggestion> s = knob(get(advice, Finding::DataBound), "dataloader_num_workers");
  ASSERT_NE(s, std::nullopt);
  EXPECT_EQ(s->value, "2");
}

TEST(Diagnosis, DataBoundOnCudaWithoutPinnedMemorySuggestsPinning) {
  Profile p = profile(100, 40, 25, 30, 6, 1, 5);
  p.facts.device = "cuda";
  p.facts.dataloader_pin_memory = false;
  EXPECT_NE(knob(get(diagnose(input(p)), Finding::DataBound), "dataloader_pin_memory"), std::nullopt);
}

TEST(Diagnosis, BalancedProfileGetsOnlyTheBalancedFinding) {
  // Compute 90 of 100 ms, all-reduce 20 ms mostly hidden, 1 ms of data wait.
  const auto advice = diagnose(input(profile(100, 1, 40, 50, 20, 2, 18)));
  ASSERT_EQ(advice.size(), 1u) << format_advice(advice);
  EXPECT_EQ(advice[0].finding, Finding::Balanced);
}

TEST(Diagnosis, SingleRankIsNeverCommBound) {
  Profile p = profile(100, 1, 40, 50, 0, 0, 0);
  p.facts.world_size = 1;
  EXPECT_EQ(diagnose(input(p)).front().finding, Finding::Balanced);
}

TEST(Diagnosis, SpeedupBelowOneIsNegativeScaling) {
  DiagnosisInput in = input(comm_bound_profile());
  in.scaling = ScalingFacts{4, 0.46, 0.115};  // seed 001's AG News on 4 GPUs
  const auto advice = diagnose(in);
  EXPECT_TRUE(has(advice, Finding::NegativeScaling));
  EXPECT_TRUE(has(advice, Finding::CommBound));
  EXPECT_FALSE(has(advice, Finding::PoorScaling));
}

TEST(Diagnosis, ScalingFindingSaysWhereTheExtraStepTimeWent) {
  Profile one = profile(50, 1, 20, 25, 0, 0, 0);
  one.facts.world_size = 1;
  DiagnosisInput in = input(profile(80, 1, 30, 35, 12, 10, 2));  // compute +20, exposed +10
  in.baseline = one;
  in.scaling = ScalingFacts{2, 1.25, 0.625};
  const Advice a = get(diagnose(in), Finding::PoorScaling);
  EXPECT_NE(a.summary.find("from 50.0 ms on 1 rank to 80.0 ms on 2"), std::string::npos) << a.summary;
  const size_t compute = a.summary.find("compute (ranks share the cores) +20.0 ms");
  const size_t exposed = a.summary.find("exposed all-reduce +10.0 ms");
  ASSERT_NE(compute, std::string::npos) << a.summary;
  ASSERT_NE(exposed, std::string::npos) << a.summary;
  EXPECT_LT(compute, exposed) << "largest part first";
}

TEST(Diagnosis, LowEfficiencyAboveOneIsPoorNotNegativeScaling) {
  DiagnosisInput in = input(profile(100, 1, 40, 50, 20, 2, 18));
  in.scaling = ScalingFacts{4, 2.0, 0.5};
  const auto advice = diagnose(in);
  EXPECT_TRUE(has(advice, Finding::PoorScaling));
  EXPECT_FALSE(has(advice, Finding::NegativeScaling));
}

TEST(Diagnosis, GoodScalingAddsNoScalingFinding) {
  DiagnosisInput in = input(profile(100, 1, 40, 50, 20, 2, 18));
  in.scaling = ScalingFacts{4, 3.49, 0.873};  // seed 001's IMDB
  const auto advice = diagnose(in);
  EXPECT_FALSE(has(advice, Finding::PoorScaling));
  EXPECT_FALSE(has(advice, Finding::NegativeScaling));
}

TEST(Diagnosis, SmallBatchWithAccumulationTradesAccumulationForBatch) {
  // Seed 002: batch 4 x 12 accumulation steps on 2 GPUs; a batch of 12 is known to fit.
  Profile p = profile(100, 1, 40, 50, 20, 2, 18);
  p.facts.per_device_batch = 4;
  p.facts.gradient_accumulation_steps = 12;
  DiagnosisInput in = input(p);
  in.max_batch_that_fits = 12;
  const Advice a = get(diagnose(in), Finding::SmallBatch);
  ASSERT_NE(knob(a, "per_device_train_batch_size"), std::nullopt);
  ASSERT_NE(knob(a, "gradient_accumulation_steps"), std::nullopt);
  EXPECT_EQ(knob(a, "per_device_train_batch_size")->value, "12");
  EXPECT_EQ(knob(a, "gradient_accumulation_steps")->value, "4");  // 12 x 4 = 4 x 12: same effective batch
}

TEST(Diagnosis, SmallBatchWhileCommBoundSuggestsTheSmallBatchBar) {
  Profile p = comm_bound_profile();
  p.facts.per_device_batch = 8;
  const Advice a = get(diagnose(input(p)), Finding::SmallBatch);
  ASSERT_NE(knob(a, "per_device_train_batch_size"), std::nullopt);
  EXPECT_EQ(knob(a, "per_device_train_batch_size")->value, "32");
}

TEST(Diagnosis, SmallBatchThatIsNotABottleneckIsNotFlagged) {
  Profile p = profile(100, 1, 40, 50, 20, 2, 18);
  p.facts.per_device_batch = 8;
  EXPECT_FALSE(has(diagnose(input(p)), Finding::SmallBatch));
}

TEST(Diagnosis, CostlyLoggingStepsAreSyncPoints) {
  Profile p = profile(100, 1, 40, 50, 20, 2, 18);
  p.facts.logging_steps = 1;  // seed 000's logging_steps=1
  p.logging_overhead_ms = 30;
  const std::optional<Suggestion> s = knob(get(diagnose(input(p)), Finding::SyncPoints), "logging_steps");
  ASSERT_NE(s, std::nullopt);
  EXPECT_GE(std::stod(s->value), 30.0);  // 30 ms every 30 steps of 100 ms is 1%
}

TEST(Diagnosis, CheapLoggingIsNotASyncPoint) {
  Profile p = profile(100, 1, 40, 50, 20, 2, 18);
  p.facts.logging_steps = 50;
  p.logging_overhead_ms = 30;  // 0.6% of the time
  EXPECT_FALSE(has(diagnose(input(p)), Finding::SyncPoints));
}

TEST(Diagnosis, UnmeasuredFrequentLoggingOnCudaIsASyncPoint) {
  Profile p = profile(100, 1, 40, 50, 20, 2, 18);
  p.facts.device = "cuda";
  p.facts.logging_steps = 1;
  EXPECT_TRUE(has(diagnose(input(p)), Finding::SyncPoints));
}

TEST(Diagnosis, FrequentCheckpointsAreSyncPoints) {
  Profile p = profile(100, 1, 40, 50, 20, 2, 18);
  p.facts.save_steps = 10;
  p.checkpoint_ms = 500;  // half a second every second of training
  EXPECT_NE(knob(get(diagnose(input(p)), Finding::SyncPoints), "save_steps"), std::nullopt);
}

TEST(Diagnosis, MoreCpuThreadsThanCoresIsOversubscribed) {
  Profile p = profile(100, 1, 40, 50, 20, 2, 18);
  p.facts.dataloader_num_workers = 1;
  DiagnosisInput in = input(p);
  in.host_cores = 2;  // 2 ranks x (compute + worker + comm) = 6 threads
  EXPECT_TRUE(has(diagnose(in), Finding::Oversubscribed));
  in.host_cores = 6;
  EXPECT_FALSE(has(diagnose(in), Finding::Oversubscribed));
  in.profile.facts.device = "cuda";
  in.host_cores = 2;
  EXPECT_FALSE(has(diagnose(in), Finding::Oversubscribed));
}

TEST(Diagnosis, WideStepSpreadIsANoisyMeasurementButNotABottleneck) {
  Profile p = profile(100, 1, 40, 50, 20, 2, 18);
  p.step_ms = summarize({70, 100, 160});  // p10 76, p90 148
  const auto advice = diagnose(input(p));
  EXPECT_TRUE(has(advice, Finding::Noisy));
  EXPECT_TRUE(has(advice, Finding::Balanced));
}

TEST(Diagnosis, BusyMachineIsANoisyMeasurement) {
  Profile p = profile(100, 1, 40, 50, 20, 2, 18);
  p.step_ms = summarize({99, 100, 101});
  DiagnosisInput in = input(p);
  EXPECT_FALSE(has(diagnose(in), Finding::Noisy));
  in.host_cores = 2;
  in.profile.facts.dataloader_num_workers = 0;
  in.profile.facts.world_size = 1;
  in.load_average = 9;
  EXPECT_TRUE(has(diagnose(in), Finding::Noisy));
}

TEST(Diagnosis, FormattedAdviceNamesEveryKnob) {
  const auto advice = diagnose(input(comm_bound_profile()));
  const std::string text = format_advice(advice);
  EXPECT_NE(text.find("[comm-bound]"), std::string::npos);
  for (const Advice& a : advice)
    for (const Suggestion& s : a.suggestions) EXPECT_NE(text.find(s.knob), std::string::npos) << s.knob;
}

}  // namespace
}  // namespace tandem::report
