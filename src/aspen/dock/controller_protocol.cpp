#include "aspen/dock/controller_protocol.h"

#include "aspen/dock/claim_codec.h"
#include "aspen/dock/imports.h"

namespace aspen::dock {
namespace {

enum ControllerOp : uint16_t {
  kSchema = 1,
  kRegisterWarehouse = 2,
  kWarehouseEndpoints = 3,
  kAllocate = 4,
  kPublish = 5,
  kClaim = 6,
  kAck = 7,
  kRelease = 8,
  kMetrics = 9,
  kRenew = 10,
  kUpdateInfo = 11,
  kDiscard = 12,
  kRetarget = 13,
  kBacklog = 14,
  kPostStatus = 15,
  kStatuses = 16,
  kRetireWarehouse = 17,
};

WireMessage reply(uint16_t op, std::string body) {
  WireMessage message;
  message.op = op;
  message.body = std::move(body);
  return message;
}

std::string encode_claim_options(const std::string& consumer, const ClaimOptions& o) {
  ByteWriter w;
  w.put_string(consumer).put<int64_t>(o.max_rows).put<int64_t>(o.min_rows);
  w.put<double>(o.timeout_s).put<uint8_t>(o.whole_groups).put<uint8_t>(o.oldest_first);
  w.put<int64_t>(o.min_version).put<int64_t>(o.max_version);
  w.put<int32_t>(o.balance_ranks).put<double>(o.lease_s);
  w.put_vector(o.groups);
  w.put<int32_t>(o.target).put<int64_t>(o.required_through_version);
  w.put<uint8_t>(o.complete_window);
  return w.take();
}

ClaimOptions decode_claim_options(ByteReader& r, std::string& consumer) {
  ClaimOptions o;
  consumer = r.get_string();
  o.max_rows = r.get<int64_t>();
  o.min_rows = r.get<int64_t>();
  o.timeout_s = r.get<double>();
  o.whole_groups = r.get<uint8_t>() != 0;
  o.oldest_first = r.get<uint8_t>() != 0;
  o.min_version = r.get<int64_t>();
  o.max_version = r.get<int64_t>();
  o.balance_ranks = r.get<int32_t>();
  o.lease_s = r.get<double>();
  o.groups = r.get_vector<int64_t>();
  o.target = r.get<int32_t>();
  o.required_through_version = r.get<int64_t>();
  o.complete_window = r.get<uint8_t>() != 0;
  r.expect_end();
  return o;
}

void put_infos(ByteWriter& w, const std::vector<RowInfo>& infos) {
  w.put<uint32_t>(static_cast<uint32_t>(infos.size()));
  for (const RowInfo& info : infos) put_row_info(w, info);
}

std::vector<RowInfo> decode_infos(ByteReader& r) {
  const uint32_t count = r.get<uint32_t>();
  std::vector<RowInfo> infos;
  for (uint32_t i = 0; i < count; ++i) infos.push_back(get_row_info(r));
  return infos;
}

// An allocate request: f64 timeout | infos | optional i32 owner (see the header).
struct AllocateRequest {
  double timeout_s = 0;
  std::vector<RowInfo> infos;
  WarehouseId owner = kNoWarehouse;
};

AllocateRequest decode_allocate(const std::string& body) {
  ByteReader r(body);
  AllocateRequest request;
  request.timeout_s = r.get<double>();
  request.infos = decode_infos(r);
  if (!r.at_end()) request.owner = r.get<int32_t>();  // absent: an unowned allocation
  r.expect_end();
  return request;
}

// Retired rows, as ack and discard return them.
void put_retired_rows(ByteWriter& w, const std::vector<RetiredRow>& rows) {
  w.put<uint32_t>(static_cast<uint32_t>(rows.size()));
  for (const RetiredRow& row : rows) w.put<int64_t>(row.id).put_vector<int32_t>(row.warehouses);
}

std::vector<RetiredRow> get_retired_rows(ByteReader& r) {
  const uint32_t count = r.get<uint32_t>();
  std::vector<RetiredRow> rows;
  for (uint32_t i = 0; i < count; ++i) {
    RetiredRow row;
    row.id = r.get<int64_t>();
    row.warehouses = r.get_vector<int32_t>();
    rows.push_back(std::move(row));
  }
  return rows;
}

class ControllerHandler : public ServiceHandler {
 public:
  ControllerHandler(std::shared_ptr<DockController> controller,
                    std::function<nlohmann::json()> wire_metrics)
      : controller_(std::move(controller)), wire_metrics_(std::move(wire_metrics)) {}

