#include "data/tokenizer_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "data/text_file.h"

namespace tandem::data {

namespace {

using nlohmann::json;

constexpr const char* kSpecial[] = {"[PAD]", "[UNK]", "[CLS]"};

json added_token(int id, const char* content) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}

json cls_template() {
  return json::array(
      {{{"SpecialToken", {{"id", "[CLS]"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}});
}

// The 1-based line of byte `offset` in `text`.
int64_t line_of(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  return 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n');
}

class Reader {
 public:
  explicit Reader(const std::filesystem::path& path) : path_(path.string()) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw_input_error(path_, fmt::format("{}: {}", key, what));
  }
  const json& at(const json& obj, const std::string& parent, const char* name) const {
    const std::string key = parent.empty() ? name : parent + "." + name;
    if (!obj.is_object() || !obj.contains(name)) fail(key, "missing");
    return obj.at(name);
  }
  void expect_null_or(const json& v, const std::string& key, const json& allowed) const {
    if (!v.is_null() && v != allowed)
      fail(key, fmt::format("{} is not supported (Tandem's BPE tokenizer reads {})", v.dump(), allowed.dump()));
  }

 private:
  std::string path_;
};

}  // namespace

std::string to_tokenizer_json(const HfBpeTokenizer& t) {
  const BpeModel& m = *t.model;
  json vocab = json::object();
  for (size_t i = 0; i < m.vocab().size(); ++i) vocab[m.vocab()[i]] = i;
  json merges = json::array();
  for (const auto& [a, b] : m.merges()) merges.push_back({a, b});
  json post = nullptr;
  if (t.prepend_cls) {
    post = {{"type", "TemplateProcessing"},
            {"single", cls_template()},
            {"pair", json::array({{{"SpecialToken", {{"id", "[CLS]"}, {"type_id", 0}}}},
                                  {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                  {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}})},
            {"special_tokens", {{"[CLS]", {{"id", "[CLS]"}, {"ids", {2}}, {"tokens", {"[CLS]"}}}}}}};
  }
  json doc = {{"version", "1.0"},
              {"truncation", nullptr},
              {"padding", nullptr},
              {"added_tokens",
               json::array({added_token(0, kSpecial[0]), added_token(1, kSpecial[1]), added_token(2, kSpecial[2])})},
              {"normalizer", t.lowercase ? json{{"type", "Lowercase"}} : json(nullptr)},
              {"pre_tokenizer", {{"type", "Whitespace"}}},
              {"post_processor", post},
              {"decoder", nullptr},
              {"model",
               {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", m.unk_token()},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", false},
                {"vocab", vocab},
                {"merges", merges}}}};
  return doc.dump(2) + "\n";
}

HfBpeTokenizer parse_tokenizer_json(std::string_view text, const std::filesystem::path& path) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    throw_input_error(location(path, line_of(text, e.byte == 0 ? 0 : e.byte - 1)),
                      fmt::format("invalid JSON: {}", e.what()));
  }
  const Reader r(path);
  if (!doc.is_object()) r.fail("(top level)", "expected a JSON object");

  // Special tokens: exactly Tandem's three, at Tandem's ids, matched in the raw
  // text.
  const json& added = r.at(doc, "", "added_tokens");
  if (!added.is_array() || added.size() != std::size(kSpecial))
    r.fail("added_tokens", "expected exactly [PAD], [UNK], [CLS] with ids 0, 1, 2");
  for (size_t i = 0; i < std::size(kSpecial); ++i) {
    const json& a = added[i];
    if (!a.is_object() || a.value("id", -1) != static_cast<int>(i) || a.value("content", "") != kSpecial[i] ||
        a.value("normalized", true) || a.value("single_word", true) || a.value("lstrip", true) ||
        a.value("rstrip", true))
      r.fail(fmt::format("added_tokens[{}]", i), fmt::format("expected {} with id {} (normalized, single_word, "
                                                             "lstrip, rstrip false), found {}",
                                                             kSpecial[i], i, a.dump()));
  }

