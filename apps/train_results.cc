#include "apps/train_results.h"

#include <nlohmann/json.hpp>

#include "apps/checkpoint.h"

namespace tandem::apps {

void write_train_results(const std::filesystem::path& output_dir, const TrainResult& r, int world_size,
                         const std::string& backend) {
  nlohmann::json j = {{"steps", r.steps},
                      {"train_loss", r.train_loss},
                      {"eval_loss", r.eval.loss},
                      {"eval_accuracy", r.eval.accuracy},
                      {"eval_per_class_accuracy", r.eval.per_class_accuracy},
                      {"class_names", r.class_names},
                      {"majority_baseline", r.majority_baseline},
                      {"train_seconds", r.seconds},
                      {"samples_per_second", r.samples_per_second},
                      {"world_size", world_size},
                      {"stopped_early", r.stopped_early},
                      {"weight_checksums", r.weight_checksums},
                      {"backend", backend}};
  write_file_atomically(output_dir / "results.json", j.dump(2) + "\n");
}

}  // namespace tandem::apps
