#include "aspen/tokenizer/utf8.h"

#include <cstdint>

#include "aspen/tokenizer/imports.h"

namespace aspen::tokenizer::utf8 {
namespace {

// Length of the sequence a lead byte announces, 0 for bytes that never lead one
// (continuation bytes, C0/C1 which could only encode overlongs, F5..FF beyond U+10FFFF).
int sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF5) return 4;
  return 0;
}

// The allowed range of the byte after `lead` (Unicode Table 3-7): narrower than
// 80..BF for the leads whose full range would admit overlongs, surrogates or > U+10FFFF.
bool second_byte_ok(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0:
      return b >= 0xA0 && b <= 0xBF;
    case 0xED:
      return b >= 0x80 && b <= 0x9F;
    case 0xF0:
      return b >= 0x90 && b <= 0xBF;
    case 0xF4:
      return b >= 0x80 && b <= 0x8F;
    default:
      return b >= 0x80 && b <= 0xBF;
  }
}

// Bytes at `pos` that belong to one sequence: its full length when well-formed
// (*valid = true), otherwise the length of the maximal ill-formed subpart (>= 1).
size_t scan_sequence(std::string_view text, size_t pos, bool* valid) {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  const int len = sequence_length(p[pos]);
  if (len == 0) {
    *valid = false;
    return 1;
  }
  size_t k = 1;
  while (k < static_cast<size_t>(len) && pos + k < text.size()) {
    const uint8_t b = p[pos + k];
    const bool ok = k == 1 ? second_byte_ok(p[pos], b) : (b & 0xC0) == 0x80;
    if (!ok) break;
    ++k;
  }
  *valid = k == static_cast<size_t>(len);
  return k;
}

}  // namespace

size_t find_invalid(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    bool valid = false;
    const size_t n = scan_sequence(text, pos, &valid);
    if (!valid) return pos;
    pos += n;
  }
  return kAllValid;
}

void append_lossy(std::string_view bytes, std::string& out) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    // Copy the longest run of well-formed bytes in one go.
    size_t run_end = pos;
    bool valid = true;
    size_t n = 0;
    while (run_end < bytes.size()) {
      if (static_cast<unsigned char>(bytes[run_end]) < 0x80) {
        ++run_end;
        continue;
      }
      n = scan_sequence(bytes, run_end, &valid);
      if (!valid) break;
      run_end += n;
    }
    out.append(bytes.data() + pos, run_end - pos);
    if (run_end == bytes.size()) return;
    out.append("\xEF\xBF\xBD");
    pos = run_end + n;
  }
}

void append_code_point(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

int decode_at(std::string_view text, size_t pos, char32_t* cp) {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data()) + pos;
  const size_t avail = text.size() - pos;
  int len = sequence_length(p[0]);
  if (len == 0 || static_cast<size_t>(len) > avail) len = 1;
  switch (len) {
    case 1:
      *cp = p[0];
      break;
    case 2:
      *cp = ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu);
      break;
    case 3:
      *cp = ((p[0] & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
      break;
    default:
      *cp =
          ((p[0] & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
  }
  return len;
}

}  // namespace aspen::tokenizer::utf8
