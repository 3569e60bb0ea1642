#include "report/bench_files.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/atomic_file.h"
#include "core/check.h"
#include "core/stream.h"

namespace tandem::report {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kVersion = 1;

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown";
}

double load_average() {
  std::ifstream in("/proc/loadavg");
  double one = 0;
  in >> one;
  return one;
}

double memory_gib() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kib = 0;
  while (in >> key) {
    if (key == "MemTotal:") {
      in >> kib;
      return kib / (1024.0 * 1024.0);
    }
    in.ignore(1 << 10, '\n');
  }
  return 0;
}

// The StepSample fields, by JSON name.
struct SampleField {
  const char* name;
  double StepSample::*field;
};
constexpr SampleField kSampleFields[] = {{"step_ms", &StepSample::step_ms},
                                         {"data_wait_ms", &StepSample::data_wait_ms},
                                         {"forward_ms", &StepSample::forward_ms},
                                         {"backward_ms", &StepSample::backward_ms},
                                         {"backward_compute_ms", &StepSample::backward_compute_ms},
                                         {"comm_ms", &StepSample::comm_ms},
                                         {"exposed_comm_ms", &StepSample::exposed_comm_ms},
                                         {"overlap_ms", &StepSample::overlap_ms},
                                         {"optimizer_ms", &StepSample::optimizer_ms},
                                         {"sync_ms", &StepSample::sync_ms}};

// Per-step vectors (optional in the files: DDP only).
struct SeriesField {
  const char* name;
  std::vector<double> StepSample::*field;
};
constexpr SeriesField kSeriesFields[] = {{"gradient_ready_ms", &StepSample::gradient_ready_ms},
                                         {"bucket_ready_ms", &StepSample::bucket_ready_ms},
                                         {"bucket_comm_start_ms", &StepSample::bucket_comm_start_ms},
                                         {"bucket_comm_end_ms", &StepSample::bucket_comm_end_ms}};
struct ProfileSeries {
  const char* name;
  std::vector<double> Profile::*field;
  bool per_gradient;  // else per bucket
};
constexpr ProfileSeries kProfileSeries[] = {{"gradient_ready_ms", &Profile::gradient_ready_ms, true},
                                            {"bucket_ready_ms", &Profile::bucket_ready_ms, false},
                                            {"bucket_comm_start_ms", &Profile::bucket_comm_start_ms, false},
                                            {"bucket_comm_end_ms", &Profile::bucket_comm_end_ms, false}};

json meta_json(const BenchMeta& m) {
  return {{"date", m.date},
          {"command", m.command},
          {"tandem_version", m.tandem_version},
          {"machine",
           {{"cpu", m.machine.cpu},
            {"cores", m.machine.cores},
            {"memory_gib", m.machine.memory_gib},
            {"gpu", m.machine.gpu},
            {"load_average", m.machine.load_average}}}};
}

BenchMeta meta_from(const json& j) {
  BenchMeta m;
  const json& x = j.at("meta");
  m.date = x.at("date").get<std::string>();
  m.command = x.at("command").get<std::string>();
  m.tandem_version = x.at("tandem_version").get<std::string>();
  const json& mm = x.at("machine");
  m.machine.cpu = mm.at("cpu").get<std::string>();
  m.machine.cores = mm.at("cores").get<int>();
  m.machine.memory_gib = mm.at("memory_gib").get<double>();
  m.machine.gpu = mm.at("gpu").get<std::string>();
  m.machine.load_average = mm.at("load_average").get<double>();
  return m;
}

json header(const char* kind, const BenchMeta& meta) {
  return {{"kind", kind}, {"version", kVersion}, {"meta", meta_json(meta)}};
}

json profiles_json(const std::vector<Profile>& cases) {
  json a = json::array();
  for (const Profile& p : cases) a.push_back(to_json(p));
  return a;
}

std::vector<Profile> profiles_from(const json& j, const std::string& where) {
  std::vector<Profile> out;
  const json& a = j.at("cases");
  TANDEM_CHECK(a.is_array(), "{}: 'cases' is not an array", where);
  for (size_t i = 0; i < a.size(); ++i) out.push_back(profile_from_json(a[i], fmt::format("{}: cases[{}]", where, i)));
  return out;
}

}  // namespace

json to_json(const BenchMeta& m) { return meta_json(m); }

BenchMeta current_meta(const std::string& command) {
  BenchMeta m;
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  m.date = buf;
  m.command = command;
#ifdef TANDEM_VERSION
  m.tandem_version = TANDEM_VERSION;
#endif
  m.machine.cpu = cpu_model();
  m.machine.cores = static_cast<int>(std::thread::hardware_concurrency());
  m.machine.memory_gib = memory_gib();
  m.machine.load_average = load_average();
  if (cuda::available()) m.machine.gpu = fmt::format("{} CUDA device(s)", cuda::device_count());
  return m;
}

