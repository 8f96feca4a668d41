#include "aspen/util/config.h"

#include <optional>
#include <sstream>

#include "aspen/util/file.h"

namespace aspen {

ConfigSection::ConfigSection(YAML::Node node, std::string path, std::string source,
                             std::shared_ptr<const OverrideOrigins> overrides)
    : node_(std::move(node)),
      path_(std::move(path)),
      source_(std::move(source)),
      seen_(std::make_shared<std::set<std::string>>()),
      overrides_(std::move(overrides)) {
  if (node_ && !node_.IsNull() && !node_.IsMap()) {
    throw Error("expected a mapping of keys", source_ + (path_.empty() ? "" : ": " + path_));
  }
}

std::string ConfigSection::where(const std::string& key) const {
  const std::string full = path_.empty() ? key : path_ + "." + key;
  if (overrides_) {
    // The value itself, or a section above it, set on the command line.
    for (std::string prefix = full;;) {
      auto it = overrides_->find(prefix);
      if (it != overrides_->end()) return "override \"" + it->second + "\": " + full;
      const size_t dot = prefix.rfind('.');
      if (dot == std::string::npos) break;
      prefix.resize(dot);
    }
  }
  return source_ + ": " + full;
}

YAML::Node ConfigSection::child(const std::string& key) {
  seen_->insert(key);
  if (!node_ || node_.IsNull()) return YAML::Node();
  return node_[key];
}

bool ConfigSection::has(const std::string& key) const {
  return node_ && node_.IsMap() && node_[key] && !node_[key].IsNull();
}

namespace {

nlohmann::json to_json(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json object = nlohmann::json::object();
      for (const auto& item : node) object[item.first.as<std::string>()] = to_json(item.second);
      return object;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json array = nlohmann::json::array();
      for (const auto& item : node) array.push_back(to_json(item));
      return array;
    }
    case YAML::NodeType::Scalar: {
      if (node.Tag() == "!") return node.as<std::string>();  // quoted: always a string
      int64_t integer;
      double real;
      bool boolean;
      if (YAML::convert<int64_t>::decode(node, integer)) return integer;
      if (YAML::convert<double>::decode(node, real)) return real;
      if (YAML::convert<bool>::decode(node, boolean)) return boolean;
      return node.as<std::string>();
    }
    default:
      return nullptr;
  }
}

}  // namespace

nlohmann::json ConfigSection::json(const std::string& key, const nlohmann::json& fallback) {
  YAML::Node value = child(key);
  if (!value || value.IsNull()) return fallback;
  return to_json(value);
}

ConfigSection ConfigSection::section(const std::string& key) {
  YAML::Node value = child(key);
  const std::string path = path_.empty() ? key : path_ + "." + key;
  if (!value || value.IsNull()) return ConfigSection(YAML::Node(), path, source_, overrides_);
  if (!value.IsMap()) throw Error("expected a mapping of keys", where(key));
  return ConfigSection(value, path, source_, overrides_);
}

void ConfigSection::finish() const {
  if (!node_ || !node_.IsMap()) return;
  for (const auto& item : node_) {
    const std::string key = item.first.as<std::string>();
    if (seen_->count(key) == 0) {
      std::string known;
      for (const auto& k : *seen_) known += (known.empty() ? "" : ", ") + k;
      throw Error("unknown key", where(key), "known keys here: " + known);
    }
  }
}

