// core/env_switch.h: a three-way switch on a variable private to this test,
// set and unset with setenv, against what the header promises: the first
// choice when unset or empty, each name its value, any other text an Error
// naming the variable, every choice and the text; read once; a test's
// override wins until cleared; each value's name, and no name for a value
// outside the table.
#include "core/env_switch.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace tandem {
namespace {

enum class Flavour { Plain, Salted, Sweet };

constexpr const char* kVariable = "TANDEM_ENV_SWITCH_TEST_FLAVOUR";

using FlavourSwitch = EnvSwitch<Flavour, 3>;
constexpr EnvChoice<Flavour> kFlavours[] = {
    {"plain", Flavour::Plain}, {"salted", Flavour::Salted}, {"sweet", Flavour::Sweet}};

TEST(EnvSwitch, UnsetOrEmptyIsTheFirstChoiceAndEachNameItsValue) {
  const FlavourSwitch s{kVariable, kFlavours};
  EXPECT_EQ(s.parse(nullptr), Flavour::Plain);
  EXPECT_EQ(s.parse(""), Flavour::Plain);
  EXPECT_EQ(s.parse("plain"), Flavour::Plain);
  EXPECT_EQ(s.parse("salted"), Flavour::Salted);
  EXPECT_EQ(s.parse("sweet"), Flavour::Sweet);
}

TEST(EnvSwitch, AnyOtherTextIsAnErrorNamingTheVariableTheChoicesAndTheText) {
  const FlavourSwitch s{kVariable, kFlavours};
  try {
    s.parse("Sweet");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::string(kVariable) + " must be plain, salted or sweet, got 'Sweet'"),
              std::string::npos)
        << e.what();
  }
}

TEST(EnvSwitch, ReadsTheVariableOnceOnFirstUse) {
  FlavourSwitch s{kVariable, kFlavours};
  ASSERT_EQ(setenv(kVariable, "salted", 1), 0);
  EXPECT_EQ(s.value(), Flavour::Salted);
  ASSERT_EQ(setenv(kVariable, "sweet", 1), 0);
  EXPECT_EQ(s.value(), Flavour::Salted);
  unsetenv(kVariable);
}

TEST(EnvSwitch, ABadValueThrowsOnEveryUse) {
  FlavourSwitch s{kVariable, kFlavours};
  ASSERT_EQ(setenv(kVariable, "bitter", 1), 0);
  EXPECT_THROW(s.value(), Error);
  EXPECT_THROW(s.value(), Error);
  unsetenv(kVariable);
}

TEST(EnvSwitch, ATestOverrideWinsUntilCleared) {
  FlavourSwitch s{kVariable, kFlavours};
  unsetenv(kVariable);
  s.force_for_testing(Flavour::Sweet);
  EXPECT_EQ(s.value(), Flavour::Sweet);
  s.force_for_testing(std::nullopt);
  EXPECT_EQ(s.value(), Flavour::Plain);
}

TEST(EnvSwitch, NamesEachValue) {
  const FlavourSwitch s{kVariable, kFlavours};
  EXPECT_STREQ(s.name(Flavour::Plain), "plain");
  EXPECT_STREQ(s.name(Flavour::Salted), "salted");
  EXPECT_STREQ(s.name(Flavour::Sweet), "sweet");
}

TEST(EnvSwitch, AValueOutsideTheTableIsAnErrorNotAName) {
  const FlavourSwitch s{kVariable, kFlavours};
  EXPECT_THROW(s.name(static_cast<Flavour>(7)), Error);
}

}  // namespace
}  // namespace tandem
