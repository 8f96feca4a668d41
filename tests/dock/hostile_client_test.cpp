// A live controller and warehouse keep serving a real workload while hostile clients
// send garbage frames, well-signed requests of every op with random bodies and random
// tensors (any dtype, any shape), oversize messages, a wrong token, and a slow-loris
// half message: every hostile request gets an error reply (or, half-sent, nothing),
// the services never stop, and the workload moves every row through both consumers
// exactly once, leaving no lease behind.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <random>
#include <set>
#include <thread>
#include <zmq_addon.hpp>

#include "aspen/dock/controller_protocol.h"
#include "aspen/dock/transfer_dock.h"
#include "aspen/dock/wire_format.h"
#include "aspen/dock/zmq_service.h"
#include "aspen/dock/zmq_transport.h"
#include "dock_test_util.h"
#include "raw_frames.h"

namespace aspen::dock {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kHostileToken[] = "hostile-client-test-token";
constexpr int64_t kHostileRows = 120;
constexpr size_t kHostileMaxBytes = size_t{1} << 20;

// A reply decodes: signed by the service, or (a rejection) unsigned.
bool well_formed(std::vector<zmq::message_t>& reply) {
  for (const std::string token : {kHostileToken, ""}) {
    std::vector<zmq::message_t> copy;
    for (const zmq::message_t& frame : reply) copy.emplace_back(frame.data(), frame.size());
    try {
      decode_message(copy, token, kHostileMaxBytes);
      return true;
    } catch (const Error&) {
    }
  }
  return false;
}

std::string random_bytes(std::mt19937& rng, size_t max_size) {
  std::string bytes(std::uniform_int_distribution<size_t>(0, max_size)(rng), '\0');
  for (char& c : bytes) c = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
  return bytes;
}

// A tensor of any wire dtype and a random small shape (0-d included).
torch::Tensor random_tensor(std::mt19937& rng) {
  static const torch::Dtype kDtypes[] = {
      torch::kFloat32, torch::kFloat64, torch::kFloat16, torch::kBFloat16, torch::kInt64,
      torch::kInt32,   torch::kInt16,   torch::kInt8,    torch::kUInt8,    torch::kBool};
  const torch::Dtype dtype = kDtypes[std::uniform_int_distribution<int>(0, 9)(rng)];
  std::vector<int64_t> shape(std::uniform_int_distribution<size_t>(0, 3)(rng));
  for (int64_t& size : shape) size = std::uniform_int_distribution<int64_t>(0, 4)(rng);
  return torch::zeros(shape, torch::TensorOptions().dtype(dtype));
}

// A request that must be refused or fail harmlessly, never change the workload's rows:
// read-only ops and unknown ops with random bodies; mutating ops with bodies too short
// to name a row (every mutating op's body starts with a 4-byte count or string size).
std::vector<zmq::message_t> hostile_request(std::mt19937& rng, int kind) {
  switch (kind) {
    case 0: {  // garbage frames
      std::vector<zmq::message_t> frames;
      const int count = std::uniform_int_distribution<int>(1, 5)(rng);
      for (int i = 0; i < count; ++i) {
        const std::string bytes = random_bytes(rng, 64);
        frames.emplace_back(bytes.data(), bytes.size());
      }
      if (rng() % 2) {  // with a valid magic, so the decoder reads further
        const std::string header = std::string("ASPD") + random_bytes(rng, 12);
        frames.front() = zmq::message_t(header.data(), header.size());
      }
      return frames;
    }
    case 1: {  // well signed, random op and body, random tensors
      static const uint16_t kHarmless[] = {0, 1, 3, 9, 14, 16, 17, 30, 35, 36, 37, 99, 65535};
      static const uint16_t kMutating[] = {2, 4, 5, 6, 7, 8, 10, 11, 12, 13, 15, 31, 32, 33, 34};
      WireMessage message;
      if (rng() % 2) {
        message.op = kHarmless[std::uniform_int_distribution<size_t>(0, 12)(rng)];
        message.body = random_bytes(rng, 48);
      } else {
        message.op = kMutating[std::uniform_int_distribution<size_t>(0, 14)(rng)];
        message.body = random_bytes(rng, 3);
      }
      const int tensors = std::uniform_int_distribution<int>(0, 4)(rng);
      for (int i = 0; i < tensors; ++i) message.tensors.push_back(random_tensor(rng));
      return encode_message(message, kHostileToken);
    }
    case 2: {  // over the size limit
      WireMessage big;
      big.op = 5;
      big.tensors.push_back(torch::zeros({static_cast<int64_t>(kHostileMaxBytes)}, torch::kUInt8));
      return encode_message(big, kHostileToken);
    }
    default: {  // the wrong token
      WireMessage message;
      message.op = 1;
      return encode_message(message, "not-the-token");
    }
  }
}

TEST(HostileClients, ServicesKeepServingAWorkloadThroughGarbageAndRandomRequests) {
  auto controller =
      std::make_shared<DockController>(testing::two_consumer_schema(), DockControllerOptions{256});
  ControllerService service(
      controller, ZmqServiceOptions{"tcp://127.0.0.1:*", kHostileToken, kHostileMaxBytes});
  ZmqTransportOptions options;
  options.controller_endpoint = service.endpoint();
  options.token = kHostileToken;
  options.rpc_timeout_s = 20.0;
  options.max_message_bytes = kHostileMaxBytes;
  TransferDock producer(std::make_shared<ZmqTransport>(options));
  options.reader_only = true;
  TransferDock consumer(std::make_shared<ZmqTransport>(options));
  const std::vector<std::string> endpoints = {service.endpoint(),
                                              controller->warehouse_endpoints().at(0)};

  std::atomic<bool> workload_done{false};
  std::thread produce([&] {
    for (int64_t i = 0; i < kHostileRows; ++i) {
      const std::vector<RowInfo> info = {testing::row_info(i, 1, 1 + i % 7)};
      producer.put(info, testing::columns_for(info, {i}));
    }
  });
  // Both consumers take every row once; the markers say which row each one got.
  std::map<std::string, std::multiset<int64_t>> seen;
  std::thread consume([&] {
    ClaimOptions claim;
    claim.max_rows = 8;
    claim.min_rows = 1;
    claim.timeout_s = 0.2;
    claim.lease_s = 60.0;
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    while ((seen["actor"].size() < kHostileRows || seen["reference"].size() < kHostileRows) &&
           Clock::now() < deadline) {
      for (const std::string name : {"reference", "actor"}) {
        const Claim got = consumer.claim(name, claim);
        if (got.empty()) continue;
        const std::vector<ColumnData> columns = consumer.get(got);
        for (const torch::Tensor& tokens : columns.front().values) {
          seen[name].insert(tokens[0].item<int64_t>());
        }
        EXPECT_TRUE(consumer.ack(got));
      }
    }
    workload_done = true;
  });

  std::mt19937 rng(20261201);
  int64_t sent = 0, answered = 0;
  std::discrete_distribution<int> kinds({4, 4, 1, 1});  // garbage, signed, oversize, token
  while (!workload_done || sent < 1000) {
    const int kind = kinds(rng);
    const std::string& endpoint = endpoints[rng() % endpoints.size()];
    std::vector<zmq::message_t> reply = testing::raw_call(endpoint, hostile_request(rng, kind));
    if (!reply.empty()) {
      ++answered;
      // Whatever it was, the reply is a well-formed message (an error, mostly).
      EXPECT_TRUE(well_formed(reply)) << "request kind " << kind;
    }
    ++sent;
    if (sent % 50 == 0) {
      // Slow loris: the first frame of a message that never ends, left open.
      zmq::socket_t loris(dock_zmq_context(), zmq::socket_type::dealer);
      loris.set(zmq::sockopt::linger, 0);
      loris.connect(endpoint);
      loris.send(zmq::buffer(std::string("ASPD")), zmq::send_flags::sndmore);
    }
    ASSERT_LT(sent, 20000) << "the workload did not finish";
  }
  produce.join();
  consume.join();
  EXPECT_EQ(answered, sent) << "every complete hostile request gets a reply";
  for (const std::string name : {"reference", "actor"}) {
    ASSERT_EQ(seen[name].size(), static_cast<size_t>(kHostileRows)) << name;
    for (int64_t i = 0; i < kHostileRows; ++i)
      EXPECT_EQ(seen[name].count(i), 1u) << name << " row " << i;
  }
  const nlohmann::json metrics = controller->metrics();
  EXPECT_EQ(metrics["open_leases"], 0);
  EXPECT_EQ(metrics["rows_retired"], kHostileRows);
  EXPECT_EQ(metrics["rows_discarded"], 0);
  EXPECT_GT(service.wire_metrics()["rejected"].get<int64_t>() +
                service.wire_metrics()["errors"].get<int64_t>(),
            0);
}

}  // namespace
}  // namespace aspen::dock
