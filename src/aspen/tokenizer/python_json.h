// python_json_dumps: JSON text exactly as Python's `json.dumps(value, ensure_ascii=False)`
// writes it, which is what HF transformers' `tojson` filter produces inside a chat template
// (transformers overrides Jinja's own tojson with json.dumps and these defaults). The Qwen
// templates print tool schemas and tool-call arguments with it, so a prompt rendered here
// equals HF's byte for byte only if this matches Python:
//   - separators ", " and ": "; keys in the value's own order (hence ordered_json: the
//     order the JSON arrived in, as Python's dicts keep it; nlohmann::json would sort);
//   - strings: `"` `\\` \b \f \n \r \t escaped, other bytes below 0x20 as \u00xx, every
//     other byte as is (UTF-8 passes through; U+2028 and DEL are not escaped);
//   - floats as Python's repr: shortest round-trip digits, "1.0" for integral values,
//     exponent form ("1e-05", "1e+16") below 1e-4 and from 1e16 on, "NaN", "Infinity";
//   - integers in decimal. nlohmann holds integers in 64 bits, so an integer literal
//     beyond that parsed from text arrives here as a double and prints as one (Python
//     would keep every digit); tool arguments that need big numbers should be strings.
// Thread safety: a pure function.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "aspen/tokenizer/imports.h"

namespace aspen::tokenizer {

std::string python_json_dumps(const nlohmann::ordered_json& value);

// Python's repr() of a float (the number formatting above).
std::string python_float_repr(double value);

}  // namespace aspen::tokenizer
