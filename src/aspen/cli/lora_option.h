// The --lora options of the commands that run a model: `generate` and `logprobs` take
// one adapter directory (--lora DIR), `serve` any number of named ones (--lora NAME=DIR,
// repeatable, as vLLM's --lora-modules NAME=PATH). The directory is PEFT's format
// (io/peft_adapter.h); model/peft_lora.h applies it.
//
// Each adapter is read and checked (directory, syntax, names, PEFT config and tensors)
// BEFORE the model's weights are read, so bad --lora input fails in a moment. An error
// names the flag as given ("--lora a=/x/y"); shapes are checked against the model when
// the adapter is applied (the error names the adapter's directory and the tensor).
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "aspen/cli/imports.h"
#include "aspen/io/peft_adapter.h"

namespace aspen::cli {

// An adapter the command was given: its served name (serve only), directory and content.
struct AdapterOption {
  std::string name;
  std::string dir;
  LoraAdapter adapter;
};

// The adapter in `dir`, `flag` being how the user gave it (for the error).
inline LoraAdapter read_adapter_option(const std::string& dir, const std::string& flag) {
  std::error_code ignored;
  check_input(!dir.empty() && std::filesystem::is_directory(dir, ignored),
              "no such adapter directory '" + dir + "'", flag,
              "give a PEFT adapter directory (adapter_config.json, adapter_model.safetensors)");
  try {
    return read_peft_adapter(dir);
  } catch (const Error& error) {
    throw Error(error.problem() + " (" + error.input() + ")", flag, error.hint());
  }
}

inline void add_lora_option(CLI::App* command, std::string& dir) {
  command->add_option("--lora", dir,
                      "a PEFT LoRA adapter directory to apply to the model "
                      "(adapter_config.json, adapter_model.safetensors)");
}

inline void add_served_lora_option(CLI::App* command, std::vector<std::string>& specs) {
  command
      ->add_option("--lora", specs,
                   "NAME=DIR: serve the PEFT LoRA adapter in DIR as model NAME beside the "
                   "base (repeatable; requests pick it by \"model\")")
      ->allow_extra_args(false);  // one NAME=DIR per --lora
}

// Parses and reads each NAME=DIR. Errors: no '=', an empty name or directory, a name
// given twice or equal to the base model's served name `base_name`, and whatever
// read_adapter_option refuses; each names the --lora option it is about.
inline std::vector<AdapterOption> read_served_adapters(const std::vector<std::string>& specs,
                                                       const std::string& base_name) {
  std::vector<AdapterOption> adapters;
  std::set<std::string> names;
  for (const std::string& spec : specs) {
    const std::string flag = "--lora " + spec;
    const size_t equals = spec.find('=');
    check_input(equals != std::string::npos && equals > 0 && equals + 1 < spec.size(),
                "expected NAME=DIR (the adapter's served name, '=', its directory)", flag);
    AdapterOption adapter;
    adapter.name = spec.substr(0, equals);
    adapter.dir = spec.substr(equals + 1);
    check_input(adapter.name != base_name,
                "the name '" + adapter.name + "' is the base model's served name", flag,
                "name the adapter otherwise, or set --served-model-name");
    check_input(names.insert(adapter.name).second,
                "the name '" + adapter.name + "' is given to two adapters", flag);
    adapter.adapter = read_adapter_option(adapter.dir, flag);
    adapters.push_back(std::move(adapter));
  }
  return adapters;
}

}  // namespace aspen::cli
