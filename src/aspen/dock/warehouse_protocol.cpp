#include "aspen/dock/warehouse_protocol.h"

#include "aspen/dock/imports.h"

namespace aspen::dock {
namespace {

enum WarehouseOp : uint16_t {
  kWarehousePut = 32,
  kWarehouseGet = 33,
  kWarehouseErase = 34,
  kWarehouseMetrics = 35,
  kWarehouseWeights = 36,
  kWarehouseWeightUpdate = 37,
};

enum WeightUpdateKind : uint8_t { kUpdateNone = 0, kUpdateFull = 1, kUpdateDeltas = 2 };

WireMessage message(uint16_t op, std::string body) {
  WireMessage m;
  m.op = op;
  m.body = std::move(body);
  return m;
}

// A set's fields after op 36's `found` byte (version, TP rank and size, names) into
// `w`, its tensors onto `reply` by reference (zero copy).
void put_weight_set(const std::shared_ptr<const WeightSet>& weights, ByteWriter& w,
                    WireMessage& reply) {
  w.put<int64_t>(weights ? weights->version : 0);
  w.put<int32_t>(weights ? weights->tp_rank : 0).put<int32_t>(weights ? weights->tp_size : 1);
  std::vector<std::string> names;
  if (weights != nullptr) {
    for (const auto& [name, tensor] : weights->tensors) {
      names.push_back(name);
      reply.tensors.push_back(tensor);
    }
  }
  w.put_strings(names);
}

// The reader's side of put_weight_set; `tensors` from `next` on are the set's.
std::shared_ptr<WeightSet> get_weight_set(ByteReader& r, std::vector<torch::Tensor>& tensors,
                                          size_t& next, const std::string& where) {
  auto weights = std::make_shared<WeightSet>();
  weights->version = r.get<int64_t>();
  weights->tp_rank = r.get<int32_t>();
  weights->tp_size = r.get<int32_t>();
  std::vector<std::string> names = r.get_strings();
  check_input(tensors.size() >= next + names.size(),
              "weights reply with " + std::to_string(tensors.size() - next) + " tensors for " +
                  std::to_string(names.size()) + " names",
              where);
  for (std::string& name : names) weights->tensors.emplace_back(std::move(name), std::move(tensors[next++]));
  return weights;
}

// The fixed-layout reply of op 36.
WireMessage weights_reply(const std::shared_ptr<const WeightSet>& weights) {
  ByteWriter w;
  w.put<uint8_t>(weights != nullptr);
  WireMessage reply = message(kWarehouseWeights, {});
  put_weight_set(weights, w, reply);
  reply.body = w.take();
  return reply;
}

// The reply of op 37; payloads and tensors by reference.
WireMessage weight_update_reply(const WeightUpdate& update) {
  ByteWriter w;
  WireMessage reply = message(kWarehouseWeightUpdate, {});
  if (update.full != nullptr) {
    w.put<uint8_t>(kUpdateFull);
    put_weight_set(update.full, w, reply);
  } else if (!update.deltas.empty()) {
    w.put<uint8_t>(kUpdateDeltas).put<uint32_t>(static_cast<uint32_t>(update.deltas.size()));
    for (const auto& delta : update.deltas) {
      w.put<int64_t>(delta->from_version).put<int64_t>(delta->to_version);
      std::vector<std::string> names;
      std::vector<uint8_t> codings;
      for (const TensorDelta& t : delta->tensors) {
        names.push_back(t.name);
        codings.push_back(static_cast<uint8_t>(t.coding));
        reply.tensors.push_back(t.payload);
      }
      w.put_strings(names).put_vector<uint8_t>(codings);
    }
  } else {
    w.put<uint8_t>(kUpdateNone);
  }
  reply.body = w.take();
  return reply;
}

class WarehouseHandler : public ServiceHandler {
 public:
  explicit WarehouseHandler(std::shared_ptr<Warehouse> warehouse)
      : warehouse_(std::move(warehouse)) {}

