#include <gmock/gmock.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>

#include "data/data_loader.h"
#include "tests/data/test_files.h"
#include "tests/testing/gradcheck.h"

namespace tandem::data {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

// Rows anyone can check by hand: ids[j] = 10 * index + j, the first (index % S) + 1 mask bytes
// set, label = index % 5. `hook` runs first for every example (to throw, block or record).
class NumberSource final : public BatchSource {
 public:
  NumberSource(int64_t n, int64_t seq_len, std::function<void(int64_t)> hook = {})
      : n_(n), seq_len_(seq_len), hook_(std::move(hook)) {}
  int64_t size() const override { return n_; }
  int64_t seq_len() const override { return seq_len_; }
  void fill(std::span<const int64_t> indices, const BatchBuffers& out) const override {
    for (size_t i = 0; i < indices.size(); ++i) {
      const int64_t x = indices[i];
      if (hook_) hook_(x);
      for (int64_t j = 0; j < seq_len_; ++j) {
        const int64_t v = 10 * x + j;
        if (out.ids_dtype == DType::I32) {
          static_cast<int32_t*>(out.ids)[static_cast<int64_t>(i) * seq_len_ + j] = static_cast<int32_t>(v);
        } else {
          static_cast<int64_t*>(out.ids)[static_cast<int64_t>(i) * seq_len_ + j] = v;
        }
        out.mask[static_cast<int64_t>(i) * seq_len_ + j] = j <= x % seq_len_ ? 1 : 0;
      }
      out.labels[i] = x % 5;
    }
  }
  int64_t length(int64_t index) const override { return index % seq_len_ + 1; }

