#include "aspen/dock/schema.h"

#include <set>

#include "aspen/dock/imports.h"
#include "aspen/util/error.h"

namespace aspen::dock {

DockSchema::DockSchema(std::vector<ColumnSpec> columns, std::vector<ConsumerSpec> consumers)
    : columns_(std::move(columns)), consumers_(std::move(consumers)) {
  check_input(!columns_.empty(), "schema has no columns", "dock schema");
  check_input(!consumers_.empty(), "schema has no consumers", "dock schema",
              "a row retires when every consumer consumed it; declare at least one");
  check_input(static_cast<int>(consumers_.size()) <= kMaxConsumers,
              "schema has " + std::to_string(consumers_.size()) + " consumers, the limit is " +
                  std::to_string(kMaxConsumers),
              "dock schema");
  std::set<std::string> seen;
  for (const ColumnSpec& column : columns_) {
    check_input(!column.name.empty(), "column with an empty name", "dock schema");
    check_input(seen.insert(column.name).second, "duplicate column '" + column.name + "'",
                "dock schema");
  }
  seen.clear();
  for (const ConsumerSpec& consumer : consumers_) {
    check_input(!consumer.name.empty(), "consumer with an empty name", "dock schema");
    check_input(seen.insert(consumer.name).second, "duplicate consumer '" + consumer.name + "'",
                "dock schema");
    check_input(!consumer.columns.empty(), "consumer '" + consumer.name + "' needs no column",
                "dock schema");
    std::vector<int> needed;
    for (const std::string& name : consumer.columns) needed.push_back(column_index(name));
    needed_.push_back(std::move(needed));
  }
}

int DockSchema::column_index(const std::string& name) const {
  for (size_t i = 0; i < columns_.size(); ++i) {
    if (columns_[i].name == name) return static_cast<int>(i);
  }
  throw Error("unknown column '" + name + "'", "dock schema");
}

int DockSchema::consumer_index(const std::string& name) const {
  for (size_t i = 0; i < consumers_.size(); ++i) {
    if (consumers_[i].name == name) return static_cast<int>(i);
  }
  throw Error("unknown consumer '" + name + "'", "dock schema");
}

}  // namespace aspen::dock
