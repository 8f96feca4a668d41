// The YAML training config (util/config.h) with `key.sub=value` overrides. Input: YAML
// text, a NUL byte, then one override per line. Every top-level key is read as JSON, as
// a section and as each scalar type; then finish(). Checks: all of it works or throws
// aspen::Error (yaml-cpp's own exceptions must not escape).
#include <yaml-cpp/yaml.h>

#include <sstream>

#include "aspen/util/config.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [yaml, overrides] = aspen::fuzz::split_at_nul(data, size);
  ASPEN_FUZZ_CONTRACT({
    aspen::Config config = aspen::Config::parse(std::string(yaml), "fuzz.yaml");
    std::istringstream lines{std::string(overrides)};
    std::string line;
    while (std::getline(lines, line)) {
      try {
        config.apply_override(line);
      } catch (const aspen::Error&) {
        // a malformed override is refused; the next one still applies
      }
    }
    // The keys to ask for: those of the document as yaml-cpp reads it (parse succeeded,
    // so loading the same text again does too).
    std::vector<std::string> keys;
    const YAML::Node document = YAML::Load(std::string(yaml));
    if (document.IsMap()) {
      for (const auto& item : document) {
        if (item.first.IsScalar()) keys.push_back(item.first.Scalar());
      }
    }
    aspen::ConfigSection root = config.root();
    for (const std::string& key : keys) {
      try {
        root.json(key, nullptr);
      } catch (const aspen::Error&) {
      }
      try {
        root.get<double>(key, 0.0);
      } catch (const aspen::Error&) {
      }
      try {
        root.get<int64_t>(key, 0);
      } catch (const aspen::Error&) {
      }
      try {
        root.get<bool>(key, false);
      } catch (const aspen::Error&) {
      }
      try {
        root.get<std::string>(key, "");
      } catch (const aspen::Error&) {
      }
      try {
        root.get<std::vector<std::string>>(key, {});
      } catch (const aspen::Error&) {
      }
      try {
        aspen::ConfigSection section = root.section(key);
        section.finish();
      } catch (const aspen::Error&) {
      }
    }
    root.finish();
  });
  return 0;
}
