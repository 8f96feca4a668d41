#include "aspen/reward/json_options.h"

#include <cmath>

#include "aspen/reward/imports.h"
#include "aspen/util/error.h"

namespace aspen::reward {

JsonOptions::JsonOptions(const nlohmann::json& options, std::string where)
    : options_(options.is_null() ? nlohmann::json::object() : options), where_(std::move(where)) {
  check_input(options_.is_object(),
              "options must be a JSON object, got " + json_for_message(options_), where_);
}

const nlohmann::json* JsonOptions::raw(const std::string& key) {
  read_.insert(key);
  auto it = options_.find(key);
  return it == options_.end() ? nullptr : &*it;
}

double JsonOptions::number(const std::string& key, double fallback) {
  const nlohmann::json* value = raw(key);
  if (value == nullptr) return fallback;
  check_input(value->is_number() && std::isfinite(value->get<double>()),
              "expected a finite number, got " + json_for_message(*value), path(key));
  return value->get<double>();
}

int64_t JsonOptions::integer(const std::string& key, int64_t fallback) {
  const nlohmann::json* value = raw(key);
  if (value == nullptr) return fallback;
  check_input(value->is_number_integer(), "expected an integer, got " + json_for_message(*value),
              path(key));
  return value->get<int64_t>();
}

bool JsonOptions::boolean(const std::string& key, bool fallback) {
  const nlohmann::json* value = raw(key);
  if (value == nullptr) return fallback;
  check_input(value->is_boolean(), "expected true or false, got " + json_for_message(*value),
              path(key));
  return value->get<bool>();
}

std::string JsonOptions::string(const std::string& key, const std::string& fallback) {
  const nlohmann::json* value = raw(key);
  if (value == nullptr) return fallback;
  check_input(value->is_string(), "expected a string, got " + json_for_message(*value), path(key));
  return value->get<std::string>();
}

std::vector<std::string> JsonOptions::strings(const std::string& key,
                                              const std::vector<std::string>& fallback) {
  const nlohmann::json* value = raw(key);
  if (value == nullptr) return fallback;
  check_input(value->is_array(), "expected an array of strings, got " + json_for_message(*value),
              path(key));
  std::vector<std::string> out;
  for (const nlohmann::json& item : *value) {
    check_input(item.is_string(), "expected an array of strings, got " + json_for_message(*value),
                path(key));
    out.push_back(item.get<std::string>());
  }
  return out;
}

void JsonOptions::check_no_unknown_keys() const {
  for (auto it = options_.begin(); it != options_.end(); ++it) {
    if (read_.count(it.key()) != 0) continue;
    std::string known;
    for (const std::string& key : read_) known += (known.empty() ? "" : ", ") + key;
    throw Error("unknown option \"" + it.key() + "\"", path(it.key()), "known options: " + known);
  }
}

std::string json_for_message(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace aspen::reward
