// The pieces of a training job built from a TrainConfig, shared by the
// trainer and the benchmarks (which time steps with exactly the trainer's
// model, optimizer and DDP settings).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "apps/train_config.h"
#include "core/device.h"
#include "core/dtype.h"
#include "data/dataset_spec.h"
#include "data/tokenizer.h"
#include "ddp/distributed_data_parallel.h"
#include "nn/transformer.h"
#include "optim/optimizer.h"

namespace tandem::apps {

// device: cpu, cuda (an error without one) or auto; CUDA ranks use GPU local_rank % count.
Device pick_device(const TrainConfig& c, int local_rank);
// f32, or bf16/f16 when the config asks for mixed precision.
DType compute_dtype(const TrainConfig& c);
// The reader spec of a split ("train" or "test"); class_names fixes the label set (the train split's).
data::DatasetSpec dataset_spec(const TrainConfig& c, const std::string& split,
                               const std::vector<std::string>& class_names);
// The tokenizer section (and data.vocab_*, data.lowercase) as builder options; [CLS] always first.
data::TokenizerOptions tokenizer_options(const TrainConfig& c);
nn::TextClassifierConfig model_config(const TrainConfig& c, int64_t vocab_size, int64_t num_classes);
// AdamW or SGD; weight decay on matrices only (biases and LayerNorm weights are not decayed).
std::unique_ptr<Optimizer> make_optimizer(const TrainConfig& c, const nn::Module& model);
// allreduce | fp16 | bf16
ddp::CommHook comm_hook(const std::string& name);
ddp::DDPOptions ddp_options(const TrainConfig& c);

}  // namespace tandem::apps
