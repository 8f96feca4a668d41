// Strict YAML configuration: typed reads that name the key path in every error,
// unknown keys rejected, and `key.sub=value` command-line overrides.
//
// Refused at parse time: a mapping that repeats a key (YAML parsers keep one silently),
// a document (or override value) that expands to more than 100,000 values once its
// aliases are written out (an alias bomb), and a config path that is a directory.
// Floating-point values must be finite.
//
// Usage: a reader asks a ConfigSection for each key it understands (get/section),
// then calls finish(), which throws for any key it never asked about — so a typo
// in a config is an error naming "config.yaml: train.lrr", never a silent default.
//
//   Config config = Config::load_file("run.yaml");
//   config.apply_override("train.lr=1e-5");
//   ConfigSection train = config.root().section("train");
//   double lr = train.get<double>("lr", 1e-6);
//   train.finish();
//
// Thread safety: none; configs are read once at start-up.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "aspen/util/error.h"

namespace aspen {

// Key paths set by command-line overrides -> the override that set them, so that an
// error names the override a value came from rather than the file.
using OverrideOrigins = std::map<std::string, std::string>;

class ConfigSection {
 public:
  ConfigSection(YAML::Node node, std::string path, std::string source,
                std::shared_ptr<const OverrideOrigins> overrides = nullptr);

  bool has(const std::string& key) const;
  // The value at `key`, or `fallback` when absent. Wrong type: aspen::Error naming the path.
  template <typename T>
  T get(const std::string& key, const T& fallback);
  // A required value: aspen::Error when absent.
  template <typename T>
  T require(const std::string& key);
  // The value at `key` as JSON (mappings, lists and scalars; numbers and booleans
  // typed), or `fallback` when absent. For free-form option blocks.
  nlohmann::json json(const std::string& key, const nlohmann::json& fallback);
  // A nested mapping (empty when absent).
  ConfigSection section(const std::string& key);
  // Throws aspen::Error naming the first key of this mapping nobody asked for.
  void finish() const;

  // "source: path.key" for messages about `key`; `override "a.b=v": a.b` when that
  // value (or a section above it) came from a command-line override.
  std::string where(const std::string& key) const;

 private:
  YAML::Node child(const std::string& key);

  YAML::Node node_;
  std::string path_;
  std::string source_;
  std::shared_ptr<std::set<std::string>> seen_;
  std::shared_ptr<const OverrideOrigins> overrides_;
};

class Config {
 public:
  static Config load_file(const std::string& path);
  static Config parse(const std::string& yaml_text, const std::string& source);
  // An empty config (every key takes its default).
  static Config empty(const std::string& source = "defaults");
  // A command's positional arguments (`aspen train`, `sft`, `eval`, `simulate`, `bench
  // pipeline`): at most one YAML file plus any number of key.sub=value overrides,
  // applied in order. No file: the built-in defaults. aspen::Error for two files, an
  // unreadable file or a malformed override.
  static Config from_arguments(const std::vector<std::string>& arguments);

  // "a.b.c=value": the value is parsed as YAML (numbers, booleans, lists work) and
  // replaces or creates the key. Malformed overrides are aspen::Error.
  void apply_override(const std::string& assignment);

  ConfigSection root() { return ConfigSection(root_, "", source_, overrides_); }
  const std::string& source() const { return source_; }

 private:
  Config(YAML::Node root, std::string source)
      : root_(std::move(root)),
        source_(std::move(source)),
        overrides_(std::make_shared<OverrideOrigins>()) {}
  YAML::Node root_;
  std::string source_;
  std::shared_ptr<OverrideOrigins> overrides_;
};

// ---- template implementation ----

template <typename T>
T ConfigSection::get(const std::string& key, const T& fallback) {
  YAML::Node value = child(key);
  if (!value || value.IsNull()) return fallback;
  T parsed;
  try {
    parsed = value.as<T>();
  } catch (const YAML::Exception&) {
    throw Error("wrong type for this key (value: " + YAML::Dump(value) + ")", where(key));
  }
  if constexpr (std::is_floating_point_v<T>) {
    // YAML spells .inf and .nan; no setting means either (train.lr=.inf trained to NaN).
    check_input(std::isfinite(parsed), "must be a finite number (value: " + YAML::Dump(value) + ")",
                where(key));
  }
  return parsed;
}

template <typename T>
T ConfigSection::require(const std::string& key) {
  YAML::Node value = child(key);
  if (!value || value.IsNull()) throw Error("required key is missing", where(key));
  return get<T>(key, T{});
}

}  // namespace aspen
