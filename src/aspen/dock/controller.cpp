#include "aspen/dock/controller.h"

#include <cmath>

#include <algorithm>
#include <limits>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "aspen/dock/imports.h"
#include "aspen/dock/token_balance.h"
#include "aspen/util/error.h"

namespace aspen::dock {
namespace {

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::chrono::steady_clock::duration to_duration(double seconds) {
  // Clamp so "wait forever" style values do not overflow time_point arithmetic; NaN
  // (refused before it gets here) would be undefined behaviour in duration_cast.
  if (!(seconds > 0.0)) return std::chrono::steady_clock::duration::zero();
  const double clamped = std::min(seconds, 1e7);
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(clamped));
}

}  // namespace

DockController::DockController(DockSchema schema, DockControllerOptions options)
    : schema_(std::move(schema)),
      options_(options),
      all_consumers_mask_(schema_.consumers().size() == 64
                              ? ~uint64_t{0}
                              : (uint64_t{1} << schema_.consumers().size()) - 1),
      clock_(options_.clock != nullptr ? *options_.clock : real_clock()),
      claimable_(schema_.consumers().size()),
      stats_(schema_.consumers().size()) {
  check_input(options_.capacity_rows >= 1,
              "capacity of " + std::to_string(options_.capacity_rows) + " rows",
              "dock capacity_rows", "use at least 1");
}

DockController::~DockController() {
  close();
}

void DockController::close() {
  {
    MutexLock lock(mutex_);
    closed_ = true;
  }
  ready_cv_.notify_all();
  space_cv_.notify_all();
}

WarehouseId DockController::register_warehouse(const std::string& endpoint) {
  MutexLock lock(mutex_);
  warehouses_.push_back(endpoint);
  warehouse_dead_.push_back(false);
  return static_cast<WarehouseId>(warehouses_.size() - 1);
}

std::vector<std::string> DockController::warehouse_endpoints() {
  MutexLock lock(mutex_);
  return warehouses_;
}

void DockController::check_warehouse_locked(WarehouseId where, const std::string& context) const {
  check_input(where >= 0 && where < static_cast<WarehouseId>(warehouses_.size()),
              "unregistered warehouse " + std::to_string(where), context);
  check_input(!warehouse_dead_[where], "warehouse " + std::to_string(where) + " is retired",
              context, "its process died; a replacement registers a new warehouse");
}

std::vector<RowId> DockController::reserve_locked(const std::vector<RowInfo>& rows,
                                                  WarehouseId owner) {
  if (owner != kNoWarehouse) check_warehouse_locked(owner, "dock allocate owner");
  std::vector<RowId> ids;
  ids.reserve(rows.size());
  for (const RowInfo& info : rows) {
    RowState state;
    state.info = info;
    state.where.assign(schema_.columns().size(), kNoWarehouse);
    state.owner = owner;
    ids.push_back(next_row_);
    rows_.emplace(next_row_++, std::move(state));
  }
  rows_allocated_ += static_cast<int64_t>(rows.size());
  if (options_.hooks.allocated) options_.hooks.allocated(ids, rows, owner);
  return ids;
}

std::optional<std::vector<RowId>> DockController::try_allocate(const std::vector<RowInfo>& rows,
                                                               WarehouseId owner) {
  check_input(static_cast<int64_t>(rows.size()) <= options_.capacity_rows,
              "allocating " + std::to_string(rows.size()) + " rows at once exceeds capacity " +
                  std::to_string(options_.capacity_rows),
              "dock put", "put fewer rows per call or raise capacity_rows");
  for (const RowInfo& info : rows) {
    check_input(info.group_size >= 1 && info.tokens >= 0,
                "row with group_size " + std::to_string(info.group_size) + " and tokens " +
                    std::to_string(info.tokens),
                "dock put", "group_size >= 1 and tokens >= 0");
  }
  MutexLock lock(mutex_);
  // A dead owner is refused even when the dock is full (no waiting for nothing).
  if (owner != kNoWarehouse) check_warehouse_locked(owner, "dock allocate owner");
  if (static_cast<int64_t>(rows_.size() + rows.size()) > options_.capacity_rows) {
    return std::nullopt;
  }
  return reserve_locked(rows, owner);
}

