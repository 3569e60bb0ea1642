#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "train/config.h"
#include "train/setup.h"
#include "core/check.h"

namespace tandem::train {
namespace {

std::string write_config(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TrainConfig, DefaultsFollowHuggingFaceTrainingArguments) {
  TrainConfig c = load_train_config("", {});
  EXPECT_EQ(c.per_device_train_batch_size, 8);
  EXPECT_DOUBLE_EQ(c.learning_rate, 5e-5);
  EXPECT_DOUBLE_EQ(c.ddp_bucket_cap_mb, 25.0);
  EXPECT_EQ(c.lr_scheduler_type, "linear");
  EXPECT_EQ(c.seed, 42);
}

TEST(TrainConfig, ReadsTopLevelKeysAndSections) {
  auto path = write_config("a.yaml",
                           "per_device_train_batch_size: 32\nlearning_rate: 1e-3\nbf16: true\n"
                           "model:\n  d_model: 256\n  n_heads: 8\ndata:\n  format: fortunes\n  categories: [art, food]\n");
  TrainConfig c = load_train_config(path, {});
  EXPECT_EQ(c.per_device_train_batch_size, 32);
  EXPECT_DOUBLE_EQ(c.learning_rate, 1e-3);
  EXPECT_TRUE(c.bf16);
  EXPECT_EQ(c.model.d_model, 256);
  EXPECT_EQ(c.data.categories, (std::vector<std::string>{"art", "food"}));
}

TEST(TrainConfig, TokenizerSectionDefaultsToWordAndReadsBpeSettings) {
  EXPECT_EQ(load_train_config("", {}).tokenizer.type, "word");
  auto path = write_config("tok.yaml", "tokenizer:\n  type: bpe\n  vocab_size: 4000\n  min_frequency: 3\n");
  TrainConfig c = load_train_config(path, {});
  EXPECT_EQ(c.tokenizer.type, "bpe");
  EXPECT_EQ(c.tokenizer.vocab_size, 4000);
  data::TokenizerOptions t = tokenizer_options(c);
  EXPECT_EQ(t.type, "bpe");
  EXPECT_EQ(t.vocab_size, 4000);
  EXPECT_EQ(t.min_frequency, 3);
  std::string e = error_of([&] { load_train_config("", {"tokenizer.type=wordpiece"}); });
  EXPECT_NE(e.find("key 'tokenizer.type' must be one of word, bpe, char_ngrams, got 'wordpiece'"), std::string::npos) << e;
}

TEST(TrainConfig, CsvKeysReachTheDatasetSpec) {
  auto path = write_config("csv.yaml",
                           "data:\n  format: csv\n  train_path: tr.tsv\n  test_path: te.tsv\n  delimiter: tab\n"
                           "  header: true\n  label_column: topic\n  text_columns: [title, body]\n"
                           "  class_names: [a, b]\n");
  TrainConfig c = load_train_config(path, {});
  validate(c);
  data::DatasetSpec s = dataset_spec(c, "train", {});
  EXPECT_EQ(s.path, "tr.tsv");
  EXPECT_EQ(s.csv.delimiter, '\t');
  EXPECT_TRUE(s.header);
  EXPECT_EQ(s.csv.label_column, "topic");
  EXPECT_EQ(s.csv.text_columns, (std::vector<std::string>{"title", "body"}));
  EXPECT_EQ(s.class_names, (std::vector<std::string>{"a", "b"}));
  // The test split takes the train split's classes.
  EXPECT_EQ(dataset_spec(c, "test", {"x", "y", "z"}).class_names, (std::vector<std::string>{"x", "y", "z"}));
  c.data.delimiter = ";;";
  std::string e = error_of([&] { validate(c); });
  EXPECT_NE(e.find("data.delimiter must be one character or \"tab\", got ';;'"), std::string::npos) << e;
}

TEST(TrainConfig, OverridesApplyAfterTheFileAndReachIntoSections) {
  auto path = write_config("b.yaml", "learning_rate: 1e-3\nmodel:\n  d_model: 64\n");
  TrainConfig c = load_train_config(path, {"learning_rate=3e-4", "model.d_model=32", "data.categories=[a, b]"});
  EXPECT_DOUBLE_EQ(c.learning_rate, 3e-4);
  EXPECT_EQ(c.model.d_model, 32);
  EXPECT_EQ(c.data.categories.size(), 2u);
}

TEST(TrainConfig, UnknownKeyIsAnErrorWithFileLineAndSuggestion) {
  auto path = write_config("c.yaml", "seed: 1\nlearning_rat: 0.1\n");
  std::string e = error_of([&] { load_train_config(path, {}); });
  EXPECT_NE(e.find("c.yaml:2"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'learning_rat'"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'learning_rate'"), std::string::npos) << e;
}

TEST(TrainConfig, KeyOutsideItsSectionSuggestsTheSection) {
  std::string e = error_of([&] { load_train_config("", {"d_model=3"}); });
  EXPECT_NE(e.find("did you mean 'model.d_model'"), std::string::npos) << e;
}

TEST(TrainConfig, WrongTypeIsAnErrorNamingKeyAndExpectedType) {
  auto path = write_config("d.yaml", "per_device_train_batch_size: many\n");
  std::string e = error_of([&] { load_train_config(path, {}); });
  EXPECT_NE(e.find("d.yaml:1"), std::string::npos) << e;
  EXPECT_NE(e.find("'per_device_train_batch_size' must be an integer, got 'many'"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { load_train_config("", {"per_device_train_batch_size=1.5"}); }).find("an integer"),
            std::string::npos);
  EXPECT_NE(error_of([&] { load_train_config("", {"bf16=maybe"}); }).find("true or false"), std::string::npos);
  EXPECT_NE(error_of([&] { load_train_config("", {"model=3"}); }).find("unknown key 'model'"), std::string::npos);
}

TEST(TrainConfig, ValueOutsideTheChoicesListsThem) {
  std::string e = error_of([&] { load_train_config("", {"lr_scheduler_type=step"}); });
  EXPECT_NE(e.find("must be one of linear, cosine, constant, constant_with_warmup"), std::string::npos) << e;
}

TEST(TrainConfig, MalformedYamlNamesTheLine) {
  auto path = write_config("e.yaml", "seed: 1\nmodel: [unclosed\n");
  std::string e = error_of([&] { load_train_config(path, {}); });
  EXPECT_NE(e.find("e.yaml:"), std::string::npos) << e;
  EXPECT_NE(e.find("invalid YAML"), std::string::npos) << e;
}

TEST(TrainConfig, MissingFileIsAnError) {
  EXPECT_NE(error_of([] { load_train_config("/nonexistent/x.yaml", {}); }).find("/nonexistent/x.yaml"),
            std::string::npos);
}

TEST(TrainConfig, ADirectoryGivenAsTheConfigIsAnErrorNamingIt) {
  const std::string dir = ::testing::TempDir();
  EXPECT_NE(error_of([&] { load_train_config(dir, {}); }).find("cannot read config file " + dir + ": it is a directory"),
            std::string::npos);
}

TEST(TrainConfig, AKeyThatIsAListOrMapIsAnErrorNamingTheFileAndLine) {
  auto path = write_config("list_key.yaml", "seed: 1\n? [a, b]\n: 1\n");
  EXPECT_NE(error_of([&] { load_train_config(path, {}); }).find("list_key.yaml:2: a key must be a name, got a list"),
            std::string::npos)
      << error_of([&] { load_train_config(path, {}); });
  path = write_config("map_key.yaml", "model:\n  ? {a: 1}\n  : 1\n");
  EXPECT_NE(error_of([&] { load_train_config(path, {}); }).find("map_key.yaml:2: a key must be a name, got a map"),
            std::string::npos)
      << error_of([&] { load_train_config(path, {}); });
}

TEST(TrainConfig, AKeySetTwiceIsAnErrorNamingBothLines) {
  auto path = write_config("twice.yaml", "seed: 1\nlearning_rate: 0.1\nmodel:\n  d_model: 8\nlearning_rate: 0.2\n");
  EXPECT_NE(error_of([&] { load_train_config(path, {}); })
                .find("twice.yaml:5: key 'learning_rate' is set twice (first at line 2)"),
            std::string::npos)
      << error_of([&] { load_train_config(path, {}); });
  path = write_config("twice_in_section.yaml", "model:\n  d_model: 8\n  d_model: 16\n");
  EXPECT_NE(error_of([&] { load_train_config(path, {}); })
                .find("twice_in_section.yaml:3: key 'model.d_model' is set twice (first at line 2)"),
            std::string::npos)
      << error_of([&] { load_train_config(path, {}); });
  // An override on the command line replaces the file's value, as always.
  path = write_config("once.yaml", "learning_rate: 0.1\n");
  EXPECT_DOUBLE_EQ(load_train_config(path, {"learning_rate=0.2"}).learning_rate, 0.2);
}

TEST(TrainConfig, AClassNamedTwiceOrAQuoteAsDelimiterIsAnErrorNamingIt) {
  TrainConfig c = load_train_config("", {"data.class_names=[a, b, a]"});
  EXPECT_NE(error_of([&] { validate(c); }).find("data.class_names names 'a' twice (classes 0 and 2)"),
            std::string::npos)
      << error_of([&] { validate(c); });
  c = TrainConfig{};
  c.data.delimiter = "\"";
  EXPECT_NE(error_of([&] { validate(c); }).find("data.delimiter cannot be the quote or a line end, got '\"'"),
            std::string::npos)
      << error_of([&] { validate(c); });
}

TEST(TrainConfig, OptimizerAndVocabularySettingsAreCheckedUnderTheirConfigNames) {
  for (const auto& [set, message] : std::vector<std::pair<std::string, std::string>>{
           {"adam_beta1=1", "config: adam_beta1 must be in [0, 1), got 1"},
           {"adam_beta2=-0.5", "config: adam_beta2 must be in [0, 1), got -0.5"},
           {"adam_epsilon=-1", "config: adam_epsilon must be >= 0, got -1"},
           {"data.vocab_min_freq=0", "config: data.vocab_min_freq must be at least 1, got 0"}}) {
    TrainConfig c = load_train_config("", {set});
    EXPECT_NE(error_of([&] { validate(c); }).find(message), std::string::npos) << error_of([&] { validate(c); });
  }
}

TEST(TrainConfig, MalformedOverrideIsAnError) {
  EXPECT_NE(error_of([] { load_train_config("", {"seed"}); }).find("expected key=value"), std::string::npos);
}

TEST(TrainConfig, ValidationRejectsInconsistentSettings) {
  TrainConfig c;
  c.model.d_model = 130;
  c.model.n_heads = 4;
  EXPECT_NE(error_of([&] { validate(c); }).find("divisible"), std::string::npos);
  c = TrainConfig();
  c.bf16 = c.fp16 = true;
  EXPECT_NE(error_of([&] { validate(c); }).find("bf16 and fp16"), std::string::npos);
  c = TrainConfig();
  c.per_device_train_batch_size = 0;
  EXPECT_NE(error_of([&] { validate(c); }).find("per_device_train_batch_size"), std::string::npos);
  EXPECT_NO_THROW(validate(TrainConfig()));
}

// The validation message for `sets` applied to the defaults ("" when valid).
std::string validation_error(const std::vector<std::string>& sets) {
  return error_of([&] { validate(load_train_config("", sets)); });
}

TEST(TrainConfig, SizesWhoseBytesOverflowAreErrorsNamingTheKeyAndValue) {
  EXPECT_NE(validation_error({"model.dim_feedforward=576460752303423488"})
                .find("each layer's feed-forward weights (model.dim_feedforward 576460752303423488 x model.d_model "
                      "128 floats) would take more than 256 TiB"),
            std::string::npos)
      << validation_error({"model.dim_feedforward=576460752303423488"});
  EXPECT_NE(validation_error({"model.max_seq_len=576460752303423488"})
                .find("the position embeddings (model.max_seq_len 576460752303423488 x model.d_model 128 floats)"),
            std::string::npos);
  EXPECT_NE(validation_error({"model.d_model=576460752303423488", "model.n_heads=1"})
                .find("the token embeddings (data.vocab_max_size 20000 x model.d_model 576460752303423488 floats)"),
            std::string::npos);
}

TEST(TrainConfig, SequenceLengthWithoutPositionEmbeddingsIsBoundedByTheBatchActivations) {
  EXPECT_NE(validation_error({"model.max_seq_len=4611686018427387904", "model.position_embedding=false"})
                .find("a training batch's activations (per_device_train_batch_size 8 x model.max_seq_len "
                      "4611686018427387904 x model.dim_feedforward 256 floats)"),
            std::string::npos);
}

TEST(TrainConfig, LayerCountWhoseWeightsPassTheLimitIsAnErrorNamingIt) {
  EXPECT_NE(validation_error({"model.num_layers=1099511627776"}).find("the encoder's weights (model.num_layers 1099511627776"),
            std::string::npos);
}

TEST(TrainConfig, LargeButPossibleSizesAreAccepted) {
  EXPECT_EQ(validation_error({"model.d_model=4096", "model.n_heads=32", "model.dim_feedforward=16384",
                              "model.max_seq_len=8192", "model.num_layers=48"}),
            "");
}

TEST(TrainConfig, InfiniteOrNanNumbersAreErrorsNamingTheKey) {
  const std::vector<std::string> sets = {"learning_rate=.inf", "weight_decay=.inf", "max_grad_norm=.nan",
                                         "num_train_epochs=.inf", "ddp_bucket_cap_mb=-.inf"};
  for (const std::string& set : sets) {
    const std::string key = set.substr(0, set.find('='));
    EXPECT_NE(error_of([&] { load_train_config("", {set}); })
                  .find(fmt::format("--set {}: key '{}' must be a finite number, got '{}'", set, key,
                                    set.substr(set.find('=') + 1))),
              std::string::npos)
        << set;
  }
}

TEST(TrainConfig, HugeFiniteLearningRateIsAccepted) { EXPECT_EQ(validation_error({"learning_rate=1e30"}), ""); }

TEST(TrainConfig, NegativeMaxGradNormIsAnErrorAndZeroMeansNoClipping) {
  EXPECT_NE(validation_error({"max_grad_norm=-1"}).find("max_grad_norm must be >= 0 (0: no clipping), got -1"),
            std::string::npos);
  EXPECT_EQ(validation_error({"max_grad_norm=0"}), "");
}

TEST(TrainConfig, DdpTimeoutOutsideItsRangeIsAnErrorNamingTheRange) {
  EXPECT_NE(validation_error({"ddp_timeout=10000000000"})
                .find("ddp_timeout must be in [1, 1000000000] seconds, got 10000000000"),
            std::string::npos);
  EXPECT_EQ(validation_error({"ddp_timeout=180000000"}), "");
}

TEST(TrainConfig, ChoosingTheModelNeedsEvaluations) {
  TrainConfig c = load_train_config("", {"eval_strategy=no", "load_best_model_at_end=true"});
  EXPECT_NE(error_of([&] { validate(c); }).find("load_best_model_at_end needs evaluations"), std::string::npos);
  c = load_train_config("", {"eval_strategy=no", "early_stopping_patience=2"});
  EXPECT_NE(error_of([&] { validate(c); }).find("early_stopping_patience needs evaluations"), std::string::npos);
  EXPECT_NO_THROW(validate(load_train_config("", {"load_best_model_at_end=true", "early_stopping_patience=2"})));
}

TEST(TrainConfig, MetricForBestModelAcceptsHuggingFaceNames) {
  EXPECT_EQ(load_train_config("", {"metric_for_best_model=eval_accuracy"}).metric_for_best_model, "eval_accuracy");
  EXPECT_NE(error_of([] { load_train_config("", {"metric_for_best_model=f1"}); }).find("macro_f1"), std::string::npos);
}

TEST(TrainConfig, ValidationFractionMustLeaveTrainingData) {
  TrainConfig c = load_train_config("", {"data.validation_fraction=1"});
  EXPECT_NE(error_of([&] { validate(c); }).find("data.validation_fraction"), std::string::npos);
}

data::Dataset dataset_with_counts(const std::vector<int64_t>& counts) {
  data::Dataset d;
  for (size_t k = 0; k < counts.size(); ++k) {
    d.class_names.push_back("class" + std::to_string(k));
    for (int64_t i = 0; i < counts[k]; ++i) d.examples.push_back({"text", static_cast<int32_t>(k), "mem:1"});
  }
  return d;
}

TEST(TrainConfig, ZeroStageIsZeroOrOneAndRefusesFp16AndCompressionHooks) {
  EXPECT_EQ(load_train_config("", {}).zero_stage, 0);
  validate(load_train_config("", {"zero_stage=1", "bf16=true"}));
  EXPECT_NE(error_of([] { validate(load_train_config("", {"zero_stage=2"})); }).find("zero_stage must be 0 or 1, got 2"),
            std::string::npos);
  EXPECT_NE(error_of([] { validate(load_train_config("", {"zero_stage=1", "fp16=true"})); }).find("fp16"),
            std::string::npos);
  EXPECT_NE(error_of([] { validate(load_train_config("", {"zero_stage=1", "ddp_comm_hook=bf16"})); })
                .find("ddp_comm_hook bf16 does not apply with zero_stage 1"),
            std::string::npos);
}

TEST(TrainConfig, CudaGraphIsOffByDefaultAndMakesTheStepCapturable) {
  const TrainConfig off = load_train_config("", {});
  EXPECT_FALSE(off.cuda_graph);
  EXPECT_FALSE(step_options(off).capturable);
  const TrainConfig on = load_train_config(
      "", {"cuda_graph=true", "ddp_gradient_as_bucket_view=true", "gradient_accumulation_steps=4", "fp16=true"});
  validate(on);
  EXPECT_TRUE(step_options(on).capturable);
}

TEST(TrainConfig, CudaGraphRefusesWhatCannotBeCapturedNamingTheKey) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"device=cpu", "needs a GPU"},
      {"ddp_backend=ring", "ddp_backend nccl"},
      {"zero_stage=1", "zero_stage 1"},
      {"ddp_find_unused_parameters=true", "ddp_find_unused_parameters"},
      {"ddp_static_graph=true", "ddp_static_graph"},
      {"ddp_comm_hook=powersgd", "ddp_comm_hook allreduce, got powersgd"},
      {"ddp_comm_hook=bf16", "ddp_comm_hook allreduce, got bf16"},
  };
  for (const auto& [setting, why] : refused) {
    validate(load_train_config("", {setting}));  // fine without cuda_graph
    const std::string e = error_of([&] { validate(load_train_config("", {"cuda_graph=true", setting})); });
    EXPECT_NE(e.find("cuda_graph"), std::string::npos) << setting << ": " << e;
    EXPECT_NE(e.find(why), std::string::npos) << setting << ": " << e;
  }
}

