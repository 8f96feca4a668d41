// The TransferDock of a multi-rank run (MindSpeed-RL's layout): rank 0 serves the
// CONTROLLER (metadata only) over ZeroMQ; every rank keeps its own WAREHOUSE in
// memory, writes its rollout rows there without a copy and serves it to the other
// ranks. A reader fetches a row's columns straight from the warehouse that holds them.
//
// Set-up is collective over `world`: rank 0 binds the controller on
// tcp://HOST:* (HOST = ASPEN_DOCK_HOST, default 127.0.0.1 — loopback unless told
// otherwise, as every dock endpoint), draws a random shared token and broadcasts the
// endpoint and token; each rank then connects and registers its warehouse, bound on
// the same HOST. For several machines set ASPEN_DOCK_HOST to an address the other
// machines reach (each rank binds its own warehouse there).
// Errors: aspen::Error when the controller cannot be bound or reached.
// Thread safety: the dock is thread-safe (zmq_transport.h).
#pragma once

#include <memory>

#include "aspen/dock/controller_protocol.h"
#include "aspen/dock/transfer_dock.h"
#include "aspen/parallel/process_group.h"
#include "aspen/pipeline/imports.h"

namespace aspen::pipeline {

struct DistributedDock {
  std::unique_ptr<ControllerService> controller;  // rank 0 only
  std::unique_ptr<TransferDock> dock;
};

// write_to_rank0 (per rank): this rank keeps no warehouse and writes every row into
// rank 0's (ZmqTransport's central mode) - a rollout-only rank of the asynchronous
// engine, so that its death takes no finished row with it.
DistributedDock make_distributed_dock(ProcessGroupHandle& world, DockSchema schema,
                                      int64_t capacity_rows, bool write_to_rank0 = false);

}  // namespace aspen::pipeline
