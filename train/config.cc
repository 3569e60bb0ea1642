#include "train/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "core/check.h"

namespace tandem::train {

namespace {

// One schema entry: a dotted key, how to read a YAML scalar into the config,
// and how to write the current value back.
struct Field {
  std::string key;
  std::function<void(TrainConfig&, const YAML::Node&, const std::string& where)> set;
  std::function<void(const TrainConfig&, YAML::Emitter&)> emit;
};

template <class T>
const char* type_name() {
  if constexpr (std::is_same_v<T, bool>) return "true or false";
  else if constexpr (std::is_same_v<T, int64_t>) return "an integer";
  else if constexpr (std::is_same_v<T, double>) return "a number";
  else if constexpr (std::is_same_v<T, std::string>) return "a string";
  else return "a list of strings";
}

template <class T>
T read_value(const YAML::Node& node, const std::string& key, const std::string& where) {
  auto bad = [&]() -> Error {
    std::string got = node.IsScalar() ? "'" + node.Scalar() + "'" : (node.IsSequence() ? "a list" : "a map");
    return Error(fmt::format("{}: key '{}' must be {}, got {}", where, key, type_name<T>(), got));
  };
  if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    if (!node.IsSequence()) throw bad();
    std::vector<std::string> out;
    for (const auto& item : node) {
      if (!item.IsScalar()) throw bad();
      out.push_back(item.Scalar());
    }
    return out;
  } else {
    if (!node.IsScalar()) throw bad();
    if constexpr (std::is_same_v<T, std::string>) {
      return node.Scalar();
    } else {
      // yaml-cpp would accept 1.5 as an integer by truncation: reject that explicitly.
      if constexpr (std::is_same_v<T, int64_t>) {
        const std::string& s = node.Scalar();
        if (s.find_first_of(".eE") != std::string::npos && s.rfind("0x", 0) != 0) throw bad();
      }
      T v{};
      if (!YAML::convert<T>::decode(node, v)) throw bad();
      // YAML reads .inf and .nan as numbers; no key means anything by them, and downstream they
      // overflow step counts or turn into NaN far from the key.
      if constexpr (std::is_same_v<T, double>) {
        if (!std::isfinite(v))
          throw Error(fmt::format("{}: key '{}' must be a finite number, got '{}'", where, key, node.Scalar()));
      }
      return v;
    }
  }
}

template <class T>
Field field(std::string key, std::function<T&(TrainConfig&)> member, std::vector<std::string> choices = {}) {
  Field f;
  f.key = key;
  f.set = [key, member, choices](TrainConfig& c, const YAML::Node& node, const std::string& where) {
    T v = read_value<T>(node, key, where);
    if constexpr (std::is_same_v<T, std::string>) {
      if (!choices.empty() && std::find(choices.begin(), choices.end(), v) == choices.end()) {
        std::string list;
        for (const auto& ch : choices) list += (list.empty() ? "" : ", ") + ch;
        throw Error(fmt::format("{}: key '{}' must be one of {}, got '{}'", where, key, list, v));
      }
    }
    member(c) = std::move(v);
  };
  f.emit = [member](const TrainConfig& c, YAML::Emitter& out) {
    const T& v = member(const_cast<TrainConfig&>(c));
    if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      out << YAML::Flow << YAML::BeginSeq;
      for (const auto& s : v) out << s;
      out << YAML::EndSeq;
    } else {
      out << v;
    }
  };
  return f;
}

// class_weights: the word none or balanced, or a list of numbers (one per class).
Field class_weights_field() {
  Field f;
  f.key = "class_weights";
  f.set = [](TrainConfig& c, const YAML::Node& node, const std::string& where) {
    if (node.IsScalar() && (node.Scalar() == "none" || node.Scalar() == "balanced")) {
      c.class_weights = node.Scalar();
      c.class_weight_values.clear();
      return;
    }
    std::vector<double> values;
    if (node.IsSequence()) {
      for (size_t i = 0; i < node.size(); ++i) {
        double v = 0;
        if (!node[i].IsScalar() || !YAML::convert<double>::decode(node[i], v) || !std::isfinite(v) || v <= 0)
          throw Error(fmt::format("{}: key 'class_weights': entry {} must be a positive number, got '{}'", where, i,
                                  node[i].IsScalar() ? node[i].Scalar() : "a list or map"));
        values.push_back(v);
      }
    }
    if (values.empty())
      throw Error(fmt::format("{}: key 'class_weights' must be none, balanced or a list of positive numbers (one per "
                              "class), got {}",
                              where, node.IsScalar() ? "'" + node.Scalar() + "'" : "an empty list or a map"));
    c.class_weights = "list";
    c.class_weight_values = std::move(values);
  };
  f.emit = [](const TrainConfig& c, YAML::Emitter& out) {
    if (c.class_weights != "list") {
      out << c.class_weights;
      return;
    }
    out << YAML::Flow << YAML::BeginSeq;
    for (double v : c.class_weight_values) out << v;
    out << YAML::EndSeq;
  };
  return f;
}

