// The pieces of a training job built from a TrainConfig, shared by the
// trainer, the benchmarks (which time steps with exactly the trainer's data,
// model, optimizer and DDP settings) and `tandem bench export-data`: one
// place for each of them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "train/config.h"
#include "core/device.h"
#include "core/dtype.h"
#include "data/data_loader.h"
#include "data/dataset_spec.h"
#include "data/tokenizer.h"
#include "ddp/distributed_data_parallel.h"
#include "ddp/zero_redundancy_optimizer.h"
#include "nn/transformer.h"
#include "optim/optimizer.h"
#include "train/step.h"

namespace tandem::train {

// device: cpu, cuda (an error without one) or auto; CUDA ranks use GPU local_rank % count.
Device pick_device(const TrainConfig& c, int local_rank);
// pick_device, made this thread's device when it is a GPU. Call it before the
// process group is created, as PyTorch's init_process_group(device_id=...):
// NCCL's init and the ring's staging then never touch another rank's GPU.
Device select_device(const TrainConfig& c, int local_rank);
// f32, or bf16/f16 when the config asks for mixed precision.
DType compute_dtype(const TrainConfig& c);
// The reader spec of a split ("train" or "test"); class_names fixes the label set (the train split's).
data::DatasetSpec dataset_spec(const TrainConfig& c, const std::string& split,
                               const std::vector<std::string>& class_names);
// The tokenizer section (and data.vocab_*, data.lowercase) as builder options; [CLS] always first.
data::TokenizerOptions tokenizer_options(const TrainConfig& c);
// The training split, the validation split (data.validation_fraction of the training split,
// per class, when > 0), the test split (when asked for; its labels follow the training split's
// classes), all validated, and the tokenizer built from what remains for training: every rank
// builds the same one.
struct TrainingData {
  std::shared_ptr<data::Dataset> train, validation, test;  // validation: null without one
  std::shared_ptr<data::Tokenizer> tokenizer;
};
TrainingData load_training_data(const TrainConfig& c, bool with_test = true);
// The training split's sampler (shuffled, seeded) for `rank` of `world_size`; with
// group_by_length, grouped by the lengths of `source`'s rows (each example tokenized once).
data::SamplerOptions train_sampler_options(const TrainConfig& c, const data::BatchSource& source, int rank,
                                           int world_size);
// The training loader's options (batch size, workers, pinning, timeout, padding) on `device`.
data::DataLoaderOptions train_loader_options(const TrainConfig& c, Device device);
nn::TextClassifierConfig model_config(const TrainConfig& c, int64_t vocab_size, int64_t num_classes);
// model.pooling tfidf: the training split's idf (data/tfidf.h, over the encodings at
// model.max_seq_len) into the model's buffer; any other pooling: nothing. Every rank computes
// the same values; call it before DDP broadcasts the buffers, and not for a model loaded from a
// checkpoint (its idf is in the checkpoint).
void fit_idf(nn::TextClassifier& model, const TrainConfig& c, const TrainingData& d);
// AdamW or SGD; weight decay on matrices only (biases and LayerNorm weights are not decayed).
std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& c, const nn::Module& model);
// zero_stage 1: the same optimizer, sharded over `group`'s ranks (ZeRO-1).
std::unique_ptr<ddp::ZeroRedundancyOptimizer> make_zero_optimizer(const TrainConfig& c, const nn::Module& model,
                                                                  std::shared_ptr<comm::ProcessGroup> group);
// The DDP options of ddp_* keys; the comm hook allreduce | fp16 | bf16 | powersgd (with a
// PowerSGDState of the powersgd_* keys, seeded by `seed`).
ddp::DDPOptions ddp_options(const TrainConfig& c);
// The compute dtype and this rank's dropout seed.
nn::ForwardContext forward_context(const TrainConfig& c, int rank);
// Accumulation, clipping, label smoothing; zero_grad keeps bucket-view gradients.
// (Class weights depend on the data: see class_weights.)
StepOptions step_options(const TrainConfig& c);
// The training loss's class weights, in the training split's class order: empty for
// class_weights none; balanced: n / (classes * n_c) over the training split (scikit-learn's
// class_weight="balanced"); a list: checked against the number of classes.
std::vector<double> class_weights(const TrainConfig& c, const data::Dataset& train);

}  // namespace tandem::train
