// Hashed character n-grams (data/char_ngrams.h) and the tokenizer type that
// uses them: the features are scikit-learn's analyzers' (fixture from
// tests/fixtures/data/make_char_ngram_fixtures.py), the hash is FNV-1a-32
// (its published test vectors), ids are distinct in first-occurrence order,
// truncation keeps features from the whole text, and the tokenizer file
// round-trips and fails clearly.
#include "data/char_ngrams.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "data/tokenizer.h"
#include "tests/data/test_files.h"

namespace tandem::data {
namespace {

using ::testing::HasSubstr;
using testing::error_of;
using testing::TempDir;

CharNgramOptions options(const std::string& analyzer, int64_t min_n, int64_t max_n, bool lowercase = true) {
  CharNgramOptions o;
  o.analyzer = analyzer;
  o.min_n = min_n;
  o.max_n = max_n;
  o.lowercase = lowercase;
  return o;
}

TEST(CharNgrams, FeaturesAreScikitLearnsCharAndCharWbAnalyzers) {
  std::ifstream in(std::string(TANDEM_FIXTURES_DIR) + "/data/char_ngrams_sklearn.json");
  ASSERT_TRUE(in) << "missing fixture";
  const auto fixture = nlohmann::json::parse(in);
  ASSERT_GE(fixture["cases"].size(), 20u);
  for (const auto& c : fixture["cases"]) {
    const CharNgramOptions o = options(c["analyzer"], c["min_n"], c["max_n"], c["lowercase"]);
    const std::vector<std::string> got = ngram_features(c["text"].get<std::string>(), o),
                                   want = c["ngrams"].get<std::vector<std::string>>();
    size_t first = 0;
    while (first < got.size() && first < want.size() && got[first] == want[first]) ++first;
    EXPECT_EQ(got, want) << c["analyzer"] << " " << c["min_n"] << "-" << c["max_n"] << " lowercase "
                         << c["lowercase"] << " on " << c["text"] << ": first difference at " << first << ": "
                         << (first < got.size() ? got[first] : "(end)") << " vs "
                         << (first < want.size() ? want[first] : "(end)");
  }
}

TEST(CharNgrams, Fnv1a32MatchesItsPublishedTestVectors) {
  EXPECT_EQ(fnv1a32(""), 0x811c9dc5u);
  EXPECT_EQ(fnv1a32("a"), 0xe40c292cu);
  EXPECT_EQ(fnv1a32("foobar"), 0xbf9cf968u);
}

TEST(CharNgrams, IdsAreDistinctHashesAfterTheSpecialTokensInFirstOccurrenceOrder) {
  CharNgramOptions o = options("char", 2, 2);
  o.buckets = 1000;
  // "abab": ab, ba, ab -> ab once.
  const std::vector<int32_t> ids = ngram_ids("abab", o);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[0], 3 + static_cast<int32_t>(fnv1a32("ab") % 1000));
  EXPECT_EQ(ids[1], 3 + static_cast<int32_t>(fnv1a32("ba") % 1000));
  o.distinct = false;
  EXPECT_EQ(ngram_ids("abab", o).size(), 3u);
}

TEST(CharNgrams, WordNgramsAddTheWordsAndAdjacentPairsHashedApartFromCharacters) {
  CharNgramOptions o = options("char", 3, 3);
  o.word_ngrams = 2;
  const std::vector<std::string> f = ngram_features("Red fox", o);
  EXPECT_THAT(f, ::testing::Contains("\x01red"));
  EXPECT_THAT(f, ::testing::Contains("\x01" "fox"));
  EXPECT_THAT(f, ::testing::Contains("\x01red fox"));
  EXPECT_THAT(f, ::testing::Contains("red"));  // the character 3-gram, a different key
  o.word_ngrams = 1;
  EXPECT_THAT(ngram_features("Red fox", o), ::testing::Not(::testing::Contains("\x01red fox")));
}

TEST(CharNgrams, TruncationSubsamplesTheWholeTextEvenly) {
  CharNgramOptions o = options("char", 1, 1);
  o.buckets = 1 << 20;
  o.lowercase = false;
  const std::string text = "abcdefghijklmnopqrstuvwxyz";  // 26 distinct ids
  const std::vector<int32_t> all = ngram_ids(text, o);
  std::vector<int32_t> out = {0};  // one id already there (the [CLS])
  append_ngram_ids(text, o, out, 14);
  ASSERT_EQ(out.size(), 14u);
  for (size_t i = 0; i < 13; ++i) EXPECT_EQ(out[i + 1], all[i * 26 / 13]) << i;
  EXPECT_EQ(out.back(), all[24]);  // the end of the text is represented, not cut off
}

TEST(CharNgrams, TermCountsAreEachDistinctIdsOccurrencesAmongTheFeatures) {
  CharNgramOptions o = options("char", 1, 2);
  o.buckets = 1 << 20;
  const std::string text = "abababa";  // a x4, b x3, ab x3, ba x3
  std::vector<uint8_t> counts;
  const std::vector<int32_t> ids = ngram_ids(text, o, &counts);
  ASSERT_EQ(ids.size(), counts.size());
  std::map<int32_t, int> occurrences;  // the reference: the features themselves, hashed and counted
  for (const std::string& f : ngram_features(text, o)) ++occurrences[3 + static_cast<int32_t>(fnv1a32(f) % o.buckets)];
  ASSERT_EQ(ids.size(), occurrences.size());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(counts[i], occurrences[ids[i]]) << "id " << ids[i];
}

TEST(CharNgrams, TermCountsStopAt255) {
  CharNgramOptions o = options("char", 1, 1);
  std::vector<uint8_t> counts;
  ngram_ids(std::string(300, 'x'), o, &counts);
  EXPECT_EQ(counts, std::vector<uint8_t>{255});
}

TEST(CharNgrams, SubsampledIdsKeepTheirOwnCounts) {
  CharNgramOptions o = options("char", 1, 1);
  o.buckets = 1 << 20;
  o.lowercase = false;
  const std::string text = "aabbbcdddd";  // a 2, b 3, c 1, d 4
  std::vector<int32_t> out;
  std::vector<uint8_t> counts;
  append_ngram_ids(text, o, out, 2, &counts);  // of 4 ids, those at 0 and 2: a and c
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], 3 + static_cast<int32_t>(fnv1a32("a") % o.buckets));
  EXPECT_EQ(out[1], 3 + static_cast<int32_t>(fnv1a32("c") % o.buckets));
  EXPECT_EQ(counts, (std::vector<uint8_t>{2, 1}));
}

