#include "aspen/pipeline/weight_receiver.h"

#include <chrono>
#include <map>
#include <string>

#include "aspen/dock/weight_delta.h"
#include "aspen/pipeline/imports.h"
#include "aspen/util/error.h"
#include "aspen/util/seconds_since.h"

namespace aspen::pipeline {

std::shared_ptr<const WeightSet> WeightReceiver::fetch(TransferDock& dock, WarehouseId where,
                                                       int64_t engine_version) {
  auto start = std::chrono::steady_clock::now();
  if (sync_ == WeightSync::kFull) {
    std::shared_ptr<const WeightSet> latest = dock.latest_weights(where, engine_version);
    if (latest != nullptr) last_ = Receipt{latest->bytes(), 0, seconds_since(start), 0.0};
    return latest;
  }
  const WeightUpdate update = dock.weight_update(where, held_ ? held_->version : -1);
  if (update.empty()) return nullptr;
  check_input(update.full != nullptr || held_ != nullptr,
              "the board sent deltas to a receiver that holds no weights", "weight receiver");
  Receipt receipt{update.bytes(), static_cast<int64_t>(update.deltas.size()), seconds_since(start),
                  0.0};
  start = std::chrono::steady_clock::now();
  held_ = update.full != nullptr
              ? update.full
              : apply_weight_update(update, std::map<std::string, torch::Tensor>(
                                                held_->tensors.begin(), held_->tensors.end()));
  receipt.apply_s = seconds_since(start);
  last_ = receipt;
  // The engine may already hold this version (it starts on version 0's weights).
  return held_->version > engine_version ? held_ : nullptr;
}

}  // namespace aspen::pipeline
