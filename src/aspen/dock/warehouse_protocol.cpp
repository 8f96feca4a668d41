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
};

WireMessage message(uint16_t op, std::string body) {
  WireMessage m;
  m.op = op;
  m.body = std::move(body);
  return m;
}

// The fixed-layout reply of op 36; the tensors are sent by reference (zero copy).
WireMessage weights_reply(const std::shared_ptr<const WeightSet>& weights) {
  ByteWriter w;
  w.put<uint8_t>(weights != nullptr);
  w.put<int64_t>(weights ? weights->version : 0);
  w.put<int32_t>(weights ? weights->tp_rank : 0).put<int32_t>(weights ? weights->tp_size : 1);
  std::vector<std::string> names;
  WireMessage reply = message(kWarehouseWeights, {});
  if (weights != nullptr) {
    for (const auto& [name, tensor] : weights->tensors) {
      names.push_back(name);
      reply.tensors.push_back(tensor);
    }
  }
  reply.body = w.put_strings(names).take();
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
  ByteReader r(reply.body);
  const bool found = r.get<uint8_t>() != 0;
  auto weights = std::make_shared<WeightSet>();
  weights->version = r.get<int64_t>();
  weights->tp_rank = r.get<int32_t>();
  weights->tp_size = r.get<int32_t>();
  std::vector<std::string> names = r.get_strings();
  r.expect_end();
  check_input(reply.tensors.size() == names.size(),
              "weights reply with " + std::to_string(reply.tensors.size()) + " tensors for " +
                  std::to_string(names.size()) + " names",
              "dock warehouse " + client_.endpoint());
  if (!found) return nullptr;
  for (size_t i = 0; i < names.size(); ++i) {
    weights->tensors.emplace_back(std::move(names[i]), std::move(reply.tensors[i]));
  }
  return weights;
}

nlohmann::json RemoteWarehouse::metrics() {
  WireMessage reply = client_.call(message(kWarehouseMetrics, {}));
  ByteReader r(reply.body);
  return nlohmann::json::parse(r.get_string());
}

}  // namespace aspen::dock