#define TOP(T, name, ...) field<T>(#name, [](TrainConfig& c) -> T& { return c.name; } __VA_OPT__(, ) __VA_ARGS__)
#define MODEL(T, name, ...) field<T>("model." #name, [](TrainConfig& c) -> T& { return c.model.name; } __VA_OPT__(, ) __VA_ARGS__)
#define DATA(T, name, ...) field<T>("data." #name, [](TrainConfig& c) -> T& { return c.data.name; } __VA_OPT__(, ) __VA_ARGS__)
#define TOKENIZER(T, name, ...) field<T>("tokenizer." #name, [](TrainConfig& c) -> T& { return c.tokenizer.name; } __VA_OPT__(, ) __VA_ARGS__)

const std::vector<Field>& schema() {
  using S = std::string;
  using L = std::vector<std::string>;
  static const std::vector<Field> fields = {
      TOP(S, output_dir),
      TOP(int64_t, per_device_train_batch_size),
      TOP(int64_t, per_device_eval_batch_size),
      TOP(int64_t, gradient_accumulation_steps),
      TOP(double, num_train_epochs),
      TOP(int64_t, max_steps),
      TOP(S, optim, {"adamw", "sgd"}),
      TOP(double, learning_rate),
      TOP(double, weight_decay),
      TOP(double, adam_beta1),
      TOP(double, adam_beta2),
      TOP(double, adam_epsilon),
      TOP(double, momentum),
      TOP(S, lr_scheduler_type, {"linear", "cosine", "constant", "constant_with_warmup"}),
      TOP(int64_t, warmup_steps),
      TOP(double, warmup_ratio),
      TOP(double, max_grad_norm),
      TOP(double, label_smoothing_factor),
      class_weights_field(),
      TOP(int64_t, logging_steps),
      TOP(S, eval_strategy, {"no", "steps", "epoch"}),
      TOP(int64_t, eval_steps),
      TOP(int64_t, save_steps),
      TOP(int64_t, save_total_limit),
      TOP(bool, load_best_model_at_end),
      TOP(S, metric_for_best_model, {"loss", "accuracy", "macro_f1", "eval_loss", "eval_accuracy", "eval_macro_f1"}),
      TOP(int64_t, early_stopping_patience),
      TOP(double, early_stopping_threshold),
      TOP(int64_t, seed),
      TOP(bool, bf16),
      TOP(bool, fp16),
      TOP(S, device, {"auto", "cpu", "cuda"}),
      TOP(S, ddp_backend, {"auto", "ring", "nccl"}),
      TOP(double, ddp_bucket_cap_mb),
      TOP(int64_t, zero_stage),
      TOP(bool, ddp_find_unused_parameters),
      TOP(bool, ddp_gradient_as_bucket_view),
      TOP(bool, ddp_static_graph),
      TOP(S, ddp_comm_hook, {"allreduce", "fp16", "bf16", "powersgd"}),
      TOP(int64_t, powersgd_rank),
      TOP(int64_t, powersgd_start_iter),
      TOP(double, powersgd_min_compression_rate),
      TOP(int64_t, ddp_timeout),
      TOP(bool, group_by_length),
      TOP(int64_t, dataloader_num_workers),
      TOP(bool, dataloader_pin_memory),
      TOP(int64_t, profile_steps),
      TOP(int64_t, profile_skip_first),
      TOP(bool, trace),
      TOP(S, profile_dir),
      TOP(bool, cuda_graph),
      MODEL(int64_t, d_model),
      MODEL(int64_t, n_heads),
      MODEL(int64_t, num_layers),
      MODEL(int64_t, dim_feedforward),
      MODEL(int64_t, max_seq_len),
      MODEL(double, dropout),
      MODEL(S, pooling, {"mean", "cls", "tfidf"}),
      MODEL(S, activation, {"gelu", "gelu_tanh", "relu"}),
      MODEL(bool, norm_first),
      MODEL(bool, position_embedding),
      MODEL(bool, sublinear_tf),
      MODEL(double, embedding_init_std),
      DATA(S, format, {"fortunes", "ag_news", "csv", "imdb", "jsonl", "tsv"}),
      DATA(S, train_path),
      DATA(S, test_path),
      DATA(L, categories),
      DATA(S, text_field),
      DATA(S, label_field),
      DATA(L, class_names),
      DATA(S, delimiter),
      DATA(bool, header),
      DATA(S, label_column),
      DATA(L, text_columns),
      DATA(double, test_fraction),
      DATA(double, validation_fraction),
      DATA(int64_t, vocab_min_freq),
      DATA(int64_t, vocab_max_size),
      DATA(bool, lowercase),
      DATA(S, padding, {"max_length", "longest"}),
      DATA(int64_t, pad_to_multiple_of),
      TOKENIZER(S, type, {"word", "bpe", "char_ngrams"}),
      TOKENIZER(int64_t, vocab_size),
      TOKENIZER(int64_t, min_frequency),
      TOKENIZER(S, analyzer, {"char", "char_wb"}),
      TOKENIZER(int64_t, min_n),
      TOKENIZER(int64_t, max_n),
      TOKENIZER(int64_t, buckets),
      TOKENIZER(int64_t, word_ngrams),
      TOKENIZER(bool, distinct),
      TOKENIZER(bool, term_counts),
  };
  return fields;
}

