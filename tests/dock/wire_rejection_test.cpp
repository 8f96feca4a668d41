// A dock service rejects bad messages and keeps serving: wrong token, missing
// token, truncated or malformed frames, oversized messages. Also pins the tensor
// framing round trip (dtype, shape, bytes) and zero-copy receive.
#include <gtest/gtest.h>

#include <zmq_addon.hpp>

#include "aspen/dock/controller_protocol.h"
#include "aspen/dock/warehouse_protocol.h"
#include "aspen/util/error.h"
#include "dock_test_util.h"
#include "raw_frames.h"

namespace aspen::dock {
namespace {

using testing::raw_call;

constexpr char kRightToken[] = "the-right-token";

std::string rejection_text(std::vector<zmq::message_t>& reply) {
  EXPECT_FALSE(reply.empty()) << "no reply";
  if (reply.empty()) return {};
  WireMessage message = decode_message(reply, "", 1 << 20);  // rejections carry no token
  EXPECT_EQ(message.status, kWireError);
  return error_text(message);
}

class WireRejectionTest : public ::testing::Test {
 protected:
  WireRejectionTest()
      : controller(std::make_shared<DockController>(testing::two_consumer_schema())),
        service(controller, ZmqServiceOptions{"tcp://127.0.0.1:*", kRightToken, 4096}) {}

  // A healthy request still works after each bad one.
  void expect_still_serving() {
    RemoteController client(RpcClientOptions{service.endpoint(), kRightToken, 5.0});
    EXPECT_EQ(client.schema().consumers().size(), 2u);
  }

  std::vector<zmq::message_t> valid_schema_request(const std::string& token) {
    WireMessage request;
    request.op = 1;  // schema
    return encode_message(request, token);
  }