 private:
  int64_t n_, seq_len_;
  std::function<void(int64_t)> hook_;
};

// A batch as plain numbers, to compare runs.
struct Flat {
  std::vector<int64_t> ids, mask, labels, indices;
  bool operator==(const Flat&) const = default;
};

Flat flatten(const Batch& b) {
  return {b.ids.to_int_vector(), b.mask.to_int_vector(), b.labels.to_int_vector(), b.indices};
}

std::vector<Flat> run_epoch(DataLoader& loader, int64_t epoch) {
  loader.start_epoch(epoch);
  std::vector<Flat> out;
  while (auto b = loader.next()) out.push_back(flatten(*b));
  return out;
}

DataLoaderOptions with_workers(int workers, int64_t batch_size = 8) {
  DataLoaderOptions o;
  o.batch_size = batch_size;
  o.num_workers = workers;
  return o;
}

TEST(DataLoader, BatchesAreIdenticalForAnyNumberOfWorkers) {
  auto source = std::make_shared<NumberSource>(103, 6);
  SamplerOptions sampling{1, 0, true, 3, false};
  DataLoader reference(source, DistributedSampler(103, sampling), with_workers(0));
  auto epoch0 = run_epoch(reference, 0), epoch1 = run_epoch(reference, 1);
  ASSERT_EQ(epoch0.size(), 13u);
  EXPECT_NE(epoch0, epoch1);
  for (int workers : {1, 3}) {
    DataLoader loader(source, DistributedSampler(103, sampling), with_workers(workers));
    EXPECT_EQ(run_epoch(loader, 0), epoch0) << workers << " workers";
    EXPECT_EQ(run_epoch(loader, 1), epoch1) << workers << " workers";
  }
}

TEST(DataLoader, BatchKHoldsRowsKBToKBPlusBOfTheShard) {
  auto source = std::make_shared<NumberSource>(50, 3);
  DistributedSampler sampler(50, SamplerOptions{2, 1, true, 4, false});
  sampler.set_epoch(2);
  const auto shard = sampler.indices();
  DataLoader loader(source, sampler, with_workers(2, 7));
  auto batches = run_epoch(loader, 2);
  ASSERT_EQ(batches.size(), 4u);  // 25 samples in batches of 7
  for (size_t k = 0; k < batches.size(); ++k) {
    const auto& b = batches[k];
    for (size_t i = 0; i < b.indices.size(); ++i) {
      const int64_t x = shard[k * 7 + i];
      ASSERT_EQ(b.indices[i], x);
      EXPECT_EQ(b.ids[i * 3 + 2], 10 * x + 2);
      EXPECT_EQ(b.labels[i], x % 5);
      EXPECT_EQ(b.mask[i * 3], 1);
    }
  }
}

// The loader's rows must be what the tokenizer gives for the same texts, single-threaded.
TEST(DataLoader, TextBatchesMatchTheTokenizerOnTheSamplersIndices) {
  auto dataset = std::make_shared<Dataset>();
  dataset->class_names = {"a", "b", "c"};
  for (int i = 0; i < 37; ++i)
    dataset->examples.push_back({"example number " + std::to_string(i) + (i % 2 ? " is odd" : " is even, and longer"),
                                 i % 3, "mem:" + std::to_string(i)});
  auto tokenizer = std::make_shared<Tokenizer>(Tokenizer::build(*dataset, {.min_freq = 2}));
  auto source = std::make_shared<TextClassificationSource>(dataset, tokenizer, 6);
  for (int64_t rank = 0; rank < 2; ++rank) {
    DistributedSampler sampler(37, SamplerOptions{2, rank, true, 1, false});
    const auto shard = sampler.indices();
    DataLoader loader(source, sampler, with_workers(2, 5));
    loader.start_epoch(0);
    size_t row = 0;
    while (auto b = loader.next()) {
      std::vector<std::string> texts;
      std::vector<int64_t> labels;
      for (int64_t i = 0; i < b->ids.size(0); ++i, ++row) {
        texts.push_back(dataset->examples[static_cast<size_t>(shard[row])].text);
        labels.push_back(dataset->examples[static_cast<size_t>(shard[row])].label);
      }
      Encoding expected = tokenizer->encode_batch(texts, 6);
      EXPECT_EQ(b->ids.to_int_vector(), expected.ids.to_int_vector());
      EXPECT_EQ(b->mask.to_int_vector(), expected.mask.to_int_vector());
      EXPECT_EQ(b->labels.to_int_vector(), labels);
    }
    EXPECT_EQ(row, shard.size());
  }
}

TEST(TextClassificationSource, LengthIsOnePastTheLastRealPositionOfItsRow) {
  // Texts of 1-9 words in rows of 6 ([CLS] included): some cut, some padded.
  auto dataset = std::make_shared<Dataset>();
  dataset->class_names = {"a", "b"};
  for (int i = 0; i < 9; ++i) {
    std::string text = "w";
    for (int w = 0; w < i; ++w) text += " w";
    dataset->examples.push_back({text, i % 2, "mem:" + std::to_string(i)});
  }
  auto tokenizer = std::make_shared<Tokenizer>(Tokenizer::build(*dataset, {.min_freq = 1}));
  const TextClassificationSource source(dataset, tokenizer, 6);
  std::vector<int64_t> all(9);
  std::iota(all.begin(), all.end(), int64_t{0});
  std::vector<int64_t> ids(9 * 6), labels(9);
  std::vector<uint8_t> mask(9 * 6);
  source.fill(all, BatchBuffers{ids.data(), DType::I64, mask.data(), labels.data()});
  for (int64_t i = 0; i < 9; ++i) {
    int64_t last = 0;
    for (int64_t j = 0; j < 6; ++j)
      if (mask[static_cast<size_t>(i * 6 + j)]) last = j + 1;
    EXPECT_EQ(source.length(i), last) << "example " << i;
  }
  EXPECT_EQ(lengths_of(source), (std::vector<int64_t>{2, 3, 4, 5, 6, 6, 6, 6, 6}));
}

TEST(DataLoader, FinalPartialBatchIsKeptOrDropped) {
  auto source = std::make_shared<NumberSource>(10, 2);
  DataLoader keep(source, DistributedSampler(10, SamplerOptions{1, 0, false}), with_workers(1, 4));
  auto kept = run_epoch(keep, 0);
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[2].indices, (std::vector<int64_t>{8, 9}));
  EXPECT_EQ(kept[2].ids.size(), 4u);  // [2, S]
  EXPECT_EQ(keep.num_batches(), 3);

