// core/parse_number.h: a number only when the whole string is one.
#include "core/parse_number.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tandem {
namespace {

TEST(ParseNumber, AWholeIntegerIsReadWithItsSign) {
  EXPECT_EQ(parse_int64("42"), 42);
  EXPECT_EQ(parse_int64("-7"), -7);
  EXPECT_EQ(parse_int64("9223372036854775807"), INT64_MAX);
}

TEST(ParseNumber, TrailingCharactersEmptyTextAndOverflowAreNotIntegers) {
  for (const char* bad : {"10x", "1.5", "", " ", "x", "12 ", "9223372036854775808"})
    EXPECT_EQ(parse_int64(bad), std::nullopt) << "'" << bad << "'";
}

TEST(ParseNumber, AWholeDoubleIsReadIncludingExponentsAndInfinity) {
  EXPECT_EQ(parse_double("0.25"), 0.25);
  EXPECT_EQ(parse_double("-1e3"), -1000.0);
  EXPECT_EQ(parse_double("2"), 2.0);
  EXPECT_TRUE(std::isinf(*parse_double("inf")));
}

TEST(ParseNumber, TrailingCharactersEmptyTextAndOverflowAreNotDoubles) {
  for (const char* bad : {"0.1x", "", "abc", "1.5 MB", "1e999"})
    EXPECT_EQ(parse_double(bad), std::nullopt) << "'" << bad << "'";
}

}  // namespace
}  // namespace tandem
