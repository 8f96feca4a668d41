// Tokenizer: loads tokenizer.json into its parts (added vocabulary, normaliser,
// pre-tokenizer, BPE model, ByteLevel decoder) and runs them in HF's order.
#include "aspen/tokenizer/tokenizer.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "aspen/tokenizer/added_vocabulary.h"
#include "aspen/tokenizer/bpe_model.h"
#include "aspen/tokenizer/byte_level.h"
#include "aspen/tokenizer/imports.h"
#include "aspen/tokenizer/normalizer.h"
#include "aspen/tokenizer/pre_tokenizer.h"
#include "aspen/tokenizer/utf8.h"
#include "aspen/util/bounded_json.h"
#include "aspen/util/error.h"
#include "aspen/util/file.h"
#include "aspen/util/first_error.h"

namespace aspen::tokenizer {
namespace {

// Only ByteLevel decoding is supported; it is the inverse of the ByteLevel step.
void check_decoder(const nlohmann::json& spec, const std::string& where) {
  const std::string type = spec.is_object() && spec.contains("type") && spec["type"].is_string()
                               ? spec["type"].get<std::string>()
                               : std::string(spec.is_null() ? "null" : "?");
  if (type == "ByteLevel") return;
  if (type == "Sequence") {
    for (const auto& step : spec.value("decoders", nlohmann::json::array())) {
      check_decoder(step, where);
    }
    return;
  }
  throw Error("unsupported decoder \"" + type + "\"", where, "supported: ByteLevel");
}

}  // namespace

struct Tokenizer::Impl {
  std::string source;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  BpeModel model;
  AddedVocabulary added;
  std::vector<AddedToken> added_tokens;
  int64_t vocab_size = 0;
  // Per id: the bytes decode emits, and whether the id exists / is special.
  std::vector<std::string> id_bytes;  // (vocab_size)
  std::vector<uint8_t> id_flags;      // (vocab_size) kKnown | kSpecial
  static constexpr uint8_t kKnown = 1;
  static constexpr uint8_t kSpecial = 2;

  // Tokenizes text that contains no raw-matched added token.
  void encode_unmatched(std::string_view text, std::vector<TokenId>& ids) const {
    std::string normalized_scratch;
    const std::string_view normalized = normalizer.apply(text, normalized_scratch);
    auto encode_words = [&](std::string_view piece) {
      pre_tokenizer.split(piece, [&](std::string_view word) { model.encode_word(word, ids); });
    };
    if (!added.has_patterns(AddedVocabulary::Stage::kNormalized)) {
      encode_words(normalized);
      return;
    }
    std::vector<AddedVocabulary::Piece> pieces;
    added.split(normalized, AddedVocabulary::Stage::kNormalized, pieces);
    for (const auto& piece : pieces) {
      if (piece.id != AddedVocabulary::Piece::kText) {
        ids.push_back(piece.id);
      } else {
        encode_words(normalized.substr(piece.begin, piece.end - piece.begin));
      }
    }
  }
};

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

Tokenizer Tokenizer::from_file(const std::string& path) {
  std::string file = path;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    file = (std::filesystem::path(path) / "tokenizer.json").string();
  }
  return from_json(read_file(file), file);
}

Tokenizer Tokenizer::from_json(const std::string& json_text, const std::string& source) {
  // Bounded depth: the sections below copy subtrees, which recurses once per level.
  const nlohmann::json spec = parse_json_bounded(json_text, source);
  try {
    return from_spec(spec, source);
  } catch (const nlohmann::json::exception& e) {
    // A value of the wrong JSON type where the sections read it with value()/get()
    // (e.g. "invert": "yes" in a Split pre-tokenizer).
    throw Error(std::string("a value has the wrong JSON type: ") + e.what(), source);
  }
}