TEST(TrainConfig, PaddingIsMaxLengthByDefaultAndItsKeysReachTheLoaderAndSampler) {
  const TrainConfig off = load_train_config("", {});
  EXPECT_EQ(train_loader_options(off, Device::cpu()).padding, data::Padding::MaxLength);
  const TrainConfig on = load_train_config(
      "", {"data.padding=longest", "data.pad_to_multiple_of=8", "group_by_length=true", "per_device_train_batch_size=3"});
  validate(on);
  const data::DataLoaderOptions lo = train_loader_options(on, Device::cpu());
  EXPECT_EQ(lo.padding, data::Padding::Longest);
  EXPECT_EQ(lo.pad_to_multiple_of, 8);
  EXPECT_TRUE(on.group_by_length);
}

TEST(TrainConfig, BadPaddingValuesAreErrorsNamingTheKey) {
  EXPECT_NE(error_of([] { load_train_config("", {"data.padding=shortest"}); }).find("data.padding"), std::string::npos);
  EXPECT_NE(validation_error({"data.pad_to_multiple_of=0"}).find("data.pad_to_multiple_of must be at least 1"),
            std::string::npos);
}

TEST(TrainConfig, CudaGraphWithLongestPaddingRefusesMoreGraphsThanItsLimitNamingPadToMultipleOf) {
  // model.max_seq_len 128 in steps of 16: 8 lengths, one graph each: at the limit.
  EXPECT_EQ(validation_error({"cuda_graph=true", "data.padding=longest", "model.max_seq_len=128",
                              "data.pad_to_multiple_of=16"}),
            "");
  const std::string e = validation_error(
      {"cuda_graph=true", "data.padding=longest", "model.max_seq_len=128", "data.pad_to_multiple_of=8"});
  EXPECT_NE(e.find("16 length(s)"), std::string::npos) << e;
  EXPECT_NE(e.find("raise data.pad_to_multiple_of"), std::string::npos) << e;
  // Two micro-batches per step: 4 lengths make 16 sequences of them.
  EXPECT_NE(validation_error({"cuda_graph=true", "data.padding=longest", "model.max_seq_len=128",
                              "data.pad_to_multiple_of=32", "gradient_accumulation_steps=2"})
                .find("gradient_accumulation_steps 2"),
            std::string::npos);
  EXPECT_EQ(validation_error({"cuda_graph=true", "model.max_seq_len=128"}), "");  // max_length: one graph
}

