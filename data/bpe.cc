#include "data/bpe.h"

#include <fmt/format.h>

#include <algorithm>
#include <queue>
#include <set>

#include "core/check.h"
#include "data/utf8.h"

namespace tandem::data {

namespace {

// A malformed model (from a file) is the user's input, so the message carries
// no source location.
template <class... Args>
void require(bool ok, fmt::format_string<Args...> format, Args&&... args) {
  if (!ok) throw Error(fmt::format(format, std::forward<Args>(args)...));
}

// Byte length of the character at `pos` (1 for a byte of invalid UTF-8).
size_t char_length(std::string_view s, size_t pos) {
  if (static_cast<unsigned char>(s[pos]) < 0x80) return 1;
  size_t len = 1;
  decode_utf8(s, pos, &len);
  return len;
}

}  // namespace

BpeModel::BpeModel(std::vector<std::string> vocab, std::vector<std::pair<std::string, std::string>> merges,
                   std::string unk_token)
    : vocab_(std::move(vocab)), unk_token_(std::move(unk_token)) {
  ids_.reserve(vocab_.size());
  for (size_t i = 0; i < vocab_.size(); ++i) {
    auto [it, inserted] = ids_.emplace(vocab_[i], static_cast<int32_t>(i));
    require(inserted, "BPE: token '{}' appears twice in the vocabulary (ids {} and {})", vocab_[i], it->second, i);
  }
  unk_id_ = find(unk_token_);
  require(unk_id_ >= 0, "BPE: the unknown token '{}' is not in the vocabulary", unk_token_);
  // A pair listed twice keeps its later rank: keep only each pair's last
  // occurrence, in order.
  std::unordered_map<uint64_t, size_t> last;
  std::vector<uint64_t> keys(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [a, b] = merges[r];
    const int32_t ia = find(a), ib = find(b), inew = find(a + b);
    require(ia >= 0 && ib >= 0, "BPE: merge {} ('{}' '{}') uses a token that is not in the vocabulary", r, a, b);
    require(inew >= 0, "BPE: merge {} ('{}' '{}') makes '{}', which is not in the vocabulary", r, a, b, a + b);
    keys[r] = key(ia, ib);
    last[keys[r]] = r;
  }
  for (size_t r = 0; r < merges.size(); ++r) {
    if (last[keys[r]] != r) continue;
    merge_of_[keys[r]] = Merge{static_cast<uint32_t>(merges_.size()), find(merges[r].first + merges[r].second)};
    merges_.push_back(std::move(merges[r]));
  }
}

int32_t BpeModel::find(std::string_view token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  // tokenizers' Word::merge_all: a linked list of symbols and a min-heap of
  // candidate merges ordered by (rank, position); stale candidates are skipped
  // when popped.
  struct Symbol {
    int32_t c;
    int64_t prev, next;
    size_t len;  // bytes; 0 marks a symbol merged into its left neighbour
  };
  std::vector<Symbol> symbols;
  auto add = [&](int32_t c, size_t len) {
    const auto n = static_cast<int64_t>(symbols.size());
    if (!symbols.empty()) symbols.back().next = n;
    symbols.push_back({c, n - 1, -1, len});
  };
  size_t pending_unk = 0;  // bytes of an unknown character not yet added
  for (size_t pos = 0; pos < word.size();) {
    const size_t len = char_length(word, pos);
    const int32_t id = find(word.substr(pos, len));
    if (pending_unk > 0) add(unk_id_, pending_unk);
    pending_unk = 0;
    if (id >= 0) {
      add(id, len);
    } else {
      pending_unk = len;
    }
    pos += len;
  }
  if (pending_unk > 0) add(unk_id_, pending_unk);

  struct Candidate {
    size_t pos;
    uint32_t rank;
    int32_t new_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto lookup = [&](int32_t a, int32_t b) -> const Merge* {
    auto it = merge_of_.find(key(a, b));
    return it == merge_of_.end() ? nullptr : &it->second;
  };
  for (size_t i = 0; i + 1 < symbols.size(); ++i)
    if (const Merge* m = lookup(symbols[i].c, symbols[i + 1].c)) queue.push({i, m->rank, m->new_id});
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& cur = symbols[top.pos];
    if (cur.len == 0 || cur.next == -1) continue;
    const auto next_pos = static_cast<size_t>(cur.next);
    const Symbol right = symbols[next_pos];
    const Merge* m = lookup(cur.c, right.c);
    if (m == nullptr || m->new_id != top.new_id) continue;  // an expired candidate
    cur.c = top.new_id;
    cur.len += right.len;
    cur.next = right.next;
    symbols[next_pos].len = 0;
    if (right.next > -1 && static_cast<size_t>(right.next) < symbols.size())
      symbols[static_cast<size_t>(right.next)].prev = static_cast<int64_t>(top.pos);
    if (cur.prev >= 0) {
      const auto prev = static_cast<size_t>(cur.prev);
      if (const Merge* pm = lookup(symbols[prev].c, cur.c)) queue.push({prev, pm->rank, pm->new_id});
    }
    if (cur.next >= 0) {
      if (const Merge* nm = lookup(cur.c, symbols[static_cast<size_t>(cur.next)].c))
        queue.push({top.pos, nm->rank, nm->new_id});
    }
  }
  for (const Symbol& s : symbols)
    if (s.len != 0) out.push_back(s.c);
}

BpeModel train_bpe(const std::map<std::string, int64_t>& word_counts, const BpeTrainerOptions& options) {
  TANDEM_CHECK(options.vocab_size >= 1, "BPE: vocab_size must be positive, got {}", options.vocab_size);
  TANDEM_CHECK(options.min_frequency >= 0, "BPE: min_frequency must be >= 0, got {}", options.min_frequency);
  // The steps and names follow tokenizers' BpeTrainer::do_train.
  std::vector<std::string> id_to_word;
  std::unordered_map<std::string, int32_t> word_to_id;
  auto add_token = [&](const std::string& t) {
    if (word_to_id.emplace(t, static_cast<int32_t>(id_to_word.size())).second) id_to_word.push_back(t);
  };
  // 1. Special tokens.
  for (const auto& t : options.special_tokens) add_token(t);
  // 2. The alphabet: every character of the words, in code point order.
  std::map<char32_t, std::string> alphabet;
  for (const auto& [w, n] : word_counts) {
    for (size_t pos = 0; pos < w.size();) {
      size_t len = 1;
      const char32_t c =
          static_cast<unsigned char>(w[pos]) < 0x80 ? static_cast<unsigned char>(w[pos]) : decode_utf8(w, pos, &len);
      alphabet.emplace(c == kInvalidCodePoint ? 0x110000 + static_cast<unsigned char>(w[pos]) : c, w.substr(pos, len));
      pos += len;
    }
  }
  for (const auto& [c, s] : alphabet) add_token(s);
  // 3. Words as symbol ids.
  std::vector<std::vector<int32_t>> words;
  std::vector<int64_t> counts;
  for (const auto& [w, n] : word_counts) {
    std::vector<int32_t> symbols;
    for (size_t pos = 0; pos < w.size();) {
      const size_t len = char_length(w, pos);
      symbols.push_back(word_to_id.at(w.substr(pos, len)));
      pos += len;
    }
    words.push_back(std::move(symbols));
    counts.push_back(n);
  }
  // 4. Pair counts, and the words each pair occurs in.
  using Pair = std::pair<int32_t, int32_t>;
  std::map<Pair, int64_t> pair_counts;
  std::map<Pair, std::set<size_t>> where_to_update;
  for (size_t i = 0; i < words.size(); ++i)
    for (size_t k = 0; k + 1 < words[i].size(); ++k) {
      const Pair p{words[i][k], words[i][k + 1]};
      pair_counts[p] += counts[i];
      where_to_update[p].insert(i);
    }
  struct Entry {
    Pair pair;
    int64_t count;
    std::set<size_t> pos;
  };
  // Max-heap on count; equal counts: the smaller pair first.
  auto less = [](const Entry& a, const Entry& b) { return a.count != b.count ? a.count < b.count : a.pair > b.pair; };
  std::vector<Entry> queue;
  auto push = [&](Entry e) {
    queue.push_back(std::move(e));
    std::push_heap(queue.begin(), queue.end(), less);
  };
  auto flush_updates = [&] {
    for (auto& [pair, pos] : where_to_update) {
      const int64_t count = pair_counts[pair];
      if (count > 0) push({pair, count, std::move(pos)});
    }
    where_to_update.clear();
  };
  flush_updates();
  // 5. Merges. Like tokenizers, the merged pair's own count is not reset: a
  // second queue entry for it can merge it again (a no-op on the words,
  // recorded again in the merge list).
  std::vector<std::pair<Pair, int32_t>> merges;
  while (static_cast<int64_t>(word_to_id.size()) < options.vocab_size && !queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), less);
    Entry top = std::move(queue.back());
    queue.pop_back();
    const int64_t current = pair_counts[top.pair];
    if (top.count != current) {
      top.count = current;
      push(std::move(top));
      continue;
    }
    if (top.count < 1 || options.min_frequency > top.count) break;
    const std::string new_token =
        id_to_word[static_cast<size_t>(top.pair.first)] + id_to_word[static_cast<size_t>(top.pair.second)];
    add_token(new_token);
    const int32_t new_id = word_to_id.at(new_token);
    merges.emplace_back(top.pair, new_id);
    for (size_t i : top.pos) {
      // tokenizers' Word::merge: left to right, non-overlapping; report the
      // pairs lost and formed.
      std::vector<int32_t>& s = words[i];
      auto change = [&](Pair p, int64_t delta) {
        pair_counts[p] += delta * counts[i];
        if (delta > 0) where_to_update[p].insert(i);
      };
      for (size_t k = 0; k < s.size(); ++k) {
        if (s[k] != top.pair.first || k + 1 >= s.size() || s[k + 1] != top.pair.second) continue;
        const int32_t second = s[k + 1];
        if (k > 0) {
          change({s[k - 1], s[k]}, -1);
          change({s[k - 1], new_id}, +1);
        }
        s[k] = new_id;
        s.erase(s.begin() + static_cast<std::ptrdiff_t>(k) + 1);
        if (k + 1 < s.size()) {
          change({second, s[k + 1]}, -1);
          change({new_id, s[k + 1]}, +1);
        }
      }
    }
    flush_updates();
  }
  std::vector<std::pair<std::string, std::string>> merge_tokens;
  for (const auto& [pair, id] : merges)
    merge_tokens.emplace_back(id_to_word[static_cast<size_t>(pair.first)],
                              id_to_word[static_cast<size_t>(pair.second)]);
  return BpeModel(std::move(id_to_word), std::move(merge_tokens), options.unk_token);
}

}  // namespace tandem::data
