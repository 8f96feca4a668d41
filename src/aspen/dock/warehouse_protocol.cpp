#include "aspen/dock/warehouse_protocol.h"

namespace aspen {
namespace {

enum WarehouseOp : uint16_t { kWarehousePut = 32, kWarehouseGet = 33, kWarehouseErase = 34, kWarehouseMetrics = 35 };

WireMessage message(uint16_t op, std::string body) {
  WireMessage m;
  m.op = op;
  m.body = std::move(body);
  return m;
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
        return message(kWarehouseMetrics, ByteWriter().put_string(warehouse_->metrics().dump()).take());
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

WarehouseService::WarehouseService(std::shared_ptr<Warehouse> warehouse, ZmqServiceOptions options)
    : service_(std::make_unique<ZmqService>(
          std::move(options), std::make_shared<WarehouseHandler>(std::move(warehouse)))) {}

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

nlohmann::json RemoteWarehouse::metrics() {
  WireMessage reply = client_.call(message(kWarehouseMetrics, {}));
  ByteReader r(reply.body);
  return nlohmann::json::parse(r.get_string());
}

}  // namespace aspen