json to_json(const RunFacts& f) {
  json j = {{"label", f.label},
            {"config", f.config},
            {"overrides", f.overrides},
            {"device", f.device},
            {"backend", f.backend},
            {"world_size", f.world_size},
            {"per_device_batch", f.per_device_batch},
            {"gradient_accumulation_steps", f.gradient_accumulation_steps},
            {"seq_len", f.seq_len},
            {"padding", f.padding},
            {"pad_to_multiple_of", f.pad_to_multiple_of},
            {"logging_steps", f.logging_steps},
            {"save_steps", f.save_steps},
            {"dataloader_num_workers", f.dataloader_num_workers},
            {"dataloader_pin_memory", f.dataloader_pin_memory},
            {"precision", f.precision},
            {"comm_hook", f.comm_hook},
            {"bucket_cap_mb", f.bucket_cap_mb},
            {"one_bucket", f.one_bucket},
            {"bucket_bytes", f.bucket_bytes},
            {"num_parameters", f.num_parameters},
            {"vocab_size", f.vocab_size},
            {"d_model", f.d_model},
            {"train_examples", f.train_examples},
            {"synthetic_data", f.synthetic_data},
            {"synthetic_real_fraction", f.synthetic_real_fraction}};
  if (!f.gradient_names.empty()) {
    j["gradient_names"] = f.gradient_names;
    j["gradient_bytes"] = f.gradient_bytes;
  }
  return j;
}

RunFacts facts_from_json(const json& f) {
  RunFacts r;
  r.label = f.at("label").get<std::string>();
  r.config = f.at("config").get<std::string>();
  r.overrides = f.at("overrides").get<std::vector<std::string>>();
  r.device = f.at("device").get<std::string>();
  r.backend = f.at("backend").get<std::string>();
  r.world_size = f.at("world_size").get<int>();
  r.per_device_batch = f.at("per_device_batch").get<int64_t>();
  r.gradient_accumulation_steps = f.at("gradient_accumulation_steps").get<int64_t>();
  r.seq_len = f.at("seq_len").get<int64_t>();
  r.padding = f.value("padding", std::string("max_length"));  // absent from files written before it
  r.pad_to_multiple_of = f.value("pad_to_multiple_of", int64_t{1});
  r.logging_steps = f.at("logging_steps").get<int64_t>();
  r.save_steps = f.at("save_steps").get<int64_t>();
  r.dataloader_num_workers = f.at("dataloader_num_workers").get<int64_t>();
  r.dataloader_pin_memory = f.at("dataloader_pin_memory").get<bool>();
  r.precision = f.at("precision").get<std::string>();
  r.comm_hook = f.at("comm_hook").get<std::string>();
  r.bucket_cap_mb = f.at("bucket_cap_mb").get<double>();
  r.one_bucket = f.at("one_bucket").get<bool>();
  r.bucket_bytes = f.at("bucket_bytes").get<std::vector<int64_t>>();
  r.num_parameters = f.at("num_parameters").get<int64_t>();
  r.vocab_size = f.at("vocab_size").get<int64_t>();
  r.d_model = f.at("d_model").get<int64_t>();
  r.train_examples = f.at("train_examples").get<int64_t>();
  r.synthetic_data = f.at("synthetic_data").get<bool>();
  r.synthetic_real_fraction = f.value("synthetic_real_fraction", 1.0);  // absent from files written before it
  if (f.contains("gradient_names")) {  // files written before the step model have none
    r.gradient_names = f.at("gradient_names").get<std::vector<std::string>>();
    r.gradient_bytes = f.at("gradient_bytes").get<std::vector<int64_t>>();
    TANDEM_CHECK(r.gradient_bytes.size() == r.gradient_names.size(), "{} gradient_bytes for {} gradient_names",
                 r.gradient_bytes.size(), r.gradient_names.size());
    for (size_t i = 0; i < r.gradient_bytes.size(); ++i)
      TANDEM_CHECK(r.gradient_bytes[i] > 0, "gradient_bytes of '{}' must be positive, got {}", r.gradient_names[i],
                   r.gradient_bytes[i]);
  }
  TANDEM_CHECK(r.world_size >= 1 && r.per_device_batch >= 1 && r.gradient_accumulation_steps >= 1,
               "world_size, per_device_batch and gradient_accumulation_steps must be positive");
  return r;
}