TEST(TrainConfig, CharNgramTokenizerKeysReachTheTokenizerAndBadValuesNameTheKey) {
  const TrainConfig c = load_train_config("", {"tokenizer.type=char_ngrams", "tokenizer.analyzer=char",
                                               "tokenizer.min_n=1", "tokenizer.max_n=4", "tokenizer.buckets=1024",
                                               "tokenizer.word_ngrams=2", "data.lowercase=false",
                                               "model.num_layers=0", "model.position_embedding=false"});
  validate(c);
  const data::CharNgramOptions o = char_ngram_options(c);
  EXPECT_EQ(o.analyzer, "char");
  EXPECT_EQ(o.min_n, 1);
  EXPECT_EQ(o.max_n, 4);
  EXPECT_EQ(o.buckets, 1024);
  EXPECT_EQ(o.word_ngrams, 2);
  EXPECT_FALSE(o.lowercase);
  EXPECT_NE(error_of([] { validate(load_train_config("", {"tokenizer.type=char_ngrams", "tokenizer.max_n=40"})); })
                .find("tokenizer.max_n"),
            std::string::npos);
  EXPECT_NE(error_of([] { validate(load_train_config("", {"model.num_layers=-1"})); }).find("model.num_layers"),
            std::string::npos);
}

TEST(TrainConfig, TfIdfPoolingKeysReachTheModelAndTokenizer) {
  const TrainConfig c = load_train_config("", {"tokenizer.type=char_ngrams", "tokenizer.term_counts=true",
                                               "model.pooling=tfidf", "model.sublinear_tf=false"});
  validate(c);
  EXPECT_TRUE(char_ngram_options(c).term_counts);
  const nn::TextClassifierConfig mc = model_config(c, 100, 3);
  EXPECT_EQ(mc.pooling, nn::Pooling::TfIdf);
  EXPECT_FALSE(mc.sublinear_tf);
  EXPECT_TRUE(model_config(load_train_config("", {}), 100, 3).sublinear_tf);  // the default
  EXPECT_FALSE(load_train_config("", {}).tokenizer.term_counts);
}

