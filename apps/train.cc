// `tandem train`: one rank of a training job (alone, or under tandem launch,
// torchrun --no-python, srun or mpirun, which the rank environment reveals).
#include <fmt/format.h>

#include "apps/commands.h"
#include "train/results.h"
#include "train/setup.h"
#include "train/trainer.h"
#include "comm/init.h"

namespace tandem::apps {

void add_train_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("train", "Train a text classifier (with DDP when started by a launcher)");
  struct Args {
    std::string config;
    std::vector<std::string> overrides;
    std::string resume;
    int64_t stop_after = 0;
    bool quiet = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("--config", args->config, "YAML config (keys as in Hugging Face TrainingArguments)");
  cmd->add_option("--set", args->overrides, "override a key: --set learning_rate=3e-4 --set model.d_model=256");
  cmd->add_option("--resume", args->resume, "continue from 'latest' or a checkpoint folder");
  cmd->add_option("--stop-after", args->stop_after,
                  "stop after this many optimizer steps, saving a checkpoint that --resume continues from");
  cmd->add_flag("--quiet", args->quiet, "no progress output");
  cmd->callback([args] {
    train::TrainConfig config = train::load_train_config(args->config, args->overrides);
    validate(config);
    comm::RankInfo info = comm::rank_info_from_env();
    std::shared_ptr<comm::ProcessGroup> group;
    if (info.world_size > 1) {
      train::select_device(config, info.local_rank);  // before the group: no context on another rank's GPU
      comm::ProcessGroupOptions o;
      o.timeout = std::chrono::seconds(config.ddp_timeout);
      group = comm::init_process_group(config.ddp_backend, info, o);
    }
    train::TrainerOptions options;
    options.resume = args->resume;
    options.quiet = args->quiet;
    options.stop_after_steps = args->stop_after;
    train::TrainResult r = train::train(config, group, options);
    if (info.rank != 0) return;
    train::write_train_results(config.output_dir, r, info.world_size, group ? group->backend_name() : "none");
    if (r.stopped_early) {
      if (!args->quiet) fmt::print("\nstopped after step {}; continue with --resume latest\n", r.steps);
      return;
    }
    if (!args->quiet) {
      fmt::print("\ntest accuracy {:.4f} (majority-class baseline {:.4f}), test loss {:.4f}, macro-F1 {:.4f}\n",
                 r.eval.accuracy, r.majority_baseline, r.eval.loss, r.eval.macro_f1);
      for (size_t k = 0; k < r.class_names.size(); ++k)
        fmt::print("  {:<16} accuracy {:.4f}  precision {:.4f}  F1 {:.4f}\n", r.class_names[k],
                   r.eval.per_class_accuracy[k], r.eval.per_class_precision[k], r.eval.per_class_f1[k]);
      if (r.early_stopped) fmt::print("early stopping ended training at step {}\n", r.steps);
      if (r.best_step >= 0)
        fmt::print("best model: step {} ({} {:.4f}){}\n", r.best_step, r.metric_for_best_model, r.best_metric,
                   config.load_best_model_at_end ? ", loaded" : "");
      fmt::print("{} steps in {:.1f} s ({:.0f} samples/s over {} rank(s)); results in {}/results.json\n", r.steps,
                 r.seconds, r.samples_per_second, info.world_size, config.output_dir);
    }
  });
}

}  // namespace tandem::apps
