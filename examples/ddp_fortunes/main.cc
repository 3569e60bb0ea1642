// Train a small transformer to tell fortune cookies apart, with data-parallel
// ranks: what a user writes on top of an installed Tandem. Run it under
// `tandem launch --nproc-per-node 2 -- ./ddp_fortunes` (or torchrun, srun).
// Rank 0 prints the test accuracy next to the majority-class baseline.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "comm/init.h"
#include "core/autograd/grad_mode.h"
#include "data/data_loader.h"
#include "data/fortunes.h"
#include "ddp/distributed_data_parallel.h"
#include "kernels/cross_entropy.h"
#include "nn/transformer.h"
#include "optim/adamw.h"

using namespace tandem;

int main(int argc, char** argv) {
  const int epochs = argc > 1 ? std::atoi(argv[1]) : 8;
  try {
    auto group = comm::init_process_group("auto", comm::rank_info_from_env());
    const int rank = group->rank(), world = group->size();

    // Data: five fortune categories, 10% held out; each rank reads its share of every epoch.
    auto [train, test] = data::split_train_test(data::read_fortunes(data::default_fortune_categories()), 0.1, 7);
    auto train_set = std::make_shared<data::Dataset>(std::move(train));
    auto test_set = std::make_shared<data::Dataset>(std::move(test));
    auto tokenizer = std::make_shared<data::Tokenizer>(data::Tokenizer::build(*train_set, data::TokenizerOptions{}));
    const int64_t seq_len = 64;
    data::SamplerOptions sampling;
    sampling.world_size = world;
    sampling.rank = rank;
    data::DataLoaderOptions loading;
    loading.batch_size = 16;
    data::DataLoader loader(std::make_shared<data::TextClassificationSource>(train_set, tokenizer, seq_len),
                            data::DistributedSampler(train_set->size(), sampling), loading);

    // Model: every rank starts from rank 0's weights (DDP broadcasts them).
    nn::TextClassifierConfig config;
    config.vocab_size = tokenizer->vocab_size();
    config.num_classes = train_set->num_classes();
    config.max_seq_len = seq_len;
    config.d_model = 64;
    config.dim_feedforward = 128;
    auto model = std::make_shared<nn::TextClassifier>(config, /*seed=*/1);
    ddp::DistributedDataParallel ddp(model, group);
    optim::AdamWOptions adam;
    adam.lr = 1e-3;
    optim::AdamW optimizer(model->parameters(), adam);

    nn::ForwardContext ctx;
    for (int epoch = 0; epoch < epochs; ++epoch) {
      loader.start_epoch(epoch);
      while (auto batch = loader.next()) {
        Tensor logits = ddp.forward([&] { return model->forward(batch->ids, batch->mask, ctx); });
        kernels::cross_entropy(logits, batch->labels).backward();  // gradients are averaged over the ranks here
        optimizer.step();
        optimizer.zero_grad();
        ++ctx.step;
      }
    }

    if (rank == 0) {  // evaluation: the whole test split on rank 0, in order, no dropout
      model->train(false);
      NoGradGuard no_grad;
      data::SamplerOptions in_order;
      in_order.shuffle = false;
      data::DataLoader eval(std::make_shared<data::TextClassificationSource>(test_set, tokenizer, seq_len),
                            data::DistributedSampler(test_set->size(), in_order), loading);
      eval.start_epoch(0);
      int64_t correct = 0, total = 0;
      while (auto batch = eval.next()) {
        const std::vector<double> logits = model->forward(batch->ids, batch->mask, ctx).to_double_vector();
        const std::vector<int64_t> labels = batch->labels.to_int_vector();
        const auto classes = static_cast<std::ptrdiff_t>(config.num_classes);
        for (size_t i = 0; i < labels.size(); ++i) {
          auto row = logits.begin() + static_cast<std::ptrdiff_t>(i) * classes;
          correct += std::max_element(row, row + classes) - row == labels[i];
        }
        total += static_cast<int64_t>(labels.size());
      }
      fmt::print("ranks {}  epochs {}  test accuracy {:.4f}  (majority-class baseline {:.4f})\n", world, epochs,
                 static_cast<double>(correct) / static_cast<double>(total), test_set->majority_fraction());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_fortunes: %s\n", e.what());
    return 1;
  }
}