TEST(TrainConfig, BadTfIdfValuesAreErrorsNamingTheKey) {
  EXPECT_NE(error_of([] { load_train_config("", {"model.pooling=idf"}); })
                .find("key 'model.pooling' must be one of mean, cls, tfidf"),
            std::string::npos);
  EXPECT_NE(error_of([] { load_train_config("", {"model.sublinear_tf=sometimes"}); }).find("model.sublinear_tf"),
            std::string::npos);
  EXPECT_NE(error_of([] { validate(load_train_config("", {"model.embedding_init_std=0"})); })
                .find("model.embedding_init_std must be > 0"),
            std::string::npos);
  EXPECT_NE(error_of([] { validate(load_train_config("", {"tokenizer.term_counts=true"})); })
                .find("tokenizer.term_counts applies to tokenizer.type char_ngrams, not word"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              validate(load_train_config("", {"tokenizer.type=char_ngrams", "tokenizer.term_counts=true",
                                              "tokenizer.distinct=false"}));
            }).find("tokenizer.term_counts needs tokenizer.distinct: true"),
            std::string::npos);
}

TEST(TrainConfig, PowerSGDKeysOutOfRangeAreErrorsNamingTheKey) {
  auto message = [](std::vector<std::string> sets) {
    sets.push_back("ddp_comm_hook=powersgd");
    return error_of([&] { validate(load_train_config("", sets)); });
  };
  EXPECT_EQ(message({}), "");
  EXPECT_NE(message({"powersgd_rank=0"}).find("powersgd_rank must be >= 1"), std::string::npos);
  EXPECT_NE(message({"powersgd_start_iter=1"}).find("powersgd_start_iter must be > 1"), std::string::npos);
  EXPECT_NE(message({"powersgd_min_compression_rate=-1"}).find("powersgd_min_compression_rate"), std::string::npos);
  EXPECT_NE(message({"fp16=true"}).find("ddp_comm_hook powersgd does not apply with fp16"), std::string::npos);
}

