#include "aspen/report/finite_metrics.h"

#include <cmath>

#include "aspen/report/imports.h"
#include "aspen/util/error.h"

namespace aspen::report {
namespace {

void check_finite_at(const nlohmann::json& value, const std::string& path, const std::string& where) {
  if (value.is_number_float()) {
    const double number = value.get<double>();
    check_input(std::isfinite(number),
                "metric " + path + " is " + std::to_string(number) +
                    ", which JSON cannot hold (it would be written as null)",
                where, "a reward, loss or statistic overflowed or divided by zero");
  } else if (value.is_object()) {
    for (const auto& [key, item] : value.items()) {
      check_finite_at(item, path.empty() ? key : path + "." + key, where);
    }
  } else if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) {
      check_finite_at(value[i], path + "[" + std::to_string(i) + "]", where);
    }
  }
}

}  // namespace

void check_finite_metrics(const nlohmann::json& metrics, const std::string& where) {
  check_finite_at(metrics, "", where);
}

}  // namespace aspen::report
