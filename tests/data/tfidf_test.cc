// TF-IDF statistics (data/tfidf.h) and, with the tokenizer's term counts and
// kernels::tfidf_weights, the whole TF-IDF pooling weight against
// scikit-learn's TfidfVectorizer (fixture from
// tests/fixtures/data/make_tfidf_fixture.py), n-gram for n-gram.
#include "data/tfidf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "kernels/tfidf_weights.h"

namespace tandem::data {
namespace {

Dataset dataset_of(const std::vector<std::string>& texts) {
  Dataset d;
  d.class_names = {"a", "b"};
  for (const std::string& t : texts) d.examples.push_back({t, 0, "test"});
  return d;
}

Tokenizer char_tokenizer(const std::string& analyzer, int64_t min_n, int64_t max_n, int64_t buckets, bool cls) {
  TokenizerOptions t;
  t.type = "char_ngrams";
  t.prepend_cls = cls;
  t.char_ngrams.analyzer = analyzer;
  t.char_ngrams.min_n = min_n;
  t.char_ngrams.max_n = max_n;
  t.char_ngrams.buckets = buckets;
  t.char_ngrams.term_counts = true;
  return Tokenizer::build(std::vector<std::string>{}, t);
}

TEST(Tfidf, DocumentFrequencyCountsATokenOncePerTextClsInEvery) {
  const Tokenizer tok = char_tokenizer("char", 1, 1, 1 << 20, true);
  const DocumentFrequencies f = document_frequencies(tok, dataset_of({"aab", "b", "bc"}), 16);
  auto id = [](const char* g) { return static_cast<size_t>(3 + fnv1a32(g) % (1 << 20)); };
  EXPECT_EQ(f.documents, 3);
  EXPECT_EQ(f.df[Tokenizer::kCls], 3);
  EXPECT_EQ(f.df[id("a")], 1);
  EXPECT_EQ(f.df[id("b")], 3);
  EXPECT_EQ(f.df[id("c")], 1);
  EXPECT_EQ(f.df[id("d")], 0);
}

TEST(Tfidf, DocumentFrequenciesSeeTheTruncatedEncoding) {
  const Tokenizer tok = char_tokenizer("char", 1, 1, 1 << 20, false);
  // max_seq_len 2 keeps 2 of "abcd"'s 4 ids, subsampled: a and c.
  const DocumentFrequencies f = document_frequencies(tok, dataset_of({"abcd"}), 2);
  auto id = [](const char* g) { return static_cast<size_t>(3 + fnv1a32(g) % (1 << 20)); };
  EXPECT_EQ(f.df[id("a")], 1);
  EXPECT_EQ(f.df[id("b")], 0);
  EXPECT_EQ(f.df[id("c")], 1);
}

TEST(Tfidf, SmoothedIdfIsLnOfOnePlusNOverOnePlusDfPlusOneAndZeroForUnseenIds) {
  DocumentFrequencies f;
  f.documents = 9;
  f.df = {0, 9, 4, 1};
  const std::vector<float> idf = smoothed_idf(f);
  ASSERT_EQ(idf.size(), 4u);
  EXPECT_EQ(idf[0], 0.0f);
  EXPECT_FLOAT_EQ(idf[1], 1.0f);
  EXPECT_FLOAT_EQ(idf[2], static_cast<float>(std::log(2.0) + 1));
  EXPECT_FLOAT_EQ(idf[3], static_cast<float>(std::log(5.0) + 1));
}

TEST(Tfidf, IdfAndWeightsAreScikitLearnsTfidfVectorizer) {
  std::ifstream in(std::string(TANDEM_FIXTURES_DIR) + "/data/tfidf_sklearn.json");
  ASSERT_TRUE(in) << "missing fixture";
  const auto fixture = nlohmann::json::parse(in);
  const int64_t buckets = fixture["buckets"];
  const auto train = fixture["train"].get<std::vector<std::string>>(),
             test = fixture["test"].get<std::vector<std::string>>();
  ASSERT_GE(fixture["cases"].size(), 3u);
  for (const auto& c : fixture["cases"]) {
    const std::string what = c["analyzer"].get<std::string>() + " " + std::to_string(c["min_n"].get<int>()) + "-" +
                             std::to_string(c["max_n"].get<int>()) + (c["sublinear_tf"].get<bool>() ? " sublinear" : "");
    // No [CLS]: scikit-learn's vectors have no such feature.
    const Tokenizer tok = char_tokenizer(c["analyzer"], c["min_n"], c["max_n"], buckets, false);
    auto id = [&](const std::string& g) { return static_cast<int64_t>(3 + fnv1a32(g) % static_cast<uint64_t>(buckets)); };
    const std::vector<float> idf = smoothed_idf(document_frequencies(tok, dataset_of(train), 4096));
    const auto& want_idf = c["idf"];
    int64_t nonzero = 0;
    for (float v : idf) nonzero += v != 0;
    EXPECT_EQ(nonzero, static_cast<int64_t>(want_idf.size())) << what << ": ids with an idf vs the vocabulary";
    for (const auto& [gram, v] : want_idf.items())
      EXPECT_NEAR(idf[static_cast<size_t>(id(gram))], v.get<double>(), 1e-5) << what << " idf of '" << gram << "'";

    const Encoding e = tok.encode_batch(test, 4096);
    const std::vector<double> w =
        kernels::tfidf_weights(e.ids, e.mask, Tensor::from_vector(idf, {tok.vocab_size()}), c["sublinear_tf"])
            .to_double_vector();
    const std::vector<double> ids = e.ids.to_double_vector(), mask = e.mask.to_double_vector();
    for (size_t row = 0; row < test.size(); ++row) {
      std::map<int64_t, double> want;  // by id; every other position must weigh 0
      for (const auto& [gram, v] : c["weights"][row].items()) want[id(gram)] = v.get<double>();
      size_t matched = 0;
      for (size_t s = 0; s < 4096; ++s) {
        const size_t i = row * 4096 + s;
        const auto token = static_cast<int64_t>(ids[i]);
        const auto it = want.find(token);
        if (it == want.end() || mask[i] == 0) {
          EXPECT_EQ(w[i], 0.0) << what << ": text " << row << " position " << s;
          continue;
        }
        ++matched;
        EXPECT_NEAR(w[i], it->second, 1e-6) << what << ": text " << row << " id " << token;
      }
      EXPECT_EQ(matched, want.size()) << what << ": text " << row;
    }
  }
}

}  // namespace
}  // namespace tandem::data