TEST(TrainConfig, ClassWeightsAreNoneByDefault) {
  TrainConfig c = load_train_config("", {});
  EXPECT_EQ(c.class_weights, "none");
  EXPECT_TRUE(class_weights(c, dataset_with_counts({3, 1})).empty());
}

TEST(TrainConfig, BalancedClassWeightsFollowScikitLearn) {
  // n / (classes * n_c): 8 examples, 2 classes of 6 and 2.
  TrainConfig c = load_train_config("", {"class_weights=balanced"});
  const std::vector<double> w = class_weights(c, dataset_with_counts({6, 2}));
  ASSERT_EQ(w.size(), 2u);
  EXPECT_DOUBLE_EQ(w[0], 8.0 / 12.0);
  EXPECT_DOUBLE_EQ(w[1], 2.0);
}

TEST(TrainConfig, ClassWeightsListIsTakenInClassOrder) {
  TrainConfig c = load_train_config("", {"class_weights=[1.5, 0.25, 4]"});
  EXPECT_EQ(class_weights(c, dataset_with_counts({1, 1, 1})), (std::vector<double>{1.5, 0.25, 4}));
}

TEST(TrainConfig, ClassWeightsListMustHaveOneValuePerClass) {
  TrainConfig c = load_train_config("", {"class_weights=[1, 2]"});
  EXPECT_NE(error_of([&] { class_weights(c, dataset_with_counts({1, 1, 1})); })
                .find("class_weights has 2 values but the training data has 3 classes (class0, class1, class2)"),
            std::string::npos);
}

