// Data pipeline throughput: UTF-8 validation, tokenization, vocabulary
// building, and DataLoader batches/s with 0..N worker threads, with the
// consumer idle or busy for a fixed time per batch (a stand-in for a training
// step, to show how much of the batch building the workers hide).
//
// The corpus is synthetic and deterministic (Zipf-distributed words with
// punctuation, AG News-like lengths), so runs on different machines compare;
// --fortunes uses the Debian fortunes demo categories instead.
//
//   data_bench [--texts N] [--seq-len S] [--batch B] [--max-workers W] [--step-us U] [--fortunes]
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/elapsed.h"
#include "data/batch_source.h"
#include "data/data_loader.h"
#include "data/fortunes.h"
#include "data/permutation.h"
#include "data/tokenizer.h"
#include "data/utf8.h"

using namespace tandem;
using namespace tandem::data;
using Clock = std::chrono::steady_clock;

namespace {

// Word forms "w<k>" spelled with letters, drawn with probability ~ 1/rank (Zipf).
Dataset synthetic_corpus(int64_t n, uint64_t seed) {
  const int vocab = 30000;
  std::vector<double> cdf(vocab);
  double total = 0;
  for (int r = 0; r < vocab; ++r) cdf[r] = (total += 1.0 / (r + 1));
  auto word = [](int r) {
    std::string w;
    for (int x = r + 1; x > 0; x /= 26) w.push_back(static_cast<char>('a' + x % 26));
    return w;
  };
  PhiloxWords rng(seed, 0);
  auto uniform = [&] { return static_cast<double>(rng.next() >> 11) * 0x1.0p-53; };
  const char* punct[] = {",", ".", "'s", " -", ":", "!", "?", " (", ")"};
  Dataset d;
  d.class_names = {"a", "b", "c", "d"};
  for (int64_t i = 0; i < n; ++i) {
    const int64_t words = 20 + static_cast<int64_t>(rng.below(50));
    std::string text;
    for (int64_t k = 0; k < words; ++k) {
      const double u = uniform() * total;
      const int r = static_cast<int>(std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
      std::string w = word(std::min(r, vocab - 1));
      if (k == 0) w[0] = static_cast<char>(w[0] - 32);
      text += w;
      if (rng.below(6) == 0) text += punct[rng.below(9)];
      text += ' ';
    }
    d.examples.push_back({std::move(text), static_cast<int32_t>(rng.below(4)), "synthetic:" + std::to_string(i + 1)});
  }
  return d;
}

void busy_wait_us(int64_t us) {
  const auto until = Clock::now() + std::chrono::microseconds(us);
  while (Clock::now() < until) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  int64_t texts = 20000, seq_len = 128, batch = 32, step_us = 2000;
  int max_workers = 2;
  bool fortunes = false;
  for (int i = 1; i < argc; ++i) {
    auto next = [&] {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "data_bench: %s needs a value\n", argv[i]);
        std::exit(2);
      }
      return std::atoll(argv[++i]);
    };
    if (!std::strcmp(argv[i], "--texts"))
      texts = next();
    else if (!std::strcmp(argv[i], "--seq-len"))
      seq_len = next();
    else if (!std::strcmp(argv[i], "--batch"))
      batch = next();
    else if (!std::strcmp(argv[i], "--max-workers"))
      max_workers = static_cast<int>(next());
    else if (!std::strcmp(argv[i], "--step-us"))
      step_us = next();
    else if (!std::strcmp(argv[i], "--fortunes"))
      fortunes = true;
    else {
      std::fprintf(
          stderr,
          "usage: data_bench [--texts N] [--seq-len S] [--batch B] [--max-workers W] [--step-us U] [--fortunes]\n");
      return 2;
    }
  }

