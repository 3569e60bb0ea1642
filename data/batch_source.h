// What a DataLoader worker runs to turn dataset indices into batch rows.
//
// fill() is called from several worker threads at once, each on its own rows,
// so implementations must be safe to call concurrently (const, no shared
// mutable state). The loader owns the buffers and the ordering; a source only
// computes rows, which is what makes the loader's output independent of the
// number of workers.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "data/dataset.h"
#include "data/tokenizer.h"

namespace tandem::data {

// Host memory for `rows` rows of one batch.
struct BatchBuffers {
  void* ids = nullptr;  // [rows, seq_len] of ids_dtype (I32 or I64)
  DType ids_dtype = DType::I64;
  uint8_t* mask = nullptr;    // [rows, seq_len]
  int64_t* labels = nullptr;  // [rows]
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual int64_t size() const = 0;     // examples the indices refer to
  virtual int64_t seq_len() const = 0;  // S, the length of every row
  // Row i of `out` for example indices[i].
  virtual void fill(std::span<const int64_t> indices, const BatchBuffers& out) const = 0;
  // Example `index`'s real tokens: one past the last nonzero mask entry fill() writes for it
  // (what group_by_length sorts by).
  virtual int64_t length(int64_t index) const = 0;
};

// length(i) of every example, in index order.
std::vector<int64_t> lengths_of(const BatchSource& source);

// Tokenizes a Dataset's texts: ids and mask from Tokenizer::encode_into, labels from the examples.
class TextClassificationSource final : public BatchSource {
 public:
  TextClassificationSource(std::shared_ptr<const Dataset> dataset, std::shared_ptr<const Tokenizer> tokenizer,
                           int64_t max_seq_len);
  int64_t size() const override { return dataset_->size(); }
  int64_t seq_len() const override { return max_seq_len_; }
  void fill(std::span<const int64_t> indices, const BatchBuffers& out) const override;
  int64_t length(int64_t index) const override;  // tokenizes the text

 private:
  std::shared_ptr<const Dataset> dataset_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  int64_t max_seq_len_;
};

}  // namespace tandem::data