  DataLoaderOptions drop = with_workers(1, 4);
  drop.drop_last = true;
  DataLoader dropper(source, DistributedSampler(10, SamplerOptions{1, 0, false}), drop);
  EXPECT_EQ(run_epoch(dropper, 0).size(), 2u);
  EXPECT_EQ(dropper.num_batches(), 2);
}

TEST(DataLoader, EveryRankRunsTheSameNumberOfBatches) {
  auto source = std::make_shared<NumberSource>(29, 2);
  std::set<size_t> counts;
  for (int64_t rank = 0; rank < 3; ++rank) {
    DataLoader loader(source, DistributedSampler(29, SamplerOptions{3, rank, true, 0, false}), with_workers(1, 4));
    counts.insert(run_epoch(loader, 0).size());
  }
  EXPECT_EQ(counts, (std::set<size_t>{3}));  // ceil(29 / 3) = 10 samples -> 3 batches of 4
}

TEST(DataLoader, WorkersPersistAcrossEpochs) {
  std::mutex mutex;
  std::set<std::thread::id> threads;
  auto source = std::make_shared<NumberSource>(40, 2, [&](int64_t) {
    std::lock_guard<std::mutex> lock(mutex);
    threads.insert(std::this_thread::get_id());
  });
  DataLoader loader(source, DistributedSampler(40, SamplerOptions{}), with_workers(2, 4));
  for (int epoch = 0; epoch < 3; ++epoch) run_epoch(loader, epoch);
  EXPECT_LE(threads.size(), 2u);
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);
}

TEST(DataLoader, WithoutWorkersBatchesAreBuiltInTheCallersThread) {
  std::set<std::thread::id> threads;
  auto source = std::make_shared<NumberSource>(8, 2, [&](int64_t) { threads.insert(std::this_thread::get_id()); });
  DataLoader loader(source, DistributedSampler(8, SamplerOptions{}), with_workers(0, 4));
  run_epoch(loader, 0);
  EXPECT_EQ(threads, (std::set<std::thread::id>{std::this_thread::get_id()}));
}

TEST(DataLoader, EachBatchRecordsWhichWorkerBuiltItAndWhen) {
  auto source = std::make_shared<NumberSource>(40, 3);
  for (int workers : {0, 2}) {
    DataLoader loader(source, DistributedSampler(40, SamplerOptions{1, 0, false}), with_workers(workers, 4));
    loader.start_epoch(0);
    std::set<int> builders;
    for (;;) {
      const auto before = std::chrono::steady_clock::now();
      std::optional<Batch> b = loader.next();
      if (!b) break;
      const auto after = std::chrono::steady_clock::now();
      builders.insert(b->worker);
      EXPECT_LE(b->build_start, b->build_end);
      EXPECT_LE(b->build_end, after) << "a batch is handed out only once built";
      if (workers == 0) {
        EXPECT_GE(b->build_start, before) << "built inside next()";
      }
      EXPECT_EQ(b->copy_start, nullptr) << "no copy events without time_copies on a CUDA device";
    }
    for (int w : builders) {
      if (workers == 0) {
        EXPECT_EQ(w, -1);
      } else {
        EXPECT_TRUE(w >= 0 && w < workers) << w;
      }
    }
  }
}

