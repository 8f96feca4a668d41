#include "aspen/io/peft_adapter.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "aspen/io/imports.h"
#include "aspen/io/safetensors.h"
#include "aspen/io/strict_json.h"
#include "aspen/util/error.h"
#include "aspen/util/file.h"
#include "aspen/util/strings.h"

namespace aspen::io {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// PeftModel wraps the base model as base_model (LoraModel) whose .model is the HF model.
constexpr const char* kKeyPrefix = "base_model.model.";
constexpr const char* kLoraASuffix = ".lora_A.weight";
constexpr const char* kLoraBSuffix = ".lora_B.weight";

// PEFT's own defaults for its optional fields: a key holding one of these has no effect.
bool is_default(const Json& value) {
  return value.is_null() || (value.is_boolean() && !value.get<bool>()) ||
         (value.is_object() && value.empty()) || (value.is_array() && value.empty());
}

// LoraConfig fields that change what the adapter computes in ways Aspen does not
// implement; each is refused unless it holds its default (is_default).
struct Refusal {
  const char* key;
  const char* problem;
};
constexpr Refusal kRefused[] = {
    {"use_dora", "DoRA (weight-decomposed LoRA) is not supported"},
    {"rank_pattern", "per-module ranks are not supported: Aspen uses one r for every module"},
    {"alpha_pattern",
     "per-module alphas are not supported: Aspen uses one lora_alpha for every module"},
    {"modules_to_save", "fully trained modules saved beside the adapter are not supported"},
    {"trainable_token_indices", "trainable token embeddings are not supported"},
    {"lora_bias", "a trained bias on lora_B is not supported"},
    {"fan_in_fan_out", "fan_in_fan_out (transposed Conv1D weights) is not supported"},
    {"layers_to_transform", "adapters on a subset of the layers are not supported"},
    {"exclude_modules", "excluded modules are not supported"},
    {"target_parameters", "LoRA on bare parameters (target_parameters) is not supported"},
    {"layer_replication", "layer replication is not supported"},
    {"megatron_config", "Megatron parallel linears are not supported"},
    {"use_qalora", "the QALoRA variant is not supported"},
    {"use_bdlora", "the block-diagonal LoRA variant is not supported"},
    {"arrow_config", "the Arrow routing variant is not supported"},
    {"alora_invocation_tokens", "activated LoRA (aLoRA) is not supported"},
    {"velora_config", "the VeLoRA variant is not supported"},
    {"monteclora_config", "the MonteCLoRA variant is not supported"},
    {"kasa_config", "the KaSA variant is not supported"},
};

// Fields read below, or bookkeeping and initialisation settings with no effect on a saved
// linear adapter (the initialisations that do matter are refused by init_lora_weights).
const std::set<std::string>& known_keys() {
  static const std::set<std::string> keys = {
      "peft_type", "task_type", "r", "lora_alpha", "lora_dropout", "target_modules",
      "use_rslora", "base_model_name_or_path", "bias", "init_lora_weights",
      // bookkeeping
      "peft_version", "revision", "auto_mapping", "inference_mode",
      // only meaningful with layers_to_transform, use_qalora or megatron_config (refused)
      "layers_pattern", "qalora_group_size", "megatron_core",
      // ties adapters of tied embeddings; Aspen adapts no embedding
      "ensure_weight_tying",
      // initialisation-time settings, used before the weights were trained
      "loftq_config", "eva_config", "corda_config", "lora_ga_config",
      // PEFT's runtime options (GPU offload), not part of the adapter
      "runtime_config"};
  return keys;
}

class PeftConfigReader {
 public:
  PeftConfigReader(const Json& root, std::string source) : root_(root), source_(std::move(source)) {}

  Error error(const std::string& key, const std::string& problem,
              const std::string& hint = {}) const {
    return Error(problem, source_ + ": " + key, hint);
  }
  bool has(const char* key) const { return root_.contains(key) && !root_.at(key).is_null(); }
  const Json& required(const char* key) const {
    if (!has(key)) throw error(key, "missing required key");
    return root_.at(key);
  }
  std::string string(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!root_.at(key).is_string()) throw error(key, "must be a string");
    return root_.at(key).get<std::string>();
  }
  double number(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    if (!root_.at(key).is_number()) throw error(key, "must be a number");
    return root_.at(key).get<double>();
  }
  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!root_.at(key).is_boolean()) throw error(key, "must be true or false");
    return root_.at(key).get<bool>();
  }

 private:
  const Json& root_;
  std::string source_;
};

