// Collectives over small host-side objects (bytes, JSON, vectors of doubles), in the
// manner of torch.distributed's broadcast_object_list / all_gather_object: the RL
// loop uses them for metadata only — a dock claim every rank acts on, an endpoint,
// per-rank reward statistics — never for tensors of model size.
//
// Encoding: a value travels as a uint8 (or float64) tensor preceded by its length, so
// ranks need not agree on sizes beforehand (one extra small collective per call).
// Contract: collective over `group` — every rank calls with the same root, in the same
// order as its other collectives. Errors: aspen::Error from a failed collective; a
// payload that does not parse as JSON on a receiving rank is an internal error.
// Thread safety: as ProcessGroupHandle (one thread per group).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aspen/parallel/imports.h"
#include "aspen/parallel/process_group.h"

namespace aspen::parallel {

// Every rank ends with root's `bytes`.
void broadcast_bytes(ProcessGroupHandle& group, std::string& bytes, int root);
// Every rank ends with root's `value`.
void broadcast_json(ProcessGroupHandle& group, nlohmann::json& value, int root);
// Every rank's `values`, concatenated in rank order (lengths may differ by rank).
std::vector<double> all_gather_doubles(ProcessGroupHandle& group,
                                       const std::vector<double>& values);

}  // namespace aspen::parallel
