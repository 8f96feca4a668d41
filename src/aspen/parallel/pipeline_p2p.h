// Point-to-point messages between pipeline stages: a stage's output activations go to
// the next stage, their gradients come back to it.
//
// Message format: a header, then the payload. The header is a CPU int64 tensor of
// kHeaderLength entries {dtype (c10::ScalarType), ndim, size_0, ..., size_{ndim-1},
// 0...} sent over the group's CPU (Gloo) backend; the payload is the tensor itself,
// contiguous, through the backend of its device (Gloo for CPU, NCCL for CUDA). The
// receiver learns shape and dtype from the header, so stages need not agree in
// advance on micro-batch sizes: packed variable-length micro-batches have a different
// token count T each. Messages between one pair of ranks with one tag arrive in the
// order they were sent; the stages use kActivationTag forward and kGradientTag backward.
//
// Errors: aspen::Error for a tensor of more than kMaxDims dims, a header that does not
// describe a tensor, or a failed send/receive (naming the op and the rank).
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "aspen/parallel/imports.h"
#include "aspen/parallel/process_group.h"

namespace aspen::parallel {

constexpr int64_t kMaxDims = 6;
constexpr int64_t kHeaderLength = 2 + kMaxDims;
constexpr int kActivationTag = 0;
constexpr int kGradientTag = 1;

// Sends `tensor`'s header and (a contiguous copy of) its data to rank `dst` of `group`;
// returns once both are posted. Wait the work before the process exits or reuses the
// peer's channel out of order; it keeps the tensors alive until then.
PendingWork send_tensor(ProcessGroupHandle& group, const torch::Tensor& tensor, int dst, int tag);

// Receives one send_tensor message from rank `src`: a new tensor of the sent shape and
// dtype on `device`. Blocks until it has arrived.
torch::Tensor recv_tensor(ProcessGroupHandle& group, int src, int tag, torch::Device device);

}  // namespace aspen::parallel
