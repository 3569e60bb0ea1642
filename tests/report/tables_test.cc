// CSV and LaTeX tables: CSV read back by the data library's RFC 4180 parser,
// LaTeX with booktabs rules and escaped text.
#include "report/tables.h"

#include <gtest/gtest.h>

#include "core/check.h"
#include "data/csv.h"

namespace tandem::report {
namespace {

std::vector<std::vector<std::string>> parse(const std::string& csv) {
  std::vector<std::vector<std::string>> rows;
  data::for_each_csv_record(csv, "summary.csv", [&](const data::CsvRecord& r) { rows.push_back(r.fields); });
  return rows;
}

TEST(Csv, RowsReadBackExactlyThroughAnRfc4180Parser) {
  Table t{{"case", "note", "value"}, {{"1 rank", "plain", "1.5"}, {"a,b", "say \"hi\"", "line\nbreak"}}, ""};
  const auto rows = parse(to_csv(t));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0], t.header);
  EXPECT_EQ(rows[1], t.rows[0]);
  EXPECT_EQ(rows[2], t.rows[1]);
}

TEST(Csv, PlainFieldsAreNotQuoted) {
  EXPECT_EQ(csv_field("abc 1.5"), "abc 1.5");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("a\"b"), "\"a\"\"b\"");
}

TEST(Csv, RaggedRowIsAnError) { EXPECT_THROW(to_csv(Table{{"a", "b"}, {{"1"}}, ""}), Error); }

TEST(Latex, BooktabsTableWithOneLinePerRow) {
  Table t{{"Ranks", "Speedup"}, {{"1", "1.00"}, {"2", "1.85"}}, "rr"};
  const std::string tex = to_latex(t, "DDP scaling", "tab:scaling");
  EXPECT_NE(tex.find("\\begin{tabular}{rr}"), std::string::npos);
  EXPECT_NE(tex.find("\\toprule\nRanks & Speedup \\\\\n\\midrule\n1 & 1.00 \\\\\n2 & 1.85 \\\\\n\\bottomrule"),
            std::string::npos);
  EXPECT_NE(tex.find("\\caption{DDP scaling}"), std::string::npos);
  EXPECT_NE(tex.find("\\label{tab:scaling}"), std::string::npos);
}

TEST(Latex, DefaultAlignmentIsLeftThenRight) {
  EXPECT_NE(to_latex(Table{{"a", "b", "c"}, {}, ""}, "c", "l").find("{lrr}"), std::string::npos);
}

TEST(Latex, SpecialCharactersAreEscaped) {
  EXPECT_EQ(latex_escape("50% of ddp_bucket_cap_mb & $x#{}~^\\"),
            "50\\% of ddp\\_bucket\\_cap\\_mb \\& \\$x\\#\\{\\}\\textasciitilde{}\\textasciicircum{}\\textbackslash{}");
}

TEST(Latex, AlignmentOfTheWrongLengthIsAnError) { EXPECT_THROW(to_latex(Table{{"a", "b"}, {}, "l"}, "c", "l"), Error); }

}  // namespace
}  // namespace tandem::report