  std::optional<WireMessage> try_handle(const WireMessage& request) override {
    ByteReader r(request.body);
    check_input(request.tensors.empty(), "controller request with tensors", "dock controller",
                "column data goes to warehouses");
    switch (request.op) {
      case kSchema: {
        r.expect_end();
        const DockSchema& schema = controller_->schema();
        ByteWriter w;
        w.put<uint32_t>(static_cast<uint32_t>(schema.columns().size()));
        for (const ColumnSpec& column : schema.columns()) {
          w.put_string(column.name).put<uint8_t>(wire_dtype_code(column.dtype));
          w.put<uint8_t>(column.kind == ColumnKind::kPerToken ? 1 : 0);
        }
        w.put<uint32_t>(static_cast<uint32_t>(schema.consumers().size()));
        for (const ConsumerSpec& consumer : schema.consumers()) {
          w.put_string(consumer.name).put_strings(consumer.columns);
        }
        return reply(kSchema, w.take());
      }
      case kRegisterWarehouse: {
        const std::string endpoint = r.get_string();
        r.expect_end();
        return reply(kRegisterWarehouse,
                     ByteWriter().put<int32_t>(controller_->register_warehouse(endpoint)).take());
      }
      case kWarehouseEndpoints:
        r.expect_end();
        return reply(kWarehouseEndpoints,
                     ByteWriter().put_strings(controller_->warehouse_endpoints()).take());
      case kAllocate: {
        const AllocateRequest allocate = decode_allocate(request.body);
        std::optional<std::vector<RowId>> ids =
            controller_->try_allocate(allocate.infos, allocate.owner);
        if (!ids && allocate.timeout_s > 0) return std::nullopt;
        return reply(kAllocate,
                     ByteWriter().put_vector<int64_t>(ids.value_or(std::vector<RowId>{})).take());
      }
      case kPublish: {
        std::vector<RowId> rows = r.get_vector<int64_t>();
        std::vector<std::string> columns = r.get_strings();
        const WarehouseId where = r.get<int32_t>();
        std::vector<RowInfo> infos = decode_infos(r);
        r.expect_end();
        controller_->publish(rows, columns, where, infos);
        return reply(kPublish, {});
      }
      case kClaim: {
        std::string consumer;
        ClaimOptions options = decode_claim_options(r, consumer);
        std::optional<Claim> claim = controller_->try_claim(consumer, options);
        if (!claim && options.timeout_s > 0) return std::nullopt;
        if (!claim) claim = controller_->claim(consumer, options);  // records the miss
        return reply(kClaim, encode_claim(*claim));
      }
      case kAck: {
        const int64_t lease = r.get<int64_t>();
        r.expect_end();
        AckResult result = controller_->ack(lease);
        ByteWriter w;
        w.put<uint8_t>(result.acknowledged);
        put_retired_rows(w, result.retired);
        return reply(kAck, w.take());
      }
      case kRelease: {
        const int64_t lease = r.get<int64_t>();
        r.expect_end();
        return reply(kRelease, ByteWriter().put<uint8_t>(controller_->release(lease)).take());
      }
      case kMetrics: {
        r.expect_end();
        nlohmann::json metrics = controller_->metrics();
        metrics["wire"] = wire_metrics_();
        return reply(kMetrics, ByteWriter().put_string(metrics.dump()).take());
      }
      case kRenew:
      case kUpdateInfo:
      case kDiscard:
      case kRetarget:
      case kBacklog:
      case kPostStatus:
      case kStatuses:
      case kRetireWarehouse:
        return handle_upkeep(request.op, r);
      default:
        throw Error("unknown controller op " + std::to_string(request.op), "dock controller");
    }
  }

  WireMessage handle_blocking(const WireMessage& request) override {
    ByteReader r(request.body);
    if (request.op == kAllocate) {
      const AllocateRequest allocate = decode_allocate(request.body);
      return reply(kAllocate,
                   ByteWriter()
                       .put_vector<int64_t>(controller_->allocate(
                           allocate.infos, allocate.timeout_s, allocate.owner))
                       .take());
    }
    std::string consumer;
    ClaimOptions options = decode_claim_options(r, consumer);
    return reply(kClaim, encode_claim(controller_->claim(consumer, options)));
  }

  void close() override { controller_->close(); }