TEST(TrainConfig, BalancedClassWeightsWithAnEmptyClassAreAnErrorNamingIt) {
  TrainConfig c = load_train_config("", {"class_weights=balanced"});
  EXPECT_NE(error_of([&] { class_weights(c, dataset_with_counts({4, 0})); }).find("class 'class1' has no training"),
            std::string::npos);
}

TEST(TrainConfig, ClassWeightsRejectOtherWordsAndNonPositiveEntriesNamingThem) {
  auto path = write_config("weights.yaml", "seed: 1\nclass_weights: [1, -2]\n");
  const std::string e = error_of([&] { load_train_config(path, {}); });
  EXPECT_NE(e.find("weights.yaml:2: key 'class_weights': entry 1 must be a positive number, got '-2'"), std::string::npos)
      << e;
  EXPECT_NE(error_of([] { load_train_config("", {"class_weights=auto"}); }).find("none, balanced or a list"),
            std::string::npos);
}

TEST(TrainConfig, ClassWeightsSurviveTheResolvedYaml) {
  for (const char* v : {"class_weights=balanced", "class_weights=[2, 0.5]"}) {
    TrainConfig c = load_train_config("", {v});
    TrainConfig back = load_train_config(write_config("cw.yaml", to_yaml(c)), {});
    EXPECT_EQ(back.class_weights, c.class_weights);
    EXPECT_EQ(back.class_weight_values, c.class_weight_values);
  }
}