std::vector<RowId> DockController::allocate(const std::vector<RowInfo>& rows, double timeout_s,
                                            WarehouseId owner) {
  check_input(!std::isnan(timeout_s), "timeout_s is NaN", "allocate",
              "seconds to wait: <= 0 (do not wait), a positive number or infinity");
  if (auto ids = try_allocate(rows, owner)) return *ids;  // validates, fast path
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + to_duration(timeout_s);
  MutexLock lock(mutex_);
  const auto room = [&]() REQUIRES(mutex_) {
    return closed_ || static_cast<int64_t>(rows_.size() + rows.size()) <= options_.capacity_rows;
  };
  while (!room() && space_cv_.wait_until(mutex_, deadline)) {
  }
  const bool fits = room();  // past the deadline, room made at the last moment still counts
  producer_wait_s_ += seconds_between(start, std::chrono::steady_clock::now());
  if (!fits || closed_) return {};
  return reserve_locked(rows, owner);  // throws if the owner died while we waited
}

bool DockController::ready_for_locked(const RowState& row, int consumer) const {
  const uint64_t bit = uint64_t{1} << consumer;
  if ((row.consumed | row.leased) & bit) return false;
  for (int column : schema_.needed_columns(consumer)) {
    if (row.where[column] == kNoWarehouse) return false;
  }
  return true;
}

void DockController::publish(const std::vector<RowId>& rows,
                             const std::vector<std::string>& columns, WarehouseId where,
                             const std::vector<RowInfo>& infos) {
  if (!infos.empty()) update_info(rows, infos);
  std::vector<int> column_ids;
  for (const std::string& name : columns) column_ids.push_back(schema_.column_index(name));
  bool any_claimable = false;
  {
    MutexLock lock(mutex_);
    check_warehouse_locked(where, "dock publish");
    for (RowId id : rows) {
      auto it = rows_.find(id);
      check_input(it != rows_.end(), "row " + std::to_string(id) + " is not live", "dock publish",
                  "allocate rows before publishing; retired rows are gone");
      for (int column : column_ids) it->second.where[column] = where;
      for (size_t c = 0; c < claimable_.size(); ++c) {
        if (ready_for_locked(it->second, static_cast<int>(c))) {
          any_claimable |= claimable_[c].insert(id).second;
        }
      }
    }
  }
  if (any_claimable) ready_cv_.notify_all();
}

bool DockController::requires_window(const ClaimOptions& options) {
  return options.required_through_version != std::numeric_limits<int64_t>::min();
}

void DockController::validate_claim(const ClaimOptions& options) const {
  check_input(options.max_rows >= 1, "max_rows " + std::to_string(options.max_rows),
              "claim options", "ask for at least one row");
  check_input(options.min_rows >= 0 && options.min_rows <= options.max_rows,
              "min_rows " + std::to_string(options.min_rows) + " with max_rows " +
                  std::to_string(options.max_rows),
              "claim options", "0 <= min_rows <= max_rows");
  check_input(options.balance_ranks >= 1 && options.balance_ranks <= kMaxBalanceRanks,
              "balance_ranks " + std::to_string(options.balance_ranks), "claim options",
              "use 1 to " + std::to_string(kMaxBalanceRanks) + " ranks");
  check_input(options.lease_s > 0, "lease_s " + std::to_string(options.lease_s), "claim options",
              "a lease must last a positive time");
  // Found by fuzz_dock_frames: a NaN timeout reached duration_cast (undefined behaviour).
  check_input(!std::isnan(options.timeout_s), "timeout_s is NaN", "claim options",
              "seconds to wait: <= 0 (do not wait), a positive number or infinity");
  check_input(options.min_version <= options.max_version, "empty policy-version window",
              "claim options");
  check_input(options.target >= -1, "target " + std::to_string(options.target), "claim options",
              "-1 (any row) or an instance index");
  check_input(!requires_window(options) || options.whole_groups,
              "required_through_version without whole_groups", "claim options",
              "a staleness window is made of whole groups; set whole_groups");
}

Claim DockController::empty_claim(int consumer, const Selection& selection) const {
  Claim claim;
  claim.consumer = schema_.consumers()[consumer].name;
  claim.columns = schema_.consumers()[consumer].columns;
  claim.pending_required_rows = selection.pending_required_rows;
  claim.ready_rows_left = selection.ready_rows_left;
  return claim;
}

