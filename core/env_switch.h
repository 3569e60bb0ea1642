// A process-wide choice among a few named values (an enum, or bool) made by
// an environment variable: read once, on first use; unset or empty picks the
// first choice; any other text that names none is an Error naming the
// variable, the choices and the value. Tests force a value and return to the
// environment's with nullopt. One object per switch, at namespace scope in
// the .cc that owns it (constant-initialised, so usable from any static
// initialiser); its public functions forward to it. Forcing is for tests on
// one thread, as the tests use it: it is not synchronised with readers.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "core/check.h"

namespace tandem {

template <class V>
struct EnvChoice {
  const char* text;
  V value;
};

template <class V, size_t N>
class EnvSwitch {
  static_assert(N >= 2, "a switch chooses between at least two values");

 public:
  // choices[0] is the default (unset or empty).
  constexpr EnvSwitch(const char* variable, const EnvChoice<V> (&choices)[N]) : variable_(variable) {
    for (size_t i = 0; i < N; ++i) choices_[i] = choices[i];
  }
  EnvSwitch(const EnvSwitch&) = delete;
  EnvSwitch& operator=(const EnvSwitch&) = delete;

  // The value `text` names (null or empty: the default); throws Error naming the variable.
  V parse(const char* text) const {
    if (text == nullptr || *text == '\0') return choices_[0].value;
    for (const EnvChoice<V>& c : choices_)
      if (std::string_view(c.text) == text) return c.value;
    TANDEM_FAIL("{} must be {}, got '{}'", variable_, alternatives(), text);
  }

  // The forced value, else the variable's, read once (a bad value throws on every call).
  V value() {
    if (forced_) return *forced_;
    std::call_once(read_, [this] { from_environment_ = parse(std::getenv(variable_)); });
    return from_environment_;
  }

  void force_for_testing(std::optional<V> v) { forced_ = v; }

  // The text that names v.
  const char* name(V v) const {
    for (const EnvChoice<V>& c : choices_)
      if (c.value == v) return c.text;
    TANDEM_FAIL("{}: no choice has the value {}", variable_, static_cast<int>(v));
  }

 private:
  // "a or b", "a, b or c".
  std::string alternatives() const {
    std::string s = choices_[0].text;
    for (size_t i = 1; i < N; ++i) s += std::string(i + 1 == N ? " or " : ", ") + choices_[i].text;
    return s;
  }

  const char* variable_;
  EnvChoice<V> choices_[N] = {};
  std::optional<V> forced_;
  std::once_flag read_;
  V from_environment_{};
};

}  // namespace tandem