 private:
  // Ops 10..17: leases, row infos, dispatch, the status board and dead warehouses;
  // none blocks.
  WireMessage handle_upkeep(uint16_t op, ByteReader& r) {
    ByteWriter w;
    switch (op) {
      case kRenew: {
        const int64_t lease = r.get<int64_t>();
        const double lease_s = r.get<double>();
        r.expect_end();
        w.put<uint8_t>(controller_->renew(lease, lease_s));
        break;
      }
      case kUpdateInfo: {
        std::vector<RowId> rows = r.get_vector<int64_t>();
        std::vector<RowInfo> infos = decode_infos(r);
        r.expect_end();
        controller_->update_info(rows, infos);
        break;
      }
      case kDiscard: {
        std::vector<RowId> rows = r.get_vector<int64_t>();
        const bool unleased_only = r.get<uint8_t>() != 0;
        r.expect_end();
        put_retired_rows(w, controller_->discard(rows, unleased_only));
        break;
      }
      case kRetarget: {
        const int32_t from = r.get<int32_t>();
        const int32_t to = r.get<int32_t>();
        r.expect_end();
        w.put<int64_t>(controller_->retarget(from, to));
        break;
      }
      case kBacklog: {
        const std::string consumer = r.get_string();
        r.expect_end();
        const ConsumerBacklog b = controller_->backlog(consumer);
        w.put<int64_t>(b.rows).put<int64_t>(b.groups).put<int64_t>(b.ready_rows);
        w.put<int64_t>(b.leased_rows);
        break;
      }
      case kRetireWarehouse: {
        const WarehouseId warehouse = r.get<int32_t>();
        r.expect_end();
        put_retired_rows(w, controller_->retire_warehouse(warehouse));
        break;
      }
      case kPostStatus: {
        const std::string key = r.get_string();
        const std::string value = r.get_string();
        r.expect_end();
        controller_->post_status(key, value);
        break;
      }
      default: {  // kStatuses
        const std::string prefix = r.get_string();
        r.expect_end();
        const std::map<std::string, StatusEntry> entries = controller_->statuses(prefix);
        w.put<uint32_t>(static_cast<uint32_t>(entries.size()));
        for (const auto& [key, entry] : entries) {
          w.put_string(key).put_string(entry.value).put<double>(entry.age_s);
        }
      }
    }
    return reply(op, w.take());
  }