TEST(CharNgrams, OutOfRangeOptionsAreErrorsNamingTheConfigKey) {
  CharNgramOptions o;
  o.min_n = 0;
  EXPECT_THAT(error_of([&] { validate(o); }), HasSubstr("tokenizer.min_n"));
  o = {};
  o.max_n = 1;
  EXPECT_THAT(error_of([&] { validate(o); }), HasSubstr("tokenizer.max_n"));
  o = {};
  o.buckets = 0;
  EXPECT_THAT(error_of([&] { validate(o); }), HasSubstr("tokenizer.buckets"));
  o = {};
  o.analyzer = "word";
  EXPECT_THAT(error_of([&] { validate(o); }), HasSubstr("tokenizer.analyzer"));
  o = {};
  o.word_ngrams = 3;
  EXPECT_THAT(error_of([&] { validate(o); }), HasSubstr("tokenizer.word_ngrams"));
  o = {};
  o.term_counts = true;
  o.distinct = false;
  EXPECT_THAT(error_of([&] { validate(o); }), HasSubstr("tokenizer.term_counts"));
}

TEST(CharNgramTokenizer, TermCountsGoInTheMaskAndClsCountsOnce) {
  TokenizerOptions t;
  t.type = "char_ngrams";
  t.char_ngrams = options("char", 1, 1);
  t.char_ngrams.buckets = 1 << 20;
  t.char_ngrams.term_counts = true;
  const Tokenizer tok = Tokenizer::build(std::vector<std::string>{}, t);
  const Encoding e = tok.encode_batch({"abbccc", "zz"}, 5);
  EXPECT_EQ(e.mask.to_double_vector(), (std::vector<double>{1, 1, 2, 3, 0, 1, 2, 0, 0, 0}));
  t.char_ngrams.term_counts = false;
  const Encoding plain = Tokenizer::build(std::vector<std::string>{}, t).encode_batch({"abbccc", "zz"}, 5);
  EXPECT_EQ(plain.ids.to_double_vector(), e.ids.to_double_vector());
  EXPECT_EQ(plain.mask.to_double_vector(), (std::vector<double>{1, 1, 1, 1, 0, 1, 1, 0, 0, 0}));
}