namespace {

// The most values (mappings, lists and scalars, counted as if every alias were written
// out) one config file or override may hold. An alias shares its anchor's node, so
// yaml-cpp loads nested aliases cheaply, but every walk over the tree (this check, the
// readers, to_json) visits the shared node once per path to it: nine anchors of ten
// aliases each ("billion laughs", 300 bytes) are 10^9 values and a minute of CPU. Real
// configs hold a few hundred values; the bound makes such a file fail in milliseconds.
constexpr int64_t kMaxConfigValues = 100000;

// Counts values as reject_duplicate_keys visits them; aspen::Error past the bound.
struct ValueBudget {
  int64_t left = kMaxConfigValues;
  void spend(const std::string& source) {
    check_input(--left >= 0,
                "the YAML expands to more than " + std::to_string(kMaxConfigValues) +
                    " values (anchors and aliases repeat content)",
                source, "write the values out, or nest fewer aliases");
  }
};

// yaml-cpp keeps every pair of a mapping that repeats a key and answers lookups with
// the first, so `lr: 1e-5` written twice would silently use the first value. Also
// bounds the expanded size (ValueBudget) before anything else walks the tree.
void reject_duplicate_keys(const YAML::Node& node, const std::string& path,
                           const std::string& source, ValueBudget& budget) {
  budget.spend(source);
  if (node.IsMap()) {
    std::set<std::string> keys;
    for (const auto& item : node) {
      // `? [a, b]: 1` or `{: x}` are YAML but not config: a key is a plain name.
      check_input(item.first.IsScalar() && !item.first.Scalar().empty(),
                  "a mapping key must be a plain name",
                  source + ": " + (path.empty() ? "top level" : path));
      const std::string key = item.first.Scalar();
      const std::string here = path.empty() ? key : path + "." + key;
      if (!keys.insert(key).second) {
        throw Error("duplicate key", source + ": " + here, "each key may appear once per mapping");
      }
      reject_duplicate_keys(item.second, here, source, budget);
    }
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) {
      reject_duplicate_keys(node[i], path + "[" + std::to_string(i) + "]", source, budget);
    }
  }
}

}  // namespace

Config Config::load_file(const std::string& path) {
  return parse(read_file(path), path);
}

Config Config::parse(const std::string& yaml_text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    throw Error("malformed YAML at line " + std::to_string(e.mark.line + 1) + ": " + e.msg, source);
  } catch (const YAML::Exception& e) {
    throw Error(std::string("unreadable YAML: ") + e.what(), source);
  }
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) throw Error("the top level must be a mapping of sections", source);
  ValueBudget budget;
  reject_duplicate_keys(root, "", source, budget);
  return Config(root, source);
}

Config Config::empty(const std::string& source) {
  return Config(YAML::Node(YAML::NodeType::Map), source);
}

Config Config::from_arguments(const std::vector<std::string>& arguments) {
  std::optional<Config> config;
  std::vector<std::string> overrides;
  for (const auto& argument : arguments) {
    if (argument.find('=') != std::string::npos) {
      overrides.push_back(argument);
    } else {
      check_input(!config, "more than one config file given", argument);
      config = Config::load_file(argument);
    }
  }
  if (!config) config = Config::empty("built-in defaults");
  for (const auto& assignment : overrides) config->apply_override(assignment);
  return *config;
}

void Config::apply_override(const std::string& assignment) {
  const std::string where = "override \"" + assignment + "\"";
  const size_t equals = assignment.find('=');
  check_input(equals != std::string::npos && equals > 0, "expected key.sub=value", where);
  const std::string path = assignment.substr(0, equals);
  YAML::Node value;
  try {
    value = YAML::Load(assignment.substr(equals + 1));
  } catch (const YAML::ParserException& e) {
    throw Error("the value is not valid YAML: " + e.msg, where);
  } catch (const YAML::Exception& e) {
    throw Error(std::string("the value is not valid YAML: ") + e.what(), where);
  }
  ValueBudget budget;
  reject_duplicate_keys(value, "", where, budget);
  std::vector<std::string> keys;
  std::stringstream stream(path);
  for (std::string key; std::getline(stream, key, '.');) {
    check_input(!key.empty(), "empty key in the path", where);
    keys.push_back(key);
  }
  // yaml-cpp nodes are handles: walk down, creating mappings as needed.
  std::vector<YAML::Node> chain{root_};
  for (size_t i = 0; i + 1 < keys.size(); ++i) {
    YAML::Node next = chain.back()[keys[i]];
    if (!next || next.IsNull()) {
      chain.back()[keys[i]] = YAML::Node(YAML::NodeType::Map);
      next = chain.back()[keys[i]];
    }
    check_input(next.IsMap(), "\"" + keys[i] + "\" is not a section", where);
    chain.push_back(next);
  }
  chain.back()[keys.back()] = value;
  (*overrides_)[path] = assignment;
}

}  // namespace aspen