#undef TOP
#undef MODEL
#undef DATA
#undef TOKENIZER

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string suggestion(const std::string& key) {
  std::string best;
  size_t best_d = 4;  // suggest only near misses
  for (const Field& f : schema()) {
    size_t d = edit_distance(key, f.key);
    // A key given without its section ("d_model") matches "model.d_model".
    if (f.key.size() > key.size() && f.key.compare(f.key.size() - key.size(), key.size(), key) == 0 &&
        f.key[f.key.size() - key.size() - 1] == '.')
      d = 1;
    if (d < best_d) {
      best_d = d;
      best = f.key;
    }
  }
  return best.empty() ? "" : fmt::format(" (did you mean '{}'?)", best);
}

const Field& find_field(const std::string& key, const std::string& where) {
  for (const Field& f : schema())
    if (f.key == key) return f;
  throw Error(fmt::format("{}: unknown key '{}'{}", where, key, suggestion(key)));
}

std::string where_of(const std::string& file, const YAML::Node& node) {
  return fmt::format("{}:{}", file, node.Mark().line + 1);
}

void apply_map(TrainConfig& c, const YAML::Node& map, const std::string& prefix, const std::string& file) {
  // yaml-cpp keeps both entries of a repeated key and the later one silently
  // wins; a config that sets a value twice is a mistake worth naming.
  std::map<std::string, int> first_line;
  for (const auto& entry : map) {
    // Copies: yaml-cpp's iterator hands out a temporary pair, so references into it dangle.
    const YAML::Node key_node = entry.first, value = entry.second;
    if (!key_node.IsScalar())
      throw Error(fmt::format("{}: a key must be a name, got {}", where_of(file, key_node),
                              key_node.IsSequence() ? "a list" : "a map"));
    const std::string key = prefix + key_node.Scalar();
    if (const auto [at, fresh] = first_line.emplace(key, key_node.Mark().line + 1); !fresh)
      throw Error(fmt::format("{}: key '{}' is set twice (first at line {})", where_of(file, key_node), key,
                              at->second));
    if ((key == "model" || key == "data" || key == "tokenizer") && prefix.empty()) {
      if (!value.IsMap()) throw Error(fmt::format("{}: section '{}' must be a map", where_of(file, key_node), key));
      apply_map(c, value, key + ".", file);
      continue;
    }
    find_field(key, where_of(file, key_node)).set(c, value, where_of(file, value));
  }
}

