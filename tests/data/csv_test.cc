#include "data/csv.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/data/test_files.h"

namespace tandem::data {
namespace {

using testing::error_of;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::vector<CsvRecord> parse(std::string_view text) {
  std::vector<CsvRecord> out;
  for_each_csv_record(text, "in.csv", [&](const CsvRecord& r) { out.push_back(r); });
  return out;
}

TEST(Csv, QuotedFieldsKeepCommasEscapedQuotesAndNewlines) {
  auto records = parse("\"1\",\"a, b\",\"say \"\"hi\"\"\"\n\"2\",\"two\nlines\",x\n");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].fields, (std::vector<std::string>{"1", "a, b", "say \"hi\""}));
  EXPECT_EQ(records[1].fields, (std::vector<std::string>{"2", "two\nlines", "x"}));
}

TEST(Csv, RecordsKnowTheLineTheyStartOn) {
  auto records = parse("a,\"multi\nline\nfield\"\n\nb,c\r\nd,e");
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].line, 1);
  EXPECT_EQ(records[1].line, 5);  // after the 3-line record and an empty line
  EXPECT_EQ(records[2].line, 6);
  EXPECT_EQ(records[1].fields, (std::vector<std::string>{"b", "c"}));  // CRLF stripped
  EXPECT_EQ(records[2].fields, (std::vector<std::string>{"d", "e"}));  // no final newline
}

TEST(Csv, EmptyFieldsAreKept) {
  auto records = parse(",\"\",\n");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].fields, (std::vector<std::string>{"", "", ""}));
}

TEST(Csv, UnterminatedQuoteNamesTheLineItOpenedOn) {
  EXPECT_THAT(error_of([] { parse("a,b\nc,\"never\nclosed\n"); }),
              StartsWith("in.csv:2: quoted field is never closed"));
}

TEST(Csv, TextAfterAClosingQuoteIsAnError) {
  EXPECT_THAT(error_of([] { parse("a,b\n\"x\"y,z\n"); }), StartsWith("in.csv:2: unexpected 'y' after a closing quote"));
}

TEST(Csv, QuoteInsideAnUnquotedFieldIsAnError) {
  EXPECT_THAT(error_of([] { parse("ok\nab\"c,d\n"); }), StartsWith("in.csv:2: '\"' inside an unquoted field"));
}

}  // namespace
}  // namespace tandem::data
