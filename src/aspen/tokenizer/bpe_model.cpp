#include "aspen/tokenizer/bpe_model.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <queue>

#include "aspen/tokenizer/byte_level.h"
#include "aspen/tokenizer/imports.h"
#include "aspen/util/error.h"

namespace aspen::tokenizer {
namespace {

// A merge written either as "left right" (older files) or ["left", "right"].
std::pair<std::string, std::string> parse_merge(const nlohmann::json& merge,
                                                const std::string& where) {
  if (merge.is_string()) {
    const std::string text = merge.get<std::string>();
    const size_t space = text.find(' ');
    if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
      throw Error("merge \"" + text + "\" is not two tokens separated by one space", where);
    }
    return {text.substr(0, space), text.substr(space + 1)};
  }
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
    return {merge[0].get<std::string>(), merge[1].get<std::string>()};
  }
  throw Error("merge is neither \"a b\" nor [\"a\", \"b\"]", where);
}

bool is_null_or_empty(const nlohmann::json& spec, const char* key) {
  return !spec.contains(key) || spec[key].is_null() ||
         (spec[key].is_string() && spec[key].get<std::string>().empty());
}

}  // namespace

BpeModel BpeModel::from_json(const nlohmann::json& spec, const std::string& source) {
  const std::string where = source + ": model";
  if (!spec.is_object() || spec.value("type", "BPE") != "BPE") {
    throw Error("model type is not BPE", where, "only byte-level BPE models are supported");
  }
  if (!is_null_or_empty(spec, "dropout") && spec["dropout"].get<double>() != 0.0) {
    throw Error("BPE dropout is not supported (encoding would be random)", where + ".dropout");
  }
  if (spec.value("byte_fallback", false)) {
    throw Error("BPE byte_fallback is not supported", where + ".byte_fallback");
  }
  if (!is_null_or_empty(spec, "continuing_subword_prefix") ||
      !is_null_or_empty(spec, "end_of_word_suffix")) {
    throw Error("BPE continuing_subword_prefix/end_of_word_suffix are not supported", where);
  }
  if (!spec.contains("vocab") || !spec["vocab"].is_object()) {
    throw Error("model has no \"vocab\" object", where);
  }

  BpeModel model;
  TokenId max_id = -1;
  for (const auto& [token, id_json] : spec["vocab"].items()) {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 ||
        id_json.get<int64_t>() > INT32_MAX) {
      throw Error("vocab id of \"" + token + "\" is not a non-negative 32-bit integer",
                  where + ".vocab");
    }
    const auto id = static_cast<TokenId>(id_json.get<int64_t>());
    model.vocab_.emplace(token, id);
    max_id = std::max(max_id, id);
  }
  // Ids index dense tables (tokens_, and the tokenizer's per-id bytes), so a declared id
  // sizes an allocation: bound it by the number of entries (tokenizer.h documents this).
  const int64_t id_bound = 2 * static_cast<int64_t>(model.vocab_.size()) + 1024;
  if (max_id >= id_bound) {
    throw Error("vocab id " + std::to_string(max_id) + " is far above the " +
                    std::to_string(model.vocab_.size()) + " vocab entries (ids must be below " +
                    std::to_string(id_bound) + ")",
                where + ".vocab", "number the vocab from 0 without large gaps");
  }
  model.tokens_.resize(static_cast<size_t>(max_id + 1));
  model.has_token_.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [token, id] : model.vocab_) {
    // Two tokens on one id would decode that id as either of them: refused, as a
    // token listed twice is (util/bounded_json.h). Named in byte order, so the message
    // does not depend on the hash map's order.
    if (model.has_token_[id]) {
      const std::string& other = model.tokens_[id];
      throw Error("\"" + std::min(token, other) + "\" and \"" + std::max(token, other) +
                      "\" both have id " + std::to_string(id),
                  where + ".vocab", "each id may name one token");
    }
    model.tokens_[id] = token;
    model.has_token_[id] = true;
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = model.vocab_.find(byte_level::text_of(static_cast<uint8_t>(b)));
    model.byte_ids_[b] = it == model.vocab_.end() ? -1 : it->second;
  }

  const auto& merges = spec.value("merges", nlohmann::json::array());
  model.merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string merge_where = where + ".merges[" + std::to_string(rank) + "]";
    const auto [left, right] = parse_merge(merges[rank], merge_where);
    const auto l = model.vocab_.find(left);
    const auto r = model.vocab_.find(right);
    const auto merged = model.vocab_.find(left + right);
    if (l == model.vocab_.end() || r == model.vocab_.end() || merged == model.vocab_.end()) {
      throw Error("merge \"" + left + "\" + \"" + right + "\" names a token not in the vocab",
                  merge_where);
    }
    // The first occurrence of a pair wins, as in HF (later duplicates never apply).
    model.merges_.emplace(pair_key(l->second, r->second),
                          Merge{static_cast<int32_t>(rank), merged->second});
  }

  if (!is_null_or_empty(spec, "unk_token")) {
    const std::string unk = spec["unk_token"].get<std::string>();
    const auto it = model.vocab_.find(unk);
    if (it == model.vocab_.end()) {
      throw Error("unk_token \"" + unk + "\" is not in the vocab", where + ".unk_token");
    }
    model.unk_id_ = it->second;
  }
  model.fuse_unk_ = spec.value("fuse_unk", false);
  model.ignore_merges_ = spec.value("ignore_merges", false);
  return model;
}

