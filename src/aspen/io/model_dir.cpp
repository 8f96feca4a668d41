#include "aspen/io/model_dir.h"

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "aspen/io/imports.h"
#include "aspen/io/safetensors.h"
#include "aspen/io/strict_json.h"
#include "aspen/util/error.h"
#include "aspen/util/file.h"

namespace aspen::io {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

std::string join(const std::string& dir, const std::string& name) {
  return (fs::path(dir) / name).string();
}

bool exists(const std::string& path) {
  std::error_code ignored;
  return fs::exists(path, ignored);
}

// A shard name from the index must stay inside the model directory.
bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos;
}

std::map<std::string, torch::Tensor> load_sharded(const std::string& dir) {
  const std::string index_path = join(dir, kWeightsIndexFile);
  const Json index = parse_strict_json(read_file(index_path), index_path);
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    throw Error("must be an object with a \"weight_map\" object", index_path);
  }
  // shard file -> tensor names the index puts there
  std::map<std::string, std::set<std::string>> shards;
  for (const auto& [name, shard] : index["weight_map"].items()) {
    if (!shard.is_string() || !is_plain_file_name(shard.get<std::string>())) {
      throw Error("weight_map entry \"" + name + "\" must name a file in the directory",
                  index_path);
    }
    shards[shard.get<std::string>()].insert(name);
  }
  if (shards.empty()) throw Error("weight_map is empty", index_path);

  std::map<std::string, torch::Tensor> tensors;
  for (const auto& [shard, expected] : shards) {
    const std::string shard_path = join(dir, shard);
    if (!exists(shard_path)) {
      throw Error("shard \"" + shard + "\" listed in the index does not exist", index_path);
    }
    const SafetensorsReader reader(shard_path);
    for (const std::string& name : expected) {
      if (!reader.contains(name)) {
        throw Error(
            "tensor \"" + name + "\" is missing, though " + kWeightsIndexFile + " maps it here",
            shard_path);
      }
    }
    for (const std::string& name : reader.names()) {
      if (!expected.count(name)) {
        throw Error("tensor \"" + name + "\" is not mapped to this shard in " +
                        std::string(kWeightsIndexFile),
                    shard_path, "the index and the shards disagree");
      }
      tensors.emplace(name, reader.tensor(name));
    }
  }
  return tensors;
}

// Shard names transformers uses: model-00001-of-00003.safetensors.
std::string shard_name(size_t index, size_t count) {
  char name[64];
  std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return name;
}

void remove_stale_weights(const std::string& dir, const std::set<std::string>& keep) {
  static const std::regex kShardPattern(R"(model-\d+-of-\d+\.safetensors)");
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    const bool weights = name == kSingleWeightsFile || name == kWeightsIndexFile ||
                         std::regex_match(name, kShardPattern);
    if (weights && !keep.count(name)) fs::remove(entry.path(), error);
  }
}

}  // namespace

void check_model_dir(const std::string& dir, const std::string& what) {
  check_input_directory(dir, what,
                        "name a Hugging Face model directory: config.json, the tokenizer's "
                        "files, the safetensors weights");
}

std::map<std::string, torch::Tensor> load_model_weights(const std::string& dir) {
  const std::string single = join(dir, kSingleWeightsFile);
  if (exists(single)) return load_safetensors(single);
  if (exists(join(dir, kWeightsIndexFile))) return load_sharded(dir);
  throw Error(std::string("no ") + kSingleWeightsFile + " or " + kWeightsIndexFile, dir,
              "is this a Hugging Face model directory?");
}

void save_model_weights(const std::string& dir,
                        const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                        int64_t max_shard_bytes) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) throw Error("cannot create directory: " + error.message(), dir);

  // Greedy in the given order, as transformers shards: start a new shard when the
  // next tensor would overflow the current one.
  std::vector<std::vector<std::pair<std::string, torch::Tensor>>> shards(1);
  int64_t shard_bytes = 0;
  uint64_t total_bytes = 0;
  for (const auto& item : tensors) {
    const int64_t bytes = item.second.defined() ? static_cast<int64_t>(item.second.nbytes()) : 0;
    if (max_shard_bytes > 0 && !shards.back().empty() && shard_bytes + bytes > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(item);
    shard_bytes += bytes;
    total_bytes += static_cast<uint64_t>(bytes);
  }

  if (shards.size() == 1) {
    write_safetensors(join(dir, kSingleWeightsFile), tensors, {{"format", "pt"}});
    remove_stale_weights(dir, {kSingleWeightsFile});
    return;
  }
  std::set<std::string> written = {kWeightsIndexFile};
  Json weight_map = Json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name = shard_name(i, shards.size());
    for (const auto& item : shards[i]) {
      if (weight_map.contains(item.first)) {
        throw Error("duplicate tensor name \"" + item.first + "\"", dir);
      }
      weight_map[item.first] = name;
    }
    write_safetensors(join(dir, name), shards[i], {{"format", "pt"}});
    written.insert(name);
  }
  Json index;
  index["metadata"]["total_size"] = total_bytes;
  index["weight_map"] = std::move(weight_map);
  write_file_atomic(join(dir, kWeightsIndexFile), index.dump(2) + "\n");
  remove_stale_weights(dir, written);
}

std::optional<GenerationConfig> read_generation_config(const std::string& dir) {
  const std::string path = join(dir, "generation_config.json");
  if (!exists(path)) return std::nullopt;
  const Json root = parse_strict_json(read_file(path), path);
  if (!root.is_object()) throw Error("must be a JSON object", path);

  auto present = [&](const char* key) { return root.contains(key) && !root[key].is_null(); };
  auto fail = [&](const char* key, const char* expected) {
    return Error(std::string("must be ") + expected, path + ": " + key);
  };
  auto integer = [&](const char* key) -> std::optional<int64_t> {
    if (!present(key)) return std::nullopt;
    if (!root[key].is_number_integer()) throw fail(key, "an integer");
    return root[key].get<int64_t>();
  };
  auto number = [&](const char* key) -> std::optional<double> {
    if (!present(key)) return std::nullopt;
    if (!root[key].is_number()) throw fail(key, "a number");
    return root[key].get<double>();
  };

  GenerationConfig config;
  if (present("eos_token_id")) {
    const Json& eos = root["eos_token_id"];
    if (eos.is_number_integer()) {
      config.eos_token_ids.push_back(eos.get<int64_t>());
    } else if (eos.is_array()) {
      for (const Json& id : eos) {
        if (!id.is_number_integer()) throw fail("eos_token_id", "an integer or list of integers");
        config.eos_token_ids.push_back(id.get<int64_t>());
      }
    } else {
      throw fail("eos_token_id", "an integer or list of integers");
    }
  }
  config.bos_token_id = integer("bos_token_id");
  config.pad_token_id = integer("pad_token_id");
  config.temperature = number("temperature");
  config.top_p = number("top_p");
  config.top_k = integer("top_k");
  if (present("do_sample")) {
    if (!root["do_sample"].is_boolean()) throw fail("do_sample", "true or false");
    config.do_sample = root["do_sample"].get<bool>();
  }
  return config;
}

}  // namespace aspen::io