Tokenizer Tokenizer::from_spec(const nlohmann::json& spec, const std::string& source) {
  if (!spec.is_object()) throw Error("tokenizer.json is not a JSON object", source);
  for (const char* key : {"truncation", "padding"}) {
    if (spec.contains(key) && !spec[key].is_null()) {
      throw Error(std::string("\"") + key + "\" is set; it would change encode results",
                  source + ": " + key, "set it to null");
    }
  }
  if (!spec.contains("model")) throw Error("no \"model\" section", source);

  auto impl = std::make_unique<Impl>();
  impl->source = source;
  impl->normalizer = Normalizer::from_json(spec.value("normalizer", nlohmann::json()), source);
  impl->pre_tokenizer =
      PreTokenizer::from_json(spec.value("pre_tokenizer", nlohmann::json()), source);
  impl->model = BpeModel::from_json(spec["model"], source);
  impl->added = AddedVocabulary::from_json(spec.value("added_tokens", nlohmann::json()),
                                           impl->normalizer, impl->model, source);
  check_decoder(spec.value("decoder", nlohmann::json()), source + ": decoder");

  impl->vocab_size = impl->model.id_limit();
  for (const auto& entry : impl->added.entries()) {
    if (entry.id < 0) throw Error("negative added token id", source + ": added_tokens");
    impl->added_tokens.push_back({entry.content, entry.id, entry.special});
    impl->vocab_size = std::max<int64_t>(impl->vocab_size, entry.id + int64_t{1});
  }
  impl->id_bytes.resize(static_cast<size_t>(impl->vocab_size));
  impl->id_flags.assign(static_cast<size_t>(impl->vocab_size), 0);
  for (TokenId id = 0; id < impl->vocab_size; ++id) {
    const AddedVocabulary::Entry* entry = impl->added.find(id);
    const std::string* text = entry ? &entry->content : impl->model.id_to_token(id);
    if (text == nullptr) continue;
    impl->id_flags[id] = Impl::kKnown | (entry && entry->special ? Impl::kSpecial : 0);
    // HF's ByteLevel decoder keeps a token's text verbatim when some character of it
    // is not a ByteLevel character (e.g. an added token containing a space).
    std::optional<std::string> bytes = byte_level::decode(*text);
    impl->id_bytes[id] = bytes ? std::move(*bytes) : *text;
  }
  return Tokenizer(std::move(impl));
}

std::vector<TokenId> Tokenizer::encode(std::string_view text) const {
  const size_t bad = utf8::find_invalid(text);
  if (bad != utf8::kAllValid) {
    throw Error("invalid UTF-8 at byte " + std::to_string(bad), "tokenizer input",
                "encode takes UTF-8 text; decode or re-encode the input first");
  }
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + 4);
  const Impl& impl = *impl_;
  if (!impl.added.has_patterns(AddedVocabulary::Stage::kRaw)) {
    impl.encode_unmatched(text, ids);
    return ids;
  }
  std::vector<AddedVocabulary::Piece> pieces;
  impl.added.split(text, AddedVocabulary::Stage::kRaw, pieces);
  for (const auto& piece : pieces) {
    if (piece.id != AddedVocabulary::Piece::kText) {
      ids.push_back(piece.id);
    } else {
      impl.encode_unmatched(text.substr(piece.begin, piece.end - piece.begin), ids);
    }
  }
  return ids;
}

std::vector<std::vector<TokenId>> Tokenizer::encode_batch(const std::vector<std::string>& texts,
                                                          int threads) const {
  std::vector<std::vector<TokenId>> results(texts.size());
  size_t workers = threads > 0 ? static_cast<size_t>(threads)
                               : std::max(1u, std::thread::hardware_concurrency());
  workers = std::min(workers, texts.size());
  if (workers <= 1) {
    for (size_t i = 0; i < texts.size(); ++i) results[i] = encode(texts[i]);
    return results;
  }
  // Texts are claimed one at a time so a few long texts do not leave threads idle.
  std::atomic<size_t> next{0};
  FirstError errors;
  auto work = [&] {
    for (size_t i = next++; i < texts.size(); i = next++) {
      try {
        results[i] = encode(texts[i]);
      } catch (...) {
        errors.record(std::current_exception());
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < workers; ++t) pool.emplace_back(work);
  work();
  for (auto& thread : pool) thread.join();
  errors.rethrow_if_any();
  return results;
}

std::string Tokenizer::decode(const std::vector<TokenId>& ids, bool skip_special_tokens) const {
  const Impl& impl = *impl_;
  std::string bytes;
  for (const TokenId id : ids) {
    if (id < 0 || id >= impl.vocab_size || !(impl.id_flags[id] & Impl::kKnown)) {
      throw Error("unknown token id " + std::to_string(id), impl.source,
                  "ids must be below vocab_size " + std::to_string(impl.vocab_size));
    }
    if (skip_special_tokens && (impl.id_flags[id] & Impl::kSpecial)) continue;
    bytes += impl.id_bytes[id];
  }
  std::string text;
  text.reserve(bytes.size());
  utf8::append_lossy(bytes, text);
  return text;
}

int64_t Tokenizer::vocab_size() const {
  return impl_->vocab_size;
}

std::optional<TokenId> Tokenizer::token_to_id(std::string_view token) const {
  if (const auto* entry = impl_->added.find(token)) return entry->id;
  return impl_->model.token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(TokenId id) const {
  if (const auto* entry = impl_->added.find(id)) return entry->content;
  if (const std::string* token = impl_->model.id_to_token(id)) return *token;
  return std::nullopt;
}

bool Tokenizer::is_special(TokenId id) const {
  const auto* entry = impl_->added.find(id);
  return entry != nullptr && entry->special;
}

const std::vector<Tokenizer::AddedToken>& Tokenizer::added_tokens() const {
  return impl_->added_tokens;
}

}  // namespace aspen::tokenizer
