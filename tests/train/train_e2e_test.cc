// `tandem train`, `evaluate` and `predict` end to end, as processes: a tiny
// model on a tiny, learnable JSONL task (label 1 when the text contains
// "alpha", 0 when it contains "omega", among random filler words).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/saved_model.h"
#include "comm/launcher.h"
#include "core/philox.h"
#include "core/safetensors.h"
#include "data/dataset_spec.h"
#include "data/tfidf.h"
#include "tests/testing/require_gpu.h"

namespace tandem::train {
namespace {

namespace fs = std::filesystem;

struct Output {
  int exit_code = 0;
  std::string out, err;
};

Output run_tandem(int ranks, const std::vector<std::string>& args) {
  comm::LaunchOptions o;
  o.nproc_per_node = ranks;
  o.command = {TANDEM_BINARY};
  o.command.insert(o.command.end(), args.begin(), args.end());
  o.timeout = std::chrono::seconds(240);
  Output r;
  o.on_line = [&](int, bool is_stderr, const std::string& line) { (is_stderr ? r.err : r.out) += line + "\n"; };
  r.exit_code = comm::launch(o).exit_code;
  return r;
}

void write_task(const fs::path& path, int n, uint64_t seed) {
  static const char* filler[] = {"the", "a", "cat", "dog", "runs", "blue", "green", "fast", "slow", "tree",
                                 "house", "river", "stone", "cloud", "lamp", "book"};
  std::ofstream out(path);
  for (int i = 0; i < n; ++i) {
    Philox4 r = philox_block(seed, 0, static_cast<uint64_t>(i));
    const int label = static_cast<int>(r.v[0] % 2);
    std::string text;
    const int words = 4 + static_cast<int>(r.v[1] % 6), key_at = static_cast<int>(r.v[2] % words);
    for (int w = 0; w < words; ++w) {
      if (!text.empty()) text += ' ';
      text += w == key_at ? (label ? "alpha" : "omega") : filler[philox_block(seed, 1, static_cast<uint64_t>(i * 16 + w)).v[0] % 16];
    }
    out << nlohmann::json{{"text", text}, {"label", label}}.dump() << "\n";
  }
}

std::vector<nlohmann::json> records(const fs::path& metrics, const std::string& kind) {
  std::vector<nlohmann::json> out;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j["kind"] == kind) out.push_back(j);
  }
  return out;
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

class TrainEndToEnd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("tandem_e2e_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    write_task(dir_ / "train.jsonl", 256, 1);
    write_task(dir_ / "test.jsonl", 64, 2);
    std::ofstream(dir_ / "config.yaml") << "per_device_train_batch_size: 8\n"
                                           "per_device_eval_batch_size: 32\n"
                                           "num_train_epochs: 2\n"
                                           "learning_rate: 3.0e-3\n"
                                           "weight_decay: 0.01\n"
                                           "warmup_steps: 4\n"
                                           "logging_steps: 1\n"
                                           "eval_strategy: epoch\n"
                                           "save_steps: 10\n"
                                           "save_total_limit: 2\n"
                                           "seed: 7\n"
                                           "dataloader_num_workers: 1\n"
                                           "model: {d_model: 16, n_heads: 2, num_layers: 1, dim_feedforward: 32, "
                                           "max_seq_len: 16, dropout: 0.1}\n"
                                           "data:\n"
                                           "  format: jsonl\n"
                                           "  train_path: " + (dir_ / "train.jsonl").string() + "\n"
                                           "  test_path: " + (dir_ / "test.jsonl").string() + "\n"
                                           "  vocab_min_freq: 1\n";
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::vector<std::string> train_args(const fs::path& out, std::vector<std::string> extra = {}) {
    std::vector<std::string> a = {"train", "--config", (dir_ / "config.yaml").string(), "--quiet",
                                  "--set", "output_dir=" + out.string()};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  // Padding to each batch's longest text cuts only padding: without dropout (whose mask follows
  // the tensor's shape) training follows max_length's to rounding. The texts have 4-9 words in
  // rows of 16, so every batch is shorter.
  static void expect_longest_trains_as_max_length(const fs::path& dir, const std::vector<std::string>& common,
                                                    int ranks) {
    std::vector<std::string> longest = common;
    longest.insert(longest.end(), {"--set", "data.padding=longest"});
    Output rm = run_tandem(ranks, train_args(dir / "max_length", common));
    ASSERT_EQ(rm.exit_code, 0) << rm.err;
    Output rl = run_tandem(ranks, train_args(dir / "longest", longest));
    ASSERT_EQ(rl.exit_code, 0) << rl.err;
    auto lm = records(dir / "max_length" / "metrics.jsonl", "train"), ll = records(dir / "longest" / "metrics.jsonl", "train");
    ASSERT_EQ(lm.size(), ll.size());
    ASSERT_GT(lm.size(), 30u / static_cast<size_t>(ranks));  // 64 steps on one rank, 32 on two
    for (size_t i = 0; i < lm.size(); ++i) {
      const double a = lm[i]["loss"].get<double>(), b = ll[i]["loss"].get<double>();
      EXPECT_NEAR(b, a, 1e-4 * std::abs(a) + 1e-6) << "step " << lm[i]["step"];
      EXPECT_EQ(lm[i]["mean_padded_length"].get<double>(), 16.0);
      EXPECT_LT(ll[i]["mean_padded_length"].get<double>(), 12.0) << "step " << ll[i]["step"];  // texts of 4-9 words
    }
    const auto em = read_json(dir / "max_length" / "results.json"), el = read_json(dir / "longest" / "results.json");
    EXPECT_EQ(el["eval_accuracy"], em["eval_accuracy"]);
    EXPECT_NEAR(el["eval_loss"].get<double>(), em["eval_loss"].get<double>(), 1e-4);
  }
  // Trains on the GPU eagerly and with cuda_graph (batches of 10, `extra` settings on both): the
  // same loss at every logging step and the same weights.
  static void expect_graph_replays_eager(const fs::path& eager, const fs::path& graphed,
                                         const std::vector<std::string>& extra) {
    std::vector<std::string> gpu = {"--set", "device=cuda", "--set", "per_device_train_batch_size=10"};
    gpu.insert(gpu.end(), extra.begin(), extra.end());
    std::vector<std::string> with_graph = gpu;
    with_graph.insert(with_graph.end(), {"--set", "cuda_graph=true"});
    Output re = run_tandem(1, train_args(eager, gpu));
    ASSERT_EQ(re.exit_code, 0) << re.err;
    Output rg = run_tandem(1, train_args(graphed, with_graph));
    ASSERT_EQ(rg.exit_code, 0) << rg.err;
    auto le = records(eager / "metrics.jsonl", "train"), lg = records(graphed / "metrics.jsonl", "train");
    ASSERT_EQ(le.size(), lg.size());
    ASSERT_GT(le.size(), 40u);
    for (size_t i = 0; i < le.size(); ++i)
      EXPECT_EQ(lg[i]["loss"].get<double>(), le[i]["loss"].get<double>()) << "step " << le[i]["step"];
    EXPECT_EQ(read_json(graphed / "results.json")["weight_checksums"], read_json(eager / "results.json")["weight_checksums"]);
  }
  // A run stopped after 13 steps and resumed from its checkpoint (`extra` settings on all runs)
  // logs the same losses and ends with the same weights as one run straight through.
  static void expect_resumed_run_matches(const fs::path& a, const fs::path& b, const std::vector<std::string>& extra) {
    std::vector<std::string> stop = extra, resume = extra;
    stop.insert(stop.end(), {"--stop-after", "13"});
    resume.insert(resume.end(), {"--resume", "latest"});
    Output ra = run_tandem(1, train_args(a, extra));
    ASSERT_EQ(ra.exit_code, 0) << ra.err;
    Output rb1 = run_tandem(1, train_args(b, stop));
    ASSERT_EQ(rb1.exit_code, 0) << rb1.err;
    EXPECT_TRUE(read_json(b / "results.json")["stopped_early"].get<bool>());
    Output rb2 = run_tandem(1, train_args(b, resume));
    ASSERT_EQ(rb2.exit_code, 0) << rb2.err;
    auto la = records(a / "metrics.jsonl", "train"), lb = records(b / "metrics.jsonl", "train");
    ASSERT_EQ(la.size(), lb.size());
    for (size_t i = 0; i < la.size(); ++i) {
      EXPECT_EQ(la[i]["step"], lb[i]["step"]);
      EXPECT_EQ(la[i]["loss"].get<double>(), lb[i]["loss"].get<double>()) << "step " << la[i]["step"];
    }
    EXPECT_EQ(read_json(a / "results.json")["weight_checksums"], read_json(b / "results.json")["weight_checksums"]);
  }
  static fs::path dir_;
};
fs::path TrainEndToEnd::dir_;

TEST_F(TrainEndToEnd, TwoRanksLearnAndEndWithIdenticalWeights) {
  const fs::path out = dir_ / "two_ranks";
  Output r = run_tandem(2, train_args(out));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json res = read_json(out / "results.json");
  auto sums = res["weight_checksums"].get<std::vector<int64_t>>();
  ASSERT_EQ(sums.size(), 2u);
  EXPECT_EQ(sums[0], sums[1]) << "the ranks' weights diverged";
  auto train = records(out / "metrics.jsonl", "train");
  ASSERT_GE(train.size(), 10u);
  double first = 0, last = 0;
  for (int i = 0; i < 4; ++i) {
    first += train[static_cast<size_t>(i)]["loss"].get<double>();
    last += train[train.size() - 1 - static_cast<size_t>(i)]["loss"].get<double>();
  }
  EXPECT_LT(last, first) << "the loss did not fall";
  EXPECT_GT(res["eval_accuracy"].get<double>(), res["majority_baseline"].get<double>());
  for (const char* f : {"config.yaml", "vocab.txt", "train_log.csv", "eval_log.csv"}) EXPECT_TRUE(fs::exists(out / f)) << f;
}

TEST_F(TrainEndToEnd, ZeroStageOneTrainsLikeDdpWithAboutHalfTheOptimizerStatePerRankAtTwoRanks) {
  const fs::path ddp = dir_ / "ddp_two", zero = dir_ / "zero_two";
  Output rd = run_tandem(2, train_args(ddp));
  ASSERT_EQ(rd.exit_code, 0) << rd.err;
  Output rz = run_tandem(2, train_args(zero, {"--set", "zero_stage=1"}));
  ASSERT_EQ(rz.exit_code, 0) << rz.err;
  nlohmann::json d = read_json(ddp / "results.json"), z = read_json(zero / "results.json");
  auto sums = z["weight_checksums"].get<std::vector<int64_t>>();
  ASSERT_EQ(sums.size(), 2u);
  EXPECT_EQ(sums[0], sums[1]) << "the ZeRO ranks' weights diverged";
  // The same data, masks and updates: the loss curves agree to rounding (reduce-scatter and
  // all-reduce add in different orders).
  auto ld = records(ddp / "metrics.jsonl", "train"), lz = records(zero / "metrics.jsonl", "train");
  ASSERT_EQ(ld.size(), lz.size());
  for (size_t i = 0; i < ld.size(); ++i)
    EXPECT_NEAR(lz[i]["loss"].get<double>(), ld[i]["loss"].get<double>(), 1e-3) << "step " << ld[i]["step"];
  EXPECT_NEAR(z["eval_loss"].get<double>(), d["eval_loss"].get<double>(), 1e-3);
  // Rank 0's optimizer state: its shard's moments (half the elements) against all of them.
  const auto zb = z["optimizer_state_bytes"].get<double>(), db = d["optimizer_state_bytes"].get<double>();
  EXPECT_GT(db, 0);
  EXPECT_NEAR(zb / db, 0.5, 0.02);
}

TEST_F(TrainEndToEnd, PowerSGDAtTwoRanksSendsFewerElementsAndStillLearns) {
  const fs::path out = dir_ / "powersgd_two";
  Output r = run_tandem(2, train_args(out, {"--set", "ddp_comm_hook=powersgd", "--set", "powersgd_start_iter=4"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json res = read_json(out / "results.json");
  auto sums = res["weight_checksums"].get<std::vector<int64_t>>();
  ASSERT_EQ(sums.size(), 2u);
  EXPECT_EQ(sums[0], sums[1]) << "the ranks' weights diverged";
  const auto& e = res["comm_hook_elements"];
  EXPECT_LT(e["sent"].get<int64_t>(), e["before"].get<int64_t>()) << res.dump();
  EXPECT_GT(res["eval_accuracy"].get<double>(), res["majority_baseline"].get<double>());
}

TEST_F(TrainEndToEnd, ResumingAZeroStageOneRunIsRefusedWithAClearMessage) {
  const fs::path out = dir_ / "zero_resume";
  Output r1 = run_tandem(2, train_args(out, {"--set", "zero_stage=1", "--stop-after", "5"}));
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  Output r2 = run_tandem(2, train_args(out, {"--set", "zero_stage=1", "--resume", "latest"}));
  EXPECT_NE(r2.exit_code, 0);
  EXPECT_NE(r2.err.find("--resume with zero_stage 1"), std::string::npos) << r2.err;
}

TEST_F(TrainEndToEnd, ResumingGivesTheSameLossCurveAsAnUninterruptedRun) {
  expect_resumed_run_matches(dir_ / "straight", dir_ / "interrupted", {});
}

TEST_F(TrainEndToEnd, ResumingARunGroupedByLengthGivesTheSameLossCurve) {
  // The sampler's saved position refers to the grouped order, which the resumed run rebuilds
  // from the same lengths, seed and epoch.
  expect_resumed_run_matches(dir_ / "grouped_straight", dir_ / "grouped_interrupted",
                             {"--set", "group_by_length=true", "--set", "data.padding=longest"});
}

TEST_F(TrainEndToEnd, EvaluateAndPredictUseTheSavedCheckpoint) {
  const fs::path out = dir_ / "for_eval";
  ASSERT_EQ(run_tandem(1, train_args(out)).exit_code, 0);
  nlohmann::json res = read_json(out / "results.json");
  fs::path ck;
  for (const auto& e : fs::directory_iterator(out))
    if (e.path().filename().string().rfind("checkpoint-", 0) == 0 && e.path() > ck) ck = e.path();
  ASSERT_FALSE(ck.empty());
  Output ev = run_tandem(1, {"evaluate", "--checkpoint", ck.string()});
  ASSERT_EQ(ev.exit_code, 0) << ev.err;
  EXPECT_NE(ev.out.find(fmt::format("accuracy {:.4f}", res["eval_accuracy"].get<double>())), std::string::npos)
      << ev.out;
  Output pr = run_tandem(1, {"predict", "--checkpoint", ck.string(), "--text", "the alpha cat", "--text", "omega tree"});
  ASSERT_EQ(pr.exit_code, 0) << pr.err;
  EXPECT_NE(pr.out.find("the alpha cat"), std::string::npos) << pr.out;
}

TEST_F(TrainEndToEnd, AModelThatDivergedIsRefusedNamingTheWeightInsteadOfPredictingNan) {
  const fs::path out = dir_ / "diverged";
  ASSERT_EQ(run_tandem(1, train_args(out)).exit_code, 0);
  fs::path ck;
  for (const auto& e : fs::directory_iterator(out))
    if (e.path().filename().string().rfind("checkpoint-", 0) == 0 && e.path() > ck) ck = e.path();
  ASSERT_FALSE(ck.empty());
  NamedTensors weights = load_safetensors((ck / "model.safetensors").string());
  Tensor& first = weights.tensors.front().second;
  first = first.clone();
  static_cast<float*>(first.data_ptr())[3] = std::nanf("");
  save_safetensors((ck / "model.safetensors").string(), weights);
  Output pr = run_tandem(1, {"predict", "--checkpoint", ck.string(), "--text", "the alpha cat"});
  EXPECT_NE(pr.exit_code, 0);
  EXPECT_NE(pr.err.find(fmt::format("{}: weight '{}' holds NaN at element 3: the model diverged",
                                    (ck / "model.safetensors").string(), weights.tensors.front().first)),
            std::string::npos)
      << pr.err;
}

TEST_F(TrainEndToEnd, ABpeTokenizerIsSavedAsTokenizerJsonAndEvaluateUsesIt) {
  const fs::path out = dir_ / "bpe";
  Output r = run_tandem(1, train_args(out, {"--set", "tokenizer.type=bpe", "--set", "tokenizer.vocab_size=60"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out / "tokenizer.json"));
  EXPECT_FALSE(fs::exists(out / "vocab.txt"));
  EXPECT_EQ(read_json(out / "tokenizer.json")["model"]["vocab"].size(), 60u);
  nlohmann::json res = read_json(out / "results.json");
  fs::path ck;
  for (const auto& e : fs::directory_iterator(out))
    if (e.path().filename().string().rfind("checkpoint-", 0) == 0 && e.path() > ck) ck = e.path();
  ASSERT_FALSE(ck.empty());
  EXPECT_TRUE(fs::exists(ck / "tokenizer.json"));
  Output ev = run_tandem(1, {"evaluate", "--checkpoint", ck.string()});
  ASSERT_EQ(ev.exit_code, 0) << ev.err;
  EXPECT_NE(ev.out.find(fmt::format("accuracy {:.4f}", res["eval_accuracy"].get<double>())), std::string::npos)
      << ev.out;
}

TEST_F(TrainEndToEnd, ABagOfCharNgramsModelLearnsAndEvaluateAndPredictRebuildIt) {
  // The bag model (no positions, no encoder layers) on hashed character n-grams;
  // evaluate and predict must rebuild the same model and tokenizer from the checkpoint.
  const fs::path out = dir_ / "char_ngrams";
  Output r = run_tandem(1, train_args(out, {"--set", "tokenizer.type=char_ngrams", "--set", "tokenizer.buckets=4096",
                                            "--set", "model.num_layers=0", "--set", "model.position_embedding=false",
                                            "--set", "model.max_seq_len=128", "--set", "learning_rate=2e-2"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out / "char_ngrams.json"));
  nlohmann::json res = read_json(out / "results.json");
  EXPECT_GT(res["eval_accuracy"].get<double>(), res["majority_baseline"].get<double>());
  fs::path ck;
  for (const auto& e : fs::directory_iterator(out))
    if (e.path().filename().string().rfind("checkpoint-", 0) == 0 && e.path() > ck) ck = e.path();
  ASSERT_FALSE(ck.empty());
  Output ev = run_tandem(1, {"evaluate", "--checkpoint", ck.string()});
  ASSERT_EQ(ev.exit_code, 0) << ev.err;
  EXPECT_NE(ev.out.find(fmt::format("accuracy {:.4f}", res["eval_accuracy"].get<double>())), std::string::npos)
      << ev.out;
  Output pr = run_tandem(1, {"predict", "--checkpoint", ck.string(), "--text", "the alpha cat"});
  ASSERT_EQ(pr.exit_code, 0) << pr.err;
  EXPECT_NE(pr.out.find("the alpha cat"), std::string::npos) << pr.out;
}

fs::path last_checkpoint(const fs::path& out) {
  fs::path ck;
  for (const auto& e : fs::directory_iterator(out))
    if (e.path().filename().string().rfind("checkpoint-", 0) == 0 && e.path() > ck) ck = e.path();
  return ck;
}

TEST_F(TrainEndToEnd, ATfIdfBagModelSavesTheTrainingSplitsIdfAndEvaluateAndPredictUseIt) {
  const fs::path out = dir_ / "tfidf";
  Output r = run_tandem(1, train_args(out, {"--set", "tokenizer.type=char_ngrams", "--set", "tokenizer.buckets=4096",
                                            "--set", "tokenizer.term_counts=true", "--set", "model.pooling=tfidf",
                                            "--set", "model.num_layers=0", "--set", "model.position_embedding=false",
                                            "--set", "model.max_seq_len=128", "--set", "learning_rate=2e-2"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json res = read_json(out / "results.json");
  EXPECT_GT(res["eval_accuracy"].get<double>(), res["majority_baseline"].get<double>());
  const fs::path ck = last_checkpoint(out);
  ASSERT_FALSE(ck.empty());

  // The idf of the training split, from its own file, as data/tfidf.h defines it.
  const data::Tokenizer tok = data::Tokenizer::load(ck / "char_ngrams.json");
  ASSERT_TRUE(tok.char_ngrams()->term_counts);
  data::DatasetSpec spec;
  spec.format = "jsonl";
  spec.path = (dir_ / "train.jsonl").string();
  const std::vector<float> want = data::smoothed_idf(data::document_frequencies(tok, data::load_dataset(spec), 128));
  NamedTensors saved = load_safetensors((ck / "model.safetensors").string());
  const Tensor* idf = saved.find("idf");
  ASSERT_NE(idf, nullptr);
  EXPECT_EQ(idf->to_double_vector(), std::vector<double>(want.begin(), want.end()));
  const apps::SavedModel loaded = apps::load_saved_model(ck, {});
  EXPECT_EQ(loaded.model->state_dict().find("idf")->to_double_vector(), idf->to_double_vector());

  // evaluate and predict read it: evaluate reproduces the run's test scores, and the same
  // checkpoint with every idf 1 scores a different loss.
  Output ev = run_tandem(1, {"evaluate", "--checkpoint", ck.string()});
  ASSERT_EQ(ev.exit_code, 0) << ev.err;
  EXPECT_NE(ev.out.find(fmt::format("accuracy {:.4f}", res["eval_accuracy"].get<double>())), std::string::npos)
      << ev.out;
  EXPECT_NE(ev.out.find(fmt::format("loss {:.4f}", res["eval_loss"].get<double>())), std::string::npos) << ev.out;
  const fs::path flat = dir_ / "tfidf_flat_idf";
  fs::copy(ck, flat, fs::copy_options::recursive);
  for (auto& [name, t] : saved.tensors)
    if (name == "idf") t = Tensor::full(t.shape(), 1.0);
  save_safetensors((flat / "model.safetensors").string(), saved);
  Output flat_ev = run_tandem(1, {"evaluate", "--checkpoint", flat.string()});
  ASSERT_EQ(flat_ev.exit_code, 0) << flat_ev.err;
  EXPECT_EQ(flat_ev.out.find(fmt::format("loss {:.4f}", res["eval_loss"].get<double>())), std::string::npos)
      << flat_ev.out;
  Output pr = run_tandem(1, {"predict", "--checkpoint", ck.string(), "--text", "the alpha cat"});
  ASSERT_EQ(pr.exit_code, 0) << pr.err;
  EXPECT_NE(pr.out.find("the alpha cat"), std::string::npos) << pr.out;
}

TEST_F(TrainEndToEnd, ACheckpointFolderFromAnotherModelIsRefusedNamingTheParameter) {
  const fs::path out = dir_ / "mismatch";
  ASSERT_EQ(run_tandem(1, train_args(out, {"--stop-after", "10"})).exit_code, 0);
  Output r = run_tandem(1, train_args(out, {"--resume", "latest", "--set", "model.d_model=32"}));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("load_state_dict"), std::string::npos) << r.err;
}

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST_F(TrainEndToEnd, LoadBestModelAtEndGoesBackToTheBestValidationEvaluationOnEveryRank) {
  const fs::path out = dir_ / "best";
  Output r = run_tandem(2, train_args(out, {"--set", "data.validation_fraction=0.25", "--set", "eval_strategy=steps",
                                            "--set", "eval_steps=6", "--set", "save_steps=6", "--set", "num_train_epochs=8", "--set",
                                            "save_total_limit=-1", "--set", "load_best_model_at_end=true", "--set",
                                            "metric_for_best_model=eval_accuracy"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The best step by the validation records themselves: the highest accuracy, the first of equals.
  auto evals = records(out / "metrics.jsonl", "eval");
  ASSERT_GE(evals.size(), 3u);
  int64_t best_step = -1;
  double best = 0;
  for (const auto& e : evals) {
    EXPECT_EQ(e["split"], "validation");
    if (best_step < 0 || e["eval_accuracy"].get<double>() > best) {
      best = e["eval_accuracy"].get<double>();
      best_step = e["step"].get<int64_t>();
    }
  }
  nlohmann::json res = read_json(out / "results.json");
  EXPECT_EQ(res["best_model"]["step"].get<int64_t>(), best_step);
  EXPECT_DOUBLE_EQ(res["best_model"]["value"].get<double>(), best);
  auto sums = res["weight_checksums"].get<std::vector<int64_t>>();
  ASSERT_EQ(sums.size(), 2u);
  EXPECT_EQ(sums[0], sums[1]) << "rank 1 did not take the best model";
  // The test split is evaluated once, at the end, on the best model, whose weights the last checkpoint holds.
  EXPECT_EQ(records(out / "metrics.jsonl", "test").size(), 1u);
  const int64_t last = res["steps"].get<int64_t>();
  std::string curve;
  for (const auto& e : evals) curve += fmt::format(" {}:{}", e["step"].get<int64_t>(), e["eval_accuracy"].get<double>());
  ASSERT_NE(best_step, last) << "the run's last model was its best, so this proves nothing; the curve:" << curve;
  EXPECT_EQ(file_bytes(out / fmt::format("checkpoint-{}", last) / "model.safetensors"),
            file_bytes(out / fmt::format("checkpoint-{}", best_step) / "model.safetensors"));
}

TEST_F(TrainEndToEnd, EarlyStoppingEndsEveryRankAfterPatienceEvaluationsWithoutImprovement) {
  const fs::path out = dir_ / "early";
  // A threshold no accuracy gain can pass: the second evaluation (step 8) is the first without improvement.
  Output r = run_tandem(2, train_args(out, {"--set", "eval_strategy=steps", "--set", "eval_steps=4", "--set",
                                            "early_stopping_patience=1", "--set", "early_stopping_threshold=2",
                                            "--set", "metric_for_best_model=accuracy"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json res = read_json(out / "results.json");
  EXPECT_TRUE(res["early_stopped"].get<bool>());
  EXPECT_FALSE(res["stopped_early"].get<bool>());
  EXPECT_EQ(res["steps"].get<int64_t>(), 8);
  auto sums = res["weight_checksums"].get<std::vector<int64_t>>();
  ASSERT_EQ(sums.size(), 2u);
  EXPECT_EQ(sums[0], sums[1]);
}

TEST_F(TrainEndToEnd, ResultsCarryMacroF1AndPerClassF1) {
  const fs::path out = dir_ / "f1";
  ASSERT_EQ(run_tandem(1, train_args(out, {"--set", "max_steps=8"})).exit_code, 0);
  nlohmann::json res = read_json(out / "results.json");
  const auto f1 = res["eval_per_class_f1"].get<std::vector<double>>();
  ASSERT_EQ(f1.size(), 2u);
  EXPECT_NEAR(res["eval_macro_f1"].get<double>(), (f1[0] + f1[1]) / 2, 1e-12);
}

TEST_F(TrainEndToEnd, CudaGraphTrainsAsEagerStepsOnAGpu) {
  // One CUDA graph per step, with the trainer around it: the loader, the logging window, the
  // per-epoch evaluations and checkpoints, and a shorter last batch per epoch (256 = 25 x 10 + 6).
  TANDEM_REQUIRE_GPU();
  expect_graph_replays_eager(dir_ / "eager_gpu", dir_ / "graphed_gpu", {});
}

TEST_F(TrainEndToEnd, PaddingToEachBatchsLongestTextTrainsAsMaxLengthWithoutDropout) {
  expect_longest_trains_as_max_length(dir_ / "padding", {"--set", "model.dropout=0"}, 1);
}

TEST_F(TrainEndToEnd, PaddingToEachBatchsLongestTextTrainsAsMaxLengthWithoutDropoutOnTwoRanks) {
  // Each rank pads to its own batch's longest text; the all-reduced gradients are the same.
  expect_longest_trains_as_max_length(dir_ / "padding_two", {"--set", "model.dropout=0"}, 2);
}

TEST_F(TrainEndToEnd, GroupByLengthWithLongestPaddingLearnsTheTask) {
  const fs::path out = dir_ / "grouped";
  Output r = run_tandem(1, train_args(out, {"--set", "group_by_length=true", "--set", "data.padding=longest"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json res = read_json(out / "results.json");
  EXPECT_GT(res["eval_accuracy"].get<double>(), res["majority_baseline"].get<double>());
  // evaluate reads the padding from the saved config and scores as the trainer did.
  const std::string ck = last_checkpoint(out).string();
  Output ev = run_tandem(1, {"evaluate", "--checkpoint", ck});
  ASSERT_EQ(ev.exit_code, 0) << ev.err;
  EXPECT_NE(ev.out.find(fmt::format("accuracy {:.4f}", res["eval_accuracy"].get<double>())), std::string::npos)
      << ev.out;
  // predict cuts its batch to the longest text too, and labels as with full-length rows.
  const std::vector<std::string> texts = {"--text", "the alpha cat", "--text", "omega tree house river stone cloud"};
  std::vector<std::string> longest = {"predict", "--checkpoint", ck}, full = longest;
  longest.insert(longest.end(), texts.begin(), texts.end());
  full.insert(full.end(), texts.begin(), texts.end());
  full.insert(full.end(), {"--set", "data.padding=max_length"});
  Output pl = run_tandem(1, longest), pf = run_tandem(1, full);
  ASSERT_EQ(pl.exit_code, 0) << pl.err;
  ASSERT_EQ(pf.exit_code, 0) << pf.err;
  EXPECT_EQ(pl.out, pf.out);
}

TEST_F(TrainEndToEnd, PredictClassifiesAnInputFileInBatchesOfTheEvalBatchSize) {
  // 70 texts of 1-9 words: batches of 8 (each cut to its own longest text) print what one batch of
  // 100 prints, line for line, in the file's order.
  const fs::path out = dir_ / "predict_batches";
  Output r = run_tandem(1, train_args(out, {"--set", "data.padding=longest"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path input = dir_ / "predict_input.txt";
  {
    std::ofstream f(input);
    static const char* words[] = {"alpha", "omega", "cat", "tree", "river", "lamp", "book", "dog", "stone"};
    for (int i = 0; i < 70; ++i) {
      for (int w = 0; w <= i % 9; ++w) f << (w ? " " : "") << words[(i + w) % 9];
      f << "\n";
    }
  }
  const std::string ck = last_checkpoint(out).string();
  Output small = run_tandem(1, {"predict", "--checkpoint", ck, "--input", input.string(), "--set",
                                "per_device_eval_batch_size=8"});
  Output one = run_tandem(1, {"predict", "--checkpoint", ck, "--input", input.string(), "--set",
                              "per_device_eval_batch_size=100"});
  ASSERT_EQ(small.exit_code, 0) << small.err;
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(std::count(small.out.begin(), small.out.end(), '\n'), 70);
  EXPECT_EQ(small.out, one.out);
  // The file's order: text 1 is "omega cat", text 2 "cat tree river".
  const size_t second = small.out.find("\tomega cat\n"), third = small.out.find("\tcat tree river\n");
  ASSERT_NE(second, std::string::npos) << small.out;
  ASSERT_NE(third, std::string::npos) << small.out;
  EXPECT_EQ(small.out.find('\n', second + 1) + 1, small.out.rfind('\n', third) + 1);  // adjacent lines
}

TEST_F(TrainEndToEnd, CudaGraphWithLongestPaddingReplaysAGraphPerLengthAsEagerSteps) {
  // Rows of 16 in steps of 4: up to 4 lengths, a graph for each, each replayed against eager steps.
  TANDEM_REQUIRE_GPU();
  expect_graph_replays_eager(dir_ / "eager_gpu_longest", dir_ / "graphed_gpu_longest",
                             {"--set", "data.padding=longest", "--set", "data.pad_to_multiple_of=4"});
}

TEST_F(TrainEndToEnd, CudaGraphOnTheCpuExitsNonZeroNamingTheKey) {
  Output r = run_tandem(1, train_args(dir_ / "graph_on_cpu", {"--set", "device=cpu", "--set", "cuda_graph=true"}));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("cuda_graph: true needs a GPU"), std::string::npos) << r.err;
}

TEST_F(TrainEndToEnd, ABadConfigExitsNonZeroNamingTheKey) {
  std::ofstream(dir_ / "bad.yaml") << "per_device_train_batch_sise: 8\n";
  Output r = run_tandem(1, {"train", "--config", (dir_ / "bad.yaml").string()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("bad.yaml:1: unknown key 'per_device_train_batch_sise'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("did you mean 'per_device_train_batch_size'"), std::string::npos) << r.err;
}

TEST_F(TrainEndToEnd, AnEmptyTrainingFileExitsNonZeroNamingItAndLeavesNothingInOutputDir) {
  std::ofstream(dir_ / "empty.jsonl");
  const fs::path out = dir_ / "empty_train";
  Output r = run_tandem(1, train_args(out, {"--set", "data.train_path=" + (dir_ / "empty.jsonl").string()}));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("data.train_path " + (dir_ / "empty.jsonl").string() + ": the train split has no examples"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(out)) << "a refused job wrote into " << out;
}

TEST_F(TrainEndToEnd, AnOutputDirThatCannotBeCreatedIsNamedAsOutputDir) {
  std::ofstream(dir_ / "a_file") << "x";
  const fs::path out = dir_ / "a_file" / "run";  // below a file: no folder can be made there
  Output r = run_tandem(1, train_args(out));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("output_dir " + out.string() + ": cannot create it: Not a directory"), std::string::npos)
      << r.err;
}

TEST_F(TrainEndToEnd, AnEmptyTestFileExitsNonZeroNamingIt) {
  std::ofstream(dir_ / "empty_test.jsonl");
  Output r = run_tandem(1, train_args(dir_ / "empty_test", {"--set", "data.test_path=" + (dir_ / "empty_test.jsonl").string()}));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("data.test_path " + (dir_ / "empty_test.jsonl").string() + ": the test split has no examples"),
            std::string::npos)
      << r.err;
}

TEST_F(TrainEndToEnd, TrainingDataOfOneClassExitsNonZeroSayingAClassifierNeedsTwo) {
  std::ofstream(dir_ / "one_class.jsonl") << "{\"text\": \"a b\", \"label\": 0}\n{\"text\": \"c\", \"label\": 0}\n";
  Output r = run_tandem(1, train_args(dir_ / "one_class", {"--set", "data.train_path=" + (dir_ / "one_class.jsonl").string()}));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("data.train_path " + (dir_ / "one_class.jsonl").string() +
                       ": a classifier needs at least two classes, the training data has 1 ('0')"),
            std::string::npos)
      << r.err;
}

TEST_F(TrainEndToEnd, EpochsBeyondCountableStepsExitNonZeroNamingNumTrainEpochs) {
  const fs::path out = dir_ / "endless";
  Output r = run_tandem(1, train_args(out, {"--set", "num_train_epochs=1e30"}));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("num_train_epochs 1e+30 at 32 steps per epoch is more steps than can be counted"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(TrainEndToEnd, PredictNamesAnInputThatIsADirectoryOrHasNoTexts) {
  Output r = run_tandem(1, {"predict", "--checkpoint", dir_.string(), "--input", dir_.string()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("predict: --input " + dir_.string() + " is a directory, not a file"), std::string::npos) << r.err;
  std::ofstream(dir_ / "blank.txt") << "\n\n";
  r = run_tandem(1, {"predict", "--checkpoint", dir_.string(), "--input", (dir_ / "blank.txt").string()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("predict: --input " + (dir_ / "blank.txt").string() + " has no texts"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace tandem::train
