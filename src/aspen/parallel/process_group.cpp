// The c10d boundary: the only file that includes c10d's headers.
//  - Gloo's headers: the torch wheel ships ProcessGroupGloo.hpp but not the gloo/*.h it
//    includes. Debian's libgloo-dev provides them (scripts/setup); nothing of Debian's
//    libgloo is linked, the Gloo code that runs is the one compiled into libtorch_cpu.
//    That is sound because this file only names Gloo types through pointers and calls
//    non-inline ProcessGroupGloo members defined in libtorch: it never lays out or
//    constructs a gloo object itself. tests/parallel/distributed_test.cpp (collectives
//    across real rank processes) is the proof.
//  - USE_C10D_GLOO: torch's CMake config does not export it, and ProcessGroupGloo.hpp
//    hides behind it; it is defined here.
//  - ProcessGroupGloo is a c10d::Backend; we hold and call it directly.
//  - NCCL: CUDA tensors go through a ProcessGroupNCCL formed on the first collective on
//    a CUDA tensor (collectives run in the same order on every rank, so every rank
//    forms it at the same point), over its own prefix of the same store. nccl.h comes
//    from the wheel's nvidia-nccl package, the NCCL libtorch_cuda links, so the
//    class's layout here is the library's (cmake/AspenDependencies.cmake).
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif

#include "aspen/parallel/process_group.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "aspen/parallel/imports.h"
#include "aspen/util/error.h"
#include "aspen/util/log.h"

namespace aspen::parallel {

struct ProcessGroupHandle::Impl {
  int rank = 0;
  int world_size = 1;
  std::chrono::milliseconds collective_timeout{};
  c10::intrusive_ptr<c10d::Store> store;  // a PrefixStore over the TCPStore (join_session)
  std::shared_ptr<::gloo::transport::Device> device;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl;  // formed on the first CUDA collective
  c10::DeviceIndex nccl_device = -1;                  // ... on this device
  int subgroups_created = 0;  // names each subgroup's store prefix identically on all ranks