void refuse_unsupported(const Json& root, const PeftConfigReader& config) {
  for (const Refusal& refusal : kRefused) {
    if (root.contains(refusal.key) && !is_default(root.at(refusal.key))) {
      throw config.error(refusal.key, refusal.problem,
                         "got " + root.at(refusal.key).dump() + "; Aspen applies plain LoRA");
    }
  }
  for (const auto& [key, value] : root.items()) {
    const bool refused = std::any_of(std::begin(kRefused), std::end(kRefused),
                                     [&](const Refusal& r) { return key == r.key; });
    if (!refused && known_keys().count(key) == 0 && !is_default(value)) {
      throw config.error(key, "an option Aspen does not know, set to " + value.dump(),
                         "written by a newer PEFT? Aspen reads plain LoRA only");
    }
  }
  const std::string peft_type = config.string("peft_type", "");
  if (peft_type != "LORA") {
    throw config.error("peft_type", "must be \"LORA\", got \"" + peft_type + "\"");
  }
  const std::string task_type = config.string("task_type", "CAUSAL_LM");
  if (task_type != "CAUSAL_LM") {
    throw config.error("task_type", "must be \"CAUSAL_LM\" (or null), got \"" + task_type + "\"",
                       "other tasks add heads that Aspen does not load");
  }
  const std::string bias = config.string("bias", "none");
  if (bias != "none") {
    throw config.error("bias", "must be \"none\", got \"" + bias + "\"",
                       "trained biases of the base model are not supported");
  }
  if (root.contains("init_lora_weights") && !root.at("init_lora_weights").is_boolean()) {
    const Json& init = root.at("init_lora_weights");
    const std::string name = init.is_string() ? init.get<std::string>() : init.dump();
    // Initialisations that only set A and B are fine once trained; PiSSA, OLoRA, CorDA,
    // LoftQ and LoRA-GA subtract their start from the base weights (the adapter needs that
    // changed base model), and MiCA is a LoRA variant.
    if (name != "gaussian" && name != "eva" && name != "orthogonal") {
      throw config.error("init_lora_weights", "\"" + name + "\" is not supported",
                         "it changes the base weights or the LoRA computation; save the adapter "
                         "with PEFT's path_initial_model_for_weight_conversion to get plain LoRA");
    }
  }
}

// target_modules: a list of suffixes, or a regex string (see the header).
struct Targets {
  std::vector<std::string> names;
  bool from_regex = false;
};

Targets read_targets(const PeftConfigReader& config) {
  const Json& value = config.required("target_modules");
  Targets targets;
  if (value.is_string()) {
    targets.from_regex = true;
    return targets;
  }
  if (!value.is_array()) throw config.error("target_modules", "must be a list of names or a string");
  for (const Json& item : value) {
    if (!item.is_string()) throw config.error("target_modules", "must hold only strings");
    targets.names.push_back(item.get<std::string>());
  }
  std::sort(targets.names.begin(), targets.names.end());
  return targets;
}

LoraAdapterConfig parse_config(const std::string& text, const std::string& source,
                               bool* targets_from_regex) {
  const Json root = parse_strict_json(text, source);
  if (!root.is_object()) throw Error("must be a JSON object", source);
  const PeftConfigReader config(root, source);
  refuse_unsupported(root, config);

  LoraAdapterConfig out;
  const Json& r = config.required("r");
  if (!r.is_number_integer()) throw config.error("r", "must be an integer");
  out.rank = r.get<int64_t>();
  out.alpha = config.number("lora_alpha", 8.0);  // LoraConfig's defaults
  out.dropout = config.number("lora_dropout", 0.0);
  out.use_rslora = config.boolean("use_rslora", false);
  out.base_model = config.string("base_model_name_or_path", "");
  const Targets targets = read_targets(config);
  out.target_modules = targets.names;
  *targets_from_regex = targets.from_regex;
  return out;
}

