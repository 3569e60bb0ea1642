#include "data/tfidf.h"

#include <cmath>

#include "core/check.h"

namespace tandem::data {

DocumentFrequencies document_frequencies(const Tokenizer& tokenizer, const Dataset& train, int64_t max_seq_len) {
  TANDEM_CHECK(max_seq_len >= 1, "document_frequencies: max_seq_len must be at least 1, got {}", max_seq_len);
  DocumentFrequencies f;
  f.documents = train.size();
  f.df.assign(static_cast<size_t>(tokenizer.vocab_size()), 0);
  std::vector<int32_t> ids(static_cast<size_t>(max_seq_len));
  std::vector<uint8_t> mask(static_cast<size_t>(max_seq_len));
  std::vector<int64_t> last_text(f.df.size(), -1);  // a token counted once per text even where it repeats
  for (int64_t t = 0; t < train.size(); ++t) {
    const int64_t n = tokenizer.encode_into(train.examples[static_cast<size_t>(t)].text, max_seq_len, DType::I32,
                                            ids.data(), mask.data());
    for (int64_t s = 0; s < n; ++s) {
      const auto id = static_cast<size_t>(ids[static_cast<size_t>(s)]);
      if (last_text[id] == t) continue;
      last_text[id] = t;
      ++f.df[id];
    }
  }
  return f;
}

std::vector<float> smoothed_idf(const DocumentFrequencies& f) {
  std::vector<float> idf(f.df.size(), 0.0f);
  const double n = static_cast<double>(f.documents);
  for (size_t id = 0; id < f.df.size(); ++id)
    if (f.df[id] > 0) idf[id] = static_cast<float>(std::log((1.0 + n) / (1.0 + static_cast<double>(f.df[id]))) + 1.0);
  return idf;
}

}  // namespace tandem::data