  // The backend for a collective on `tensor`: NCCL for CUDA tensors, Gloo otherwise.
  c10d::Backend& backend_for(const torch::Tensor& tensor);
};

c10d::Backend& ProcessGroupHandle::Impl::backend_for(const torch::Tensor& tensor) {
  if (!tensor.is_cuda()) return *gloo;
  if (!nccl) {
    // The rank's device current before NCCL forms: communicators, streams and any
    // allocation without a device guard then land on cuda:LOCAL_RANK, not on cuda:0,
    // where every rank would open a context of its own.
    c10::cuda::set_device(tensor.device().index());
    nccl_device = tensor.device().index();
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = collective_timeout;
    try {
      nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(
          c10::make_intrusive<c10d::PrefixStore>("aspen/nccl", store), rank, world_size, options);
    } catch (const std::exception& e) {
      throw Error("rank " + std::to_string(rank) + " could not form the NCCL group: " + e.what(),
                  "process group (nccl)", "every rank needs its own CUDA device (cuda:LOCAL_RANK)");
    }
  }
  check_input(tensor.device().index() == nccl_device,
              "a collective on cuda:" + std::to_string(tensor.device().index()) +
                  ", but this rank's NCCL group was formed on cuda:" + std::to_string(nccl_device),
              "process group (nccl)", "keep every CUDA tensor of a rank on cuda:LOCAL_RANK");
  return *nccl;
}

namespace {

std::string seconds_text(std::chrono::milliseconds ms) {
  std::ostringstream out;
  out << static_cast<double>(ms.count()) / 1000.0 << " s";
  return out.str();
}

// The backend a collective on `tensor` went through (Impl::backend_for's choice).
const char* backend_of(const torch::Tensor& tensor) {
  return tensor.is_cuda() ? "process group (nccl)" : "process group (gloo)";
}

[[noreturn]] void throw_collective_error(const char* op, const char* backend, int rank,
                                         const std::exception& e) {
  throw Error(std::string(op) + " failed on rank " + std::to_string(rank) + ": " + e.what(),
              backend,
              "a peer rank probably died or stalled past ASPEN_DIST_TIMEOUT_S; see the "
              "aspen launch output for the first rank that failed");
}

// The rendezvous proper: every rank agrees on a session id that rank 0 draws afresh for
// this start, and everything formed afterwards (Gloo, NCCL, subgroups) keeps its keys
// under "aspen/session/<id>/". The store may outlive a start: torchrun's agent hosts it
// (TORCHELASTIC_USE_AGENT_STORE) and keeps it across restarts of its workers, so keys
// of an earlier attempt (arrival marks, Gloo's peer addresses) are still there, and
// fixed key names would let a restarted rank take them as current (count a rank as
// arrived that is not, connect to a dead peer). A prefix from TORCHELASTIC_RESTART_COUNT
// would not do: torchrun counts restarts per node (an agent whose own workers were
// healthy restarts them for another node's failure without counting it), so nodes can
// disagree on it. No key is ever deleted, so a check() followed by a get() never blocks:
//   rank 0 writes "aspen/rdzv/session" = "<id> open", waits until every other rank r
//     has written "aspen/rdzv/joined/<r>" = "<id>", then writes "<id> closed";
//   rank r > 0 polls the session; whenever it shows an open id, r writes its joined key
//     with that id; r is done when the session shows "<the id it joined> closed".
// A stale open session (an earlier rank 0 died mid-rendezvous) is overwritten by this
// rank 0, and ranks that joined it join the new id; a stale closed one names an id no
// rank of this start joined. The agent's own keys ("torchelastic/...", "<run id>/...",
// "torch.rendezvous.<run id>...") are outside "aspen/".
const char* kSessionKey = "aspen/rdzv/session";

std::string joined_key(int rank) { return "aspen/rdzv/joined/" + std::to_string(rank); }

// The value at `key`, or "" when it is absent.
std::string value_at(c10d::Store& store, const std::string& key) {
  return store.check({key}) ? store.get_to_str(key) : std::string();
}

std::string new_session_id() {
  std::random_device device;
  std::ostringstream id;
  id << std::hex << getpid();
  for (int i = 0; i < 2; ++i) id << '-' << device();
  return id.str();
}

[[noreturn]] void throw_missing_ranks(const std::vector<int>& missing, const DistEnv& env) {
  std::ostringstream ranks;
  for (size_t i = 0; i < missing.size(); ++i) ranks << (i ? ", " : "") << missing[i];
  throw Error((missing.size() == 1 ? "rank " : "ranks ") + ranks.str() + " never arrived within " +
                  seconds_text(env.rendezvous_timeout) + " (rank " + std::to_string(env.rank) +
                  " of " + std::to_string(env.world_size) + " waited at " + store_address(env) +
                  ":" + std::to_string(env.master_port) + ")",
              "rendezvous",
              "start every rank (aspen launch --nproc-per-node/--nnodes, or torchrun), check "
              "that all nodes use the same MASTER_ADDR/MASTER_PORT, or raise --rdzv-timeout");
}

// Runs the protocol above; returns the session id. Throws naming the ranks that did not
// arrive within env.rendezvous_timeout.
std::string join_session(c10d::Store& store, const DistEnv& env) {
  const auto deadline = std::chrono::steady_clock::now() + env.rendezvous_timeout;
  const auto poll = std::chrono::milliseconds(50);
  std::vector<int> missing;
  if (env.rank == 0) {
    const std::string id = new_session_id();
    store.set(kSessionKey, id + " open");
    while (true) {
      missing.clear();
      for (int r = 1; r < env.world_size; ++r) {
        if (value_at(store, joined_key(r)) != id) missing.push_back(r);
      }
      if (missing.empty()) break;
      if (std::chrono::steady_clock::now() >= deadline) throw_missing_ranks(missing, env);
      std::this_thread::sleep_for(poll);
    }
    store.set(kSessionKey, id + " closed");
    return id;
  }
  std::string joined;  // the open id this rank joined last
  while (true) {
    const std::string session = value_at(store, kSessionKey);
    const size_t space = session.find(' ');
    const std::string id = session.substr(0, space);
    const std::string state = space == std::string::npos ? "" : session.substr(space + 1);
    if (state == "closed" && id == joined) return id;
    if (state == "open" && id != joined) {
      store.set(joined_key(env.rank), id);
      joined = id;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      // Without an open session this rank knows only that rank 0 is missing; with one,
      // the ranks that have not joined it (and rank 0 if all have but it never closed).
      for (int r = 1; r < env.world_size && !joined.empty(); ++r) {
        if (r != env.rank && value_at(store, joined_key(r)) != joined) missing.push_back(r);
      }
      if (missing.empty()) missing.push_back(0);
      throw_missing_ranks(missing, env);
    }
    std::this_thread::sleep_for(poll);
  }
}

// Rank 0's listening socket for the store, bound to `host` only. c10d's TCPStore has no
// bind-address option (TCPStoreOptions in torch 2.x): left to itself its server listens
// on every interface ("::" dual stack), and it has no authentication, so anyone who can
// reach the port could read or forge rendezvous keys. It does take over a socket we
// bound ourselves (TCPStoreOptions::masterListenFd, both the libuv and the classic
// backend), which is how the address is chosen here (store_address: 127.0.0.1 on a
// single node, MASTER_ADDR on several). The store owns the returned descriptor.
int listen_on(const std::string& host, int port) {
  const std::string where = "rendezvous store address " + host + ":" + std::to_string(port) +
                            " (MASTER_ADDR:MASTER_PORT)";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  check_input(rc == 0 && found != nullptr,
              std::string("cannot resolve the address: ") + gai_strerror(rc), where,
              "rank 0 serves the rendezvous store on MASTER_ADDR (--master-addr)");
  std::string failure;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      failure = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (a->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
      failure = std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  check_input(fd >= 0, "rank 0 cannot listen there: " + failure, where,
              "is the port in use? pass --master-port 0 for a free one (single node); on "
              "several nodes MASTER_ADDR must be an address of node 0's own machine");
  return fd;
}

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

std::shared_ptr<::gloo::transport::Device> make_gloo_device(const DistEnv& env) {
  // Same precedence as torch.distributed: an explicit interface wins; otherwise a
  // single-node job (or a loopback master, several "nodes" on one machine) binds
  // loopback (the machine's hostname may not resolve, or resolve to an unreachable
  // address, and nothing off the machine needs to reach these sockets).
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME")) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  if (env.single_node() || is_loopback(env.master_addr)) {
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

}  // namespace

void PendingWork::wait() {
  if (!wait_) return;
  auto wait = std::move(wait_);
  wait_ = nullptr;
  wait();
}

ProcessGroupHandle::ProcessGroupHandle(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
int ProcessGroupHandle::rank() const { return impl_->rank; }
int ProcessGroupHandle::world_size() const { return impl_->world_size; }
std::chrono::milliseconds ProcessGroupHandle::collective_timeout() const {
  return impl_->collective_timeout;
}

PendingWork ProcessGroupHandle::all_reduce_async(torch::Tensor tensor, ReduceOp op) {
  TORCH_CHECK(tensor.is_contiguous(), "all_reduce needs a contiguous tensor");
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = op == ReduceOp::kMax ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM;
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = impl_->backend_for(tensor).allreduce(tensors, options);
  } catch (const std::exception& e) {
    throw_collective_error("allreduce", backend_of(tensor), impl_->rank, e);
  }
  const int rank = impl_->rank;
  return PendingWork([work, rank, tensor] {
    try {
      work->wait();
    } catch (const std::exception& e) {
      throw_collective_error("allreduce", backend_of(tensor), rank, e);
    }
  });
}

void ProcessGroupHandle::all_reduce(torch::Tensor& tensor, ReduceOp op) {
  all_reduce_async(tensor, op).wait();
}

std::vector<torch::Tensor> ProcessGroupHandle::all_gather(const torch::Tensor& tensor) {
  torch::Tensor input = tensor.contiguous();
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int r = 0; r < impl_->world_size; ++r) outputs[0].push_back(torch::empty_like(input));
  std::vector<at::Tensor> inputs{input};
  try {
    impl_->backend_for(input).allgather(outputs, inputs)->wait();
  } catch (const std::exception& e) {
    throw_collective_error("allgather", backend_of(input), impl_->rank, e);
  }
  return outputs[0];
}

torch::Tensor ProcessGroupHandle::all_to_all(const torch::Tensor& input,
                                             const std::vector<int64_t>& send_rows,
                                             const std::vector<int64_t>& recv_rows) {
  const auto size = static_cast<size_t>(impl_->world_size);
  TORCH_CHECK(send_rows.size() == size && recv_rows.size() == size,
              "all_to_all needs one send and one receive count per rank");
  int64_t received = 0;
  for (int64_t rows : recv_rows) received += rows;
  std::vector<int64_t> shape = input.sizes().vec();
  shape[0] = received;
  torch::Tensor in = input.contiguous();
  torch::Tensor out = torch::empty(shape, input.options());
  std::vector<int64_t> send(send_rows), recv(recv_rows);
  try {
    impl_->backend_for(in).alltoall_base(out, in, recv, send)->wait();
  } catch (const std::exception& e) {
    throw_collective_error("alltoall", backend_of(in), impl_->rank, e);
  }
  return out;
}

void ProcessGroupHandle::broadcast(torch::Tensor& tensor, int root) {
  TORCH_CHECK(tensor.is_contiguous(), "broadcast needs a contiguous tensor");
  std::vector<at::Tensor> tensors{tensor};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  try {
    impl_->backend_for(tensor).broadcast(tensors, options)->wait();
  } catch (const std::exception& e) {
    throw_collective_error("broadcast", backend_of(tensor), impl_->rank, e);
  }
}

PendingWork ProcessGroupHandle::send_async(torch::Tensor tensor, int dst, int tag) {
  TORCH_CHECK(tensor.is_contiguous(), "send needs a contiguous tensor");
  TORCH_CHECK(dst >= 0 && dst < impl_->world_size && dst != impl_->rank,
              "send to rank ", dst, " of a group of ", impl_->world_size, " from rank ",
              impl_->rank);
  std::vector<at::Tensor> tensors{tensor};
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = impl_->backend_for(tensor).send(tensors, dst, tag);
  } catch (const std::exception& e) {
    throw_collective_error("send", backend_of(tensor), impl_->rank, e);
  }
  const int rank = impl_->rank;
  return PendingWork([work, rank, tensor] {
    try {
      work->wait();
    } catch (const std::exception& e) {
      throw_collective_error("send", backend_of(tensor), rank, e);
    }
  });
}

void ProcessGroupHandle::recv(torch::Tensor& tensor, int src, int tag) {
  TORCH_CHECK(tensor.is_contiguous(), "recv needs a contiguous tensor");
  TORCH_CHECK(src >= 0 && src < impl_->world_size && src != impl_->rank,
              "recv from rank ", src, " of a group of ", impl_->world_size, " on rank ",
              impl_->rank);
  std::vector<at::Tensor> tensors{tensor};
  try {
    impl_->backend_for(tensor).recv(tensors, src, tag)->wait();
  } catch (const std::exception& e) {
    throw_collective_error("recv", backend_of(tensor), impl_->rank, e);
  }
}

void ProcessGroupHandle::barrier() {
  try {
    impl_->gloo->barrier()->wait();
  } catch (const std::exception& e) {
    throw_collective_error("barrier", "process group (gloo)", impl_->rank, e);
  }
}

std::optional<ProcessGroupHandle> ProcessGroupHandle::new_subgroup(const std::vector<int>& ranks) {
  const int index = impl_->subgroups_created++;
  std::vector<char> seen(static_cast<size_t>(impl_->world_size), 0);
  int my_index = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const int r = ranks[i];
    check_input(r >= 0 && r < impl_->world_size && !seen[static_cast<size_t>(r)],
                "rank " + std::to_string(r) + " is out of range [0, " +
                    std::to_string(impl_->world_size) + ") or listed twice",
                "new_subgroup ranks");
    seen[static_cast<size_t>(r)] = 1;
    if (r == impl_->rank) my_index = static_cast<int>(i);
  }
  check_input(!ranks.empty(), "empty rank list", "new_subgroup ranks");
  if (my_index < 0) return std::nullopt;
  auto impl = std::make_shared<Impl>();
  impl->rank = my_index;
  impl->world_size = static_cast<int>(ranks.size());
  impl->collective_timeout = impl_->collective_timeout;
  impl->store = c10::make_intrusive<c10d::PrefixStore>(
      "aspen/subgroup/" + std::to_string(index), impl_->store);
  impl->device = impl_->device;
  auto options = c10d::ProcessGroupGloo::Options::create(impl_->collective_timeout);
  options->devices.push_back(impl->device);
  try {
    impl->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(impl->store, impl->rank,
                                                            impl->world_size, options);
  } catch (const std::exception& e) {
    throw Error("rank " + std::to_string(impl_->rank) + " could not form subgroup " +
                    std::to_string(index) + ": " + e.what(),
                "process group (gloo)", "a member rank probably died or skipped new_subgroup");
  }
  return ProcessGroupHandle(std::move(impl));
}

