// TextClassifier without position embeddings and with no encoder layers: the
// bag-of-n-grams model (fastText's architecture), checked against its
// definition computed here by hand: logits = W mean_{unmasked t} E[ids_t] + b,
// and with TF-IDF pooling logits = W sum_t w_t E[ids_t] + b, w the
// L2-normalised (1 + ln count_t) idf[ids_t].
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "core/autograd/grad_mode.h"
#include "core/check.h"
#include "core/safetensors.h"
#include "nn/transformer.h"

namespace tandem::nn {
namespace {

TextClassifierConfig bag_config() {
  TextClassifierConfig c;
  c.vocab_size = 11;
  c.d_model = 4;
  c.n_heads = 2;
  c.num_layers = 0;
  c.max_seq_len = 6;
  c.num_classes = 3;
  c.dropout = 0.0;
  c.position_embedding = false;
  return c;
}

TEST(BagModel, HasOnlyTheTokenTableAndTheHead) {
  TextClassifier model(bag_config(), 1);
  std::vector<std::string> names;
  for (const auto& [name, t] : model.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"embed.token.weight", "head.weight", "head.bias"}));
}

TEST(BagModel, LogitsAreTheHeadOfTheMaskedMeanOfTheTokenEmbeddings) {
  TextClassifier model(bag_config(), 3);
  model.train(false);
  const std::vector<int64_t> ids = {2, 5, 7, 5, 0, 0, 2, 9, 0, 0, 0, 0};  // two rows, padded with 0
  const std::vector<int64_t> mask = {1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0};
  NoGradGuard no_grad;
  ForwardContext ctx;
  const Tensor logits = model.forward(Tensor::from_vector(ids, {2, 6}, DType::I64),
                                      Tensor::from_vector(mask, {2, 6}, DType::I64).to(DType::U8), ctx);
  const auto params = model.state_dict();
  const std::vector<double> e = params.find("embed.token.weight")->to_double_vector();
  const std::vector<double> w = params.find("head.weight")->to_double_vector();
  const std::vector<double> b = params.find("head.bias")->to_double_vector();
  const std::vector<double> got = logits.to_double_vector();
  ASSERT_EQ(got.size(), 6u);
  for (int row = 0; row < 2; ++row) {
    std::vector<double> mean(4, 0.0);
    int count = 0;
    for (int t = 0; t < 6; ++t) {
      if (!mask[row * 6 + t]) continue;
      ++count;
      for (int d = 0; d < 4; ++d) mean[d] += e[ids[row * 6 + t] * 4 + d];
    }
    for (double& m : mean) m /= count;
    for (int k = 0; k < 3; ++k) {
      double want = b[k];
      for (int d = 0; d < 4; ++d) want += w[k * 4 + d] * mean[d];
      EXPECT_NEAR(got[row * 3 + k], want, 1e-5) << "row " << row << " class " << k;
    }
  }
}

TEST(BagModel, WithoutPositionsTheOrderOfTheTokensDoesNotMatter) {
  TextClassifierConfig c = bag_config();
  c.num_layers = 1;  // even with attention: no positions, a permutation-invariant model
  c.dim_feedforward = 8;
  TextClassifier model(c, 5);
  model.train(false);
  NoGradGuard no_grad;
  ForwardContext ctx;
  const Tensor mask = Tensor::full({1, 4}, 1, DType::U8);
  const Tensor a = model.forward(Tensor::from_vector(std::vector<int64_t>{3, 4, 8, 1}, {1, 4}, DType::I64), mask, ctx);
  const Tensor b = model.forward(Tensor::from_vector(std::vector<int64_t>{8, 1, 4, 3}, {1, 4}, DType::I64), mask, ctx);
  const auto x = a.to_double_vector(), y = b.to_double_vector();
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-5) << i;
}

TextClassifierConfig tfidf_config() {
  TextClassifierConfig c = bag_config();
  c.pooling = Pooling::TfIdf;
  return c;
}

// Two rows: counts in the mask (row 0: ids 2, 5, 7 seen 1, 3, 2 times), padding 0.
const std::vector<int64_t> kIds = {2, 5, 7, 0, 0, 0, 2, 9, 0, 0, 0, 0};
const std::vector<int64_t> kCounts = {1, 3, 2, 0, 0, 0, 1, 1, 0, 0, 0, 0};
const std::vector<float> kIdf = {0, 0, 1.0f, 3, 3, 2.5f, 3, 1.25f, 3, 4.0f, 3};

Tensor forward(const TextClassifier& model) {
  NoGradGuard no_grad;
  ForwardContext ctx;
  return model.forward(Tensor::from_vector(kIds, {2, 6}, DType::I64),
                       Tensor::from_vector(kCounts, {2, 6}, DType::I64).to(DType::U8), ctx);
}

