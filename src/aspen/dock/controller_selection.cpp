// DockController's row selection for a claim: which ready rows of a consumer a claim
// takes (whole groups, token balance over ranks, the version window) and, with a
// required window, the groups it must wait for. controller.h states the contract;
// this file holds one concept of the controller, the choice of rows, apart from its
// bookkeeping (leases, acks, retirement) in controller.cpp.
#include "aspen/dock/controller.h"
#include "aspen/dock/imports.h"

#include <algorithm>
#include <limits>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "aspen/dock/token_balance.h"
#include "aspen/util/error.h"

namespace aspen::dock {
namespace {

// The row filters of a claim. Scope (groups, target) says which rows the claim may
// ever take; the version window may still change (update_info), so the required
// window counts a required group outside it as pending, not as out of scope.
class ClaimFilter {
 public:
  explicit ClaimFilter(const ClaimOptions& options)
      : options_(options), groups_(options.groups.begin(), options.groups.end()) {}
  bool in_scope(const RowInfo& info) const {
    const bool target_ok = options_.target < 0 || info.target < 0 || info.target == options_.target;
    return target_ok && (groups_.empty() || groups_.count(info.group_id) > 0);
  }
  bool in_window(const RowInfo& info) const {
    return info.version >= options_.min_version && info.version <= options_.max_version;
  }

 private:
  const ClaimOptions& options_;
  const std::unordered_set<int64_t> groups_;
};

}  // namespace

DockController::Selection DockController::select_locked(int consumer,
                                                        const ClaimOptions& options) const {
  if (requires_window(options)) return select_window_locked(consumer, options);
  const std::set<RowId>& pool = claimable_[consumer];
  Selection selection;
  std::vector<RowId>& picked = selection.rows;
  const auto max_rows = static_cast<size_t>(options.max_rows);
  const ClaimFilter filter(options);
  // Groups: members in visiting order, groups in order of their first member.
  std::unordered_map<int64_t, std::vector<RowId>> members;
  std::vector<int64_t> group_order;
  auto visit = [&](RowId id) REQUIRES(mutex_) {
    const RowInfo& info = rows_.at(id).info;
    if (!filter.in_scope(info) || !filter.in_window(info)) return true;
    if (!options.whole_groups) {
      picked.push_back(id);
      return picked.size() < max_rows;
    }
    auto [it, inserted] = members.try_emplace(info.group_id);
    if (inserted) group_order.push_back(info.group_id);
    it->second.push_back(id);
    return true;
  };
  if (options.oldest_first) {
    for (auto it = pool.begin(); it != pool.end() && visit(*it); ++it) {
    }
  } else {
    for (auto it = pool.rbegin(); it != pool.rend() && visit(*it); ++it) {
    }
  }
  if (options.whole_groups) {
    for (int64_t group : group_order) {
      const std::vector<RowId>& rows = members[group];
      const auto size = static_cast<size_t>(rows_.at(rows.front()).info.group_size);
      if (rows.size() == size && picked.size() + size <= max_rows) {
        picked.insert(picked.end(), rows.begin(), rows.end());
      }
    }
  }
  selection.satisfied = static_cast<int64_t>(picked.size()) >= options.min_rows;
  return selection;
}

std::vector<DockController::GroupTally> DockController::tally_groups_locked(
    int consumer, const ClaimOptions& options) const {
  const uint64_t bit = uint64_t{1} << consumer;
  const ClaimFilter filter(options);
  std::unordered_map<int64_t, GroupTally> by_group;
  std::unordered_set<int64_t> out_of_scope;  // a row of the group is not this claim's
  for (const auto& [id, row] : rows_) {
    if ((row.consumed | row.leased) & bit) continue;
    const RowInfo& info = row.info;
    if (!filter.in_scope(info)) {
      out_of_scope.insert(info.group_id);
      continue;
    }
    GroupTally& group = by_group[info.group_id];
    group.size = info.group_size;
    group.min_version = std::min(group.min_version, info.version);
    group.first_row = std::min(group.first_row, id);
    if (filter.in_window(info) && claimable_[consumer].count(id) > 0) group.ready.push_back(id);
  }
  std::vector<GroupTally> groups;
  for (auto& [group_id, group] : by_group) {
    if (out_of_scope.count(group_id) > 0) continue;
    std::sort(group.ready.begin(), group.ready.end());
    groups.push_back(std::move(group));
  }
  // (version, row id): the stalest groups first, then allocation order.
  std::sort(groups.begin(), groups.end(), [](const GroupTally& a, const GroupTally& b) {
    return std::tie(a.min_version, a.first_row) < std::tie(b.min_version, b.first_row);
  });
  return groups;
}

DockController::Selection DockController::select_window_locked(int consumer,
                                                               const ClaimOptions& options) const {
  const std::vector<GroupTally> groups = tally_groups_locked(consumer, options);
  Selection selection;
  std::vector<const GroupTally*> optional_groups;
  for (const GroupTally& group : groups) {
    const bool required = group.min_version <= options.required_through_version;
    if (!group.claimable()) {
      if (required) selection.pending_required_rows += group.size;
      continue;
    }
    if (required) {
      // Even past max_rows: the staleness bound outranks the batch size.
      selection.rows.insert(selection.rows.end(), group.ready.begin(), group.ready.end());
    } else {
      optional_groups.push_back(&group);
    }
  }
  // Fill, keeping room for every pending required group: it must fit when it is ready.
  for (const GroupTally* group : optional_groups) {
    const auto taken = static_cast<int64_t>(selection.rows.size());
    if (taken + group->size + selection.pending_required_rows <= options.max_rows) {
      selection.rows.insert(selection.rows.end(), group->ready.begin(), group->ready.end());
    } else {
      selection.ready_rows_left += group->size;
    }
  }
  const bool enough = static_cast<int64_t>(selection.rows.size()) >= options.min_rows;
  selection.satisfied =
      enough && (!options.complete_window || selection.pending_required_rows == 0);
  // An answer that takes nothing leaves every claimable row.
  if (!selection.satisfied)
    selection.ready_rows_left += static_cast<int64_t>(selection.rows.size());
  return selection;
}

}  // namespace aspen::dock
