// The text pipeline in front of a Hugging Face BPE model, as `tokenizers` runs
// it: the Lowercase normalizer (Rust's char::to_lowercase, code point by code
// point, so "İ" becomes "i̇") and the Whitespace pre-tokenizer, which splits the
// normalized text into the matches of \w+|[^\w\s]+ (runs of word characters,
// runs of other non-space characters; white space separates and is dropped).
// The character classes are tokenizers' own (data/hf_unicode_tables.h).
//
// Bytes of invalid UTF-8 (only possible for text that did not come through a
// reader, which validates) are kept, each one a non-word character.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace tandem::data::hf {

bool is_word_char(char32_t c);   // \w of the Whitespace pre-tokenizer
bool is_space_char(char32_t c);  // \s of the Whitespace pre-tokenizer

// Appends the lower-cased `text` to `out`.
void lowercase_into(std::string_view text, std::string& out);

// Calls on_word for each pre-token of `normalized`, in order (views into
// `normalized`).
void for_each_pretoken(std::string_view normalized, const std::function<void(std::string_view)>& on_word);

}  // namespace tandem::data::hf
