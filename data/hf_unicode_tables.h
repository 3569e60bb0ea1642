// Character classes of Hugging Face `tokenizers`, measured from the package by
// tools/gen_hf_unicode_tables.py (data/hf_unicode_tables.cc is generated):
// the \w and \s of its Whitespace pre-tokenizer's regex and what its Lowercase
// normalizer maps each code point to. Ranges are sorted and disjoint.
#pragma once

#include <cstddef>

namespace tandem::data::hf {

struct CodePointRange {
  char32_t lo, hi;  // inclusive
};
struct LowercaseEntry {
  char32_t code_point;
  const char* lower;  // UTF-8, one or more code points
};

extern const CodePointRange kWordRanges[];
extern const size_t kWordRangesCount;
extern const CodePointRange kSpaceRanges[];
extern const size_t kSpaceRangesCount;
extern const LowercaseEntry kLowercase[];  // sorted by code point; only those that change
extern const size_t kLowercaseCount;

}  // namespace tandem::data::hf