  std::optional<WireMessage> try_handle(const WireMessage& request) override {
    ByteReader r(request.body);
    switch (request.op) {
      case kWarehousePut: {
        std::vector<RowId> rows = r.get_vector<int64_t>();
        std::vector<std::string> names = r.get_strings();
        r.expect_end();
        check_input(request.tensors.size() == rows.size() * names.size(),
                    std::to_string(request.tensors.size()) + " tensors for " +
                        std::to_string(rows.size()) + " rows x " + std::to_string(names.size()) +
                        " columns",
                    "warehouse put");
        std::vector<ColumnData> columns;
        for (size_t c = 0; c < names.size(); ++c) {
          columns.push_back(ColumnData{names[c], {}});
          for (size_t i = 0; i < rows.size(); ++i) {
            columns.back().values.push_back(request.tensors[c * rows.size() + i]);
          }
        }
        warehouse_->put(rows, columns);
        return message(kWarehousePut, {});
      }
      case kWarehouseGet: {
        std::vector<RowId> rows = r.get_vector<int64_t>();
        std::vector<std::string> names = r.get_strings();
        r.expect_end();
        WireMessage reply = message(kWarehouseGet, {});
        for (ColumnData& column : warehouse_->get(rows, names)) {
          for (torch::Tensor& t : column.values) reply.tensors.push_back(std::move(t));
        }
        return reply;
      }
      case kWarehouseErase: {
        std::vector<RowId> rows = r.get_vector<int64_t>();
        r.expect_end();
        warehouse_->erase(rows);
        return message(kWarehouseErase, {});
      }
      case kWarehouseMetrics:
        r.expect_end();
        return message(kWarehouseMetrics,
                       ByteWriter().put_string(warehouse_->metrics().dump()).take());
      case kWarehouseWeights: {
        const int64_t newer_than = r.get<int64_t>();
        r.expect_end();
        return weights_reply(warehouse_->latest_weights(newer_than));
      }
      case kWarehouseWeightUpdate: {
        const int64_t held = r.get<int64_t>();
        r.expect_end();
        return weight_update_reply(warehouse_->weight_update(held));
      }
      default:
        throw Error("unknown warehouse op " + std::to_string(request.op), "dock warehouse");
    }
  }

  WireMessage handle_blocking(const WireMessage& request) override {
    return *try_handle(request);  // nothing in a warehouse blocks
  }

