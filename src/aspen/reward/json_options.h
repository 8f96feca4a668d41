// JsonOptions: strict, typed reading of a JSON options object (verifier and task options).
// Every getter takes a default; a key of the wrong type throws aspen::Error naming
// "<where>.<key>", and check_no_unknown_keys() throws for any key never asked for, so a
// typo in a config ("rel_tolerance" for "rel_tol") is an error instead of a silent default.
// A null options value reads as an empty object.
// Thread safety: not thread-safe (records which keys were read); use once, at construction.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "aspen/reward/imports.h"

namespace aspen::reward {

class JsonOptions {
 public:
  // `where` names the options in errors, e.g. "verifier options (math)".
  JsonOptions(const nlohmann::json& options, std::string where);

  double number(const std::string& key, double fallback);
  int64_t integer(const std::string& key, int64_t fallback);
  bool boolean(const std::string& key, bool fallback);
  std::string string(const std::string& key, const std::string& fallback);
  std::vector<std::string> strings(const std::string& key,
                                   const std::vector<std::string>& fallback);
  // The raw value of `key`, or nullptr when absent.
  const nlohmann::json* raw(const std::string& key);

  // "<where>.<key>", for callers' own range errors.
  std::string path(const std::string& key) const { return where_ + "." + key; }
  // Throws aspen::Error naming the first key that no getter asked for.
  void check_no_unknown_keys() const;

 private:
  nlohmann::json options_;
  std::string where_;
  std::set<std::string> read_;
};

// `value` as compact JSON text for error messages. Never throws: strings that are not
// valid UTF-8 (a ground truth or option built in code, not parsed) print with U+FFFD
// where nlohmann's dump() would throw json::type_error.
std::string json_for_message(const nlohmann::json& value);

}  // namespace aspen::reward