TEST(TrainConfig, ResolvedYamlLoadsBackToTheSameConfig) {
  TrainConfig c = load_train_config("", {"learning_rate=0.002", "model.n_heads=2", "data.categories=[x, y]", "bf16=true",
                                         "data.padding=longest", "data.pad_to_multiple_of=8", "group_by_length=true"});
  auto path = write_config("resolved.yaml", to_yaml(c));
  TrainConfig back = load_train_config(path, {});
  EXPECT_EQ(to_yaml(back), to_yaml(c));
  EXPECT_DOUBLE_EQ(back.learning_rate, 0.002);
  EXPECT_EQ(back.data.categories, (std::vector<std::string>{"x", "y"}));
}

TEST(TrainConfig, ProfilingIsOffByDefaultAndSetByItsKeys) {
  TrainConfig d = load_train_config("", {});
  EXPECT_EQ(d.profile_steps, 0);
  EXPECT_EQ(d.profile_skip_first, 2);
  EXPECT_FALSE(d.trace);
  EXPECT_EQ(d.profile_dir, "");
  auto path = write_config("prof.yaml", "profile_steps: 20\nprofile_skip_first: 5\ntrace: true\nprofile_dir: /tmp/p\n");
  TrainConfig c = load_train_config(path, {});
  EXPECT_NO_THROW(validate(c));
  EXPECT_EQ(c.profile_steps, 20);
  EXPECT_EQ(c.profile_skip_first, 5);
  EXPECT_TRUE(c.trace);
  EXPECT_EQ(c.profile_dir, "/tmp/p");
  EXPECT_EQ(to_yaml(load_train_config(write_config("prof2.yaml", to_yaml(c)), {})), to_yaml(c));
}

TEST(TrainConfig, TraceWithoutProfileStepsAndNegativeCountsAreErrorsNamingTheKey) {
  EXPECT_NE(error_of([] { validate(load_train_config("", {"trace=true"})); }).find("trace: true needs profile_steps > 0"),
            std::string::npos);
  EXPECT_NE(error_of([] { validate(load_train_config("", {"profile_steps=-1"})); }).find("profile_steps must be >= 0"),
            std::string::npos);
  EXPECT_NE(error_of([] { validate(load_train_config("", {"profile_skip_first=-3"})); })
                .find("profile_skip_first must be >= 0"),
            std::string::npos);
  EXPECT_NE(error_of([] { load_train_config("", {"trace=sometimes"}); }).find("true or false"), std::string::npos);
}

TEST(TrainConfig, EveryShippedConfigLoadsAndValidates) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(TANDEM_CONFIGS_DIR)) {
    if (e.path().extension() != ".yaml") continue;
    SCOPED_TRACE(e.path().string());
    EXPECT_NO_THROW(validate(load_train_config(e.path().string(), {})));
    ++n;
  }
  EXPECT_GE(n, 4);
}

}  // namespace
}  // namespace tandem::train
