// How long a batch's rows are: Hugging Face's `padding` ("max_length" or
// "longest") and `pad_to_multiple_of`, for the DataLoader.
//
// A BatchSource fills every row to its seq_len S (data/batch_source.h). With
// Padding::Longest the loader then cuts the batch to L columns, L being one
// past the last real (nonzero-mask) position of any of its rows, rounded up
// to a multiple of pad_to_multiple_of and at most S. What is cut is padding
// only, so the model sees the same real tokens; it does less work on texts
// shorter than S (attention's cost is quadratic in L, the rest linear). A
// row's real tokens keep their positions, and every masked op ignores the
// padding, so the results equal max_length's up to rounding and to which
// random numbers dropout draws (its mask follows the tensor's shape).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tandem::data {

enum class Padding {
  MaxLength,  // every row has the source's seq_len (static shapes)
  Longest,    // the batch's longest row, rounded up to pad_to_multiple_of
};

// "max_length" | "longest"; anything else is an error naming `key`.
Padding parse_padding(const std::string& name, const std::string& key);

// Padding::Longest's length of a batch of `rows` rows of `seq` mask bytes: one past the last
// nonzero byte of any row (at least 1, so an all-padding batch keeps one column), rounded up to a
// multiple of `multiple` (>= 1), at most seq.
int64_t longest_padded_length(const uint8_t* mask, int64_t rows, int64_t seq, int64_t multiple);

// Shortens rows in place: row i's first `length` elements (of `elem_bytes` each) move from
// element i * seq to i * length, so the buffer's start holds a [rows, length] array.
// length <= seq; rows are moved in increasing order, which never overwrites one not yet moved.
void shorten_rows(void* data, int64_t rows, int64_t seq, int64_t length, size_t elem_bytes);

// Padding::Longest on one batch in host memory: its [rows, seq] ids (`id_bytes` each) and mask
// cut in place to longest_padded_length columns, which it returns (their first rows * length
// elements are then [rows, length] arrays). What the DataLoader and `tandem predict` run.
int64_t cut_to_longest(void* ids, size_t id_bytes, uint8_t* mask, int64_t rows, int64_t seq, int64_t multiple);

// The mean row length, padding included, when batches of `batch` consecutive entries of `order`
// (indices into `lengths`, the rows' real lengths) are each padded to their longest row: what
// Padding::Longest runs on for that order, weighting each batch by its rows (the last may be short).
double mean_longest_row(const std::vector<int64_t>& order, const std::vector<int64_t>& lengths, int64_t batch);

}  // namespace tandem::data