  std::shared_ptr<DockController> controller;
  ControllerService service;
};

TEST_F(WireRejectionTest, WrongTokenIsRejected) {
  auto reply = raw_call(service.endpoint(), valid_schema_request("the-wrong-token"));
  EXPECT_NE(rejection_text(reply).find("wrong or missing token"), std::string::npos);
  expect_still_serving();
  EXPECT_THROW(RemoteController(RpcClientOptions{service.endpoint(), "nope", 5.0}), Error);
  expect_still_serving();
}

TEST_F(WireRejectionTest, MissingTokenIsRejected) {
  auto reply = raw_call(service.endpoint(), valid_schema_request(""));
  EXPECT_NE(rejection_text(reply).find("token"), std::string::npos);
  expect_still_serving();
}

TEST_F(WireRejectionTest, TruncatedAndMalformedFramesAreRejected) {
  std::vector<zmq::message_t> truncated;
  truncated.emplace_back("ASP", 3);  // header cut short
  truncated.emplace_back();
  auto reply = raw_call(service.endpoint(), std::move(truncated));
  EXPECT_NE(rejection_text(reply).find("truncated"), std::string::npos);
  expect_still_serving();

  std::vector<zmq::message_t> lone;
  lone.emplace_back("x", 1);  // one frame: not header + body
  reply = raw_call(service.endpoint(), std::move(lone));
  EXPECT_NE(rejection_text(reply).find("frames"), std::string::npos);

  // A correctly signed request whose body is cut short is an error, not a crash.
  WireMessage claim;
  claim.op = 6;
  claim.body = std::string(
      "\x05\x00\x00\x00"
      "act",
      7);
  auto frames = encode_message(claim, kRightToken);
  reply = raw_call(service.endpoint(), std::move(frames));
  WireMessage answer = decode_message(reply, kRightToken, 1 << 20);
  EXPECT_EQ(answer.status, kWireError);
  EXPECT_NE(error_text(answer).find("truncated"), std::string::npos);
  expect_still_serving();
  EXPECT_EQ(service.wire_metrics()["rejected"], 2);
}

TEST_F(WireRejectionTest, OversizedMessageIsRejected) {
  WireMessage big;
  big.op = 1;
  big.tensors.push_back(torch::zeros({8192}, torch::kUInt8));  // over the 4096-byte limit
  auto reply = raw_call(service.endpoint(), encode_message(big, kRightToken));
  EXPECT_NE(rejection_text(reply).find("exceeds the limit"), std::string::npos);
  expect_still_serving();
  EXPECT_EQ(service.wire_metrics()["rejected"], 1);
}

TEST(WireFormatTest, TensorsRoundTripWithDtypeAndShape) {
  WireMessage message;
  message.op = 33;
  message.body = "body";
  message.tensors = {torch::arange(12, torch::kFloat32).reshape({3, 4}),
                     torch::tensor({true, false}), torch::empty({0, 5}, torch::kInt64),
                     torch::arange(6, torch::kInt64).reshape({2, 3}).t(),  // non-contiguous
                     torch::ones({2}, torch::kBFloat16)};
  std::vector<zmq::message_t> frames = encode_message(message, kRightToken);
  EXPECT_EQ(frames.size(), 2u + 2 * message.tensors.size());
  WireMessage decoded = decode_message(frames, kRightToken, 1 << 20);
  EXPECT_EQ(decoded.op, 33);
  EXPECT_EQ(decoded.body, "body");
  ASSERT_EQ(decoded.tensors.size(), message.tensors.size());
  for (size_t i = 0; i < message.tensors.size(); ++i) {
    EXPECT_EQ(decoded.tensors[i].scalar_type(), message.tensors[i].scalar_type());
    EXPECT_EQ(decoded.tensors[i].sizes(), message.tensors[i].sizes());
    EXPECT_TRUE(torch::equal(decoded.tensors[i], message.tensors[i])) << i;
  }
}

TEST(WireFormatTest, DataFrameOfTheWrongSizeIsRejected) {
  WireMessage message;
  message.tensors = {torch::zeros({4}, torch::kFloat32)};
  std::vector<zmq::message_t> frames = encode_message(message, kRightToken);
  frames.back() = zmq::message_t(15);  // 15 bytes for 4 floats
  EXPECT_THROW(decode_message(frames, kRightToken, 1 << 20), Error);
}

// A tensor header as a peer could write it: dtype code, ndim, the dims.
zmq::message_t tensor_header(uint8_t dtype_code, const std::vector<int64_t>& shape) {
  ByteWriter header;
  header.put<uint8_t>(dtype_code).put<uint8_t>(static_cast<uint8_t>(shape.size()));
  for (int64_t size : shape) header.put<int64_t>(size);
  const std::string bytes = header.take();
  return zmq::message_t(bytes.data(), bytes.size());
}

TEST(WireFormatTest, ShapesBeyondTheElementBoundAreRefusedBeforeAnyTensorExists) {
  constexpr int64_t k62 = int64_t{1} << 62;
  // The zero dim makes no elements, but libtorch's strides (a zero dim counting as one)
  // would overflow: its c10::Error once escaped here.
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{0, k62, k62}, {k62, k62, 0}, {1 << 21, 1 << 20}}) {
    WireMessage message;
    message.tensors = {torch::zeros({0}, torch::kInt64)};
    std::vector<zmq::message_t> frames = encode_message(message, kRightToken);
    frames[2] = tensor_header(5, shape);
    try {
      decode_message(frames, kRightToken, 1 << 20);
      ADD_FAILURE() << "a shape of " << shape.size() << " dims past 2^40 elements was accepted";
    } catch (const Error& e) {
      EXPECT_NE(e.problem().find("tensor dimension"), std::string::npos) << e.what();
    }
  }
  // At the bound an empty tensor still decodes.
  WireMessage message;
  message.tensors = {torch::zeros({0}, torch::kInt64)};
  std::vector<zmq::message_t> frames = encode_message(message, kRightToken);
  frames[2] = tensor_header(5, {0, int64_t{1} << 40});
  EXPECT_EQ(decode_message(frames, kRightToken, 1 << 20).tensors.at(0).sizes(),
            c10::IntArrayRef({0, int64_t{1} << 40}));
}

TEST(WarehouseServiceTest, RemotePutGetEraseAcrossTheWire) {
  auto store = std::make_shared<Warehouse>();
  WarehouseService service(store, ZmqServiceOptions{"tcp://127.0.0.1:*", kRightToken});
  RemoteWarehouse remote(RpcClientOptions{service.endpoint(), kRightToken, 5.0});
  std::vector<RowInfo> infos = {testing::row_info(0, 1, 3), testing::row_info(0, 1, 5)};
  remote.put({7, 8}, testing::columns_for(infos, {70, 80}));
  EXPECT_EQ(store->rows_held(), 2);
  std::vector<ColumnData> got = remote.get({8, 7}, {"reward", "tokens"});
  EXPECT_EQ(got[0].values[0].item<float>(), 80.0f);
  EXPECT_EQ(got[1].values[1].size(0), 3);
  EXPECT_THROW(remote.get({9}, {"tokens"}), Error);  // not here: error reply, still serving
  remote.erase({7, 8});
  EXPECT_EQ(store->rows_held(), 0);
}

}  // namespace
}  // namespace aspen::dock
