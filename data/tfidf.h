// The statistics TF-IDF pooling (nn::Pooling::TfIdf) learns from a training
// split: document frequencies and scikit-learn's smoothed idf, per token id.
//
// A text's tokens are its encoding as the model sees it (Tokenizer::encode_into
// at max_seq_len: truncation or subsampling included, [CLS] too); df[id] is the
// number of training texts holding id among their real tokens. The idf is
// TfidfTransformer's smooth_idf,
//     idf[id] = ln((1 + n) / (1 + df[id])) + 1   for df[id] > 0, n the number of texts,
// and 0 for an id no training text holds: TfidfVectorizer drops n-grams outside
// the vocabulary it was fitted on, and such a bucket's embedding never received
// a gradient (it is still its random initialisation).
#pragma once

#include <cstdint>
#include <vector>

#include "data/dataset.h"
#include "data/tokenizer.h"

namespace tandem::data {

struct DocumentFrequencies {
  int64_t documents = 0;
  std::vector<int64_t> df;  // one per token id: tokenizer.vocab_size() entries
};

DocumentFrequencies document_frequencies(const Tokenizer& tokenizer, const Dataset& train, int64_t max_seq_len);
std::vector<float> smoothed_idf(const DocumentFrequencies& frequencies);

}  // namespace tandem::data
