#include "data/tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/data/test_files.h"

namespace tandem::data {
namespace {

using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::TempDir;

using Tokens = std::vector<std::string>;

TEST(BasicTokenize, LowerCasesAndSplitsOnWhitespace) {
  EXPECT_EQ(basic_tokenize("  The QUICK\tbrown\n\nFox  "), (Tokens{"the", "quick", "brown", "fox"}));
}

TEST(BasicTokenize, EachPunctuationCharacterIsItsOwnToken) {
  EXPECT_EQ(basic_tokenize("Don't stop!!"), (Tokens{"don", "'", "t", "stop", "!", "!"}));
  EXPECT_EQ(basic_tokenize("e-mail: a@b.com (v2.0)"),
            (Tokens{"e", "-", "mail", ":", "a", "@", "b", ".", "com", "(", "v2", ".", "0", ")"}));
}

TEST(BasicTokenize, DigitsAndNonAsciiLettersStayInWords) {
  EXPECT_EQ(basic_tokenize("CAFÉ 42nd Straße ΑΘΗΝΑ Москва"), (Tokens{"café", "42nd", "straße", "αθηνα", "москва"}));
  EXPECT_EQ(basic_tokenize("ŁÓDŹ"), (Tokens{"łódź"}));
}

TEST(BasicTokenize, UnicodePunctuationAndSpacesSplit) {
  EXPECT_EQ(basic_tokenize("“Wait…” — she said\u00A0«non»"),
            (Tokens{"“", "wait", "…", "”", "—", "she", "said", "«", "non", "»"}));
}

TEST(BasicTokenize, SoftHyphenAndByteOrderMarkAreDropped) {
  EXPECT_EQ(basic_tokenize("co\u00ADoperate \uFEFFok"), (Tokens{"cooperate", "ok"}));
}

TEST(BasicTokenize, InvalidUtf8BytesStayInsideWordsWithoutThrowing) {
  EXPECT_EQ(basic_tokenize("ab\xFF"
                           "cd ef"),
            (Tokens{"ab\xFF"
                    "cd",
                    "ef"}));
}

TEST(BasicTokenize, SpecialTokenSpellingsCannotComeFromText) {
  EXPECT_EQ(basic_tokenize("[PAD] [CLS]"), (Tokens{"[", "pad", "]", "[", "cls", "]"}));
}

TEST(Tokenizer, VocabularyIsSpecialTokensThenByFrequencyThenBytes) {
  Tokenizer t = Tokenizer::build(std::vector<std::string>{"b a c a", "c a d b"});
  // a:3, b:2, c:2, d:1 -> ties b, c in byte order.
  ASSERT_EQ(t.vocab_size(), 7);
  EXPECT_EQ(t.token(0), "[PAD]");
  EXPECT_EQ(t.token(1), "[UNK]");
  EXPECT_EQ(t.token(2), "[CLS]");
  EXPECT_EQ(t.token(3), "a");
  EXPECT_EQ(t.token(4), "b");
  EXPECT_EQ(t.token(5), "c");
  EXPECT_EQ(t.token(6), "d");
}

TEST(Tokenizer, MinFreqAndMaxSizeLimitTheVocabulary) {
  std::vector<std::string> texts{"a a a b b c", "a b d"};
  EXPECT_EQ(Tokenizer::build(texts, {.min_freq = 2}).vocab_size(), 3 + 2);  // a, b
  Tokenizer capped = Tokenizer::build(texts, {.max_size = 4});
  EXPECT_EQ(capped.vocab_size(), 4);
  EXPECT_EQ(capped.token(3), "a");
  EXPECT_EQ(capped.id("b"), Tokenizer::kUnk);
}

TEST(Tokenizer, BadOptionsAreErrors) {
  EXPECT_THAT(error_of([] { Tokenizer::build(std::vector<std::string>{"a"}, {.min_freq = 0}); }),
              HasSubstr("min_freq"));
  EXPECT_THAT(error_of([] { Tokenizer::build(std::vector<std::string>{"a"}, {.max_size = 2}); }),
              HasSubstr("max_size"));
}

TEST(Tokenizer, UnknownWordsMapToUnk) {
  Tokenizer t = Tokenizer::build(std::vector<std::string>{"hello world"});
  EXPECT_EQ(t.encode("Hello, unseen world"),
            (std::vector<int32_t>{Tokenizer::kCls, t.id("hello"), Tokenizer::kUnk, Tokenizer::kUnk, t.id("world")}));
}

TEST(Tokenizer, EncodeIntoTruncatesPadsAndMasks) {
  Tokenizer t = Tokenizer::build(std::vector<std::string>{"one two three four"});
  std::vector<int64_t> ids(4, -7);
  std::vector<uint8_t> mask(4, 9);
  EXPECT_EQ(t.encode_into("one two", 4, DType::I64, ids.data(), mask.data()), 3);
  EXPECT_EQ(ids, (std::vector<int64_t>{Tokenizer::kCls, t.id("one"), t.id("two"), Tokenizer::kPad}));
  EXPECT_EQ(mask, (std::vector<uint8_t>{1, 1, 1, 0}));
  std::vector<int32_t> ids32(3);
  EXPECT_EQ(t.encode_into("one two three four", 3, DType::I32, ids32.data(), mask.data()), 3);
  EXPECT_EQ(ids32, (std::vector<int32_t>{Tokenizer::kCls, t.id("one"), t.id("two")}));
}

TEST(Tokenizer, LowerCasingCanBeTurnedOff) {
  EXPECT_EQ(basic_tokenize("Hello WORLD, Émile", false), (Tokens{"Hello", "WORLD", ",", "Émile"}));
  Tokenizer t = Tokenizer::build(std::vector<std::string>{"Apple apple"}, {.lowercase = false});
  EXPECT_EQ(t.vocab_size(), 5);
  EXPECT_NE(t.id("Apple"), t.id("apple"));
  EXPECT_EQ(t.encode("APPLE")[1], Tokenizer::kUnk);
}

TEST(Tokenizer, PrependClsCanBeTurnedOff) {
  Tokenizer t = Tokenizer::build(std::vector<std::string>{"x y"}, {.prepend_cls = false});
  EXPECT_EQ(t.encode("y x"), (std::vector<int32_t>{t.id("y"), t.id("x")}));
}

TEST(Tokenizer, EncodeBatchMatchesEncodeRowByRow) {
  std::vector<std::string> texts{"the cat sat", "on the mat, the end", ""};
  Tokenizer t = Tokenizer::build(texts);
  Encoding e = t.encode_batch(texts, 5);
  ASSERT_EQ(e.ids.shape(), (Shape{3, 5}));
  EXPECT_EQ(e.ids.dtype(), DType::I64);
  EXPECT_EQ(e.mask.dtype(), DType::U8);
  auto ids = e.ids.to_int_vector();
  auto mask = e.mask.to_int_vector();
  for (size_t r = 0; r < texts.size(); ++r) {
    auto full = t.encode(texts[r]);
    for (size_t j = 0; j < 5; ++j) {
      const bool real = j < full.size();
      EXPECT_EQ(ids[r * 5 + j], real ? full[j] : Tokenizer::kPad) << "row " << r << " col " << j;
      EXPECT_EQ(mask[r * 5 + j], real ? 1 : 0);
    }
  }
}

TEST(Tokenizer, SaveThenLoadGivesTheSameTokenizer) {
  TempDir dir;
  Tokenizer t = Tokenizer::build(std::vector<std::string>{"Zürich, café: déjà vu!", "vu vu"},
                                 {.prepend_cls = false, .lowercase = false});
  t.save(dir.path() / "vocab.txt");
  Tokenizer u = Tokenizer::load(dir.path() / "vocab.txt");
  EXPECT_EQ(u.vocab_size(), t.vocab_size());
  EXPECT_FALSE(u.prepend_cls());
  EXPECT_FALSE(u.lowercase());
  for (int32_t i = 0; i < t.vocab_size(); ++i) EXPECT_EQ(u.token(i), t.token(i));
  EXPECT_EQ(u.encode("déjà vu in Zürich"), t.encode("déjà vu in Zürich"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "vocab.txt.tmp"));
}

TEST(TokenizerLoad, WrongHeaderIsAnErrorOnLineOne) {
  TempDir dir;
  auto p = dir.write("v.txt", "[PAD]\n[UNK]\n[CLS]\n");
  EXPECT_THAT(error_of([&] { Tokenizer::load(p); }), StartsWith(p.string() + ":1: not a Tandem vocabulary"));
}

TEST(TokenizerLoad, UnsupportedVersionIsAnError) {
  TempDir dir;
  auto p = dir.write("v.txt", "tandem-vocab 2 prepend_cls=1 lowercase=1\n[PAD]\n[UNK]\n[CLS]\n");
  EXPECT_THAT(error_of([&] { Tokenizer::load(p); }), StartsWith(p.string() + ":1: unsupported vocabulary version 2"));
}

TEST(TokenizerLoad, SpecialTokensMustComeFirst) {
  TempDir dir;
  auto p = dir.write("v.txt", "tandem-vocab 1 prepend_cls=1 lowercase=1\n[PAD]\n[CLS]\n[UNK]\n");
  EXPECT_THAT(error_of([&] { Tokenizer::load(p); }),
              StartsWith(p.string() + ":3: expected the special token [UNK] (id 1)"));
}

TEST(TokenizerLoad, TruncatedFileIsAnError) {
  TempDir dir;
  auto p = dir.write("v.txt", "tandem-vocab 1 prepend_cls=1 lowercase=1\n[PAD]\n");
  EXPECT_THAT(error_of([&] { Tokenizer::load(p); }),
              StartsWith(p.string() + ":2: the file ends before the special tokens"));
}

TEST(TokenizerLoad, DuplicateTokenNamesBothLines) {
  TempDir dir;
  auto p = dir.write("v.txt", "tandem-vocab 1 prepend_cls=1 lowercase=1\n[PAD]\n[UNK]\n[CLS]\nthe\ncat\nthe\n");
  EXPECT_THAT(error_of([&] { Tokenizer::load(p); }),
              StartsWith(p.string() + ":7: duplicate token 'the' (first on line 5)"));
}

TEST(TokenizerLoad, TokenTheTokenizerCannotProduceIsAnError) {
  TempDir dir;
  auto upper = dir.write("u.txt", "tandem-vocab 1 prepend_cls=1 lowercase=1\n[PAD]\n[UNK]\n[CLS]\nThe\n");
  auto spaced = dir.write("s.txt", "tandem-vocab 1 prepend_cls=1 lowercase=1\n[PAD]\n[UNK]\n[CLS]\nnew york\n");
  auto empty = dir.write("e.txt", "tandem-vocab 1 prepend_cls=1 lowercase=1\n[PAD]\n[UNK]\n[CLS]\n\n");
  EXPECT_THAT(error_of([&] { Tokenizer::load(upper); }),
              StartsWith(upper.string() + ":5: 'The' is not a single normalized token"));
  EXPECT_THAT(error_of([&] { Tokenizer::load(spaced); }),
              StartsWith(spaced.string() + ":5: 'new york' is not a single"));
  EXPECT_THAT(error_of([&] { Tokenizer::load(empty); }), StartsWith(empty.string() + ":5: empty token"));
}

TEST(TokenizerLoad, InvalidUtf8AndMissingFileAreErrors) {
  TempDir dir;
  auto p = dir.write("v.txt", "tandem-vocab 1 prepend_cls=1 lowercase=1\n[PAD]\n[UNK]\n[CLS]\nok\n\xE2\x82\n");
  EXPECT_THAT(error_of([&] { Tokenizer::load(p); }), StartsWith(p.string() + ":6: invalid UTF-8"));
  EXPECT_THAT(error_of([&] { Tokenizer::load(dir.path() / "none.txt"); }), HasSubstr("none.txt: no such file"));
}

}  // namespace
}  // namespace tandem::data
