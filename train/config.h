// The configuration of `tandem train`: a YAML file whose keys follow Hugging
// Face TrainingArguments where they overlap (per_device_train_batch_size,
// learning_rate, ddp_bucket_cap_mb, ...), plus `model:` and `data:` sections.
//
// Every key is declared once in a schema (train_config.cc) with its type and
// default: unknown keys and values of the wrong type are errors naming the
// file, line and key (with a suggestion for near misses), `--set key=value`
// overrides use the same parser (dotted keys reach into sections), and the
// resolved configuration can be written back as YAML.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/char_ngrams.h"

namespace tandem::train {

struct ModelConfig {
  int64_t d_model = 128;
  int64_t n_heads = 4;
  int64_t num_layers = 2;
  int64_t dim_feedforward = 256;
  int64_t max_seq_len = 128;
  double dropout = 0.1;
  // mean | cls | tfidf: TF-IDF weights (nn/transformer.h), idf from the training split, tf from
  // tokenizer.term_counts' counts (1 per token without them), L2-normalised per text.
  std::string pooling = "mean";
  std::string activation = "gelu";   // gelu | gelu_tanh | relu
  bool norm_first = false;           // post-norm (PyTorch's default) or pre-norm
  // false: no position table (a bag of n-grams has no order); with num_layers 0 the model is
  // fastText's: embedding bag (masked mean) and a linear head.
  bool position_embedding = true;
  bool sublinear_tf = true;          // pooling tfidf: tf = 1 + ln(count), else the count
  double embedding_init_std = 1.0;   // token/position embeddings from N(0, std^2); 1: PyTorch's default
};

struct DataConfig {
  std::string format = "fortunes";   // fortunes | ag_news | csv | imdb | jsonl | tsv
  std::string train_path;            // file or folder (unused for fortunes)
  std::string test_path;
  std::vector<std::string> categories;  // fortunes: which categories are the classes
  std::string text_field = "text";   // jsonl
  std::string label_field = "label"; // jsonl
  std::vector<std::string> class_names;  // ag_news: names of labels 1..N; csv/jsonl/tsv: the classes. Empty: from the data
  std::string delimiter = ",";       // csv: one character, or "tab"
  bool header = false;               // csv and tsv: the first line names the columns
  std::string label_column = "0";    // csv: header name or 0-based index
  std::vector<std::string> text_columns = {"1"};  // csv: header names or 0-based indices, joined with a space
  double test_fraction = 0.1;        // fortunes: held-out share
  // > 0: this share of the training split (per class) becomes the validation split, which the
  // periodic evaluations, load_best_model_at_end and early stopping use; the test split is then
  // evaluated once, at the end. 0: they use the test split.
  double validation_fraction = 0.0;
  int64_t vocab_min_freq = 2;
  int64_t vocab_max_size = 20000;
  bool lowercase = true;
  // How long a batch's rows are (Hugging Face's padding and pad_to_multiple_of; data/batch_padding.h):
  // max_length: model.max_seq_len, every batch the same shape; longest: the batch's longest text,
  // rounded up to a multiple of pad_to_multiple_of (at most model.max_seq_len). Training and
  // evaluation batches alike.
  std::string padding = "max_length";  // max_length | longest
  int64_t pad_to_multiple_of = 1;
};

// `tokenizer:` (data/tokenizer.h). type word uses data.vocab_min_freq/vocab_max_size;
// type bpe trains Hugging Face-compatible BPE on the training split (tokenizer.json);
// type char_ngrams hashes character n-grams into buckets (data/char_ngrams.h; data.lowercase applies).
struct TokenizerConfig {
  std::string type = "word";   // word | bpe | char_ngrams
  int64_t vocab_size = 8000;   // bpe: special tokens and alphabet included
  int64_t min_frequency = 2;   // bpe: pairs seen fewer times are not merged
  std::string analyzer = "char_wb";   // char_ngrams: char | char_wb (scikit-learn's analyzers)
  int64_t min_n = 2;                  // char_ngrams: shortest n-gram, in characters
  int64_t max_n = 5;                  // char_ngrams: longest n-gram
  int64_t buckets = int64_t{1} << 18;  // char_ngrams: hash buckets (ids after the 3 special tokens)
  int64_t word_ngrams = 0;            // char_ngrams: 0 none, 1 words, 2 words and word pairs
  bool distinct = true;               // char_ngrams: each id once per text
  bool term_counts = false;           // char_ngrams with distinct: each id's count (<= 255) in its mask entry
};

// cuda_graph with data.padding longest: the most graphs the padded lengths may need.
inline constexpr int64_t kMaxPaddedGraphs = 8;

struct TrainConfig {
  std::string output_dir = "runs/tandem";
  int64_t per_device_train_batch_size = 8;
  int64_t per_device_eval_batch_size = 8;
  int64_t gradient_accumulation_steps = 1;
  double num_train_epochs = 3.0;
  int64_t max_steps = -1;  // > 0 overrides num_train_epochs
  std::string optim = "adamw";  // adamw | sgd
  double learning_rate = 5e-5;
  double weight_decay = 0.0;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  double momentum = 0.9;  // sgd
  std::string lr_scheduler_type = "linear";  // linear | cosine | constant | constant_with_warmup
  int64_t warmup_steps = 0;
  double warmup_ratio = 0.0;
  double max_grad_norm = 1.0;  // 0 disables clipping
  double label_smoothing_factor = 0.0;
  // Class weights of the training loss (PyTorch's cross_entropy weight=): "none", "balanced"
  // (scikit-learn's n_samples / (n_classes * n_c), from the training split) or one positive
  // number per class, in the data's class order (class_weight_values). Evaluation losses stay unweighted.
  std::string class_weights = "none";  // none | balanced | list
  std::vector<double> class_weight_values;
  int64_t logging_steps = 500;
  std::string eval_strategy = "epoch";  // no | steps | epoch
  int64_t eval_steps = 500;
  int64_t save_steps = 500;  // <= 0: save only at the end
  int64_t save_total_limit = -1;  // <= 0: keep every checkpoint
  // Hugging Face's Trainer options for choosing the model: at each evaluation the best model so far
  // (by metric_for_best_model: loss, accuracy or macro_f1, "eval_" prefix optional; loss is better
  // lower, the others higher) is remembered, and the end of training goes back to it.
  bool load_best_model_at_end = false;
  std::string metric_for_best_model = "loss";
  // > 0: stop when that many evaluations in a row did not improve the metric by more than
  // early_stopping_threshold (transformers.EarlyStoppingCallback).
  int64_t early_stopping_patience = 0;
  double early_stopping_threshold = 0.0;
  int64_t seed = 42;
  bool bf16 = false;
  bool fp16 = false;
  std::string device = "auto";  // auto | cpu | cuda
  std::string ddp_backend = "auto";  // auto | ring | nccl
  double ddp_bucket_cap_mb = 25.0;
  // 1: ZeRO stage 1 at world size > 1 (ddp::ZeroRedundancyOptimizer: optimizer state sharded
  // over the ranks, gradients reduce-scattered after backward, parameters all-gathered after
  // the update) instead of DistributedDataParallel; the ddp_* bucket and hook keys then do not apply.
  int64_t zero_stage = 0;
  bool ddp_find_unused_parameters = false;
  bool ddp_gradient_as_bucket_view = false;
  bool ddp_static_graph = false;
  std::string ddp_comm_hook = "allreduce";  // allreduce | fp16 | bf16 | powersgd
  // ddp_comm_hook powersgd (ddp/powersgd_hook.h; PyTorch's PowerSGDState defaults):
  int64_t powersgd_rank = 1;                  // matrix_approximation_rank
  int64_t powersgd_start_iter = 1000;         // start_powerSGD_iter: plain all-reduce before it
  double powersgd_min_compression_rate = 2;   // compress a matrix only where this much is saved
  int64_t ddp_timeout = 300;  // seconds
  // Hugging Face's group_by_length: each epoch's shuffled order in megabatches of 50 batches
  // sorted by text length (data/length_grouping.h), so that data.padding longest cuts most of the
  // padding. The lengths come from tokenizing the training split once at start-up.
  bool group_by_length = false;
  int64_t dataloader_num_workers = 0;
  bool dataloader_pin_memory = true;
  // Step profiler (docs/profiling.md). Phase times go to the metrics at every
  // logging step regardless; these keys add a detailed window.
  int64_t profile_steps = 0;       // steps to record in detail (per-step records, summary); 0: none
  int64_t profile_skip_first = 2;  // steps to leave out before the window (warm-up, bucket rebuild)
  bool trace = false;              // Chrome trace of the window: trace_rank<R>.json, merged into trace.json
  std::string profile_dir;         // where profile and trace files go; empty: output_dir
  // One CUDA graph per training step (train/graph_step.h): the step is captured after a few eager
  // steps and replayed. GPU only, with NCCL or one process; not with ZeRO-1,
  // ddp_find_unused_parameters, ddp_static_graph or a comm hook other than allreduce.
  // With data.padding longest, a graph per sequence of micro-batch lengths: at most
  // kMaxPaddedGraphs of them (validate), since each keeps its own activation memory.
  bool cuda_graph = false;
  ModelConfig model;
  DataConfig data;
  TokenizerConfig tokenizer;
};

// Reads `path` (may be empty: all defaults), then applies each "key=value"
// override in order. Throws Error naming the file/line/key at fault.
TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides);
// Checks values and combinations (positive sizes, d_model divisible by n_heads,
// not both bf16 and fp16, ...); throws Error naming the key.
void validate(const TrainConfig& config);
// Every key with its resolved value, as YAML (sections as nested maps).
std::string to_yaml(const TrainConfig& config);
// The tokenizer section's char_ngrams keys (and data.lowercase) as data options.
data::CharNgramOptions char_ngram_options(const TrainConfig& config);
// All known keys, dotted ("model.d_model"), for help and suggestions.
std::vector<std::string> config_keys();

}  // namespace tandem::train
