// `tandem evaluate` and `tandem predict`: use a saved checkpoint.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "apps/commands.h"
#include "apps/saved_model.h"
#include "train/setup.h"
#include "train/evaluation.h"
#include "core/autograd/grad_mode.h"
#include "core/check.h"
#include "data/batch_padding.h"
#include "data/batch_source.h"
#include "data/dataset_spec.h"

namespace tandem::apps {

void add_evaluate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("evaluate", "Evaluate a checkpoint on the test split of its data (or another)");
  auto checkpoint = std::make_shared<std::string>();
  auto overrides = std::make_shared<std::vector<std::string>>();
  cmd->add_option("--checkpoint", *checkpoint, "checkpoint folder (output_dir/checkpoint-N)")->required();
  cmd->add_option("--set", *overrides, "override a saved config key, e.g. --set data.test_path=other.csv");
  cmd->callback([checkpoint, overrides] {
    SavedModel s = load_saved_model(*checkpoint, *overrides);
    auto test = std::make_shared<data::Dataset>(data::load_dataset(train::dataset_spec(s.config, "test", s.class_names)));
    test->validate();
    data::DataLoaderOptions lo;
    lo.batch_size = s.config.per_device_eval_batch_size;
    lo.device = s.device;
    lo.padding = data::parse_padding(s.config.data.padding, "data.padding");
    lo.pad_to_multiple_of = s.config.data.pad_to_multiple_of;
    data::SamplerOptions so;
    so.shuffle = false;
    data::DataLoader loader(std::make_shared<data::TextClassificationSource>(test, s.tokenizer, s.config.model.max_seq_len),
                            data::DistributedSampler(test->size(), so), lo);
    const train::EvalResult r = train::evaluate(*s.model, loader, train::compute_dtype(s.config),
                                                static_cast<int64_t>(s.class_names.size()));
    fmt::print("{} examples: accuracy {:.4f} (majority-class baseline {:.4f}), loss {:.4f}, macro-F1 {:.4f}\n",
               r.examples, r.accuracy, test->majority_fraction(), r.loss, r.macro_f1);
    for (size_t k = 0; k < s.class_names.size(); ++k)
      fmt::print("  {:<16} accuracy {:.4f}  precision {:.4f}  F1 {:.4f}\n", s.class_names[k], r.per_class_accuracy[k],
                 r.per_class_precision[k], r.per_class_f1[k]);
  });
}

void add_predict_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("predict", "Classify texts with a checkpoint");
  struct Args {
    std::string checkpoint, input;
    std::vector<std::string> texts, overrides;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("--checkpoint", args->checkpoint, "checkpoint folder")->required();
  cmd->add_option("--text", args->texts, "a text to classify (repeatable)");
  cmd->add_option("--input", args->input, "a file with one text per line");
  cmd->add_option("--set", args->overrides, "override a saved config key (e.g. device=cpu)");
  cmd->callback([args] {
    std::vector<std::string> texts = args->texts;
    if (!args->input.empty()) {
      // A directory opens as a stream that reads nothing: say so instead of "no texts".
      TANDEM_CHECK(!std::filesystem::is_directory(args->input), "predict: --input {} is a directory, not a file",
                   args->input);
      std::ifstream in(args->input);
      TANDEM_CHECK(in.good(), "cannot read {}", args->input);
      const size_t given = texts.size();
      for (std::string line; std::getline(in, line);)
        if (!line.empty()) texts.push_back(line);
      TANDEM_CHECK(texts.size() > given, "predict: --input {} has no texts (one per non-empty line)", args->input);
    }
    TANDEM_CHECK(!texts.empty(), "predict: give --text or --input");
    SavedModel s = load_saved_model(args->checkpoint, args->overrides);
    NoGradGuard no_grad;
    nn::ForwardContext ctx;
    ctx.compute_dtype = train::compute_dtype(s.config);
    const bool longest = data::parse_padding(s.config.data.padding, "data.padding") == data::Padding::Longest;
    const size_t c = s.class_names.size();
    // Batches of per_device_eval_batch_size texts, as evaluation runs: a file of any length is read
    // whole, but the model never sees more than one batch at a time.
    const auto batch = static_cast<size_t>(s.config.per_device_eval_batch_size);
    for (size_t first = 0; first < texts.size(); first += batch) {
      const std::vector<std::string> part(texts.begin() + static_cast<std::ptrdiff_t>(first),
                                          texts.begin() + static_cast<std::ptrdiff_t>(std::min(texts.size(), first + batch)));
      data::Encoding enc = s.tokenizer->encode_batch(part, s.config.model.max_seq_len);
      if (longest) {
        // As the saved config's loader did: the rows cut to the batch's longest text.
        const int64_t rows = enc.mask.size(0);
        const int64_t length = data::cut_to_longest(enc.ids.data_ptr(), dtype_size(enc.ids.dtype()),
                                                    enc.mask.data<uint8_t>(), rows, enc.mask.size(1),
                                                    s.config.data.pad_to_multiple_of);
        enc.ids = enc.ids.view_range(0, {rows, length});
        enc.mask = enc.mask.view_range(0, {rows, length});
      }
      Tensor logits = s.model->forward(enc.ids.to(s.device), enc.mask.to(s.device), ctx);
      std::vector<double> l = logits.to_double_vector();
      for (size_t i = 0; i < part.size(); ++i) {
        // Softmax on the host: a handful of numbers per text.
        double mx = l[i * c];
        for (size_t k = 1; k < c; ++k) mx = std::max(mx, l[i * c + k]);
        double z = 0;
        for (size_t k = 0; k < c; ++k) z += std::exp(l[i * c + k] - mx);
        size_t best = 0;
        for (size_t k = 1; k < c; ++k)
          if (l[i * c + k] > l[i * c + best]) best = k;
        fmt::print("{}\t{:.3f}\t{}\n", s.class_names[best], std::exp(l[i * c + best] - mx) / z, part[i]);
      }
    }
  });
}

}  // namespace tandem::apps