  try {
    auto dataset =
        std::make_shared<Dataset>(fortunes ? read_fortunes(default_fortune_categories()) : synthetic_corpus(texts, 1));
    size_t bytes = 0;
    for (const auto& e : dataset->examples) bytes += e.text.size();
    fmt::print("corpus: {} texts, {:.1f} MB ({})\n", dataset->size(), bytes / 1e6,
               fortunes ? "fortunes demo categories" : "synthetic Zipf");
    fmt::print("hardware threads: {}\n\n", std::thread::hardware_concurrency());

    // UTF-8 validation.
    auto t0 = Clock::now();
    size_t valid = 0;
    for (int rep = 0; rep < 5; ++rep)
      for (const auto& e : dataset->examples) valid += !find_invalid_utf8(e.text).has_value();
    const double utf8_s = seconds_since(t0) / 5;

    // Tokenization alone (no vocabulary lookup).
    t0 = Clock::now();
    int64_t tokens = 0;
    for (const auto& e : dataset->examples) for_each_token(e.text, [&](std::string_view) { ++tokens; });
    const double tokenize_s = seconds_since(t0);

    t0 = Clock::now();
    auto tokenizer = std::make_shared<Tokenizer>(Tokenizer::build(*dataset, {.min_freq = 2, .max_size = 20000}));
    const double build_s = seconds_since(t0);

    std::vector<int64_t> ids(static_cast<size_t>(seq_len));
    std::vector<uint8_t> mask(static_cast<size_t>(seq_len));
    t0 = Clock::now();
    int64_t encoded = 0;
    for (const auto& e : dataset->examples)
      encoded += tokenizer->encode_into(e.text, seq_len, DType::I64, ids.data(), mask.data());
    const double encode_s = seconds_since(t0);

    fmt::print("| stage | time | throughput |\n|---|---|---|\n");
    fmt::print("| UTF-8 validation | {:.2f} ms | {:.0f} MB/s |\n", utf8_s * 1e3, bytes / utf8_s / 1e6);
    fmt::print("| basic_tokenize ({} tokens) | {:.1f} ms | {:.2f} M tokens/s, {:.0f} MB/s |\n", tokens,
               tokenize_s * 1e3, tokens / tokenize_s / 1e6, bytes / tokenize_s / 1e6);
    fmt::print("| build vocabulary ({} entries) | {:.1f} ms | {:.2f} M tokens/s |\n", tokenizer->vocab_size(),
               build_s * 1e3, tokens / build_s / 1e6);
    fmt::print("| encode_into, S={} ({} ids) | {:.1f} ms | {:.0f} k texts/s, {:.2f} M ids/s |\n\n", seq_len, encoded,
               encode_s * 1e3, dataset->size() / encode_s / 1e3, encoded / encode_s / 1e6);
    if (valid != 5 * dataset->examples.size()) fmt::print("warning: some texts were not valid UTF-8\n");

    auto source = std::make_shared<TextClassificationSource>(dataset, tokenizer, seq_len);
    fmt::print("DataLoader: batch {}, S={}, CPU device, one epoch per row (best of 3)\n\n", batch, seq_len);
    fmt::print(
        "| workers | step | batches/s | examples/s | mean wait/batch | wait share |\n|---|---|---|---|---|---|\n");
    for (int64_t step : {int64_t{0}, step_us}) {
      for (int workers = 0; workers <= max_workers; ++workers) {
        DataLoaderOptions o;
        o.batch_size = batch;
        o.num_workers = workers;
        DataLoader loader(source, DistributedSampler(dataset->size(), SamplerOptions{1, 0, true, 0, false}), o);
        double best = 1e30, best_wait = 0;
        int64_t batches = 0;
        for (int rep = 0; rep < 3; ++rep) {
          loader.start_epoch(rep);
          auto start = Clock::now();
          batches = 0;
          while (auto b = loader.next()) {
            ++batches;
            if (step > 0) busy_wait_us(step);
          }
          const double s = seconds_since(start);
          if (s < best) best = s, best_wait = loader.epoch_stats().wait_seconds;
        }
        fmt::print("| {} | {} | {:.0f} | {:.0f} | {:.1f} us | {:.0f}% |\n", workers,
                   step ? fmt::format("{} us", step) : std::string("none"), batches / best, dataset->size() / best,
                   best_wait / batches * 1e6, 100 * best_wait / best);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "data_bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