std::optional<Claim> DockController::claim_locked(int consumer, const ClaimOptions& options,
                                                  Selection& selection) {
  selection = select_locked(consumer, options);
  if (!selection.satisfied) return std::nullopt;
  Claim claim = empty_claim(consumer, selection);
  std::vector<RowId>& picked = selection.rows;
  if (picked.empty()) return claim;
  const uint64_t bit = uint64_t{1} << consumer;
  const std::vector<int>& needed = schema_.needed_columns(consumer);
  std::vector<int64_t> tokens;
  for (RowId id : picked) {
    RowState& row = rows_.at(id);
    row.leased |= bit;
    claimable_[consumer].erase(id);
    ClaimedRow claimed{id, row.info, {}};
    for (int column : needed) claimed.locations.push_back(row.where[column]);
    claim.rows.push_back(std::move(claimed));
    tokens.push_back(row.info.tokens);
  }
  if (options.balance_ranks > 1) {
    TokenPartition partition = balance_by_tokens(tokens, options.balance_ranks);
    for (const std::vector<int>& rank : partition.ranks) {
      std::vector<RowId> ids;
      for (int i : rank) ids.push_back(picked[i]);
      claim.ranks.push_back(std::move(ids));
    }
    claim.imbalance = partition.imbalance;
  }
  claim.lease = next_lease_++;
  const auto deadline = clock_.now() + to_duration(options.lease_s);
  leases_[claim.lease] = Lease{consumer, picked, deadline};
  lease_deadlines_.emplace(deadline, claim.lease);
  return claim;
}

std::optional<Claim> DockController::try_claim(const std::string& consumer,
                                               const ClaimOptions& options) {
  validate_claim(options);
  const int index = schema_.consumer_index(consumer);
  const auto start = std::chrono::steady_clock::now();
  MutexLock lock(mutex_);
  expire_leases_locked(clock_.now());
  Selection selection;
  std::optional<Claim> claim = claim_locked(index, options, selection);
  if (claim) {
    record_claim_locked(index, *claim, seconds_between(start, std::chrono::steady_clock::now()), 0.0);
  }
  return claim;
}

Claim DockController::claim(const std::string& consumer, const ClaimOptions& options) {
  validate_claim(options);
  const int index = schema_.consumer_index(consumer);
  using Steady = std::chrono::steady_clock;  // waiting is real time; leases are clock_'s
  const auto start = Steady::now();
  const auto deadline = start + to_duration(options.timeout_s);
  double wait_s = 0;
  Selection last;  // the empty answer reports the counts of the last check
  MutexLock lock(mutex_);
  while (true) {
    const auto now = Steady::now();
    const auto ledger_now = clock_.now();
    expire_leases_locked(ledger_now);
    if (std::optional<Claim> claim = claim_locked(index, options, last)) {
      record_claim_locked(index, *claim, seconds_between(start, Steady::now()), wait_s);
      return *claim;
    }
    if (closed_ || now >= deadline) break;
    // Wake for new rows, or when the next lease expires and returns rows (its distance
    // on the ledger clock, as a real wait).
    auto wake = deadline;
    if (!lease_deadlines_.empty()) {
      wake = std::min(wake, now + (lease_deadlines_.begin()->first - ledger_now));
    }
    ready_cv_.wait_until(mutex_, wake);
    wait_s += seconds_between(now, Steady::now());
  }
  Claim timed_out = empty_claim(index, last);
  timed_out.timed_out = true;
  record_claim_locked(index, timed_out, seconds_between(start, Steady::now()), wait_s);
  return timed_out;
}

void DockController::record_claim_locked(int consumer, const Claim& claim, double latency_s,
                                         double wait_s) {
  ConsumerStats& stats = stats_[consumer];
  stats.claims += 1;
  stats.rows_claimed += static_cast<int64_t>(claim.rows.size());
  stats.timed_out += claim.timed_out ? 1 : 0;
  stats.latency_s_total += latency_s;
  stats.latency_s_max = std::max(stats.latency_s_max, latency_s);
  stats.wait_s += wait_s;
  if (!claim.ranks.empty()) {
    stats.balanced_claims += 1;
    stats.imbalance_total += claim.imbalance;
    stats.imbalance_max = std::max(stats.imbalance_max, claim.imbalance);
  }
}