// One factor of a tensor's element count: a config key and its value, or (key empty) a constant.
struct Factor {
  std::string key;
  int64_t value;
};

// Refuses a tensor whose f32 bytes overflow or pass 256 TiB (no machine holds that), naming the
// keys that size it: downstream, such counts wrapped around or failed far from the key.
void check_tensor_bytes(const std::string& what, const std::vector<Factor>& factors) {
  constexpr int64_t kMaxBytes = int64_t{1} << 48;
  int64_t bytes = 4;
  bool overflow = false;
  for (const Factor& f : factors) overflow = overflow || __builtin_mul_overflow(bytes, f.value, &bytes);
  if (!overflow && bytes <= kMaxBytes) return;
  std::string sizes;
  for (const Factor& f : factors)
    sizes += fmt::format("{}{}", sizes.empty() ? "" : " x ", f.key.empty() ? std::to_string(f.value)
                                                                           : fmt::format("{} {}", f.key, f.value));
  TANDEM_FAIL("config: {} ({} floats) would take more than 256 TiB", what, sizes);
}

// The model's largest tensors and a batch's largest activations, from the keys that size them
// (each already > 0). The vocabulary is bounded by the tokenizer's size key.
void check_model_sizes(const TrainConfig& c) {
  const ModelConfig& m = c.model;
  const Factor vocab = c.tokenizer.type == "bpe"           ? Factor{"tokenizer.vocab_size", c.tokenizer.vocab_size}
                       : c.tokenizer.type == "char_ngrams" ? Factor{"tokenizer.buckets", c.tokenizer.buckets}
                                                           : Factor{"data.vocab_max_size", c.data.vocab_max_size};
  const Factor d{"model.d_model", m.d_model}, ff{"model.dim_feedforward", m.dim_feedforward},
      seq{"model.max_seq_len", m.max_seq_len};
  check_tensor_bytes("the token embeddings", {vocab, d});
  if (m.position_embedding) check_tensor_bytes("the position embeddings", {seq, d});
  if (m.num_layers > 0) {
    check_tensor_bytes("each layer's attention projection", {{"", 3}, d, d});
    check_tensor_bytes("each layer's feed-forward weights", {ff, d});
  }
  const Factor widest = m.num_layers > 0 && m.dim_feedforward > m.d_model ? ff : d;
  check_tensor_bytes("a training batch's activations",
                     {{"per_device_train_batch_size", c.per_device_train_batch_size}, seq, widest});
  check_tensor_bytes("an evaluation batch's activations",
                     {{"per_device_eval_batch_size", c.per_device_eval_batch_size}, seq, widest});
  // Each factor fits now, so one layer's weights do too.
  if (m.num_layers > 0)
    check_tensor_bytes("the encoder's weights", {{"model.num_layers", m.num_layers},
                                                  {"", 4 * m.d_model * m.d_model + 2 * m.d_model * m.dim_feedforward}});
}

}  // namespace

std::vector<std::string> config_keys() {
  std::vector<std::string> keys;
  for (const Field& f : schema()) keys.push_back(f.key);
  return keys;
}

TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides) {
  TrainConfig c;
  if (!path.empty()) {
    YAML::Node root;
    // yaml-cpp reads a directory as a stream that fails with the C++ library's words, not the path.
    if (std::filesystem::is_directory(path))
      throw Error(fmt::format("cannot read config file {}: it is a directory", path));
    try {
      root = YAML::LoadFile(path);
    } catch (const YAML::BadFile&) {
      throw Error(fmt::format("cannot read config file {}", path));
    } catch (const YAML::ParserException& e) {
      throw Error(fmt::format("{}:{}: invalid YAML: {}", path, e.mark.line + 1, e.msg));
    }
    if (!root.IsNull()) {
      if (!root.IsMap()) throw Error(fmt::format("{}: the config must be a map of keys to values", path));
      apply_map(c, root, "", path);
    }
  }
  for (const std::string& o : overrides) {
    const size_t eq = o.find('=');
    const std::string where = fmt::format("--set {}", o);
    if (eq == std::string::npos || eq == 0) throw Error(fmt::format("{}: expected key=value", where));
    const std::string key = o.substr(0, eq);
    YAML::Node value;
    try {
      value = YAML::Load(o.substr(eq + 1));
    } catch (const YAML::ParserException& e) {
      throw Error(fmt::format("{}: invalid value: {}", where, e.msg));
    }
    if (value.IsNull()) value = YAML::Node(std::string());
    find_field(key, where).set(c, value, where);
  }
  return c;
}

