// The report's files, byte for byte, against golden copies in
// tests/fixtures/report/golden/<scenario>/: every table, plot and the text
// report of three bench folders (a recorded CPU run with training runs, a
// synthetic GPU scaling and bucket sweep, a precision comparison alone).
//
// The goldens were written by the report code before it was restructured, so
// a refactoring that changes any output fails here. To change the report on
// purpose, run with TANDEM_GOLDEN_OUT=<dir> (each scenario's files are copied
// to <dir>/<scenario>), review the diff against the goldens and copy them in.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "report/report.h"

namespace tandem::report {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(TANDEM_FIXTURES_DIR) / "report";

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

BenchMeta fixed_meta(const std::string& command, const std::string& gpu) {
  BenchMeta m;
  m.date = "2026-01-01T00:00:00Z";
  m.command = command;
  m.tandem_version = "0.1.0";
  m.machine = Machine{"Test CPU @ 2.0GHz", 8, 31.0, gpu, 7.5};
  return m;
}

Profile profile(int world, double step, double comm, double exposed, const std::string& label) {
  Profile p;
  p.facts.label = label;
  p.facts.world_size = world;
  p.facts.device = "cuda";
  p.facts.backend = world > 1 ? "nccl" : "none";
  p.facts.per_device_batch = 16;
  p.facts.gradient_accumulation_steps = 2;
  p.facts.num_parameters = 3'000'000;
  p.facts.vocab_size = 30000;
  p.facts.d_model = 64;
  p.facts.train_examples = 120000;
  p.facts.logging_steps = 2;
  p.facts.bucket_bytes = world > 1 ? std::vector<int64_t>{1 << 20, 5'000'000, 6'000'000} : std::vector<int64_t>{};
  p.warmup_steps = 3;
  p.median.step_ms = step;
  p.median.data_wait_ms = step * 0.15;
  p.median.forward_ms = step * 0.2;
  p.median.backward_compute_ms = step * 0.3;
  p.median.backward_ms = step * 0.3 + exposed;
  p.median.comm_ms = comm;
  p.median.exposed_comm_ms = exposed;
  p.median.overlap_ms = comm - exposed;
  p.median.optimizer_ms = step * 0.05;
  p.step_samples_ms = {step * 0.6, step, step * 1.3, step * 0.9};
  p.step_ms = summarize(p.step_samples_ms);
  p.samples_per_second = 32.0 * world / (step / 1000);
  p.peak_memory_bytes = int64_t{700} << 20;
  p.logging_overhead_ms = step * 0.4;
  p.checkpoint_ms = -1;
  return p;
}

// The recorded CPU bench folder (docs/results/ddp_cpu), with its training runs
// read as `tandem report --bench` does, their folders named relative to it.
ReportInputs recorded_cpu() {
  const fs::path dir = kFixtures / "ddp_cpu";
  ReportInputs in;
  in.bench = read_bench_folder(dir);
  for (const TrainRun& r : in.bench.scaling->runs) {
    const std::string label = std::to_string(r.world_size) + (r.world_size > 1 ? " ranks" : " rank");
    TrainingRun run = read_training_run(dir / r.dir, label);
    run.dir = r.dir;
    in.runs.push_back(run);
  }
  in.command = "tandem report --bench docs/results/ddp_cpu";
  in.date = "2026-01-02T00:00:00Z";
  return in;
}

// Strong scaling over 1, 2 and 4 GPUs in two rounds, a bucket sweep whose
// sizes repeat a layout, no training runs (the epoch-time plot is estimated).
ReportInputs synthetic_gpu() {
  ReportInputs in;
  in.bench.scaling.emplace();
  in.bench.scaling->meta = fixed_meta("tandem bench scaling --rounds 2", "NVIDIA Test GPU");
  in.bench.scaling->mode = "strong";
  in.bench.scaling->rounds = 2;
  in.bench.scaling->cases = {profile(1, 40, 0, 0, "1 rank"), profile(2, 30, 12, 4, "2 ranks"),
                             profile(4, 25, 14, 9, "4 ranks")};
  in.bench.buckets.emplace();
  in.bench.buckets->meta = fixed_meta("tandem bench buckets", "NVIDIA Test GPU");
  in.bench.buckets->current_cap_mb = 25;
  in.bench.buckets->cases = {profile(4, 24, 14, 8, "5"), profile(4, 25, 14, 9, "25"), profile(4, 25.5, 14, 9, "50"),
                             profile(4, 27, 14, 12, "one bucket")};
  in.bench.buckets->cases[0].facts.bucket_cap_mb = 5;
  in.bench.buckets->cases[1].facts.bucket_cap_mb = 25;
  in.bench.buckets->cases[2].facts.bucket_cap_mb = 50;
  in.bench.buckets->cases[3].facts.one_bucket = true;
  in.bench.buckets->cases[3].facts.bucket_bytes = {12'048'576};
  in.command = "tandem report --bench gpu";
  in.date = "2026-01-03T00:00:00Z";
  return in;
}

// A precision comparison and a batch search, nothing else.
ReportInputs step_only() {
  ReportInputs in;
  in.bench.step.emplace();
  in.bench.step->meta = fixed_meta("tandem bench step", "");
  in.bench.step->cases = {profile(1, 40, 0, 0, "fp32"), profile(1, 28, 0, 0, "bf16"), profile(1, 30, 0, 0, "fp16")};
  in.bench.step->cases[1].facts.precision = "bf16";
  in.bench.step->cases[2].facts.precision = "fp16";
  in.bench.step->cases[1].peak_memory_bytes = int64_t{400} << 20;
  in.bench.batch_search.emplace();
  in.bench.batch_search->meta = fixed_meta("tandem find-batch-size", "");
  in.bench.batch_search->config = "configs/tiny.yaml";
  in.bench.batch_search->device = "cuda:0";
  in.bench.batch_search->memory_limit_bytes = int64_t{2} << 30;
  in.bench.batch_search->max_batch = 128;
  in.bench.batch_search->hit_upper_bound = true;
  in.bench.batch_search->trials = {
      {64, true, int64_t{900} << 20, ""}, {256, false, 0, "out of memory"}, {128, true, int64_t{1800} << 20, ""}};
  in.command = "tandem report --bench step";
  in.date = "2026-01-04T00:00:00Z";
  return in;
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void expect_matches_golden(const std::string& scenario, const ReportInputs& in) {
  const fs::path out =
      fs::temp_directory_path() / ("tandem_report_golden_" + std::to_string(::getpid()) + "_" + scenario);
  fs::remove_all(out);
  std::string text;
  const std::vector<fs::path> written = write_report(in, out, &text);
  if (const char* keep = std::getenv("TANDEM_GOLDEN_OUT")) {
    fs::create_directories(fs::path(keep) / scenario);
    fs::copy(out, fs::path(keep) / scenario, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  }
  const fs::path golden = kFixtures / "golden" / scenario;
  ASSERT_TRUE(fs::is_directory(golden)) << golden;
  std::vector<std::string> written_names;
  for (const fs::path& p : written) written_names.push_back(p.filename().string());
  std::sort(written_names.begin(), written_names.end());
  EXPECT_EQ(written_names, names_in(golden));
  EXPECT_EQ(names_in(out), names_in(golden));
  for (const std::string& name : names_in(golden))
    EXPECT_EQ(read(out / name), read(golden / name)) << scenario << "/" << name << " differs from the golden";
  EXPECT_EQ(text, read(golden / "report.txt"));
  fs::remove_all(out);
}

TEST(ReportGolden, RecordedCpuFolderWithTrainingRunsIsUnchanged) {
  expect_matches_golden("recorded_cpu", recorded_cpu());
}

TEST(ReportGolden, SyntheticGpuScalingAndBucketSweepIsUnchanged) {
  expect_matches_golden("synthetic_gpu", synthetic_gpu());
}

TEST(ReportGolden, PrecisionComparisonAloneIsUnchanged) { expect_matches_golden("step_only", step_only()); }

}  // namespace
}  // namespace tandem::report