ProcessGroupHandle init_process_group(const DistEnv& env) {
  auto impl = std::make_shared<ProcessGroupHandle::Impl>();
  impl->rank = env.rank;
  impl->world_size = env.world_size;
  impl->collective_timeout = env.collective_timeout;
  const std::string host = store_address(env);
  const std::string endpoint = host + ":" + std::to_string(env.master_port);

  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(env.master_port);
  // Under torchrun the agent already serves the store there (TORCHELASTIC_USE_AGENT_STORE):
  // every rank, rank 0 included, is a client, as in torch's env:// initialisation.
  store_options.isServer = env.rank == 0 && !env.agent_store;
  store_options.numWorkers = env.world_size;
  // We wait for the ranks ourselves (join_session) to name the missing ones.
  store_options.waitWorkers = false;
  store_options.timeout = env.rendezvous_timeout;
  // Bound to `host` only, never to every interface (listen_on). If the store constructor
  // throws after this, the descriptor may or may not have been taken over; it is left
  // open rather than risk closing a descriptor twice (the rank is failing anyway).
  if (store_options.isServer) store_options.masterListenFd = listen_on(host, env.master_port);
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(host, store_options);
  } catch (const std::exception& thrown) {
    // c10's what() carries a C++ backtrace; the message alone keeps the error one line.
    const auto* c10_error = dynamic_cast<const c10::Error*>(&thrown);
    const std::string what = c10_error != nullptr ? c10_error->what_without_backtrace()
                                                  : std::string(thrown.what());
    if (store_options.isServer) {
      throw Error("rank 0 could not serve the rendezvous store on " + endpoint + ": " + what,
                  "rendezvous", "is the port in use? pass --master-port 0 for a free one");
    }
    const std::string owner = env.agent_store ? "torchrun's agent store" : "rank 0's store";
    throw Error("rank " + std::to_string(env.rank) + " could not reach " + owner + " at " +
                    endpoint + " within " + seconds_text(env.rendezvous_timeout) + ": " + what,
                "rendezvous",
                env.agent_store ? "is the torchrun agent of node 0 running, and MASTER_ADDR "
                                  "reachable from this node?"
                                : "is rank 0 running, and MASTER_ADDR/MASTER_PORT the same on "
                                  "every node?");
  }
  const std::string session = join_session(*store, env);
  impl->store = c10::make_intrusive<c10d::PrefixStore>("aspen/session/" + session, store);
  log_debug("rank ", env.rank, "/", env.world_size, ": all ranks arrived at ", endpoint,
            " (session ", session, ")");

  auto options = c10d::ProcessGroupGloo::Options::create(env.collective_timeout);
  impl->device = make_gloo_device(env);
  options->devices.push_back(impl->device);
  try {
    // Gloo's own full-mesh connect goes through the store, under the store timeout.
    impl->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(impl->store, env.rank,
                                                            env.world_size, options);
  } catch (const std::exception& e) {
    throw Error("rank " + std::to_string(env.rank) + " could not connect the gloo group: " +
                    e.what(),
                "rendezvous", "a peer rank probably died during start-up");
  }
  return ProcessGroupHandle(std::move(impl));
}

}  // namespace aspen::parallel