void DockController::return_rows_locked(const Lease& lease) {
  const uint64_t bit = uint64_t{1} << lease.consumer;
  for (RowId id : lease.rows) {
    auto it = rows_.find(id);
    if (it == rows_.end()) continue;
    it->second.leased &= ~bit;
    // The claimant it was dispatched to gave it up: any instance may take it now.
    it->second.info.target = -1;
    if (ready_for_locked(it->second, lease.consumer)) claimable_[lease.consumer].insert(id);
  }
}

void DockController::expire_leases_locked(TimePoint now) {
  bool returned = false;
  while (!lease_deadlines_.empty() && lease_deadlines_.begin()->first <= now) {
    const int64_t id = lease_deadlines_.begin()->second;
    lease_deadlines_.erase(lease_deadlines_.begin());
    auto it = leases_.find(id);
    if (it == leases_.end()) continue;
    return_rows_locked(it->second);
    leases_.erase(it);
    leases_expired_ += 1;
    returned = true;
  }
  // Other claimants may be waiting for exactly these rows.
  if (returned) ready_cv_.notify_all();
}

AckResult DockController::ack(int64_t lease) {
  AckResult result;
  {
    MutexLock lock(mutex_);
    expire_leases_locked(clock_.now());
    auto it = leases_.find(lease);
    if (it == leases_.end()) return result;
    const uint64_t bit = uint64_t{1} << it->second.consumer;
    for (RowId id : it->second.rows) {
      auto row = rows_.find(id);
      if (row == rows_.end()) continue;
      row->second.leased &= ~bit;
      row->second.consumed |= bit;
      if (row->second.consumed != all_consumers_mask_) continue;
      result.retired.push_back(retire_locked(row));
    }
    // Discarded and lost rows already left the lease: the rest is what was consumed.
    if (options_.hooks.acked) options_.hooks.acked(it->second.consumer, it->second.rows);
    lease_deadlines_.erase({it->second.deadline, lease});
    leases_.erase(it);
    result.acknowledged = true;
  }
  if (!result.retired.empty()) space_cv_.notify_all();
  return result;
}

RetiredRow DockController::retire_locked(std::unordered_map<RowId, RowState>::iterator row) {
  RetiredRow retired{row->first, {}};
  for (WarehouseId where : row->second.where) {
    if (where != kNoWarehouse && std::find(retired.warehouses.begin(), retired.warehouses.end(),
                                           where) == retired.warehouses.end()) {
      retired.warehouses.push_back(where);
    }
  }
  rows_.erase(row);
  rows_retired_ += 1;
  return retired;
}

bool DockController::release(int64_t lease) {
  {
    MutexLock lock(mutex_);
    auto it = leases_.find(lease);
    if (it == leases_.end()) return false;
    return_rows_locked(it->second);
    lease_deadlines_.erase({it->second.deadline, lease});
    leases_.erase(it);
  }
  ready_cv_.notify_all();
  return true;
}

bool DockController::renew(int64_t lease, double lease_s) {
  check_input(lease_s > 0, "lease_s " + std::to_string(lease_s), "dock renew",
              "a lease must last a positive time");
  MutexLock lock(mutex_);
  const auto now = clock_.now();
  expire_leases_locked(now);  // an expired lease's rows are gone: it cannot come back
  auto it = leases_.find(lease);
  if (it == leases_.end()) return false;
  lease_deadlines_.erase({it->second.deadline, lease});
  it->second.deadline = now + to_duration(lease_s);
  lease_deadlines_.emplace(it->second.deadline, lease);
  return true;
}

