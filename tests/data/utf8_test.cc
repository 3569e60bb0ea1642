#include "data/utf8.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace tandem::data {
namespace {

std::string from_hex(const std::string& hex) {
  std::string out;
  if (hex == "-") return out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

TEST(Utf8, AcceptsAsciiAndEveryEncodingLength) {
  EXPECT_EQ(find_invalid_utf8(""), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("plain ascii, long enough for the 8-byte path"), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF"), std::nullopt);
}

TEST(Utf8, ReportsTheOffsetOfTheFirstBadByte) {
  EXPECT_EQ(find_invalid_utf8("abc\x80"), 3u);               // stray continuation byte
  EXPECT_EQ(find_invalid_utf8("abcdefghij\xC3"), 10u);       // truncated at the end
  EXPECT_EQ(find_invalid_utf8("x\xC0\x80"), 1u);             // overlong NUL
  EXPECT_EQ(find_invalid_utf8("\xE0\x80\xAF"), 0u);          // overlong 3-byte
  EXPECT_EQ(find_invalid_utf8("ok \xED\xA0\x80"), 3u);       // UTF-16 surrogate
  EXPECT_EQ(find_invalid_utf8("\xF4\x90\x80\x80"), 0u);      // above U+10FFFF
  EXPECT_EQ(find_invalid_utf8("\xE2\x82\xAC\xE2\x82"), 3u);  // valid euro, then a truncated one
}

// Python's strict UTF-8 decoder is the reference: tests/fixtures/data/make_fixtures.py.
TEST(Utf8, AgreesWithPythonsDecoderOnRandomBytes) {
  std::ifstream in(std::string(TANDEM_FIXTURES_DIR) + "/data/utf8_cases.txt");
  ASSERT_TRUE(in) << "missing fixture utf8_cases.txt";
  std::string line;
  int cases = 0, invalid = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string hex;
    long expected = 0;
    fields >> hex >> expected;
    auto got = find_invalid_utf8(from_hex(hex));
    EXPECT_EQ(got ? static_cast<long>(*got) : -1L, expected) << "bytes " << hex;
    ++cases;
    invalid += expected >= 0;
  }
  EXPECT_GT(cases, 500);
  EXPECT_GT(invalid, 100);
  EXPECT_LT(invalid, cases);
}

TEST(Utf8, DecodeReturnsCodePointsAndFlagsInvalidBytes) {
  size_t len = 0;
  EXPECT_EQ(decode_utf8("\xC3\xA9", 0, &len), U'\u00E9');
  EXPECT_EQ(len, 2u);
  EXPECT_EQ(decode_utf8("\xF0\x9F\x98\x80", 0, &len), U'\U0001F600');
  EXPECT_EQ(len, 4u);
  EXPECT_EQ(decode_utf8("\xC3", 0, &len), kInvalidCodePoint);
  EXPECT_EQ(len, 1u);
}

TEST(Utf8, AppendEncodesWhatDecodeReads) {
  for (char32_t cp : {U'A', U'\u00E9', U'\u20AC', U'\U0001F600', U'\U0010FFFF'}) {
    std::string s;
    append_utf8(s, cp);
    size_t len = 0;
    EXPECT_EQ(decode_utf8(s, 0, &len), cp);
    EXPECT_EQ(len, s.size());
  }
}

}  // namespace
}  // namespace tandem::data
