// Hugging Face `tokenizer.json` for the one pipeline Tandem's BPE tokenizer
// runs: special tokens [PAD]=0, [UNK]=1, [CLS]=2 (added tokens, matched in the
// raw text), normalizer Lowercase or none, pre-tokenizer Whitespace, models.BPE
// with unk_token [UNK] and no dropout / subword prefix / word suffix / byte
// fallback / unk fusing, and post-processor "[CLS] $A" (TemplateProcessing) or
// none. Files written by `tokenizers` for that pipeline load here, and files
// written here load in `tokenizers` (Tokenizer.from_file) and encode the same.
//
// Anything else (another model, normalizer or pre-tokenizer, other special ids)
// is rejected with a message naming the file and the JSON key, rather than
// encoded differently from Hugging Face.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "data/bpe.h"

namespace tandem::data {

struct HfBpeTokenizer {
  std::shared_ptr<const BpeModel> model;
  bool lowercase = true;
  bool prepend_cls = true;
};

std::string to_tokenizer_json(const HfBpeTokenizer& tokenizer);
// `path` is used in messages only.
HfBpeTokenizer parse_tokenizer_json(std::string_view text, const std::filesystem::path& path);

}  // namespace tandem::data