// The rules both directions share; errors name `source` (the weights file).
void check_tensors(const std::map<std::string, torch::Tensor>& tensors,
                   const LoraAdapterConfig& config, const std::string& source) {
  if (tensors.empty()) throw Error("holds no adapter tensors", source);
  std::map<std::string, std::pair<const torch::Tensor*, const torch::Tensor*>> modules;
  for (const auto& [name, tensor] : tensors) {
    const bool is_a = ends_with(name, kLoraASuffix);
    if (!is_a && !ends_with(name, kLoraBSuffix)) {
      const bool embedding = name.find("lora_embedding_") != std::string::npos;
      throw Error(embedding ? "tensor \"" + name + "\": LoRA on embeddings is not supported"
                            : "tensor \"" + name + "\" is not a Linear's lora_A or lora_B weight",
                  source,
                  embedding ? "adapt linear layers only"
                            : "expected <module>.lora_A.weight and <module>.lora_B.weight "
                              "(without the adapter name, as PEFT saves them)");
    }
    const std::string module =
        name.substr(0, name.size() - std::string(is_a ? kLoraASuffix : kLoraBSuffix).size());
    if (module.empty()) throw Error("tensor \"" + name + "\" names no module", source);
    if (!tensor.defined()) throw Error("tensor \"" + name + "\" is undefined", source);
    if (!tensor.is_floating_point()) {
      throw Error("tensor \"" + name + "\" must be floating point, got " +
                      std::string(c10::toString(tensor.scalar_type())),
                  source);
    }
    if (tensor.dim() != 2) {
      throw Error("tensor \"" + name + "\" must be 2-D, got " + std::to_string(tensor.dim()) +
                      " dimensions",
                  source);
    }
    const int64_t rank = is_a ? tensor.size(0) : tensor.size(1);
    if (rank != config.rank) {
      throw Error("tensor \"" + name + "\" has rank " + std::to_string(rank) + " (shape " +
                      c10::str(tensor.sizes()) + "), the config's r is " +
                      std::to_string(config.rank),
                  source, is_a ? "lora_A is [r, in_features]" : "lora_B is [out_features, r]");
    }
    auto& pair = modules[module];
    (is_a ? pair.first : pair.second) = &tensor;
  }
  for (const auto& [module, pair] : modules) {
    if (pair.first == nullptr || pair.second == nullptr) {
      throw Error("module \"" + module + "\" has " + (pair.first ? "lora_A" : "lora_B") +
                      " but no " + (pair.first ? "lora_B" : "lora_A"),
                  source);
    }
    const bool targeted = std::any_of(
        config.target_modules.begin(), config.target_modules.end(),
        [&](const std::string& t) { return module == t || ends_with(module, "." + t); });
    if (!targeted) {
      throw Error("module \"" + module + "\" is not among target_modules", source,
                  "the config and the tensors disagree");
    }
  }
}

std::string last_component(const std::string& module) {
  const size_t dot = module.rfind('.');
  return dot == std::string::npos ? module : module.substr(dot + 1);
}

std::map<std::string, torch::Tensor> read_tensors(const std::string& path) {
  const SafetensorsReader reader(path);
  std::map<std::string, torch::Tensor> tensors;
  for (const std::string& key : reader.names()) {
    if (!starts_with(key, kKeyPrefix)) {
      throw Error("tensor \"" + key + "\" does not start with \"" + kKeyPrefix + "\"", path,
                  "PEFT saves PeftModel's names: base_model.model.<module>.lora_A.weight");
    }
    // A copy: the adapter outlives the mapping and is small.
    tensors[key.substr(std::string(kKeyPrefix).size())] = reader.tensor(key).clone();
  }
  return tensors;
}

Json config_json(const LoraAdapterConfig& config) {
  // PEFT's keys in its (sorted) order. lora_alpha as an integer when it is one, as PEFT
  // users write it.
  const bool integral_alpha = config.alpha == std::floor(config.alpha) &&
                              std::fabs(config.alpha) < 9.0e15;
  Json root;
  root["alpha_pattern"] = Json::object();
  root["auto_mapping"] = nullptr;
  root["base_model_name_or_path"] =
      config.base_model.empty() ? Json(nullptr) : Json(config.base_model);
  root["bias"] = "none";
  root["fan_in_fan_out"] = false;
  root["inference_mode"] = true;
  root["init_lora_weights"] = true;
  root["layers_pattern"] = nullptr;
  root["layers_to_transform"] = nullptr;
  root["lora_alpha"] = integral_alpha ? Json(static_cast<int64_t>(config.alpha)) : Json(config.alpha);
  root["lora_dropout"] = config.dropout;
  root["modules_to_save"] = nullptr;
  root["peft_type"] = "LORA";
  root["r"] = config.rank;
  root["rank_pattern"] = Json::object();
  root["revision"] = nullptr;
  root["target_modules"] = config.target_modules;
  root["task_type"] = "CAUSAL_LM";
  root["use_dora"] = false;
  root["use_rslora"] = config.use_rslora;
  return root;
}

}  // namespace