TEST(DataLoader, PrefetchStaysWithinWorkersTimesPrefetchFactor) {
  // The consumer is slow; if the bound were missing the workers would build the whole epoch ahead.
  std::atomic<int64_t> started{0}, consumed{0}, worst_lead{0};
  constexpr int64_t kBatch = 2, kWorkers = 2, kFactor = 2;
  auto source = std::make_shared<NumberSource>(80, 2, [&](int64_t) {
    const int64_t batches_started = started.fetch_add(1) / kBatch + 1;  // the first row of a batch starts it
    int64_t lead = batches_started - consumed.load(), prev = worst_lead.load();
    while (lead > prev && !worst_lead.compare_exchange_weak(prev, lead)) {
    }
  });
  DataLoaderOptions o = with_workers(kWorkers, kBatch);
  o.prefetch_factor = kFactor;
  DataLoader loader(source, DistributedSampler(80, SamplerOptions{1, 0, false}), o);
  loader.start_epoch(0);
  while (auto b = loader.next()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    consumed.fetch_add(1);
  }
  EXPECT_EQ(consumed.load(), 40);
  // Batches may be built up to kWorkers * kFactor ahead of the batch the caller has just been given.
  EXPECT_LE(worst_lead.load(), kWorkers * kFactor + 1);
}

TEST(DataLoader, WorkerExceptionReachesTheConsumerAtItsBatch) {
  for (int workers : {0, 1, 3}) {
    std::atomic<bool> armed{true};
    auto source = std::make_shared<NumberSource>(40, 2, [&](int64_t x) {
      if (x == 21 && armed.exchange(false)) throw Error("example 21 is corrupt");
    });
    DataLoader loader(source, DistributedSampler(40, SamplerOptions{1, 0, false}), with_workers(workers, 4));
    loader.start_epoch(0);
    for (int k = 0; k < 5; ++k) ASSERT_TRUE(loader.next().has_value()) << workers << " workers, batch " << k;
    std::string message = error_of([&] { loader.next(); });
    EXPECT_THAT(message, HasSubstr("batch 5 of epoch 0: example 21 is corrupt")) << workers << " workers";
    EXPECT_FALSE(loader.next().has_value());      // the epoch is over
    EXPECT_EQ(run_epoch(loader, 1).size(), 10u);  // and the loader still works
  }
}

TEST(DataLoader, StoppingEarlyNeitherHangsNorLeaksIntoTheNextEpoch) {
  auto source = std::make_shared<NumberSource>(
      200, 2, [](int64_t) { std::this_thread::sleep_for(std::chrono::microseconds(300)); });
  DataLoader reference(source, DistributedSampler(200, SamplerOptions{1, 0, true, 1}), with_workers(0, 4));
  auto expected = run_epoch(reference, 1);

  auto done = std::async(std::launch::async, [&] {
    DataLoader loader(source, DistributedSampler(200, SamplerOptions{1, 0, true, 1}), with_workers(3, 4));
    loader.start_epoch(0);
    loader.next();
    loader.next();
    auto restarted = run_epoch(loader, 1);  // abandons epoch 0 with workers busy
    loader.start_epoch(0);
    loader.next();
    return restarted;  // the destructor runs with the workers mid-epoch
  });
  ASSERT_EQ(done.wait_for(std::chrono::seconds(120)), std::future_status::ready) << "the loader hung";
  EXPECT_EQ(done.get(), expected);
}