void DockController::update_info(const std::vector<RowId>& rows,
                                 const std::vector<RowInfo>& infos) {
  check_input(rows.size() == infos.size(),
              std::to_string(infos.size()) + " infos for " + std::to_string(rows.size()) + " rows",
              "dock update_info");
  bool version_changed = false;
  {
    MutexLock lock(mutex_);
    expire_leases_locked(clock_.now());
    // Every row is checked before any changes, so a bad call changes nothing.
    for (size_t i = 0; i < rows.size(); ++i) {
      auto it = rows_.find(rows[i]);
      const std::string row = "row " + std::to_string(rows[i]);
      check_input(it != rows_.end(), row + " is not live", "dock update_info",
                  "retired and discarded rows are gone");
      const RowInfo& had = it->second.info;
      const RowInfo& now = infos[i];
      // The target is not compared: the claimant's copy goes stale when its lease
      // expires (the target is cleared) or the row is retargeted, and update_info
      // never moves a row anyway.
      check_input(now.group_id == had.group_id && now.group_size == had.group_size,
                  row + ": group " + std::to_string(now.group_id) + " of " +
                      std::to_string(now.group_size) + ", the dock has group " +
                      std::to_string(had.group_id) + " of " + std::to_string(had.group_size),
                  "dock update_info", "only tokens and version may change");
      check_input(now.tokens >= 0, row + ": tokens " + std::to_string(now.tokens),
                  "dock update_info");
    }
    // Readiness depends on columns and consumer bits only, so the claimable sets hold.
    for (size_t i = 0; i < rows.size(); ++i) {
      RowInfo& info = rows_.at(rows[i]).info;
      version_changed |= info.version != infos[i].version;
      info.tokens = infos[i].tokens;
      info.version = infos[i].version;
    }
  }
  // A claimant's version window (or required window) may match now.
  if (version_changed) ready_cv_.notify_all();
}

void DockController::drop_from_leases_locked(const std::unordered_set<RowId>& rows) {
  for (auto& [id, lease] : leases_) {
    lease.rows.erase(std::remove_if(lease.rows.begin(), lease.rows.end(),
                                    [&](RowId row) { return rows.count(row) > 0; }),
                     lease.rows.end());
  }
}

std::vector<RetiredRow> DockController::discard(const std::vector<RowId>& rows, bool unleased_only) {
  std::vector<RetiredRow> retired;
  {
    MutexLock lock(mutex_);
    expire_leases_locked(clock_.now());
    std::unordered_set<RowId> leased;  // discarded rows some lease still holds
    for (RowId id : rows) {
      auto it = rows_.find(id);
      if (it == rows_.end()) continue;  // unknown, retired, or listed twice
      if (unleased_only && it->second.leased != 0) continue;  // its holder keeps it
      if (it->second.leased != 0) leased.insert(id);
      for (std::set<RowId>& pool : claimable_) pool.erase(id);
      retired.push_back(retire_locked(it));
    }
    // The leases stay valid (their ack succeeds) but no longer hold these rows.
    if (!leased.empty()) drop_from_leases_locked(leased);
    rows_discarded_ += static_cast<int64_t>(retired.size());
  }
  if (!retired.empty()) {
    space_cv_.notify_all();  // capacity freed
    ready_cv_.notify_all();  // a pending required group may be gone: a window completes
  }
  return retired;
}

std::vector<RetiredRow> DockController::retire_warehouse(WarehouseId warehouse) {
  std::vector<RetiredRow> lost;
  {
    MutexLock lock(mutex_);
    check_input(warehouse >= 0 && warehouse < static_cast<WarehouseId>(warehouses_.size()),
                "unregistered warehouse " + std::to_string(warehouse), "dock retire_warehouse");
    if (warehouse_dead_[warehouse]) return lost;
    warehouse_dead_[warehouse] = true;
    warehouses_[warehouse].clear();  // clients fail at once instead of timing out
    warehouses_retired_ += 1;
    expire_leases_locked(clock_.now());
    std::vector<RowId> doomed;
    for (const auto& [id, row] : rows_) {
      if (row.owner == warehouse ||
          std::find(row.where.begin(), row.where.end(), warehouse) != row.where.end()) {
        doomed.push_back(id);
      }
    }
    std::sort(doomed.begin(), doomed.end());  // allocation order, for a stable answer
    std::unordered_set<RowId> leased;
    for (RowId id : doomed) {
      auto it = rows_.find(id);
      if (it->second.leased != 0) leased.insert(id);
      for (std::set<RowId>& pool : claimable_) pool.erase(id);
      lost.push_back(retire_locked(it));
    }
    if (!leased.empty()) drop_from_leases_locked(leased);
    rows_lost_ += static_cast<int64_t>(lost.size());
  }
  if (!lost.empty()) {
    space_cv_.notify_all();
    ready_cv_.notify_all();
  }
  return lost;
}