double LoraAdapterConfig::scaling() const {
  return use_rslora ? alpha / std::sqrt(static_cast<double>(rank))
                    : alpha / static_cast<double>(rank);
}

void LoraAdapterConfig::validate(const std::string& source) const {
  if (rank < 1) throw Error("r must be >= 1, got " + std::to_string(rank), source + ": r");
  if (!std::isfinite(alpha)) throw Error("lora_alpha must be finite", source + ": lora_alpha");
  if (!(dropout >= 0.0 && dropout < 1.0)) {
    throw Error("lora_dropout must be in [0, 1), got " + std::to_string(dropout),
                source + ": lora_dropout");
  }
  if (target_modules.empty()) throw Error("must name at least one module", source + ": target_modules");
  std::set<std::string> seen;
  for (const std::string& name : target_modules) {
    if (name.empty()) throw Error("holds an empty name", source + ": target_modules");
    if (!seen.insert(name).second) {
      throw Error("names \"" + name + "\" twice", source + ": target_modules");
    }
  }
}

std::vector<std::string> LoraAdapter::adapted_modules() const {
  std::set<std::string> modules;
  for (const auto& [name, tensor] : tensors) {
    for (const char* suffix : {kLoraASuffix, kLoraBSuffix}) {
      if (ends_with(name, suffix)) {
        modules.insert(name.substr(0, name.size() - std::string(suffix).size()));
      }
    }
  }
  return {modules.begin(), modules.end()};
}

std::string lora_a_name(const std::string& module) { return module + kLoraASuffix; }
std::string lora_b_name(const std::string& module) { return module + kLoraBSuffix; }

LoraAdapter read_peft_adapter(const fs::path& dir) {
  const std::string config_path = (dir / kPeftConfigFile).string();
  const std::string weights_path = (dir / kPeftWeightsFile).string();
  std::error_code ignored;
  if (!fs::exists(config_path, ignored)) {
    throw Error("missing: a PEFT adapter directory holds " + std::string(kPeftConfigFile),
                config_path);
  }
  if (!fs::exists(weights_path, ignored)) {
    const bool pickled = fs::exists(dir / "adapter_model.bin", ignored);
    throw Error("missing", weights_path,
                pickled ? "adapter_model.bin (a pickle) is not read: save the adapter with "
                          "safe_serialization=True"
                        : "");
  }
  LoraAdapter adapter;
  bool targets_from_regex = false;
  adapter.config = parse_config(read_file(config_path), config_path, &targets_from_regex);
  adapter.tensors = read_tensors(weights_path);
  if (adapter.tensors.empty()) throw Error("holds no adapter tensors", weights_path);
  if (targets_from_regex) {
    // PEFT matched the regex against full module names; what it adapted is in the file.
    std::set<std::string> leaves;
    for (const std::string& module : adapter.adapted_modules()) leaves.insert(last_component(module));
    adapter.config.target_modules.assign(leaves.begin(), leaves.end());
  }
  adapter.config.validate(config_path);
  check_tensors(adapter.tensors, adapter.config, weights_path);
  return adapter;
}

void write_peft_adapter(const fs::path& dir, const LoraAdapter& adapter) {
  const std::string config_path = (dir / kPeftConfigFile).string();
  const std::string weights_path = (dir / kPeftWeightsFile).string();
  adapter.config.validate(config_path);
  check_tensors(adapter.tensors, adapter.config, weights_path);

  check_output_directory(dir.string(), "adapter directory");
  std::vector<std::pair<std::string, torch::Tensor>> named;
  named.reserve(adapter.tensors.size());
  for (const auto& [name, tensor] : adapter.tensors) {
    named.emplace_back(kKeyPrefix + name, tensor.detach());
  }
  write_safetensors(weights_path, named, {{"format", "pt"}});
  write_file_atomic(config_path, config_json(adapter.config).dump(2) + "\n");
}

}  // namespace aspen::io
