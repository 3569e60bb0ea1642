#include "apps/bench_ranks.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/commands.h"
#include "train/results.h"
#include "train/setup.h"
#include "train/trainer.h"
#include "comm/init.h"
#include "comm/launcher.h"
#include "core/check.h"
#include "report/bench_files.h"

namespace tandem::apps {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json case_json(const train::StepCase& c) {
  return {{"label", c.label},
          {"bucket_cap_mb", c.bucket_cap_mb},
          {"one_bucket", c.one_bucket},
          {"precision", c.precision},
          {"comm_hook", c.comm_hook}};
}

train::StepCase case_from(const json& j) {
  train::StepCase c;
  c.label = j.at("label").get<std::string>();
  c.bucket_cap_mb = j.at("bucket_cap_mb").get<double>();
  c.one_bucket = j.at("one_bucket").get<bool>();
  c.precision = j.at("precision").get<std::string>();
  c.comm_hook = j.at("comm_hook").get<std::string>();
  return c;
}

json spec_json(const WorkerSpec& s) {
  json cases = json::array();
  for (const train::StepCase& c : s.cases) cases.push_back(case_json(c));
  return {{"config", s.config},
          {"overrides", s.overrides},
          {"cases", cases},
          {"warmup", s.warmup},
          {"steps", s.steps},
          {"rounds", s.rounds},
          {"synthetic", s.synthetic},
          {"synthetic_real_fraction", s.synthetic_real_fraction},
          {"time_checkpoint", s.time_checkpoint},
          {"train_output_dir", s.train_output_dir},
          {"out_dir", s.out_dir}};
}

WorkerSpec spec_from(const json& j) {
  WorkerSpec s;
  s.config = j.at("config").get<std::string>();
  s.overrides = j.at("overrides").get<std::vector<std::string>>();
  for (const json& c : j.at("cases")) s.cases.push_back(case_from(c));
  s.warmup = j.at("warmup").get<int>();
  s.steps = j.at("steps").get<int>();
  s.rounds = j.at("rounds").get<int>();
  s.synthetic = j.at("synthetic").get<bool>();
  s.synthetic_real_fraction = j.at("synthetic_real_fraction").get<double>();
  s.time_checkpoint = j.at("time_checkpoint").get<bool>();
  s.train_output_dir = j.at("train_output_dir").get<std::string>();
  s.out_dir = j.at("out_dir").get<std::string>();
  return s;
}

json read_json(const fs::path& p) {
  std::ifstream in(p);
  TANDEM_CHECK(in.good(), "cannot read {}", p.string());
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    TANDEM_FAIL("{}: {}", p.string(), e.what());
  }
}

fs::path rank_file(const fs::path& dir, int rank) { return dir / fmt::format("rank{}.json", rank); }

}  // namespace

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t a = item.find_first_not_of(" \t"), b = item.find_last_not_of(" \t");
    if (a != std::string::npos) out.push_back(item.substr(a, b - a + 1));
  }
  return out;
}

std::vector<int> parse_rank_counts(const std::string& text, const std::string& option) {
  std::vector<int> out;
  for (const std::string& s : split_list(text)) {
    int n = 0;
    try {
      size_t used = 0;
      n = std::stoi(s, &used);
      TANDEM_CHECK(used == s.size(), "");
    } catch (const std::exception&) {
      TANDEM_FAIL("{}: '{}' is not a number of ranks", option, s);
    }
    TANDEM_CHECK(n >= 1, "{}: {} is not a positive number of ranks", option, n);
    out.push_back(n);
  }
  return out;
}

std::string self_executable() { return fs::read_symlink("/proc/self/exe").string(); }

std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out;
  for (char c : raw) out += c == '\0' ? ' ' : c;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

void require_not_launched(const char* command) {
  const comm::RankInfo info = comm::rank_info_from_env();
  TANDEM_CHECK(info.world_size <= 1,
               "tandem {} starts its own ranks (--nproc/--world-sizes); run it as one process, not under a launcher "
               "(this is {})",
               command, info.str());
}

void RankResults::append(const RankResults& other) {
  TANDEM_CHECK(other.samples.size() == samples.size(), "bench: rounds with different cases");
  for (size_t c = 0; c < samples.size(); ++c) {
    TANDEM_CHECK(other.samples[c].size() == samples[c].size(), "bench: rounds with different world sizes");
    for (size_t r = 0; r < samples[c].size(); ++r) {
      samples[c][r].insert(samples[c][r].end(), other.samples[c][r].begin(), other.samples[c][r].end());
      peak_memory[c][r] = std::max(peak_memory[c][r], other.peak_memory[c][r]);
    }
  }
  checkpoint_ms = std::max(checkpoint_ms, other.checkpoint_ms);
}

std::vector<report::Profile> RankResults::profiles() const {
  std::vector<report::Profile> out;
  for (size_t c = 0; c < facts.size(); ++c)
    out.push_back(report::aggregate(facts[c], samples[c], warmup, peak_memory[c], checkpoint_ms));
  return out;
}