  std::shared_ptr<DockController> controller_;
  std::function<nlohmann::json()> wire_metrics_;
};

}  // namespace

std::shared_ptr<ServiceHandler> make_controller_handler(
    std::shared_ptr<DockController> controller, std::function<nlohmann::json()> wire_metrics) {
  return std::make_shared<ControllerHandler>(std::move(controller), std::move(wire_metrics));
}

ControllerService::ControllerService(std::shared_ptr<DockController> controller,
                                     ZmqServiceOptions options)
    : controller_(std::move(controller)) {
  auto handler = make_controller_handler(controller_, [this] {
    const ZmqService* service = published_service_.load();
    return service != nullptr ? service->metrics() : nlohmann::json::object();
  });
  service_ = std::make_unique<ZmqService>(std::move(options), handler);
  published_service_ = service_.get();
}

ControllerService::~ControllerService() {
  published_service_ = nullptr;
  service_.reset();
}

RemoteController::RemoteController(RpcClientOptions options) : client_(std::move(options)) {
  WireMessage request;
  request.op = kSchema;
  WireMessage answer = client_.call(request);
  ByteReader r(answer.body);
  std::vector<ColumnSpec> columns(r.get<uint32_t>());
  for (ColumnSpec& column : columns) {
    column.name = r.get_string();
    column.dtype = wire_dtype(r.get<uint8_t>());
    column.kind = r.get<uint8_t>() ? ColumnKind::kPerToken : ColumnKind::kPerRow;
  }
  std::vector<ConsumerSpec> consumers(r.get<uint32_t>());
  for (ConsumerSpec& consumer : consumers) {
    consumer.name = r.get_string();
    consumer.columns = r.get_strings();
  }
  r.expect_end();
  schema_ = DockSchema(std::move(columns), std::move(consumers));
}

WarehouseId RemoteController::register_warehouse(const std::string& endpoint) {
  WireMessage request = reply(kRegisterWarehouse, ByteWriter().put_string(endpoint).take());
  WireMessage answer = client_.call(request);
  ByteReader r(answer.body);
  return r.get<int32_t>();
}

std::vector<std::string> RemoteController::warehouse_endpoints() {
  WireMessage answer = client_.call(reply(kWarehouseEndpoints, {}));
  ByteReader r(answer.body);
  return r.get_strings();
}

std::vector<RowId> RemoteController::allocate(const std::vector<RowInfo>& rows, double timeout_s,
                                             WarehouseId owner) {
  ByteWriter w;
  w.put<double>(timeout_s);
  put_infos(w, rows);
  // Only when owned, so an unowned allocation reads the same to an older service.
  if (owner != kNoWarehouse) w.put<int32_t>(owner);
  WireMessage answer = client_.call(reply(kAllocate, w.take()), timeout_s);
  ByteReader r(answer.body);
  return r.get_vector<int64_t>();
}

void RemoteController::publish(const std::vector<RowId>& rows,
                               const std::vector<std::string>& columns, WarehouseId where,
                               const std::vector<RowInfo>& infos) {
  ByteWriter w;
  w.put_vector<int64_t>(rows).put_strings(columns).put<int32_t>(where);
  put_infos(w, infos);
  client_.call(reply(kPublish, w.take()));
}

Claim RemoteController::claim(const std::string& consumer, const ClaimOptions& options) {
  WireMessage answer =
      client_.call(reply(kClaim, encode_claim_options(consumer, options)), options.timeout_s);
  return decode_claim(answer.body);
}

AckResult RemoteController::ack(int64_t lease) {
  WireMessage answer = client_.call(reply(kAck, ByteWriter().put<int64_t>(lease).take()));
  ByteReader r(answer.body);
  AckResult result;
  result.acknowledged = r.get<uint8_t>() != 0;
  result.retired = get_retired_rows(r);
  return result;
}

bool RemoteController::release(int64_t lease) {
  WireMessage answer = client_.call(reply(kRelease, ByteWriter().put<int64_t>(lease).take()));
  ByteReader r(answer.body);
  return r.get<uint8_t>() != 0;
}

bool RemoteController::renew(int64_t lease, double lease_s) {
  // Copied, not moved into reply(): GCC 12 flags the move (a false -Warray-bounds).
  const std::string body = ByteWriter().put<int64_t>(lease).put<double>(lease_s).take();
  WireMessage answer = client_.call(reply(kRenew, body));
  ByteReader r(answer.body);
  return r.get<uint8_t>() != 0;
}

void RemoteController::update_info(const std::vector<RowId>& rows,
                                   const std::vector<RowInfo>& infos) {
  ByteWriter w;
  w.put_vector<int64_t>(rows);
  put_infos(w, infos);
  client_.call(reply(kUpdateInfo, w.take()));
}

std::vector<RetiredRow> RemoteController::discard(const std::vector<RowId>& rows,
                                                  bool unleased_only) {
  WireMessage answer = client_.call(reply(
      kDiscard,
      ByteWriter().put_vector<int64_t>(rows).put<uint8_t>(unleased_only ? 1 : 0).take()));
  ByteReader r(answer.body);
  return get_retired_rows(r);
}

std::vector<RetiredRow> RemoteController::retire_warehouse(WarehouseId warehouse) {
  WireMessage answer =
      client_.call(reply(kRetireWarehouse, ByteWriter().put<int32_t>(warehouse).take()));
  ByteReader r(answer.body);
  return get_retired_rows(r);
}

int64_t RemoteController::retarget(int32_t from, int32_t to) {
  WireMessage answer =
      client_.call(reply(kRetarget, ByteWriter().put<int32_t>(from).put<int32_t>(to).take()));
  ByteReader r(answer.body);
  return r.get<int64_t>();
}

ConsumerBacklog RemoteController::backlog(const std::string& consumer) {
  WireMessage answer = client_.call(reply(kBacklog, ByteWriter().put_string(consumer).take()));
  ByteReader r(answer.body);
  ConsumerBacklog backlog;
  backlog.rows = r.get<int64_t>();
  backlog.groups = r.get<int64_t>();
  backlog.ready_rows = r.get<int64_t>();
  backlog.leased_rows = r.get<int64_t>();
  return backlog;
}

void RemoteController::post_status(const std::string& key, const std::string& value) {
  client_.call(reply(kPostStatus, ByteWriter().put_string(key).put_string(value).take()));
}

std::map<std::string, StatusEntry> RemoteController::statuses(const std::string& prefix) {
  WireMessage answer = client_.call(reply(kStatuses, ByteWriter().put_string(prefix).take()));
  ByteReader r(answer.body);
  std::map<std::string, StatusEntry> entries;
  const uint32_t count = r.get<uint32_t>();
  for (uint32_t i = 0; i < count; ++i) {
    std::string key = r.get_string();
    StatusEntry entry;
    entry.value = r.get_string();
    entry.age_s = r.get<double>();
    entries.emplace(std::move(key), std::move(entry));
  }
  return entries;
}

nlohmann::json RemoteController::metrics() {
  WireMessage answer = client_.call(reply(kMetrics, {}));
  ByteReader r(answer.body);
  return nlohmann::json::parse(r.get_string());
}

}  // namespace aspen::dock
