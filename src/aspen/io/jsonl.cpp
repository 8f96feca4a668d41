#include "aspen/io/jsonl.h"

#include "aspen/io/imports.h"
#include "aspen/util/bounded_json.h"
#include "aspen/util/error.h"

namespace aspen::io {

JsonlReader::JsonlReader(std::istream& in, std::string source)
    : in_(in), source_(std::move(source)) {}

bool JsonlReader::next(nlohmann::json& value) {
  std::string line;
  while (std::getline(in_, line)) {
    ++line_number_;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    // Bounded depth (callers copy and dump values, which recurse per level); any
    // nlohmann error (syntax, a number out of range) is an aspen::Error naming the line.
    value = parse_json_bounded(line, location());
    return true;
  }
  return false;
}

std::string JsonlReader::location() const {
  return source_ + ": line " + std::to_string(line_number_);
}

void write_jsonl(std::ostream& out, const nlohmann::json& value) {
  out << value.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace)
      << '\n';
  out.flush();
}

}  // namespace aspen::io