TEST(DataLoader, StuckWorkerIsReportedAfterTheTimeout) {
  std::atomic<bool> release{false};
  std::atomic<int> first_two_batches{0};  // examples 0-7 filled
  auto source = std::make_shared<NumberSource>(16, 2, [&](int64_t x) {
    if (x < 8) ++first_two_batches;
    if (x != 9) return;
    for (int i = 0; i < 20000 && !release.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  DataLoaderOptions o = with_workers(2, 4);
  o.timeout_seconds = 0.2;
  auto done = std::async(std::launch::async, [&] {
    DataLoader loader(source, DistributedSampler(16, SamplerOptions{1, 0, false}), o);
    loader.start_epoch(0);
    // Batches 0 and 1 must not be the ones that time out: on a loaded machine (ctest -j16) starting
    // the workers alone took longer than 0.2 s. Wait until their examples are in, with time to spare.
    for (int i = 0; i < 60000 && first_two_batches.load() < 8; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    loader.next();
    loader.next();
    std::string message = error_of([&] { loader.next(); });  // batch 2 holds example 9
    release = true;
    return message;
  });
  ASSERT_EQ(done.wait_for(std::chrono::seconds(120)), std::future_status::ready) << "the loader hung";
  EXPECT_THAT(done.get(), HasSubstr("batch 2 of epoch 0 was not ready within 0.2 s"));
}

TEST(DataLoader, BatchHeldByTheCallerIsNeverOverwritten) {
  auto source = std::make_shared<NumberSource>(100, 3);
  DataLoaderOptions o = with_workers(2, 4);
  o.prefetch_factor = 1;
  DataLoader loader(source, DistributedSampler(100, SamplerOptions{1, 0, true, 2}), o);
  loader.start_epoch(0);
  Batch first = *loader.next();
  const Flat snapshot = flatten(first);
  int64_t later = 0;
  while (auto b = loader.next()) ++later;
  EXPECT_EQ(later, 24);
  EXPECT_EQ(flatten(first), snapshot);
}

TEST(DataLoader, PinnedStagingGivesTheSameBatches) {
  auto source = std::make_shared<NumberSource>(30, 4);
  DataLoaderOptions pinned = with_workers(2, 4), pageable = with_workers(2, 4);
  pinned.pin_memory = true;
  pageable.pin_memory = false;
  DataLoader a(source, DistributedSampler(30, SamplerOptions{}), pinned);
  DataLoader b(source, DistributedSampler(30, SamplerOptions{}), pageable);
  EXPECT_EQ(run_epoch(a, 0), run_epoch(b, 0));
}

TEST(DataLoader, Int32IdsAreSupported) {
  auto source = std::make_shared<NumberSource>(9, 3);
  DataLoaderOptions o = with_workers(1, 4);
  o.ids_dtype = DType::I32;
  DataLoader loader(source, DistributedSampler(9, SamplerOptions{1, 0, false}), o);
  loader.start_epoch(0);
  auto b = loader.next();
  EXPECT_EQ(b->ids.dtype(), DType::I32);
  EXPECT_EQ(b->ids.to_int_vector()[3 * 3 + 1], 31);  // row 3 is example 3
}

TEST(DataLoader, ResumeContinuesWhereTheSavedStateLeftOff) {
  auto source = std::make_shared<NumberSource>(60, 2);
  SamplerOptions sampling{2, 1, true, 7, false};
  DataLoader full(source, DistributedSampler(60, sampling), with_workers(2, 4));
  auto expected = run_epoch(full, 3);

  SamplerState saved;
  {
    DataLoader first(source, DistributedSampler(60, sampling), with_workers(2, 4));
    first.start_epoch(3);
    for (int k = 0; k < 3; ++k) first.next();
    saved = first.state();
  }
  EXPECT_EQ(saved.epoch, 3);
  EXPECT_EQ(saved.position, 12);
  DataLoader second(source, DistributedSampler(60, sampling), with_workers(1, 4));
  second.resume(saved);
  std::vector<Flat> rest;
  while (auto b = second.next()) rest.push_back(flatten(*b));
  EXPECT_EQ(rest, std::vector<Flat>(expected.begin() + 3, expected.end()));
}

TEST(DataLoader, RecordsHowLongTheConsumerWaited) {
  auto source = std::make_shared<NumberSource>(24, 2);
  DataLoader loader(source, DistributedSampler(24, SamplerOptions{}), with_workers(2, 4));
  loader.start_epoch(0);
  double total = 0;
  int64_t batches = 0;
  while (auto b = loader.next()) {
    EXPECT_GE(b->wait_seconds, 0.0);
    total += b->wait_seconds;
    ++batches;
  }
  LoaderEpochStats stats = loader.epoch_stats();
  EXPECT_EQ(stats.batches, batches);
  EXPECT_NEAR(stats.wait_seconds, total, 1e-9);
  EXPECT_GE(stats.max_wait_seconds * static_cast<double>(batches), stats.wait_seconds);
}

TEST(DataLoader, BadOptionsAreErrors) {
  auto source = std::make_shared<NumberSource>(10, 2);
  DataLoaderOptions zero = with_workers(0, 0);
  EXPECT_THAT(error_of([&] { DataLoader(source, DistributedSampler(10, SamplerOptions{}), zero); }),
              HasSubstr("batch_size must be at least 1"));
  EXPECT_THAT(error_of([&] { DataLoader(source, DistributedSampler(11, SamplerOptions{}), with_workers(0)); }),
              HasSubstr("the sampler covers 11 examples but the source has 10"));
  DataLoaderOptions f32 = with_workers(0);
  f32.ids_dtype = DType::F32;
  EXPECT_THAT(error_of([&] { DataLoader(source, DistributedSampler(10, SamplerOptions{}), f32); }),
              HasSubstr("ids_dtype must be i32 or i64"));
  DataLoaderOptions gpu = with_workers(0);
  gpu.device = Device::cuda(cuda::device_count());  // one past the last device, on any machine
  EXPECT_THAT(error_of([&] { DataLoader(source, DistributedSampler(10, SamplerOptions{}), gpu); }),
              HasSubstr(fmt::format("device cuda:{} is not available", cuda::device_count())));
}

// NumberSource's row x has (x % S) + 1 real tokens: a batch's longest row decides its length.
TEST(DataLoader, LongestPaddingCutsEachBatchToItsLongestRowAndKeepsTheRowsPrefixes) {
  const int64_t seq = 12;
  auto source = std::make_shared<NumberSource>(61, seq);
  SamplerOptions sampling{1, 0, true, 5, false};
  DataLoader full(source, DistributedSampler(61, sampling), with_workers(0, 8));
  const auto expected = run_epoch(full, 0);
  for (int workers : {0, 2}) {
    DataLoaderOptions o = with_workers(workers, 8);
    o.padding = Padding::Longest;
    DataLoader loader(source, DistributedSampler(61, sampling), o);
    loader.start_epoch(0);
    size_t k = 0;
    bool some_shorter = false;
    while (auto b = loader.next()) {
      ASSERT_LT(k, expected.size());
      const Flat& e = expected[k++];
      int64_t longest = 0;
      for (int64_t x : b->indices) longest = std::max(longest, x % seq + 1);
      const auto rows = static_cast<int64_t>(b->indices.size());
      ASSERT_EQ(b->ids.shape(), (Shape{rows, longest})) << "batch " << k - 1;
      ASSERT_EQ(b->mask.shape(), (Shape{rows, longest}));
      some_shorter = some_shorter || longest < seq;
      const Flat got = flatten(*b);
      EXPECT_EQ(got.labels, e.labels);
      EXPECT_EQ(got.indices, e.indices);
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < longest; ++j) {
          ASSERT_EQ(got.ids[static_cast<size_t>(i * longest + j)], e.ids[static_cast<size_t>(i * seq + j)]);
          ASSERT_EQ(got.mask[static_cast<size_t>(i * longest + j)], e.mask[static_cast<size_t>(i * seq + j)]);
        }
    }
    EXPECT_EQ(k, expected.size());
    EXPECT_TRUE(some_shorter) << "the test needs a batch whose rows are all shorter than S";
  }
}

TEST(DataLoader, LongestPaddingRoundsUpToPadToMultipleOfAndStopsAtTheRowLength) {
  const int64_t seq = 10;
  auto source = std::make_shared<NumberSource>(40, seq);
  DataLoaderOptions o = with_workers(1, 3);
  o.padding = Padding::Longest;
  o.pad_to_multiple_of = 4;
  DataLoader loader(source, DistributedSampler(40, SamplerOptions{1, 0, false}), o);
  loader.start_epoch(0);
  while (auto b = loader.next()) {
    int64_t longest = 0;
    for (int64_t x : b->indices) longest = std::max(longest, x % seq + 1);
    EXPECT_EQ(b->ids.size(1), std::min<int64_t>((longest + 3) / 4 * 4, seq)) << "longest row " << longest;
  }
}

TEST(DataLoader, APadToMultipleOfBelowOneIsAnError) {
  auto source = std::make_shared<NumberSource>(10, 2);
  DataLoaderOptions o = with_workers(0);
  o.pad_to_multiple_of = 0;
  EXPECT_THAT(error_of([&] { DataLoader(source, DistributedSampler(10, SamplerOptions{}), o); }),
              HasSubstr("pad_to_multiple_of must be at least 1, got 0"));
}

TEST(DataLoader, NextWithoutAnEpochReturnsNothing) {
  auto source = std::make_shared<NumberSource>(4, 2);
  DataLoader loader(source, DistributedSampler(4, SamplerOptions{}), with_workers(1, 2));
  EXPECT_FALSE(loader.next().has_value());
}

// --- CUDA device: asynchronous copies on the loader's stream --------------------------

TEST(DataLoaderCuda, DeviceBatchesEqualHostBatches) {
  TANDEM_REQUIRE_GPU();
  auto source = std::make_shared<NumberSource>(77, 5);
  SamplerOptions sampling{1, 0, true, 9, false};
  DataLoader host(source, DistributedSampler(77, sampling), with_workers(0, 8));
  auto expected = run_epoch(host, 0);
  for (int workers : {0, 2}) {
    DataLoaderOptions o = with_workers(workers, 8);
    o.device = Device::cuda(0);
    DataLoader loader(source, DistributedSampler(77, sampling), o);
    cuda::Stream compute = cuda::Stream::create(0);
    cuda::StreamGuard guard(compute);  // next() makes this stream wait for the copies
    loader.start_epoch(0);
    std::vector<Flat> got;
    while (auto b = loader.next()) {
      EXPECT_TRUE(b->ids.device().is_cuda());
      got.push_back(flatten(*b));  // reads on the current (compute) stream
    }
    EXPECT_EQ(got, expected) << workers << " workers";
  }
}

TEST(DataLoaderCuda, LongestPaddingCopiesTheShortenedBatches) {
  TANDEM_REQUIRE_GPU();
  auto source = std::make_shared<NumberSource>(45, 9);
  SamplerOptions sampling{1, 0, true, 2, false};
  DataLoaderOptions host_options = with_workers(0, 8);
  host_options.padding = Padding::Longest;
  DataLoader host(source, DistributedSampler(45, sampling), host_options);
  const auto expected = run_epoch(host, 0);
  DataLoaderOptions o = host_options;
  o.device = Device::cuda(0);
  DataLoader loader(source, DistributedSampler(45, sampling), o);
  cuda::Stream compute = cuda::Stream::create(0);
  cuda::StreamGuard guard(compute);
  loader.start_epoch(0);
  std::vector<Flat> got;
  while (auto b = loader.next()) got.push_back(flatten(*b));
  EXPECT_EQ(got, expected);
}

TEST(DataLoaderCuda, TimeCopiesRecordsCompletedEventsAroundEachCopy) {
  TANDEM_REQUIRE_GPU();
  auto source = std::make_shared<NumberSource>(40, 5);
  DataLoaderOptions o = with_workers(2, 8);
  o.device = Device::cuda(0);
  o.time_copies = true;
  DataLoader loader(source, DistributedSampler(40, SamplerOptions{1, 0, false}), o);
  loader.start_epoch(0);
  while (auto b = loader.next()) {
    ASSERT_NE(b->copy_start, nullptr);
    ASSERT_NE(b->copy_end, nullptr);
    b->copy_end->synchronize();
    EXPECT_GE(b->copy_start->elapsed_ms(*b->copy_end), 0.0f);
  }
}

TEST(DataLoaderCuda, PinnedStagingIsPageLocked) {
  TANDEM_REQUIRE_GPU();
  auto source = std::make_shared<NumberSource>(8, 2);
  DataLoader loader(source, DistributedSampler(8, SamplerOptions{}), with_workers(0, 4));
  loader.start_epoch(0);
  auto b = loader.next();
  EXPECT_TRUE(b->ids.storage()->pinned());
}

}  // namespace
}  // namespace tandem::data