 private:
  std::shared_ptr<Warehouse> warehouse_;
};

}  // namespace

std::shared_ptr<ServiceHandler> make_warehouse_handler(std::shared_ptr<Warehouse> warehouse) {
  return std::make_shared<WarehouseHandler>(std::move(warehouse));
}

WarehouseService::WarehouseService(std::shared_ptr<Warehouse> warehouse, ZmqServiceOptions options)
    : service_(std::make_unique<ZmqService>(std::move(options),
                                            make_warehouse_handler(std::move(warehouse)))) {}

void RemoteWarehouse::put(const std::vector<RowId>& rows, const std::vector<ColumnData>& columns) {
  ByteWriter w;
  w.put_vector<int64_t>(rows);
  std::vector<std::string> names;
  for (const ColumnData& column : columns) names.push_back(column.name);
  w.put_strings(names);
  WireMessage request = message(kWarehousePut, w.take());
  for (const ColumnData& column : columns) {
    check_input(column.values.size() == rows.size(),
                "column '" + column.name + "' does not match the rows", "warehouse put");
    for (const torch::Tensor& t : column.values) request.tensors.push_back(t);
  }
  client_.call(request);
}

std::vector<ColumnData> RemoteWarehouse::get(const std::vector<RowId>& rows,
                                             const std::vector<std::string>& columns) {
  ByteWriter w;
  w.put_vector<int64_t>(rows).put_strings(columns);
  WireMessage reply = client_.call(message(kWarehouseGet, w.take()));
  check_input(reply.tensors.size() == rows.size() * columns.size(),
              "warehouse replied with " + std::to_string(reply.tensors.size()) + " tensors",
              "dock warehouse " + client_.endpoint());
  std::vector<ColumnData> out;
  for (size_t c = 0; c < columns.size(); ++c) {
    out.push_back(ColumnData{columns[c], {}});
    for (size_t i = 0; i < rows.size(); ++i) {
      out.back().values.push_back(std::move(reply.tensors[c * rows.size() + i]));
    }
  }
  return out;
}

void RemoteWarehouse::erase(const std::vector<RowId>& rows) {
  client_.call(message(kWarehouseErase, ByteWriter().put_vector<int64_t>(rows).take()));
}

void RemoteWarehouse::publish_weights(std::shared_ptr<const WeightSet> /*weights*/) {
  throw Error("weights are published by the process that owns the warehouse",
              "dock warehouse " + client_.endpoint(),
              "publish through the local warehouse (TransferDock::publish_weights)");
}

std::shared_ptr<const WeightSet> RemoteWarehouse::latest_weights(int64_t newer_than) {
  WireMessage reply =
      client_.call(message(kWarehouseWeights, ByteWriter().put<int64_t>(newer_than).take()));
  const std::string where = "dock warehouse " + client_.endpoint();
  ByteReader r(reply.body);
  const bool found = r.get<uint8_t>() != 0;
  size_t next = 0;
  std::shared_ptr<WeightSet> weights = get_weight_set(r, reply.tensors, next, where);
  r.expect_end();
  check_input(next == reply.tensors.size(),
              "weights reply with " + std::to_string(reply.tensors.size()) + " tensors for " +
                  std::to_string(next) + " names",
              where);
  return found ? weights : nullptr;
}

void RemoteWarehouse::publish_weight_delta(std::shared_ptr<const WeightSet> weights,
                                           std::shared_ptr<const WeightDelta> /*delta*/) {
  publish_weights(std::move(weights));  // throws: not this process's warehouse
}

WeightUpdate RemoteWarehouse::weight_update(int64_t held) {
  WireMessage reply =
      client_.call(message(kWarehouseWeightUpdate, ByteWriter().put<int64_t>(held).take()));
  const std::string where = "dock warehouse " + client_.endpoint();
  ByteReader r(reply.body);
  const uint8_t kind = r.get<uint8_t>();
  WeightUpdate update;
  size_t next = 0;
  if (kind == kUpdateFull) {
    update.full = get_weight_set(r, reply.tensors, next, where);
  } else if (kind == kUpdateDeltas) {
    const uint32_t count = r.get<uint32_t>();
    for (uint32_t d = 0; d < count; ++d) {
      auto delta = std::make_shared<WeightDelta>();
      delta->from_version = r.get<int64_t>();
      delta->to_version = r.get<int64_t>();
      std::vector<std::string> names = r.get_strings();
      const std::vector<uint8_t> codings = r.get_vector<uint8_t>();
      check_input(codings.size() == names.size() && reply.tensors.size() >= next + names.size(),
                  "weight update reply: " + std::to_string(names.size()) + " names, " +
                      std::to_string(codings.size()) + " codings, " +
                      std::to_string(reply.tensors.size() - next) + " payloads left",
                  where);
      for (size_t i = 0; i < names.size(); ++i) {
        check_input(codings[i] == static_cast<uint8_t>(DeltaCoding::kXorZstd) ||
                        codings[i] == static_cast<uint8_t>(DeltaCoding::kRaw),
                    "weight update reply: unknown coding " + std::to_string(codings[i]), where);
        delta->tensors.push_back(TensorDelta{std::move(names[i]),
                                             static_cast<DeltaCoding>(codings[i]),
                                             std::move(reply.tensors[next++])});
      }
      update.deltas.push_back(std::move(delta));
    }
  } else {
    check_input(kind == kUpdateNone, "weight update reply: unknown kind " + std::to_string(kind),
                where);
  }
  r.expect_end();
  check_input(next == reply.tensors.size(),
              "weight update reply with " + std::to_string(reply.tensors.size() - next) +
                  " tensors too many",
              where);
  return update;
}

nlohmann::json RemoteWarehouse::metrics() {
  WireMessage reply = client_.call(message(kWarehouseMetrics, {}));
  ByteReader r(reply.body);
  return nlohmann::json::parse(r.get_string());
}

}  // namespace aspen::dock
