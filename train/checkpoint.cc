#include "train/checkpoint.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/check.h"

namespace tandem::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPrefix = "checkpoint-";

std::optional<int64_t> checkpoint_step(const fs::path& p) {
  const std::string name = p.filename().string();
  if (name.rfind(kPrefix, 0) != 0) return std::nullopt;
  const std::string digits = name.substr(std::string(kPrefix).size());
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return std::nullopt;
  if (!fs::exists(p / "trainer_state.json")) return std::nullopt;  // unfinished
  return std::stoll(digits);
}

nlohmann::json state_to_json(const TrainerState& s) {
  nlohmann::json j;
  j["global_step"] = s.global_step;
  j["epoch"] = s.epoch;
  j["sampler"] = {{"epoch", s.sampler.epoch},
                  {"position", s.sampler.position},
                  {"world_size", s.sampler.world_size},
                  {"dataset_size", s.sampler.dataset_size},
                  {"seed", s.sampler.seed}};
  if (s.scaler) {
    j["scaler"] = {{"scale", s.scaler->scale},
                   {"growth_factor", s.scaler->growth_factor},
                   {"backoff_factor", s.scaler->backoff_factor},
                   {"growth_interval", s.scaler->growth_interval},
                   {"_growth_tracker", s.scaler->growth_tracker}};
  }
  j["seed"] = s.seed;
  j["world_size"] = s.world_size;
  j["class_names"] = s.class_names;
  return j;
}

// A count of steps, epochs or samples: json's conversion would take -3 or 2.5 as they are (or
// truncated), and resuming from them went wrong far from the file.
int64_t count_at(const nlohmann::json& j, const std::string& key, const fs::path& file) {
  const nlohmann::json& v = j.at(key.substr(key.rfind('.') + 1));
  const bool ok = v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)
                                         : v.is_number_integer() && v.get<int64_t>() >= 0;
  TANDEM_CHECK(ok, "{}: {} must be a non-negative integer, got {}", file.string(), key, v.dump());
  return v.get<int64_t>();
}

TrainerState state_from_json(const nlohmann::json& j, const fs::path& file) {
  try {
    TrainerState s;
    s.global_step = count_at(j, "global_step", file);
    s.epoch = count_at(j, "epoch", file);
    const auto& sm = j.at("sampler");
    s.sampler.epoch = count_at(sm, "sampler.epoch", file);
    s.sampler.position = count_at(sm, "sampler.position", file);
    s.sampler.world_size = sm.at("world_size");
    s.sampler.dataset_size = sm.at("dataset_size");
    s.sampler.seed = sm.at("seed");
    if (j.contains("scaler")) {
      const auto& sc = j.at("scaler");
      optim::GradScaler::State st;
      st.scale = sc.at("scale");
      st.growth_factor = sc.at("growth_factor");
      st.backoff_factor = sc.at("backoff_factor");
      st.growth_interval = sc.at("growth_interval");
      st.growth_tracker = sc.at("_growth_tracker");
      s.scaler = st;
    }
    s.seed = j.at("seed");
    s.world_size = j.at("world_size");
    s.class_names = j.at("class_names").get<std::vector<std::string>>();
    return s;
  } catch (const nlohmann::json::exception& e) {
    TANDEM_FAIL("{}: malformed trainer state: {}", file.string(), e.what());
  }
}

}  // namespace

fs::path save_checkpoint(const fs::path& output_dir, const NamedTensors& model, const NamedTensors& optimizer,
                         const TrainerState& state, const std::string& config_yaml, const fs::path& vocab_file,
                         int64_t save_total_limit) {
  fs::create_directories(output_dir);
  const std::string name = kPrefix + std::to_string(state.global_step);
  const fs::path final_dir = output_dir / name;
  const fs::path tmp_dir = output_dir / ("." + name + ".tmp");
  fs::remove_all(tmp_dir);
  fs::create_directories(tmp_dir);
  save_safetensors((tmp_dir / "model.safetensors").string(), model);
  save_safetensors((tmp_dir / "optimizer.safetensors").string(), optimizer);
  write_file_atomically(tmp_dir / "config.yaml", config_yaml);
  if (!vocab_file.empty())
    fs::copy_file(vocab_file, tmp_dir / vocab_file.filename(), fs::copy_options::overwrite_existing);
  // trainer_state.json last: its presence marks a finished checkpoint.
  write_file_atomically(tmp_dir / "trainer_state.json", state_to_json(state).dump(2) + "\n");
  if (fs::exists(final_dir)) fs::remove_all(final_dir);
  fs::rename(tmp_dir, final_dir);

  if (save_total_limit > 0) {
    std::vector<std::pair<int64_t, fs::path>> all;
    for (const auto& e : fs::directory_iterator(output_dir))
      if (auto step = checkpoint_step(e.path())) all.emplace_back(*step, e.path());
    std::sort(all.begin(), all.end());
    for (size_t i = 0; i + static_cast<size_t>(save_total_limit) < all.size(); ++i) fs::remove_all(all[i].second);
  }
  return final_dir;
}

Checkpoint load_checkpoint(const fs::path& dir) {
  TANDEM_CHECK(fs::is_directory(dir), "checkpoint {} does not exist", dir.string());
  const fs::path state_file = dir / "trainer_state.json";
  std::ifstream in(state_file);
  TANDEM_CHECK(in.good(), "checkpoint {} is incomplete: no trainer_state.json", dir.string());
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    TANDEM_FAIL("{}: invalid JSON: {}", state_file.string(), e.what());
  }
  Checkpoint c;
  c.dir = dir;
  c.state = state_from_json(j, state_file);
  c.model = load_safetensors((dir / "model.safetensors").string());
  c.optimizer = load_safetensors((dir / "optimizer.safetensors").string());
  return c;
}

std::optional<fs::path> latest_checkpoint(const fs::path& output_dir) {
  if (!fs::is_directory(output_dir)) return std::nullopt;
  std::optional<std::pair<int64_t, fs::path>> best;
  for (const auto& e : fs::directory_iterator(output_dir)) {
    auto step = checkpoint_step(e.path());
    if (step && (!best || *step > best->first)) best = std::make_pair(*step, e.path());
  }
  if (!best) return std::nullopt;
  return best->second;
}

}  // namespace tandem::train