json to_json(const std::vector<StepSample>& samples) {
  json j;
  for (const SampleField& f : kSampleFields) {
    std::vector<double> column;
    for (const StepSample& s : samples) column.push_back(s.*(f.field));
    j[f.name] = column;
  }
  std::vector<bool> logging;
  for (const StepSample& s : samples) logging.push_back(s.logging_step);
  j["logging_step"] = logging;
  for (const SeriesField& f : kSeriesFields) {
    if (std::none_of(samples.begin(), samples.end(), [&](const StepSample& s) { return !(s.*(f.field)).empty(); }))
      continue;
    json column = json::array();
    for (const StepSample& s : samples) column.push_back(s.*(f.field));
    j[f.name] = column;
  }
  return j;
}

std::vector<StepSample> samples_from_json(const json& j) {
  const std::vector<bool> logging = j.at("logging_step").get<std::vector<bool>>();
  std::vector<StepSample> out(logging.size());
  for (size_t i = 0; i < out.size(); ++i) out[i].logging_step = logging[i];
  for (const SampleField& f : kSampleFields) {
    const std::vector<double> column = j.at(f.name).get<std::vector<double>>();
    TANDEM_CHECK(column.size() == out.size(), "samples: column {} has {} values, logging_step has {}", f.name,
                 column.size(), out.size());
    for (size_t i = 0; i < out.size(); ++i) out[i].*(f.field) = column[i];
  }
  for (const SeriesField& f : kSeriesFields) {
    if (!j.contains(f.name)) continue;  // optional: absent without DDP and in files from before the step model
    const auto column = j.at(f.name).get<std::vector<std::vector<double>>>();
    TANDEM_CHECK(column.size() == out.size(), "samples: {} has {} steps, logging_step has {}", f.name, column.size(),
                 out.size());
    for (size_t i = 0; i < out.size(); ++i) out[i].*(f.field) = column[i];
  }
  return out;
}

json to_json(const Profile& p) {
  json median;
  for (const SampleField& s : kSampleFields) median[s.name] = p.median.*(s.field);
  json j = {{"facts", to_json(p.facts)},
            {"warmup_steps", p.warmup_steps},
            {"median", median},
            {"step_ms",
             {{"n", p.step_ms.n},
              {"median", p.step_ms.median},
              {"p10", p.step_ms.p10},
              {"p90", p.step_ms.p90},
              {"mean", p.step_ms.mean},
              {"min", p.step_ms.min},
              {"max", p.step_ms.max}}},
            {"samples_per_second", p.samples_per_second},
            {"peak_memory_bytes", p.peak_memory_bytes},
            {"logging_overhead_ms", p.logging_overhead_ms},
            {"checkpoint_ms", p.checkpoint_ms},
            {"step_samples_ms", p.step_samples_ms}};
  for (const ProfileSeries& f : kProfileSeries)
    if (!(p.*(f.field)).empty()) j[f.name] = p.*(f.field);
  return j;
}

Profile profile_from_json(const json& j, const std::string& where) {
  try {
    Profile p;
    p.facts = facts_from_json(j.at("facts"));
    p.warmup_steps = j.at("warmup_steps").get<int>();
    const json& m = j.at("median");
    for (const SampleField& s : kSampleFields) p.median.*(s.field) = m.at(s.name).get<double>();
    const json& st = j.at("step_ms");
    p.step_ms.n = st.at("n").get<size_t>();
    p.step_ms.median = st.at("median").get<double>();
    p.step_ms.p10 = st.at("p10").get<double>();
    p.step_ms.p90 = st.at("p90").get<double>();
    p.step_ms.mean = st.at("mean").get<double>();
    p.step_ms.min = st.at("min").get<double>();
    p.step_ms.max = st.at("max").get<double>();
    p.samples_per_second = j.at("samples_per_second").get<double>();
    p.peak_memory_bytes = j.at("peak_memory_bytes").get<int64_t>();
    p.logging_overhead_ms = j.at("logging_overhead_ms").get<double>();
    p.checkpoint_ms = j.at("checkpoint_ms").get<double>();
    p.step_samples_ms = j.at("step_samples_ms").get<std::vector<double>>();
    for (const ProfileSeries& f : kProfileSeries) {
      if (!j.contains(f.name)) continue;
      p.*(f.field) = j.at(f.name).get<std::vector<double>>();
      const size_t expected = f.per_gradient ? p.facts.gradient_names.size() : p.facts.bucket_bytes.size();
      TANDEM_CHECK((p.*(f.field)).size() == expected, "{} has {} values for {} {}", f.name, (p.*(f.field)).size(),
                   expected, f.per_gradient ? "gradient_names" : "buckets");
    }
    return p;
  } catch (const json::exception& e) {
    TANDEM_FAIL("{}: {}", where, e.what());
  } catch (const Error& e) {
    TANDEM_FAIL("{}: {}", where, e.what());
  }
}

