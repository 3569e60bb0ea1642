#include "train/setup.h"

#include "comm/init.h"
#include "core/check.h"
#include "core/stream.h"
#include "data/tfidf.h"
#include "ddp/powersgd_hook.h"
#include "optim/adamw.h"
#include "optim/sgd.h"

namespace tandem::train {

namespace {

// Weight decay for matrices only: biases and LayerNorm weights are not decayed
// (the usual transformer recipe, as in Hugging Face's Trainer).
std::vector<std::vector<Tensor>> decay_groups(const nn::Module& model) {
  std::vector<Tensor> decay, no_decay;
  for (const auto& [name, p] : model.named_parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  return {decay, no_decay};
}

}  // namespace

Device pick_device(const TrainConfig& c, int local_rank) {
  if (c.device == "cpu") return Device::cpu();
  if (c.device == "cuda") {
    TANDEM_CHECK(cuda::available(), "config: device is cuda but no CUDA device is present{}",
                 cuda::built_with_cuda() ? "" : " (this build has no CUDA)");
  }
  if (!cuda::available()) return Device::cpu();
  return Device::cuda(comm::device_for_local_rank(local_rank));
}

Device select_device(const TrainConfig& c, int local_rank) {
  const Device d = pick_device(c, local_rank);
  if (d.is_cuda()) cuda::set_device(d.index);
  return d;
}

DType compute_dtype(const TrainConfig& c) { return c.bf16 ? DType::BF16 : (c.fp16 ? DType::F16 : DType::F32); }

data::DatasetSpec dataset_spec(const TrainConfig& c, const std::string& split,
                               const std::vector<std::string>& class_names) {
  data::DatasetSpec s;
  s.format = c.data.format;
  s.split = split;
  s.class_names = class_names.empty() ? c.data.class_names : class_names;
  s.header = c.data.header;
  s.csv.delimiter = c.data.delimiter == "tab" ? '\t' : c.data.delimiter.at(0);
  s.csv.label_column = c.data.label_column;
  s.csv.text_columns = c.data.text_columns;
  s.text_field = c.data.text_field;
  s.label_field = c.data.label_field;
  s.categories = c.data.categories;
  s.test_fraction = c.data.test_fraction;
  s.split_seed = static_cast<uint64_t>(c.seed);
  if (c.data.format == "imdb") {
    s.path = c.data.train_path;  // the aclImdb folder holds both splits
  } else if (c.data.format == "fortunes") {
    s.path = c.data.train_path;  // empty: the Debian package's folder
  } else {
    s.path = split == "train" ? c.data.train_path : c.data.test_path;
    TANDEM_CHECK(!s.path.empty(), "config: data.{}_path is required for format {}", split, c.data.format);
  }
  return s;
}

data::TokenizerOptions tokenizer_options(const TrainConfig& c) {
  data::TokenizerOptions t;
  t.type = c.tokenizer.type;
  t.min_freq = c.data.vocab_min_freq;
  t.max_size = c.data.vocab_max_size;
  t.vocab_size = c.tokenizer.vocab_size;
  t.min_frequency = c.tokenizer.min_frequency;
  t.prepend_cls = true;
  t.lowercase = c.data.lowercase;
  t.char_ngrams = char_ngram_options(c);
  return t;
}

namespace {

// A split without examples, or training data of one class, failed later (in the sampler, in the
// model) without naming the data: name the key and the path it came from.
void check_split(const data::Dataset& d, const TrainConfig& c, const data::DatasetSpec& spec) {
  const bool one_source = c.data.format == "imdb" || c.data.format == "fortunes";  // both splits from train_path
  const std::string from = fmt::format("config: data.{}_path {}", one_source ? "train" : spec.split,
                                       spec.path.empty() ? "(the default folder)" : spec.path.string());
  TANDEM_CHECK(d.size() > 0, "{}: the {} split has no examples", from, spec.split);
  if (spec.split != "train") return;
  std::string names;
  for (const auto& n : d.class_names) names += fmt::format("{}'{}'", names.empty() ? "" : ", ", n);
  TANDEM_CHECK(d.num_classes() >= 2, "{}: a classifier needs at least two classes, the training data has {}{}", from,
               d.num_classes(), names.empty() ? "" : " (" + names + ")");
}

}  // namespace

TrainingData load_training_data(const TrainConfig& c, bool with_test) {
  TrainingData d;
  const data::DatasetSpec train_spec = dataset_spec(c, "train", {});
  d.train = std::make_shared<data::Dataset>(data::load_dataset(train_spec));
  d.train->validate();
  check_split(*d.train, c, train_spec);
  if (c.data.validation_fraction > 0) {
    // A seed apart from the test split's (fortunes splits its one corpus with the seed itself).
    auto [rest, validation] = data::split_train_test(*d.train, c.data.validation_fraction,
                                                     static_cast<uint64_t>(c.seed) + 1);
    TANDEM_CHECK(rest.size() > 0 && validation.size() > 0,
                 "config: data.validation_fraction {} of {} training examples leaves {} for training and {} to validate",
                 c.data.validation_fraction, d.train->size(), rest.size(), validation.size());
    d.train = std::make_shared<data::Dataset>(std::move(rest));
    d.validation = std::make_shared<data::Dataset>(std::move(validation));
  }
  if (with_test) {
    const data::DatasetSpec test_spec = dataset_spec(c, "test", d.train->class_names);
    d.test = std::make_shared<data::Dataset>(data::load_dataset(test_spec));
    d.test->validate();
    check_split(*d.test, c, test_spec);
  }
  d.tokenizer = std::make_shared<data::Tokenizer>(data::Tokenizer::build(*d.train, tokenizer_options(c)));
  return d;
}

data::SamplerOptions train_sampler_options(const TrainConfig& c, const data::BatchSource& source, int rank,
                                           int world_size) {
  data::SamplerOptions o;
  o.world_size = world_size;
  o.rank = rank;
  o.seed = static_cast<uint64_t>(c.seed);
  o.shuffle = true;
  if (c.group_by_length) {
    o.lengths = std::make_shared<const std::vector<int64_t>>(data::lengths_of(source));
    o.batch_size = c.per_device_train_batch_size;
  }
  return o;
}

data::DataLoaderOptions train_loader_options(const TrainConfig& c, Device device) {
  data::DataLoaderOptions o;
  o.batch_size = c.per_device_train_batch_size;
  o.num_workers = static_cast<int>(c.dataloader_num_workers);
  o.pin_memory = c.dataloader_pin_memory;
  o.device = device;
  o.timeout_seconds = static_cast<double>(c.ddp_timeout);
  o.padding = data::parse_padding(c.data.padding, "data.padding");
  o.pad_to_multiple_of = c.data.pad_to_multiple_of;
  return o;
}

namespace {

// The optimizer over groups of decay_groups' order: group 0 is decayed, group 1 is not.
std::unique_ptr<optim::Optimizer> optimizer_for(const TrainConfig& c,
                                                const std::vector<ddp::ZeroRedundancyOptimizer::ShardGroup>& groups) {
  if (c.optim == "sgd") {
    std::vector<optim::SGD::ParamGroup> g;
    for (const auto& [index, params] : groups) {
      optim::SGDOptions o;
      o.lr = c.learning_rate;
      o.momentum = c.momentum;
      o.weight_decay = index == 0 ? c.weight_decay : 0.0;
      g.push_back({params, o});
    }
    return std::make_unique<optim::SGD>(std::move(g));
  }
  std::vector<optim::AdamW::ParamGroup> g;
  for (const auto& [index, params] : groups) {
    optim::AdamWOptions o;
    o.lr = c.learning_rate;
    o.betas = {c.adam_beta1, c.adam_beta2};
    o.eps = c.adam_epsilon;
    o.weight_decay = index == 0 ? c.weight_decay : 0.0;
    g.push_back({params, o});
  }
  return std::make_unique<optim::AdamW>(std::move(g));
}

}  // namespace

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& c, const nn::Module& model) {
  auto groups = decay_groups(model);
  return optimizer_for(c, {{0, groups[0]}, {1, groups[1]}});
}

std::unique_ptr<ddp::ZeroRedundancyOptimizer> make_zero_optimizer(const TrainConfig& c, const nn::Module& model,
                                                                  std::shared_ptr<comm::ProcessGroup> group) {
  return std::make_unique<ddp::ZeroRedundancyOptimizer>(
      decay_groups(model), std::move(group), [&c](const auto& shard_groups) { return optimizer_for(c, shard_groups); },
      std::chrono::seconds(c.ddp_timeout));
}

namespace {

ddp::CommHook comm_hook(const std::string& name) {
  if (name == "fp16") return ddp::fp16_compress_hook();
  if (name == "bf16") return ddp::bf16_compress_hook();
  if (name == "powersgd") return ddp::powerSGD_hook();
  // "allreduce": no hook, DDP's built-in average, which divides each gradient
  // as it copies it into its bucket instead of the bucket again at launch.
  return {};
}

}  // namespace

nn::TextClassifierConfig model_config(const TrainConfig& c, int64_t vocab_size, int64_t num_classes) {
  nn::TextClassifierConfig mc;
  mc.vocab_size = vocab_size;
  mc.d_model = c.model.d_model;
  mc.n_heads = c.model.n_heads;
  mc.num_layers = c.model.num_layers;
  mc.dim_feedforward = c.model.dim_feedforward;
  mc.max_seq_len = c.model.max_seq_len;
  mc.num_classes = num_classes;
  mc.dropout = c.model.dropout;
  mc.pooling = nn::parse_pooling(c.model.pooling);
  mc.activation = nn::parse_activation(c.model.activation);
  mc.norm_first = c.model.norm_first;
  mc.position_embedding = c.model.position_embedding;
  mc.sublinear_tf = c.model.sublinear_tf;
  mc.embedding_init_std = c.model.embedding_init_std;
  return mc;
}

void fit_idf(nn::TextClassifier& model, const TrainConfig& c, const TrainingData& d) {
  if (model.config().pooling != nn::Pooling::TfIdf) return;
  model.set_idf(data::smoothed_idf(data::document_frequencies(*d.tokenizer, *d.train, c.model.max_seq_len)));
}

ddp::DDPOptions ddp_options(const TrainConfig& c) {
  ddp::DDPOptions d;
  d.bucket_cap_mb = c.ddp_bucket_cap_mb;
  d.gradient_as_bucket_view = c.ddp_gradient_as_bucket_view;
  d.find_unused_parameters = c.ddp_find_unused_parameters;
  d.static_graph = c.ddp_static_graph;
  d.timeout = std::chrono::seconds(c.ddp_timeout);
  d.comm_hook = comm_hook(c.ddp_comm_hook);
  d.comm_hook_name = c.ddp_comm_hook;
  if (c.ddp_comm_hook == "powersgd") {
    ddp::PowerSGDOptions p;
    p.matrix_approximation_rank = c.powersgd_rank;
    p.start_powerSGD_iter = c.powersgd_start_iter;
    p.min_compression_rate = c.powersgd_min_compression_rate;
    p.random_seed = static_cast<uint64_t>(c.seed);
    d.comm_hook_state = std::make_shared<ddp::PowerSGDState>(p);
  }
  return d;
}

nn::ForwardContext forward_context(const TrainConfig& c, int rank) {
  nn::ForwardContext ctx;
  ctx.compute_dtype = compute_dtype(c);
  ctx.seed = static_cast<uint64_t>(c.seed) * 1000003u + static_cast<uint64_t>(rank);  // distinct masks per rank
  return ctx;
}

StepOptions step_options(const TrainConfig& c) {
  StepOptions o;
  o.accumulation_steps = c.gradient_accumulation_steps;
  o.max_grad_norm = c.max_grad_norm;
  o.label_smoothing = c.label_smoothing_factor;
  o.zero_grad_to_none = !c.ddp_gradient_as_bucket_view;
  o.capturable = c.cuda_graph;
  return o;
}

std::vector<double> class_weights(const TrainConfig& c, const data::Dataset& train) {
  const auto classes = static_cast<size_t>(train.num_classes());
  if (c.class_weights == "none") return {};
  if (c.class_weights == "list") {
    std::string names;
    for (const auto& n : train.class_names) names += (names.empty() ? "" : ", ") + n;
    TANDEM_CHECK(c.class_weight_values.size() == classes,
                 "config: class_weights has {} values but the training data has {} classes ({})",
                 c.class_weight_values.size(), classes, names);
    return c.class_weight_values;
  }
  TANDEM_CHECK(c.class_weights == "balanced", "config: class_weights must be none, balanced or a list, got '{}'",
               c.class_weights);
  const std::vector<int64_t> count = train.class_counts();
  std::vector<double> w(classes);
  for (size_t k = 0; k < classes; ++k) {
    TANDEM_CHECK(count[k] > 0, "config: class_weights balanced: class '{}' has no training examples",
                 train.class_names[k]);
    w[k] = static_cast<double>(train.size()) / (static_cast<double>(classes) * static_cast<double>(count[k]));
  }
  return w;
}

}  // namespace tandem::train