  HfBpeTokenizer out;
  const json& normalizer = r.at(doc, "", "normalizer");
  r.expect_null_or(normalizer, "normalizer", json{{"type", "Lowercase"}});
  out.lowercase = !normalizer.is_null();
  const json& pre = r.at(doc, "", "pre_tokenizer");
  if (pre != json{{"type", "Whitespace"}})
    r.fail("pre_tokenizer", fmt::format("{} is not supported (Tandem's BPE tokenizer reads "
                                        "{{\"type\":\"Whitespace\"}})",
                                        pre.dump()));
  const json& post = r.at(doc, "", "post_processor");
  out.prepend_cls = !post.is_null();
  if (!post.is_null()) {
    const bool ok = post.is_object() && post.value("type", "") == "TemplateProcessing" && post.contains("single") &&
                    post["single"] == cls_template() && post.contains("special_tokens") &&
                    post["special_tokens"].contains("[CLS]") &&
                    post["special_tokens"]["[CLS]"].value("ids", json::array()) == json::array({2});
    if (!ok)
      r.fail("post_processor",
             "only a TemplateProcessing with single = "
             "\"[CLS] $A\" ([CLS] = id 2) is supported");
  }
  const json& truncation = r.at(doc, "", "truncation");
  const json& padding = r.at(doc, "", "padding");
  if (!truncation.is_null()) r.fail("truncation", "must be null (Tandem truncates to model.max_seq_len)");
  if (!padding.is_null()) r.fail("padding", "must be null (Tandem pads to model.max_seq_len)");

  const json& model = r.at(doc, "", "model");
  if (!model.is_object() || model.value("type", "") != "BPE")
    r.fail("model.type",
           fmt::format("only BPE is supported, found {}",
                       model.is_object() && model.contains("type") ? model["type"].dump() : std::string("no type")));
  for (const char* key : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(key) && !model[key].is_null()) r.fail(fmt::format("model.{}", key), "must be null");
  for (const char* key : {"fuse_unk", "byte_fallback", "ignore_merges"})
    if (model.contains(key) && model[key] != false) r.fail(fmt::format("model.{}", key), "must be false");
  const json& unk = r.at(model, "model", "unk_token");
  if (unk != "[UNK]") r.fail("model.unk_token", fmt::format("must be \"[UNK]\", found {}", unk.dump()));

  const json& vocab_json = r.at(model, "model", "vocab");
  if (!vocab_json.is_object()) r.fail("model.vocab", "expected an object of token: id");
  std::vector<std::string> vocab(vocab_json.size());
  std::vector<bool> seen(vocab_json.size(), false);
  for (const auto& [token, id] : vocab_json.items()) {
    if (!id.is_number_unsigned() || id.get<size_t>() >= vocab.size() || seen[id.get<size_t>()])
      r.fail("model.vocab",
             fmt::format("token '{}' has id {}; ids must be 0..{} once each", token, id.dump(), vocab.size() - 1));
    vocab[id.get<size_t>()] = token;
    seen[id.get<size_t>()] = true;
  }
  for (size_t i = 0; i < std::size(kSpecial); ++i)
    if (vocab.size() <= i || vocab[i] != kSpecial[i])
      r.fail("model.vocab", fmt::format("id {} must be {}", i, kSpecial[i]));

  const json& merges_json = r.at(model, "model", "merges");
  if (!merges_json.is_array()) r.fail("model.merges", "expected a list");
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(merges_json.size());
  for (size_t i = 0; i < merges_json.size(); ++i) {
    const json& m = merges_json[i];
    if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else if (m.is_string() &&
               std::count(m.get_ref<const std::string&>().begin(), m.get_ref<const std::string&>().end(), ' ') == 1) {
      // The format of tokenizers before 0.20: "a b".
      const std::string& s = m.get_ref<const std::string&>();
      const size_t space = s.find(' ');
      merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else {
      r.fail(fmt::format("model.merges[{}]", i), fmt::format("expected [\"a\", \"b\"] or \"a b\", found {}", m.dump()));
    }
  }
  try {
    out.model = std::make_shared<const BpeModel>(std::move(vocab), std::move(merges), "[UNK]");
  } catch (const Error& e) {
    r.fail("model", e.what());
  }
  return out;
}

}  // namespace tandem::data
