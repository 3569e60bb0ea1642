// BPE tokenizer against Hugging Face `tokenizers` (fixture:
// tests/fixtures/data/ make_bpe_fixtures.py -> bpe_hf.json, tokenizers' own
// tokenizer.json files and ids).
#include "data/bpe.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/hf_pretokenizer.h"
#include "data/tokenizer.h"
#include "tests/data/test_files.h"

namespace tandem::data {
namespace {

using nlohmann::json;
using testing::error_of;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::TempDir;

const json& fixture() {
  static const json f = [] {
    std::ifstream in(std::string(TANDEM_FIXTURES_DIR) + "/data/bpe_hf.json");
    EXPECT_TRUE(in.good()) << "missing fixture bpe_hf.json";
    return json::parse(in);
  }();
  return f;
}

TokenizerOptions bpe_options(const json& c) {
  TokenizerOptions o;
  o.type = "bpe";
  o.vocab_size = c["vocab_size"].get<int64_t>();
  o.min_frequency = c["min_frequency"].get<int64_t>();
  o.lowercase = c["lowercase"].get<bool>();
  return o;
}

json saved_json(const Tokenizer& t, const TempDir& dir) {
  const auto path = dir.path() / "tokenizer.json";
  t.save(path);
  std::ifstream in(path);
  return json::parse(in);
}

TEST(HfPretokenizer, LowercaseAndWhitespaceSplitMatchTokenizers) {
  const json& f = fixture();
  std::vector<std::string> inputs = f["texts"].get<std::vector<std::string>>();
  for (size_t i = 0; i < 50; ++i) inputs.push_back(f["corpus"][i].get<std::string>());
  ASSERT_EQ(inputs.size(), f["pretokens"].size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string normalized;
    hf::lowercase_into(inputs[i], normalized);
    std::vector<std::string> words;
    hf::for_each_pretoken(normalized, [&](std::string_view w) { words.emplace_back(w); });
    EXPECT_EQ(words, f["pretokens"][i].get<std::vector<std::string>>()) << "text " << i << ": " << inputs[i];
  }
}

TEST(HfPretokenizer, LowercaseExpandsWhereRustDoes) {
  std::string out;
  hf::lowercase_into("İ ΣΑΣ Ǆ", out);
  EXPECT_EQ(out, "i\u0307 σασ ǆ");  // per code point: no final-sigma rule,
                                    // dotted I keeps its dot
}

TEST(BpeTokenizer, TokenizerJsonWrittenByTokenizersEncodesToTheSameIds) {
  const json& f = fixture();
  for (const json& c : f["cases"]) {
    TempDir dir;
    const auto path = dir.write("tokenizer.json", c["tokenizer"].dump());
    const Tokenizer t = Tokenizer::load(path);
    EXPECT_EQ(t.type(), "bpe");
    EXPECT_EQ(t.vocab_size(), static_cast<int64_t>(c["tokenizer"]["model"]["vocab"].size()));
    for (size_t i = 0; i < f["texts"].size(); ++i)
      EXPECT_EQ(t.encode(f["texts"][i].get<std::string>()), c["ids"][i].get<std::vector<int32_t>>())
          << "vocab_size " << c["vocab_size"] << ", text " << i << ": " << f["texts"][i];
  }
}

TEST(BpeTokenizer, TrainingGivesTokenizersBpeTrainerVocabularyAndMerges) {
  const json& f = fixture();
  const auto corpus = f["corpus"].get<std::vector<std::string>>();
  for (const json& c : f["cases"]) {
    TempDir dir;
    const json ours = saved_json(Tokenizer::build(corpus, bpe_options(c)), dir);
    const json& theirs = c["tokenizer"];
    EXPECT_EQ(ours["model"]["vocab"], theirs["model"]["vocab"]) << "vocab_size " << c["vocab_size"];
    EXPECT_EQ(ours["model"]["merges"], theirs["model"]["merges"]) << "vocab_size " << c["vocab_size"];
    // The whole file is the one tokenizers writes for this pipeline (key order
    // aside).
    EXPECT_EQ(ours, theirs) << "vocab_size " << c["vocab_size"];
  }
}

TEST(BpeTokenizer, SaveAndLoadRoundTrip) {
  const json& f = fixture();
  const json& c = f["cases"][0];
  TempDir dir;
  const Tokenizer built = Tokenizer::build(f["corpus"].get<std::vector<std::string>>(), bpe_options(c));
  EXPECT_EQ(built.file_name(), "tokenizer.json");
  built.save(dir.path() / "tokenizer.json");
  const Tokenizer loaded = Tokenizer::load(dir.path() / "tokenizer.json");
  ASSERT_EQ(loaded.vocab_size(), built.vocab_size());
  for (int32_t id = 0; id < built.vocab_size(); ++id) EXPECT_EQ(loaded.token(id), built.token(id));
  for (const auto& text : f["texts"])
    EXPECT_EQ(loaded.encode(text.get<std::string>()), built.encode(text.get<std::string>()));
  EXPECT_EQ(saved_json(loaded, dir), saved_json(built, dir));
  EXPECT_EQ(Tokenizer::file_in(dir.path()), dir.path() / "tokenizer.json");
}

TEST(BpeTokenizer, MergesInThePreV020StringFormatLoadAlike) {
  const json& c = fixture()["cases"][0];
  json old = c["tokenizer"];
  for (json& m : old["model"]["merges"]) m = m[0].get<std::string>() + " " + m[1].get<std::string>();
  TempDir dir;
  const Tokenizer a = Tokenizer::load(dir.write("old.json", old.dump()));
  const Tokenizer b = Tokenizer::load(dir.write("new.json", c["tokenizer"].dump()));
  for (const auto& text : fixture()["texts"])
    EXPECT_EQ(a.encode(text.get<std::string>()), b.encode(text.get<std::string>()));
}

TEST(BpeTokenizer, EncodeIntoTruncatesAndPads) {
  const json& c = fixture()["cases"][0];
  TempDir dir;
  const Tokenizer t = Tokenizer::load(dir.write("tokenizer.json", c["tokenizer"].dump()));
  const std::string text = fixture()["texts"][1].get<std::string>();
  const std::vector<int32_t> all = t.encode(text);
  ASSERT_GT(all.size(), 4u);
  Encoding e = t.encode_batch({text, ""}, 4, DType::I32);
  const int32_t* ids = e.ids.data<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(ids, ids + 4), std::vector<int32_t>(all.begin(), all.begin() + 4));
  EXPECT_EQ(std::vector<int32_t>(ids + 4, ids + 8), (std::vector<int32_t>{Tokenizer::kCls, 0, 0, 0}));
  EXPECT_EQ(e.mask.data<uint8_t>()[5], 0);
}

TEST(BpeTokenizer, MergeTiesGoToTheSmallerPairOfIds) {
  // "ab" and "cd" both occur twice; a < c in code point order, so (a, b) merges
  // first.
  TokenizerOptions o;
  o.type = "bpe";
  o.vocab_size = 3 + 4 + 1;
  o.min_frequency = 1;
  const Tokenizer t = Tokenizer::build(std::vector<std::string>{"cd ab", "ab cd"}, o);
  ASSERT_EQ(t.vocab_size(), 8);
  EXPECT_EQ(t.token(7), "ab");
}

TEST(BpeTokenizer, MinFrequencyStopsMerging) {
  TokenizerOptions o;
  o.type = "bpe";
  o.vocab_size = 100;
  o.min_frequency = 3;
  const Tokenizer t = Tokenizer::build(std::vector<std::string>{"ab ab ab cd cd"}, o);
  EXPECT_EQ(t.vocab_size(), 3 + 4 + 1);  // only "ab" (3 times) is merged
  EXPECT_EQ(t.encode("cd ab"), (std::vector<int32_t>{Tokenizer::kCls, 5, 6, 7}));
}

TEST(BpeTokenizer, UnknownTypeIsAnError) {
  TokenizerOptions o;
  o.type = "wordpiece";
  EXPECT_THAT(error_of([&] { Tokenizer::build(std::vector<std::string>{"x"}, o); }),
              HasSubstr("tokenizer: type must be 'word', 'bpe' or 'char_ngrams', got 'wordpiece'"));
}

class BpeFileErrors : public ::testing::Test {
 protected:
  std::string load_error(const std::function<void(json&)>& edit) {
    json doc = fixture()["cases"][0]["tokenizer"];
    edit(doc);
    const auto path = dir_.write("tokenizer.json", doc.dump(1));
    return error_of([&] { Tokenizer::load(path); });
  }
  std::string path() const { return (dir_.path() / "tokenizer.json").string(); }
  TempDir dir_;
};

TEST_F(BpeFileErrors, AnotherModelTypeIsRejectedNamingTheKey) {
  EXPECT_THAT(load_error([](json& d) { d["model"]["type"] = "WordPiece"; }),
              StartsWith(path() + ": model.type: only BPE is supported, found \"WordPiece\""));
}

TEST_F(BpeFileErrors, AnotherPreTokenizerIsRejected) {
  EXPECT_THAT(load_error([](json& d) {
                d["pre_tokenizer"] = {{"type", "ByteLevel"}};
              }),
              StartsWith(path() + ": pre_tokenizer: {\"type\":\"ByteLevel\"} is not supported"));
}

TEST_F(BpeFileErrors, SpecialTokensAtOtherIdsAreRejected) {
  EXPECT_THAT(load_error([](json& d) { d["added_tokens"][2]["id"] = 5; }),
              StartsWith(path() + ": added_tokens[2]: expected [CLS] with id 2"));
}

TEST_F(BpeFileErrors, MergeOfAnUnknownTokenIsRejected) {
  EXPECT_THAT(load_error([](json& d) {
                d["model"]["merges"][0] = {"n", "zzz"};
              }),
              StartsWith(path() + ": model: BPE: merge 0 ('n' 'zzz') uses a "
                                  "token that is not in the vocabulary"));
}

TEST_F(BpeFileErrors, DuplicateIdsAreRejected) {
  EXPECT_THAT(load_error([](json& d) {
                d["model"]["vocab"]["n"] = 4;
                d["model"]["vocab"]["e"] = 4;
              }),
              HasSubstr("ids must be 0.."));
}

TEST(BpeFile, InvalidJsonNamesTheLine) {
  TempDir dir;
  const auto path = dir.write("tokenizer.json", "{\n  \"version\": \"1.0\",\n  oops\n}\n");
  EXPECT_THAT(error_of([&] { Tokenizer::load(path); }), StartsWith(path.string() + ":3: invalid JSON"));
}

}  // namespace
}  // namespace tandem::data
