#include "report/training_run.h"

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/check.h"
#include "core/parse_number.h"
#include "data/csv.h"

namespace tandem::report {

namespace fs = std::filesystem;

namespace {
std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  TANDEM_CHECK(in.good(), "cannot read {}", p.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

double to_number(const std::string& field, const fs::path& file, int64_t line, const std::string& column) {
  if (const std::optional<double> v = parse_double(field)) return *v;
  TANDEM_FAIL("{}:{}: column {}: '{}' is not a number", file.string(), line, column, field);
}
}  // namespace

std::vector<std::pair<int, double>> TrainingRun::epoch_seconds() const {
  std::vector<std::pair<int, double>> out;
  const EvalPoint* previous = nullptr;
  for (const EvalPoint& e : evals) {
    // Only evaluations at whole epochs (eval_strategy: epoch) mark epoch ends.
    if (std::abs(e.epoch - std::round(e.epoch)) > 1e-6) continue;
    if (previous && std::round(e.epoch) == std::round(previous->epoch) + 1)
      out.emplace_back(static_cast<int>(std::round(e.epoch)), e.elapsed_s - previous->elapsed_s);
    previous = &e;
  }
  return out;
}

TrainingRun read_training_run(const fs::path& dir, const std::string& label) {
  TrainingRun run;
  run.label = label;
  run.dir = dir;
  const fs::path eval_file = dir / "eval_log.csv";
  TANDEM_CHECK(fs::exists(eval_file), "training run {}: no eval_log.csv (is it a tandem train output_dir?)",
               dir.string());
  std::map<std::string, size_t> columns;
  data::for_each_csv_record(read_text(eval_file), eval_file, [&](const data::CsvRecord& r) {
    if (columns.empty()) {
      for (size_t i = 0; i < r.fields.size(); ++i) columns[r.fields[i]] = i;
      for (const char* need : {"epoch", "eval_loss", "eval_accuracy", "elapsed_s"})
        TANDEM_CHECK(columns.count(need), "{}:{}: no column '{}' in the header", eval_file.string(), r.line, need);
      return;
    }
    TANDEM_CHECK(r.fields.size() == columns.size(), "{}:{}: {} fields, the header has {}", eval_file.string(), r.line,
                 r.fields.size(), columns.size());
    auto get = [&](const char* name) { return to_number(r.fields[columns[name]], eval_file, r.line, name); };
    run.evals.push_back({get("epoch"), get("eval_accuracy"), get("eval_loss"), get("elapsed_s")});
  });
  if (!run.evals.empty()) run.final_accuracy = run.evals.back().accuracy;
  const fs::path results = dir / "results.json";
  if (fs::exists(results)) {
    try {
      nlohmann::json j = nlohmann::json::parse(read_text(results));
      run.world_size = j.at("world_size").get<int>();
      run.samples_per_second = j.at("samples_per_second").get<double>();
      run.train_seconds = j.at("train_seconds").get<double>();
      run.final_accuracy = j.at("eval_accuracy").get<double>();
    } catch (const nlohmann::json::exception& e) {
      TANDEM_FAIL("{}: {}", results.string(), e.what());
    }
  }
  return run;
}

}  // namespace tandem::report