RankResults run_bench_ranks(int nproc, const WorkerSpec& spec, std::chrono::seconds timeout) {
  TANDEM_CHECK(nproc >= 1, "bench: need at least one rank (got {})", nproc);
  TANDEM_CHECK(!spec.cases.empty(), "bench: no cases to run");
  const fs::path dir = spec.out_dir;
  fs::create_directories(dir);
  for (int r = 0; r < nproc; ++r) fs::remove(rank_file(dir, r));
  const fs::path spec_path = dir / "spec.json";
  report::write_json(spec_path, spec_json(spec));

  comm::LaunchOptions o;
  o.nproc_per_node = nproc;
  o.command = {self_executable(), "bench", "worker", "--spec", spec_path.string()};
  o.prefix_output = nproc > 1;
  o.timeout = timeout;
  const comm::LaunchResult r = comm::launch(o);
  TANDEM_CHECK(r.exit_code == 0, "bench: {} (the rank's own error is printed above; spec {})", r.message,
               spec_path.string());

  const size_t n = spec.cases.size();
  RankResults out;
  out.warmup = spec.warmup;
  out.facts.resize(n);
  out.samples.assign(n, std::vector<std::vector<report::StepSample>>(static_cast<size_t>(nproc)));
  out.peak_memory.assign(n, std::vector<int64_t>(static_cast<size_t>(nproc), 0));
  for (int rank = 0; rank < nproc; ++rank) {
    const fs::path file = rank_file(dir, rank);
    TANDEM_CHECK(fs::exists(file), "bench: rank {} exited without writing {}", rank, file.string());
    const json j = read_json(file);
    try {
      const json& cases = j.at("cases");
      TANDEM_CHECK(cases.size() == n, "{}: {} cases, the spec has {}", file.string(), cases.size(), n);
      for (size_t c = 0; c < n; ++c) {
        out.samples[c][static_cast<size_t>(rank)] = report::samples_from_json(cases[c].at("samples"));
        out.peak_memory[c][static_cast<size_t>(rank)] = cases[c].at("peak_memory_bytes").get<int64_t>();
        if (rank == 0) {
          out.facts[c] = report::facts_from_json(cases[c].at("facts"));
          out.facts[c].config = spec.config;
          out.facts[c].overrides = spec.overrides;
        }
      }
      if (rank == 0) out.checkpoint_ms = j.at("checkpoint_ms").get<double>();
    } catch (const json::exception& e) {
      TANDEM_FAIL("{}: {}", file.string(), e.what());
    }
  }
  return out;
}

void run_bench_worker(const std::string& spec_path) {
  const WorkerSpec spec = spec_from(read_json(spec_path));
  train::TrainConfig config = train::load_train_config(spec.config, spec.overrides);
  validate(config);
  const comm::RankInfo info = comm::rank_info_from_env();
  std::shared_ptr<comm::ProcessGroup> group;
  if (info.world_size > 1) {
    train::select_device(config, info.local_rank);  // before the group: no context on another rank's GPU
    comm::ProcessGroupOptions o;
    o.timeout = std::chrono::seconds(config.ddp_timeout);
    group = comm::init_process_group(config.ddp_backend, info, o);
  }
  train::StepRunnerOptions ro;
  ro.synthetic = spec.synthetic;
  ro.synthetic_real_fraction = spec.synthetic_real_fraction;
  train::StepRunner runner(config, group, ro);

  const size_t n = spec.cases.size();
  std::vector<std::vector<report::StepSample>> samples(n);
  std::vector<int64_t> peaks(n, 0);
  std::vector<report::RunFacts> facts(n);
  for (int round = 0; round < spec.rounds; ++round) {
    for (size_t k = 0; k < n; ++k) {
      const size_t c = (k + static_cast<size_t>(round)) % n;  // rotate: no case always runs first
      std::vector<report::StepSample> s = runner.run(spec.cases[c], spec.warmup, spec.steps);
      samples[c].insert(samples[c].end(), s.begin(), s.end());
      peaks[c] = std::max(peaks[c], runner.peak_memory_bytes());
      facts[c] = runner.facts(spec.cases[c]);
    }
  }
  double checkpoint_ms = -1;
  if (spec.time_checkpoint && info.rank == 0) checkpoint_ms = runner.time_checkpoint_ms(spec.out_dir);

  json cases = json::array();
  for (size_t c = 0; c < n; ++c)
    cases.push_back({{"facts", report::to_json(facts[c])},
                     {"peak_memory_bytes", peaks[c]},
                     {"samples", report::to_json(samples[c])}});
  report::write_json(rank_file(spec.out_dir, info.rank),
                     {{"rank", info.rank}, {"checkpoint_ms", checkpoint_ms}, {"cases", cases}});

  if (!spec.train_output_dir.empty()) {
    train::TrainConfig tc = config;
    tc.output_dir = spec.train_output_dir;
    train::TrainerOptions options;
    options.quiet = true;
    const train::TrainResult r = train::train(tc, group, options);
    if (info.rank == 0) train::write_train_results(tc.output_dir, r, info.world_size, group ? group->backend_name() : "none");
  }
}

void add_bench_worker_command(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("worker", "One rank of a benchmark (started by bench buckets/scaling/step)");
  cmd->group("");  // hidden from --help
  auto spec = std::make_shared<std::string>();
  cmd->add_option("--spec", *spec, "The run's spec.json")->required();
  cmd->callback([spec] { run_bench_worker(*spec); });
}

}  // namespace tandem::apps
