#include "aspen/tokenizer/regex_splitter.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "aspen/tokenizer/imports.h"
#include "aspen/tokenizer/utf8.h"
#include "aspen/util/error.h"

namespace aspen::tokenizer {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

// Per-thread match state. The JIT stack is larger than PCRE2's 32 KiB default so
// that patterns like \s+(?!\S) do not fail on very long runs of whitespace.
struct ThreadMatchState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);

  ThreadMatchState() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~ThreadMatchState() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

ThreadMatchState& thread_match_state() {
  thread_local ThreadMatchState state;
  return state;
}

}  // namespace

std::string translate_onig_pattern(const std::string& pattern, const std::string& source) {
  std::string out;
  out.reserve(pattern.size() + 32);
  int class_depth = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c != '\\' || i + 1 == pattern.size()) {
      if (c == '[') ++class_depth;
      if (c == ']' && class_depth > 0) --class_depth;
      out += c;
      continue;
    }
    const char escaped = pattern[++i];
    const bool in_class = class_depth > 0;
    switch (escaped) {
      case 's':
        out += "\\p{White_Space}";
        break;
      case 'S':
        out += "\\P{White_Space}";
        break;
      case 'd':
        out += "\\p{Nd}";
        break;
      case 'D':
        out += "\\P{Nd}";
        break;
      case 'w':
        out += in_class ? "\\p{L}\\p{M}\\p{Nd}\\p{Pc}" : "[\\p{L}\\p{M}\\p{Nd}\\p{Pc}]";
        break;
      case 'W':
        if (in_class) {
          throw Error("\\W inside a character class is not supported", source,
                      "pattern: " + pattern);
        }
        out += "[^\\p{L}\\p{M}\\p{Nd}\\p{Pc}]";
        break;
      case 'h':
      case 'H':
        throw Error("\\h/\\H (hex digit in Oniguruma) is not supported", source,
                    "pattern: " + pattern);
      default:
        // Every other escape (\p{..}, \r, \x{..}, \', ...) means the same in PCRE2.
        out += c;
        out += escaped;
    }
  }
  return out;
}

struct RegexSplitter::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  std::string source;
  ~Compiled() { pcre2_code_free(code); }
};

RegexSplitter::RegexSplitter(const std::string& pattern, const std::string& source)
    : compiled_(std::make_unique<Compiled>()) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  compiled_->source = source;
  const std::string translated = translate_onig_pattern(pattern, source);
  compiled_->code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                    PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (compiled_->code == nullptr) {
    throw Error("regex does not compile at offset " + std::to_string(error_offset) + ": " +
                    pcre2_message(error_code),
                source, "pattern: " + pattern);
  }
  // JIT is an optimisation: without it (unsupported CPU) the interpreter gives the
  // same matches.
  compiled_->jit = pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE) == 0;
}

RegexSplitter::~RegexSplitter() = default;
RegexSplitter::RegexSplitter(RegexSplitter&&) noexcept = default;
RegexSplitter& RegexSplitter::operator=(RegexSplitter&&) noexcept = default;

bool RegexSplitter::next_match(std::string_view text, size_t from, size_t* begin,
                               size_t* end) const {
  ThreadMatchState& state = thread_match_state();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  while (from <= text.size()) {
    // NO_UTF_CHECK: the caller validated the text once; PCRE2 would otherwise rescan
    // the whole subject on every call, making splitting quadratic.
    const int rc = compiled_->jit ? pcre2_jit_match(compiled_->code, subject, text.size(), from,
                                                    PCRE2_NO_UTF_CHECK, state.data, state.context)
                                  : pcre2_match(compiled_->code, subject, text.size(), from,
                                                PCRE2_NO_UTF_CHECK, state.data, state.context);
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    if (rc < 0) {
      throw Error("regex matching failed: " + pcre2_message(rc), compiled_->source,
                  "input of " + std::to_string(text.size()) + " bytes");
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
    if (ovector[1] > ovector[0]) {
      *begin = ovector[0];
      *end = ovector[1];
      return true;
    }
    // An empty match splits nothing (HF drops empty pieces); resume one code point on.
    if (ovector[0] >= text.size()) return false;
    char32_t cp = 0;
    from = ovector[0] + utf8::decode_at(text, ovector[0], &cp);
  }
  return false;
}

}  // namespace aspen::tokenizer