TEST(BagModel, TfIdfPoolingAddsOnlyTheIdfBuffer) {
  TextClassifier model(tfidf_config(), 1);
  std::vector<std::string> names;
  for (const auto& [name, t] : model.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"embed.token.weight", "head.weight", "head.bias"}));
  const auto buffers = model.named_buffers();
  ASSERT_EQ(buffers.size(), 1u);
  EXPECT_EQ(buffers[0].first, "idf");
  EXPECT_EQ(buffers[0].second.to_double_vector(), std::vector<double>(11, 1.0));  // until set_idf
}

TEST(BagModel, TfIdfLogitsAreTheHeadOfTheTfIdfWeightedSumOfTheTokenEmbeddings) {
  for (bool sublinear : {true, false}) {
    TextClassifierConfig c = tfidf_config();
    c.sublinear_tf = sublinear;
    TextClassifier model(c, 3);
    model.train(false);
    model.set_idf(kIdf);
    const std::vector<double> got = forward(model).to_double_vector();
    const auto params = model.state_dict();
    const std::vector<double> e = params.find("embed.token.weight")->to_double_vector();
    const std::vector<double> w = params.find("head.weight")->to_double_vector();
    const std::vector<double> b = params.find("head.bias")->to_double_vector();
    ASSERT_EQ(got.size(), 6u);
    for (int row = 0; row < 2; ++row) {
      std::vector<double> weight(6, 0.0);
      double squares = 0;
      for (int t = 0; t < 6; ++t) {
        const double count = static_cast<double>(kCounts[row * 6 + t]);
        if (count == 0) continue;
        weight[t] = (sublinear ? 1 + std::log(count) : count) * kIdf[kIds[row * 6 + t]];
        squares += weight[t] * weight[t];
      }
      std::vector<double> pooled(4, 0.0);
      for (int t = 0; t < 6; ++t)
        for (int d = 0; d < 4; ++d) pooled[d] += weight[t] / std::sqrt(squares) * e[kIds[row * 6 + t] * 4 + d];
      for (int k = 0; k < 3; ++k) {
        double want = b[k];
        for (int d = 0; d < 4; ++d) want += w[k * 4 + d] * pooled[d];
        EXPECT_NEAR(got[row * 3 + k], want, 1e-5) << "row " << row << " class " << k << " sublinear " << sublinear;
      }
    }
  }
}

TEST(BagModel, TheIdfIsSavedAndLoadedWithTheWeights) {
  TextClassifier trained(tfidf_config(), 3);
  trained.train(false);
  trained.set_idf(kIdf);
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("tandem_bag_idf_" + std::to_string(::getpid()) + ".safetensors");
  save_safetensors(file.string(), trained.state_dict());
  TextClassifier loaded(tfidf_config(), 99);  // other initial weights, idf all ones
  loaded.train(false);
  loaded.load_state_dict(load_safetensors(file.string()));
  std::filesystem::remove(file);
  const auto idf = loaded.state_dict().find("idf")->to_double_vector();
  for (size_t i = 0; i < kIdf.size(); ++i) EXPECT_EQ(idf[i], kIdf[i]) << i;
  EXPECT_EQ(forward(loaded).to_double_vector(), forward(trained).to_double_vector());
}

TEST(BagModel, AMeanPooledStateDictLacksTheIdfAndIsRefusedByATfIdfModel) {
  TextClassifier mean_model(bag_config(), 3);
  TextClassifier tfidf_model(tfidf_config(), 3);
  EXPECT_THROW(tfidf_model.load_state_dict(mean_model.state_dict()), Error);
}

TEST(BagModel, EmbeddingInitStdScalesTheInitialTokenTable) {
  TextClassifierConfig c = bag_config();
  c.vocab_size = 4096;
  c.d_model = 16;
  for (double std : {1.0, 0.05}) {
    c.embedding_init_std = std;
    const std::vector<double> e =
        TextClassifier(c, 7).state_dict().find("embed.token.weight")->to_double_vector();
    double squares = 0;
    for (double v : e) squares += v * v;
    EXPECT_NEAR(std::sqrt(squares / static_cast<double>(e.size())), std, 0.02 * std) << std;  // 65536 draws
  }
  c.embedding_init_std = 0;
  EXPECT_THROW(TextClassifier(c, 7), Error);
}

TEST(BagModel, SetIdfOfTheWrongSizeIsAnError) {
  TextClassifier model(tfidf_config(), 3);
  EXPECT_THROW(model.set_idf(std::vector<float>(5, 1.0f)), Error);
}

}  // namespace
}  // namespace tandem::nn
