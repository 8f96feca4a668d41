#include "bench/op_profile.h"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <fstream>

#include "aspen/util/error.h"
#include "bench/imports.h"

namespace aspen::bench {
namespace {

namespace prof = torch::profiler::impl;

prof::ProfilerConfig cpu_config() {
  return prof::ProfilerConfig(prof::ProfilerState::KINETO, /*report_input_shapes=*/true);
}

}  // namespace

OpProfile::OpProfile() {
  const std::set<prof::ActivityType> activities = {prof::ActivityType::CPU};
  torch::autograd::profiler::prepareProfiler(cpu_config(), activities);
  torch::autograd::profiler::enableProfiler(cpu_config(), activities);
  active_ = true;
}

OpProfile::~OpProfile() {
  if (active_) torch::autograd::profiler::disableProfiler();
}

void OpProfile::save(const std::string& path) {
  check_input(active_, "the profile was already saved", "OpProfile::save");
  active_ = false;
  const auto result = torch::autograd::profiler::disableProfiler();
  check_input(std::ofstream(path).good(), "cannot write \"" + path + "\"", "--profile");
  result->save(path);
}

}  // namespace aspen::bench
