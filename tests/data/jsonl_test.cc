#include "data/jsonl.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/data/test_files.h"

namespace tandem::data {
namespace {

using testing::error_of;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::TempDir;

TEST(Jsonl, IntegerLabelsMakeClassesZeroToMax) {
  TempDir dir;
  auto path = dir.write("d.jsonl", "{\"text\": \"first\", \"label\": 2}\n\n{\"label\": 0, \"text\": \"second\"}\n");
  Dataset d = read_jsonl(path);
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"0", "1", "2"}));
  ASSERT_EQ(d.size(), 2);
  EXPECT_EQ(d.examples[0].label, 2);
  EXPECT_EQ(d.examples[1].text, "second");
  EXPECT_EQ(d.examples[1].source, path.string() + ":3");  // the blank line 2 is skipped
}

TEST(Jsonl, StringLabelsBecomeSortedClassNames) {
  TempDir dir;
  auto path = dir.write("d.jsonl",
                        "{\"text\": \"a\", \"label\": \"sports\"}\n{\"text\": \"b\", \"label\": \"business\"}\n"
                        "{\"text\": \"c\", \"label\": \"sports\"}\n");
  Dataset d = read_jsonl(path);
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"business", "sports"}));
  EXPECT_EQ(d.examples[0].label, 1);
  EXPECT_EQ(d.examples[1].label, 0);
  EXPECT_EQ(d.examples[2].label, 1);
}

TEST(Jsonl, FieldNamesAreConfigurable) {
  TempDir dir;
  auto path = dir.write("d.jsonl", "{\"sentence\": \"hello\", \"y\": 1, \"extra\": [1, 2]}\n");
  Dataset d = read_jsonl(path, {"sentence", "y", {}});
  ASSERT_EQ(d.size(), 1);
  EXPECT_EQ(d.examples[0].text, "hello");
  EXPECT_EQ(d.examples[0].label, 1);
}

TEST(Jsonl, GivenClassNamesAcceptNamesAndIndices) {
  TempDir dir;
  auto path = dir.write("d.jsonl", "{\"text\": \"a\", \"label\": \"pos\"}\n{\"text\": \"b\", \"label\": 0}\n");
  Dataset d = read_jsonl(path, {"text", "label", {"neg", "pos"}});
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"neg", "pos"}));
  EXPECT_EQ(d.examples[0].label, 1);
  EXPECT_EQ(d.examples[1].label, 0);
}

TEST(Jsonl, InvalidJsonNamesFileAndLine) {
  TempDir dir;
  auto path = dir.write("d.jsonl", "{\"text\": \"a\", \"label\": 0}\n{\"text\": \"b\", \"label\": 0\n");
  EXPECT_THAT(error_of([&] { read_jsonl(path); }), StartsWith(path.string() + ":2: invalid JSON:"));
}

TEST(Jsonl, LineThatIsNotAnObjectIsAnError) {
  TempDir dir;
  auto path = dir.write("d.jsonl", "[\"text\", 0]\n");
  EXPECT_THAT(error_of([&] { read_jsonl(path); }),
              StartsWith(path.string() + ":1: expected a JSON object, found array"));
}

TEST(Jsonl, MissingTextFieldIsAnError) {
  TempDir dir;
  auto path = dir.write("d.jsonl", "{\"body\": \"a\", \"label\": 0}\n");
  EXPECT_THAT(error_of([&] { read_jsonl(path); }), StartsWith(path.string() + ":1: missing text field 'text'"));
}

TEST(Jsonl, NonStringTextIsAnError) {
  TempDir dir;
  auto path = dir.write("d.jsonl", "{\"text\": 42, \"label\": 0}\n");
  EXPECT_THAT(error_of([&] { read_jsonl(path); }),
              StartsWith(path.string() + ":1: text field 'text' must be a string, found number"));
}