json to_json(const BucketsBench& b) {
  json j = header("buckets", b.meta);
  j["current_cap_mb"] = b.current_cap_mb;
  j["rounds"] = b.rounds;
  j["cases"] = profiles_json(b.cases);
  return j;
}

json to_json(const ScalingBench& b) {
  json j = header("scaling", b.meta);
  j["mode"] = b.mode;
  j["rounds"] = b.rounds;
  j["cases"] = profiles_json(b.cases);
  json runs = json::array();
  for (const TrainRun& r : b.runs) runs.push_back({{"world_size", r.world_size}, {"dir", r.dir}});
  j["runs"] = runs;
  return j;
}

json to_json(const StepBench& b) {
  json j = header("step", b.meta);
  j["rounds"] = b.rounds;
  j["cases"] = profiles_json(b.cases);
  return j;
}

json to_json(const BatchSearch& b) {
  json j = header("find_batch_size", b.meta);
  j["config"] = b.config;
  j["device"] = b.device;
  j["memory_limit_bytes"] = b.memory_limit_bytes;
  j["max_batch"] = b.max_batch;
  j["hit_upper_bound"] = b.hit_upper_bound;
  json trials = json::array();
  for (const BatchTrial& t : b.trials)
    trials.push_back({{"batch", t.batch}, {"fits", t.fits}, {"peak_bytes", t.peak_bytes}, {"error", t.error}});
  j["trials"] = trials;
  return j;
}

void read_bench_file(const fs::path& path, BenchFolder& folder) {
  std::ifstream in(path);
  TANDEM_CHECK(in.good(), "cannot read {}", path.string());
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    TANDEM_FAIL("{}: not valid JSON: {}", path.string(), e.what());
  }
  const std::string where = path.string();
  try {
    const std::string kind = j.at("kind").get<std::string>();
    const int version = j.at("version").get<int>();
    TANDEM_CHECK(version == kVersion, "{}: version {} (this tandem reads version {})", where, version, kVersion);
    if (kind == "buckets") {
      BucketsBench b;
      b.meta = meta_from(j);
      b.current_cap_mb = j.at("current_cap_mb").get<double>();
      b.rounds = j.at("rounds").get<int>();
      b.cases = profiles_from(j, where);
      folder.buckets = std::move(b);
    } else if (kind == "scaling") {
      ScalingBench b;
      b.meta = meta_from(j);
      b.mode = j.at("mode").get<std::string>();
      b.rounds = j.at("rounds").get<int>();
      b.cases = profiles_from(j, where);
      for (const json& r : j.at("runs"))
        b.runs.push_back({r.at("world_size").get<int>(), r.at("dir").get<std::string>()});
      folder.scaling = std::move(b);
    } else if (kind == "step") {
      StepBench b;
      b.meta = meta_from(j);
      b.rounds = j.at("rounds").get<int>();
      b.cases = profiles_from(j, where);
      folder.step = std::move(b);
    } else if (kind == "find_batch_size") {
      BatchSearch b;
      b.meta = meta_from(j);
      b.config = j.at("config").get<std::string>();
      b.device = j.at("device").get<std::string>();
      b.memory_limit_bytes = j.at("memory_limit_bytes").get<int64_t>();
      b.max_batch = j.at("max_batch").get<int64_t>();
      b.hit_upper_bound = j.at("hit_upper_bound").get<bool>();
      for (const json& t : j.at("trials"))
        b.trials.push_back({t.at("batch").get<int64_t>(), t.at("fits").get<bool>(), t.at("peak_bytes").get<int64_t>(),
                            t.at("error").get<std::string>()});
      folder.batch_search = std::move(b);
    } else {
      TANDEM_FAIL("{}: unknown kind '{}' (buckets, scaling, step or find_batch_size)", where, kind);
    }
  } catch (const json::exception& e) {
    TANDEM_FAIL("{}: {}", where, e.what());
  }
}

BenchFolder read_bench_folder(const fs::path& dir) {
  TANDEM_CHECK(fs::is_directory(dir), "{} is not a folder", dir.string());
  BenchFolder folder;
  for (const char* name : {"buckets.json", "scaling.json", "step.json", "find_batch_size.json"})
    if (fs::exists(dir / name)) read_bench_file(dir / name, folder);
  return folder;
}

void write_json(const fs::path& path, const json& j) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  write_file_atomically(path, j.dump(2) + "\n");
}

}  // namespace tandem::report