data::CharNgramOptions char_ngram_options(const TrainConfig& c) {
  data::CharNgramOptions o;
  o.analyzer = c.tokenizer.analyzer;
  o.min_n = c.tokenizer.min_n;
  o.max_n = c.tokenizer.max_n;
  o.buckets = c.tokenizer.buckets;
  o.word_ngrams = c.tokenizer.word_ngrams;
  o.lowercase = c.data.lowercase;
  o.distinct = c.tokenizer.distinct;
  o.term_counts = c.tokenizer.term_counts;
  return o;
}

void validate(const TrainConfig& c) {
  auto positive = [](int64_t v, const char* key) { TANDEM_CHECK(v > 0, "config: {} must be > 0, got {}", key, v); };
  positive(c.per_device_train_batch_size, "per_device_train_batch_size");
  positive(c.per_device_eval_batch_size, "per_device_eval_batch_size");
  positive(c.gradient_accumulation_steps, "gradient_accumulation_steps");
  positive(c.logging_steps, "logging_steps");
  positive(c.model.d_model, "model.d_model");
  positive(c.model.n_heads, "model.n_heads");
  TANDEM_CHECK(c.model.num_layers >= 0, "config: model.num_layers must be >= 0, got {}", c.model.num_layers);
  positive(c.model.dim_feedforward, "model.dim_feedforward");
  positive(c.model.max_seq_len, "model.max_seq_len");
  positive(c.data.vocab_max_size, "data.vocab_max_size");
  TANDEM_CHECK(c.max_steps > 0 || c.num_train_epochs > 0, "config: num_train_epochs must be > 0 (or set max_steps)");
  check_model_sizes(c);
  TANDEM_CHECK(c.model.d_model % c.model.n_heads == 0, "config: model.d_model ({}) must be divisible by model.n_heads ({})",
               c.model.d_model, c.model.n_heads);
  TANDEM_CHECK(c.model.embedding_init_std > 0, "config: model.embedding_init_std must be > 0, got {}",
               c.model.embedding_init_std);
  TANDEM_CHECK(c.model.dropout >= 0 && c.model.dropout < 1, "config: model.dropout must be in [0, 1), got {}",
               c.model.dropout);
  TANDEM_CHECK(!(c.bf16 && c.fp16), "config: bf16 and fp16 cannot both be true");
  TANDEM_CHECK(c.learning_rate > 0, "config: learning_rate must be > 0, got {}", c.learning_rate);
  TANDEM_CHECK(c.weight_decay >= 0, "config: weight_decay must be >= 0, got {}", c.weight_decay);
  TANDEM_CHECK(c.max_grad_norm >= 0, "config: max_grad_norm must be >= 0 (0: no clipping), got {}", c.max_grad_norm);
  // The optimizer checks these too, but under its own names (beta1, eps).
  TANDEM_CHECK(c.adam_beta1 >= 0 && c.adam_beta1 < 1, "config: adam_beta1 must be in [0, 1), got {}", c.adam_beta1);
  TANDEM_CHECK(c.adam_beta2 >= 0 && c.adam_beta2 < 1, "config: adam_beta2 must be in [0, 1), got {}", c.adam_beta2);
  TANDEM_CHECK(c.adam_epsilon >= 0, "config: adam_epsilon must be >= 0, got {}", c.adam_epsilon);
  TANDEM_CHECK(c.data.vocab_min_freq >= 1, "config: data.vocab_min_freq must be at least 1, got {}",
               c.data.vocab_min_freq);
  TANDEM_CHECK(c.warmup_ratio >= 0 && c.warmup_ratio <= 1, "config: warmup_ratio must be in [0, 1], got {}",
               c.warmup_ratio);
  TANDEM_CHECK(c.warmup_steps >= 0, "config: warmup_steps must be >= 0, got {}", c.warmup_steps);
  TANDEM_CHECK(c.label_smoothing_factor >= 0 && c.label_smoothing_factor < 1,
               "config: label_smoothing_factor must be in [0, 1), got {}", c.label_smoothing_factor);
  TANDEM_CHECK(c.ddp_bucket_cap_mb >= 0, "config: ddp_bucket_cap_mb must be >= 0, got {}", c.ddp_bucket_cap_mb);
  TANDEM_CHECK(c.zero_stage == 0 || c.zero_stage == 1, "config: zero_stage must be 0 or 1, got {}", c.zero_stage);
  TANDEM_CHECK(c.zero_stage == 0 || !c.fp16,
               "config: zero_stage 1 does not support fp16 loss scaling yet (use bf16 or f32)");
  TANDEM_CHECK(c.zero_stage == 0 || c.ddp_comm_hook == "allreduce",
               "config: ddp_comm_hook {} does not apply with zero_stage 1 (its gradients are reduce-scattered)",
               c.ddp_comm_hook);
  TANDEM_CHECK(c.powersgd_rank >= 1, "config: powersgd_rank must be >= 1, got {}", c.powersgd_rank);
  TANDEM_CHECK(c.powersgd_start_iter > 1,
               "config: powersgd_start_iter must be > 1, got {} (error feedback and warm start keep memory per "
               "bucket, and DDP rebuilds its buckets after the first iteration)",
               c.powersgd_start_iter);
  TANDEM_CHECK(c.powersgd_min_compression_rate >= 0, "config: powersgd_min_compression_rate must be >= 0, got {}",
               c.powersgd_min_compression_rate);
  TANDEM_CHECK(c.ddp_comm_hook != "powersgd" || !c.fp16,
               "config: ddp_comm_hook powersgd does not apply with fp16: the inf/NaN gradients of a skipped step "
               "would enter its error feedback (use bf16 or f32)");
  // Deadlines are nanoseconds of a 64-bit clock (292 years); 10^9 s still takes the huge values
  // Hugging Face recipes use for "never" (180000000).
  TANDEM_CHECK(c.ddp_timeout > 0 && c.ddp_timeout <= 1'000'000'000,
               "config: ddp_timeout must be in [1, 1000000000] seconds, got {}", c.ddp_timeout);
  TANDEM_CHECK(c.dataloader_num_workers >= 0, "config: dataloader_num_workers must be >= 0, got {}",
               c.dataloader_num_workers);
  TANDEM_CHECK(c.eval_strategy != "steps" || c.eval_steps > 0, "config: eval_steps must be > 0 with eval_strategy steps");
  TANDEM_CHECK(c.data.test_fraction > 0 && c.data.test_fraction < 1, "config: data.test_fraction must be in (0, 1), got {}",
               c.data.test_fraction);
  TANDEM_CHECK(c.data.validation_fraction >= 0 && c.data.validation_fraction < 1,
               "config: data.validation_fraction must be in [0, 1), got {}", c.data.validation_fraction);
  TANDEM_CHECK(c.early_stopping_patience >= 0, "config: early_stopping_patience must be >= 0, got {}",
               c.early_stopping_patience);
  TANDEM_CHECK(c.early_stopping_threshold >= 0, "config: early_stopping_threshold must be >= 0, got {}",
               c.early_stopping_threshold);
  TANDEM_CHECK((!c.load_best_model_at_end && c.early_stopping_patience == 0) || c.eval_strategy != "no",
               "config: {} needs evaluations: set eval_strategy to epoch or steps",
               c.load_best_model_at_end ? "load_best_model_at_end" : "early_stopping_patience");
  TANDEM_CHECK(!c.output_dir.empty(), "config: output_dir must not be empty");
  TANDEM_CHECK(c.data.delimiter == "tab" || c.data.delimiter.size() == 1,
               "config: data.delimiter must be one character or \"tab\", got '{}'", c.data.delimiter);
  // The quote and line ends have their own meaning in a CSV row (data/csv.h).
  TANDEM_CHECK(c.data.delimiter != "\"" && c.data.delimiter != "\n" && c.data.delimiter != "\r",
               "config: data.delimiter cannot be the quote or a line end, got '{}'", c.data.delimiter);
  for (size_t i = 0; i < c.data.class_names.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      TANDEM_CHECK(c.data.class_names[i] != c.data.class_names[j],
                   "config: data.class_names names '{}' twice (classes {} and {})", c.data.class_names[i], j, i);
  TANDEM_CHECK(!c.data.text_columns.empty(), "config: data.text_columns must name at least one column");
  TANDEM_CHECK(c.data.pad_to_multiple_of >= 1, "config: data.pad_to_multiple_of must be at least 1, got {}",
               c.data.pad_to_multiple_of);
  positive(c.tokenizer.vocab_size, "tokenizer.vocab_size");
  TANDEM_CHECK(c.tokenizer.min_frequency >= 0, "config: tokenizer.min_frequency must be >= 0, got {}",
               c.tokenizer.min_frequency);
  if (c.tokenizer.type == "char_ngrams") data::validate(char_ngram_options(c));
  TANDEM_CHECK(!c.tokenizer.term_counts || c.tokenizer.type == "char_ngrams",
               "config: tokenizer.term_counts applies to tokenizer.type char_ngrams, not {}", c.tokenizer.type);
  TANDEM_CHECK(c.profile_steps >= 0, "config: profile_steps must be >= 0, got {}", c.profile_steps);
  TANDEM_CHECK(c.profile_skip_first >= 0, "config: profile_skip_first must be >= 0, got {}", c.profile_skip_first);
  TANDEM_CHECK(!c.trace || c.profile_steps > 0,
               "config: trace: true needs profile_steps > 0 (how many steps the trace covers)");
  if (c.cuda_graph) {
    // What a captured step cannot contain (train/graph_step.h); the device and backend that
    // "auto" picks are checked again when the step is built.
    auto refuse = [](bool bad, const std::string& why) {
      TANDEM_CHECK(!bad, "config: cuda_graph: true {}", why);
    };
    refuse(c.device == "cpu", "needs a GPU (device is cpu)");
    refuse(c.ddp_backend == "ring",
           "needs ddp_backend nccl (or one process): the ring backend reduces on host threads, which a graph cannot "
           "capture");
    refuse(c.zero_stage != 0, "does not support zero_stage 1");
    refuse(c.ddp_find_unused_parameters,
           "does not support ddp_find_unused_parameters (DDP reads the used-parameter map on the host every step)");
    refuse(c.ddp_static_graph, "does not support ddp_static_graph (DDP reads the used-parameter map on the host)");
    if (c.data.padding == "longest") {
      // A graph per sequence of micro-batch shapes, each holding its own activations: the
      // lengths a batch can have, to the power of the micro-batches in a step.
      const int64_t lengths = (c.model.max_seq_len + c.data.pad_to_multiple_of - 1) / c.data.pad_to_multiple_of;
      double graphs = 1;
      for (int64_t i = 0; i < c.gradient_accumulation_steps; ++i) graphs *= static_cast<double>(lengths);
      refuse(graphs > kMaxPaddedGraphs,
             fmt::format("with data.padding longest captures a graph for each sequence of micro-batch lengths, "
                         "each with its own activation memory: {} length(s) (model.max_seq_len {} in steps of "
                         "data.pad_to_multiple_of {}) to the power of gradient_accumulation_steps {} is more than "
                         "{} graphs; raise data.pad_to_multiple_of",
                         lengths, c.model.max_seq_len, c.data.pad_to_multiple_of, c.gradient_accumulation_steps,
                         kMaxPaddedGraphs));
    }
    refuse(c.ddp_comm_hook != "allreduce",
           fmt::format("needs ddp_comm_hook allreduce, got {} (the compression hooks keep per-step buffers alive "
                       "across steps; powersgd also keeps host state)",
                       c.ddp_comm_hook));
  }
}

std::string to_yaml(const TrainConfig& c) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  std::string open_section;
  for (const Field& f : schema()) {
    const size_t dot = f.key.find('.');
    const std::string section = dot == std::string::npos ? "" : f.key.substr(0, dot);
    if (section != open_section) {
      if (!open_section.empty()) out << YAML::EndMap;
      if (!section.empty()) out << YAML::Key << section << YAML::Value << YAML::BeginMap;
      open_section = section;
    }
    out << YAML::Key << (dot == std::string::npos ? f.key : f.key.substr(dot + 1)) << YAML::Value;
    f.emit(c, out);
  }
  if (!open_section.empty()) out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace tandem::train
