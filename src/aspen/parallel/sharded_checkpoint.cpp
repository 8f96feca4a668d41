#include "aspen/parallel/sharded_checkpoint.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "aspen/io/safetensors.h"
#include "aspen/parallel/imports.h"
#include "aspen/parallel/shard_assembly.h"
#include "aspen/util/error.h"

namespace aspen::parallel {
namespace {

namespace fs = std::filesystem;
constexpr const char* kFormat = "aspen-sharded-v1";
constexpr const char* kLayoutFile = "layout.json";

std::string shard_file(int rank, int size) {
  return "tp-" + std::to_string(rank) + "-of-" + std::to_string(size) + ".safetensors";
}

struct LayoutEntry {
  std::string name;
  ShardSpec spec;
  std::vector<int64_t> full_shape;
};

struct Layout {
  int tp_size = 1;
  std::vector<LayoutEntry> tensors;
};

void write_layout(const std::string& dir, const std::vector<ShardedTensor>& tensors,
                  int tp_size) {
  nlohmann::json entries = nlohmann::json::array();
  for (const ShardedTensor& t : tensors) {
    entries.push_back({{"name", t.name},
                       {"dim", t.spec.dim},
                       {"blocks", t.spec.blocks},
                       {"full_shape", full_shape(t.spec, t.shard.sizes(), tp_size, t.name)}});
  }
  const nlohmann::json layout = {{"format", kFormat}, {"tp_size", tp_size}, {"tensors", entries}};
  const fs::path path = fs::path(dir) / kLayoutFile;
  const fs::path tmp = fs::path(dir) / (std::string(kLayoutFile) + ".tmp");
  {
    std::ofstream out(tmp);
    out << layout.dump(1) << "\n";
    check_input(out.good(), "could not write", tmp.string());
  }
  fs::rename(tmp, path);
}

Layout read_layout(const std::string& dir) {
  const fs::path path = fs::path(dir) / kLayoutFile;
  std::ifstream in(path);
  check_input(in.good(), "no layout.json: not a sharded checkpoint", dir);
  Layout layout;
  try {
    const nlohmann::json json = nlohmann::json::parse(in);
    check_input(json.at("format") == kFormat,
                "format is " + json.at("format").dump() + ", expected \"" + kFormat + "\"",
                path.string());
    layout.tp_size = json.at("tp_size").get<int>();
    check_input(layout.tp_size >= 1, "tp_size must be >= 1", path.string());
    for (const auto& entry : json.at("tensors")) {
      layout.tensors.push_back({entry.at("name").get<std::string>(),
                                {entry.at("dim").get<int64_t>(), entry.at("blocks").get<int64_t>()},
                                entry.at("full_shape").get<std::vector<int64_t>>()});
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("malformed layout: ") + e.what(), path.string());
  }
  return layout;
}

}  // namespace

void save_sharded(const std::string& dir, const std::vector<ShardedTensor>& tensors, int tp_rank,
                  int tp_size, int dp_rank) {
  check_input(tp_size >= 1 && tp_rank >= 0 && tp_rank < tp_size,
              "TP rank " + std::to_string(tp_rank) + " of " + std::to_string(tp_size), dir);
  if (dp_rank != 0) return;
  fs::create_directories(dir);
  std::vector<std::pair<std::string, torch::Tensor>> shards;
  for (const ShardedTensor& t : tensors) shards.emplace_back(t.name, t.shard.detach());
  write_safetensors((fs::path(dir) / shard_file(tp_rank, tp_size)).string(), shards,
                    {{"format", kFormat},
                     {"tp_rank", std::to_string(tp_rank)},
                     {"tp_size", std::to_string(tp_size)}});
  if (tp_rank == 0) write_layout(dir, tensors, tp_size);
}

int sharded_tp_size(const std::string& dir) { return read_layout(dir).tp_size; }

std::vector<std::pair<std::string, torch::Tensor>> load_sharded(const std::string& dir,
                                                                int tp_rank, int tp_size) {
  return load_sharded(dir, [&](const std::string&, const ShardSpec& saved) {
    return std::optional<ShardHolding>(ShardHolding{saved, tp_rank, tp_size});
  });
}

std::vector<std::pair<std::string, torch::Tensor>> load_sharded(
    const std::string& dir,
    const std::function<std::optional<ShardHolding>(const std::string& name,
                                                    const ShardSpec& saved)>& holding) {
  const Layout layout = read_layout(dir);
  std::map<int, std::unique_ptr<SafetensorsReader>> readers;  // opened on first need
  auto reader = [&](int rank) -> SafetensorsReader& {
    auto& slot = readers[rank];
    if (!slot) {
      const fs::path path = fs::path(dir) / shard_file(rank, layout.tp_size);
      check_input(fs::exists(path), "shard file missing (an incomplete checkpoint?)",
                  path.string());
      slot = std::make_unique<SafetensorsReader>(path.string());
    }
    return *slot;
  };
  // The shard of rank/size of `entry` under the spec it was saved with.
  auto assemble = [&](const LayoutEntry& entry, int rank, int size) {
    const std::string what = dir + ": " + entry.name;
    const int64_t extent =
        entry.spec.replicated() ? 0 : entry.full_shape.at(static_cast<size_t>(entry.spec.dim));
    std::vector<SourceShard> sources;
    for (int source : source_ranks_needed(entry.spec, extent, rank, size, layout.tp_size, what)) {
      SafetensorsReader& file = reader(source);
      check_input(file.contains(entry.name), "tensor missing from the shard file", what);
      sources.push_back({file.tensor(entry.name), source, layout.tp_size});
    }
    const auto dtype = sources.front().tensor.scalar_type();
    return assemble_shard(entry.spec, entry.full_shape, sources, rank, size, dtype, what);
  };
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const LayoutEntry& entry : layout.tensors) {
    const std::optional<ShardHolding> held = holding(entry.name, entry.spec);
    if (!held) continue;
    if (held->size == 1 || held->spec == entry.spec) {
      out.emplace_back(entry.name, assemble(entry, held->rank, held->size));
      continue;
    }
    const torch::Tensor whole = assemble(entry, 0, 1);
    out.emplace_back(entry.name, take_shard(whole, held->spec, held->rank, held->size,
                                            dir + ": " + entry.name)
                                     .clone());
  }
  return out;
}

}  // namespace aspen::parallel