int64_t DockController::retarget(int32_t from, int32_t to) {
  check_input(from >= -1 && to >= -1,
              "retarget from " + std::to_string(from) + " to " + std::to_string(to),
              "dock retarget", "targets are -1 (none) or an instance index");
  int64_t moved = 0;
  {
    MutexLock lock(mutex_);
    expire_leases_locked(clock_.now());
    for (auto& [id, row] : rows_) {
      // A leased row's claimant is still working on it where it was dispatched.
      if (row.info.target != from || row.leased != 0) continue;
      row.info.target = to;
      moved += 1;
    }
  }
  if (moved > 0 && from != to) ready_cv_.notify_all();  // the new target's claims match
  return moved;
}

ConsumerBacklog DockController::backlog(const std::string& consumer) {
  const int index = schema_.consumer_index(consumer);
  const uint64_t bit = uint64_t{1} << index;
  ConsumerBacklog backlog;
  MutexLock lock(mutex_);
  expire_leases_locked(clock_.now());
  std::unordered_set<int64_t> groups;
  for (const auto& [id, row] : rows_) {
    if (row.leased & bit) backlog.leased_rows += 1;
    if ((row.consumed | row.leased) & bit) continue;
    backlog.rows += 1;
    groups.insert(row.info.group_id);
  }
  backlog.groups = static_cast<int64_t>(groups.size());
  backlog.ready_rows = static_cast<int64_t>(claimable_[index].size());
  return backlog;
}

void DockController::post_status(const std::string& key, const std::string& value) {
  MutexLock lock(mutex_);
  expire_leases_locked(clock_.now());
  statuses_[key] = StatusPost{value, clock_.now()};
}

std::map<std::string, StatusEntry> DockController::statuses(const std::string& prefix) {
  std::map<std::string, StatusEntry> out;
  MutexLock lock(mutex_);
  const auto now = clock_.now();
  expire_leases_locked(now);
  // Keys with the prefix are one contiguous range of the ordered map.
  for (auto it = statuses_.lower_bound(prefix);
       it != statuses_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    out[it->first] = StatusEntry{it->second.value, seconds_between(it->second.posted, now)};
  }
  return out;
}

nlohmann::json DockController::metrics() {
  MutexLock lock(mutex_);
  expire_leases_locked(clock_.now());
  int64_t leased_rows = 0;  // rows held by open leases (a row leased by two consumers twice)
  for (const auto& [id, lease] : leases_) leased_rows += static_cast<int64_t>(lease.rows.size());
  nlohmann::json consumers = nlohmann::json::object();
  for (size_t c = 0; c < stats_.size(); ++c) {
    const ConsumerStats& s = stats_[c];
    consumers[schema_.consumers()[c].name] = {
        {"queue_depth", claimable_[c].size()},
        {"claims", s.claims},
        {"rows_claimed", s.rows_claimed},
        {"timed_out_claims", s.timed_out},
        {"claim_latency_s_mean", s.claims > 0 ? s.latency_s_total / s.claims : 0.0},
        {"claim_latency_s_max", s.latency_s_max},
        {"wait_s", s.wait_s},
        {"balanced_claims", s.balanced_claims},
        {"imbalance_mean", s.balanced_claims > 0 ? s.imbalance_total / s.balanced_claims : 0.0},
        {"imbalance_max", s.imbalance_max},
    };
  }
  return {{"live_rows", rows_.size()},
          {"leased_rows", leased_rows},
          {"capacity_rows", options_.capacity_rows},
          {"rows_allocated", rows_allocated_},
          {"rows_retired", rows_retired_},  // discarded and lost rows included
          {"rows_discarded", rows_discarded_},
          {"rows_lost", rows_lost_},  // retired with a dead warehouse (retire_warehouse)
          {"warehouses_retired", warehouses_retired_},
          {"statuses", statuses_.size()},
          {"open_leases", leases_.size()},
          {"leases_expired", leases_expired_},
          {"producer_wait_s", producer_wait_s_},
          {"warehouses", warehouses_.size()},
          {"consumers", consumers}};
}

}  // namespace aspen::dock
