#include "train/results.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "train/checkpoint.h"

namespace tandem::train {

void write_train_results(const std::filesystem::path& output_dir, const TrainResult& r, int world_size,
                         const std::string& backend) {
  nlohmann::json j = {{"steps", r.steps},
                      {"train_loss", r.train_loss},
                      {"eval_loss", r.eval.loss},
                      {"eval_accuracy", r.eval.accuracy},
                      {"eval_macro_f1", r.eval.macro_f1},
                      {"eval_per_class_accuracy", r.eval.per_class_accuracy},
                      {"eval_per_class_precision", r.eval.per_class_precision},
                      {"eval_per_class_f1", r.eval.per_class_f1},
                      {"class_names", r.class_names},
                      {"majority_baseline", r.majority_baseline},
                      {"train_seconds", r.seconds},
                      {"samples_per_second", r.samples_per_second},
                      {"world_size", world_size},
                      {"stopped_early", r.stopped_early},
                      {"early_stopped", r.early_stopped},
                      {"weight_checksums", r.weight_checksums},
                      {"optimizer_state_bytes", r.optimizer_state_bytes},
                      {"backend", backend}};
  if (!r.class_weights.empty()) j["class_weights"] = r.class_weights;
  if (r.comm_hook_numel_before > 0)
    j["comm_hook_elements"] = {{"before", r.comm_hook_numel_before},
                               {"sent", r.comm_hook_numel_after},
                               {"rate", static_cast<double>(r.comm_hook_numel_before) /
                                            static_cast<double>(std::max<int64_t>(r.comm_hook_numel_after, 1))}};
  if (r.best_step >= 0)
    j["best_model"] = {{"step", r.best_step}, {"metric", r.metric_for_best_model}, {"value", r.best_metric}};
  write_file_atomically(output_dir / "results.json", j.dump(2) + "\n");
}

}  // namespace tandem::train