std::optional<TokenId> BpeModel::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(TokenId id) const {
  if (id < 0 || id >= id_limit() || !has_token_[id]) return nullptr;
  return &tokens_[id];
}

void BpeModel::encode_word(std::string_view word, std::vector<TokenId>& out) const {
  if (word.empty()) return;
  if (cache_->lookup(word, out)) return;
  const size_t first = out.size();
  merge_word(word, out);
  cache_->insert(word, out.data() + first, out.size() - first);
}

void BpeModel::merge_word(std::string_view word, std::vector<TokenId>& out) const {
  if (ignore_merges_) {
    const auto it = vocab_.find(byte_level::encode(word));
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  // Symbols form a doubly linked list over the word; a merged-away symbol is marked
  // dead and keeps its slot, so a pair's position (its left symbol's slot) is stable.
  struct Symbol {
    TokenId id;
    int prev;
    int next;
    bool alive;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  bool last_was_unk = false;
  for (char c : word) {
    const TokenId id = byte_ids_[static_cast<uint8_t>(c)];
    if (id < 0 && !unk_id_) continue;  // HF drops characters it cannot represent.
    const bool is_unk = id < 0;
    if (is_unk && fuse_unk_ && last_was_unk) continue;
    last_was_unk = is_unk;
    const int slot = static_cast<int>(symbols.size());
    symbols.push_back({is_unk ? *unk_id_ : id, slot - 1, slot + 1, true});
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  struct Candidate {
    int32_t rank;
    int pos;
    TokenId result;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto push_pair = [&](int pos) {
    const int next = symbols[pos].next;
    if (next < 0) return;
    const auto it = merges_.find(pair_key(symbols[pos].id, symbols[next].id));
    if (it != merges_.end()) queue.push({it->second.rank, pos, it->second.result});
  };
  for (int pos = 0; pos + 1 < static_cast<int>(symbols.size()); ++pos) push_pair(pos);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    // Skip entries made stale by an earlier merge of either symbol.
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    const auto it = merges_.find(pair_key(left.id, right.id));
    if (it == merges_.end() || it->second.result != top.result) continue;
    left.id = top.result;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) push_pair(left.prev);
    push_pair(top.pos);
  }
  for (int pos = 0; pos >= 0; pos = symbols[pos].next) out.push_back(symbols[pos].id);
}

}  // namespace aspen::tokenizer