TEST(Jsonl, EmptyTextIsAnError) {
  TempDir dir;
  auto path = dir.write("d.jsonl", "{\"text\": \"ok\", \"label\": 0}\n{\"text\": \" \\n \", \"label\": 0}\n");
  EXPECT_THAT(error_of([&] { read_jsonl(path); }), StartsWith(path.string() + ":2: empty text"));
}

TEST(Jsonl, MissingLabelIsAnError) {
  TempDir dir;
  auto path = dir.write("d.jsonl", "{\"text\": \"a\"}\n");
  EXPECT_THAT(error_of([&] { read_jsonl(path); }), StartsWith(path.string() + ":1: missing label field 'label'"));
}

TEST(Jsonl, LabelBeyondInt64IsAnErrorReportingItsValue) {
  TempDir dir;
  auto path = dir.write("u.jsonl", "{\"text\": \"a\", \"label\": 18446744073709551615}\n");
  EXPECT_THAT(error_of([&] { read_jsonl(path); }),
              StartsWith(path.string() + ":1: label 18446744073709551615 is too large"));
}

TEST(Jsonl, FractionalOrBooleanLabelIsAnError) {
  TempDir dir;
  auto floats = dir.write("f.jsonl", "{\"text\": \"a\", \"label\": 1.5}\n");
  auto bools = dir.write("b.jsonl", "{\"text\": \"a\", \"label\": true}\n");
  EXPECT_THAT(
      error_of([&] { read_jsonl(floats); }),
      StartsWith(floats.string() + ":1: label field 'label' must be an integer or a string, found number (1.5)"));
  EXPECT_THAT(error_of([&] { read_jsonl(bools); }), HasSubstr("found boolean"));
}

TEST(Jsonl, NegativeLabelIsAnError) {
  TempDir dir;
  auto path = dir.write("d.jsonl", "{\"text\": \"a\", \"label\": -1}\n");
  EXPECT_THAT(error_of([&] { read_jsonl(path); }), StartsWith(path.string() + ":1: label -1 is negative"));
}

TEST(Jsonl, LabelOutsideTheGivenClassesIsAnError) {
  TempDir dir;
  auto index = dir.write("i.jsonl", "{\"text\": \"a\", \"label\": 2}\n");
  auto name = dir.write("n.jsonl", "{\"text\": \"a\", \"label\": \"neutral\"}\n");
  JsonlOptions options{"text", "label", {"neg", "pos"}};
  EXPECT_THAT(error_of([&] { read_jsonl(index, options); }),
              StartsWith(index.string() + ":1: label 2 is outside [0, 2)"));
  EXPECT_THAT(error_of([&] { read_jsonl(name, options); }),
              StartsWith(name.string() + ":1: label 'neutral' is not one of the classes (neg, pos)"));
}

TEST(Jsonl, MixingIntegerAndNameLabelsIsAnError) {
  TempDir dir;
  auto path = dir.write("d.jsonl", "{\"text\": \"a\", \"label\": 1}\n{\"text\": \"b\", \"label\": \"pos\"}\n");
  EXPECT_THAT(error_of([&] { read_jsonl(path); }),
              StartsWith(path.string() + ":2: label 'pos' is a name but earlier labels were integers"));
}

TEST(Jsonl, InvalidUtf8NamesLineAndOffset) {
  TempDir dir;
  auto path = dir.write("d.jsonl", "{\"text\": \"a\", \"label\": 1}\n{\"text\": \"\xC3(\", \"label\": 1}\n");
  EXPECT_THAT(error_of([&] { read_jsonl(path); }),
              StartsWith(path.string() + ":2: invalid UTF-8 at byte offset 36 (column 11"));
}

TEST(Jsonl, MissingFileIsAnError) {
  TempDir dir;
  EXPECT_THAT(error_of([&] { read_jsonl(dir.path() / "x.jsonl"); }),
              StartsWith((dir.path() / "x.jsonl").string() + ": no such file"));
}

}  // namespace
}  // namespace tandem::data
