// Times one stage of an iteration: adds its seconds to stages[name] (stages repeat in
// DAPO's refill rounds, so they accumulate) and, with a trace, draws its span on
// `track`. Shared by the schedules so every metrics line times stages alike.
// Thread safety: the caller's thread; `trace` is thread-safe.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>

#include "aspen/pipeline/imports.h"
#include "aspen/report/trace_writer.h"

namespace aspen::pipeline {

template <typename Fn>
void timed_stage(nlohmann::json& stages, const char* name, TraceWriter* trace, int track, Fn&& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  const auto end = std::chrono::steady_clock::now();
  stages[name] = stages.value(name, 0.0) + std::chrono::duration<double>(end - start).count();
  if (trace != nullptr) trace->span(track, name, start, end);
}

}  // namespace aspen::pipeline