TEST(CharNgramTokenizer, HasTheSpecialTokensPlusTheBucketsAndStartsWithCls) {
  TokenizerOptions t;
  t.type = "char_ngrams";
  t.char_ngrams = options("char_wb", 2, 4);
  t.char_ngrams.buckets = 4096;
  const Tokenizer tok = Tokenizer::build(std::vector<std::string>{"ignored: nothing is learned"}, t);
  EXPECT_EQ(tok.type(), "char_ngrams");
  EXPECT_EQ(tok.vocab_size(), 3 + 4096);
  const std::vector<int32_t> ids = tok.encode("Beer and pizza");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], Tokenizer::kCls);
  EXPECT_EQ(std::vector<int32_t>(ids.begin() + 1, ids.end()), ngram_ids("Beer and pizza", t.char_ngrams));
}

TEST(CharNgramTokenizer, SavesAndLoadsItsSettingsAsCharNgramsJson) {
  TempDir dir;
  TokenizerOptions t;
  t.type = "char_ngrams";
  t.lowercase = false;
  t.char_ngrams = options("char", 1, 3, false);
  t.char_ngrams.buckets = 777;
  t.char_ngrams.word_ngrams = 2;
  const Tokenizer tok = Tokenizer::build(std::vector<std::string>{}, t);
  EXPECT_EQ(tok.file_name(), "char_ngrams.json");
  tok.save(dir.path() / tok.file_name());
  EXPECT_EQ(Tokenizer::file_in(dir.path()), dir.path() / "char_ngrams.json");
  const Tokenizer back = Tokenizer::load(dir.path() / "char_ngrams.json");
  EXPECT_EQ(back.type(), "char_ngrams");
  EXPECT_EQ(back.vocab_size(), tok.vocab_size());
  for (const char* text : {"Hello World", "ÜBER straße", ""}) EXPECT_EQ(back.encode(text), tok.encode(text)) << text;
  EXPECT_FALSE(back.char_ngrams()->term_counts);
}

TEST(CharNgramTokenizer, TermCountsRoundTripAndAFileWithoutTheKeyHasNone) {
  TempDir dir;
  TokenizerOptions t;
  t.type = "char_ngrams";
  t.char_ngrams.term_counts = true;
  Tokenizer::build(std::vector<std::string>{}, t).save(dir.path() / "char_ngrams.json");
  EXPECT_TRUE(Tokenizer::load(dir.path() / "char_ngrams.json").char_ngrams()->term_counts);
  const auto old = dir.write("old.json",
                             R"({"type": "char_ngrams", "version": 1, "hash": "fnv1a32", "analyzer": "char",
                                 "min_n": 2, "max_n": 5, "buckets": 10, "word_ngrams": 0, "lowercase": true,
                                 "distinct": true, "prepend_cls": true})");
  EXPECT_FALSE(Tokenizer::load(old).char_ngrams()->term_counts);
}

TEST(CharNgramTokenizer, ABadFileNamesTheFileAndTheKey) {
  TempDir dir;
  const auto p = dir.write("char_ngrams.json",
                           R"({"type": "char_ngrams", "version": 1, "hash": "fnv1a32", "analyzer": "char",
                               "min_n": 2, "max_n": "five", "buckets": 10, "word_ngrams": 0, "lowercase": true,
                               "distinct": true, "prepend_cls": true})");
  const std::string e = error_of([&] { Tokenizer::load(p); });
  EXPECT_THAT(e, HasSubstr("char_ngrams.json"));
  EXPECT_THAT(e, HasSubstr("max_n"));
  const auto q = dir.write("other.json",
                           R"({"type": "char_ngrams", "version": 1, "hash": "murmur3", "analyzer": "char",
                               "min_n": 2, "max_n": 5, "buckets": 10, "word_ngrams": 0, "lowercase": true,
                               "distinct": true, "prepend_cls": true})");
  EXPECT_THAT(error_of([&] { Tokenizer::load(q); }), HasSubstr("hash"));
}

}  // namespace
}  // namespace tandem::data
