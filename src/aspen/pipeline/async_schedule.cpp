#include "aspen/pipeline/schedule.h"
#include "aspen/util/error.h"

namespace aspen {

std::unique_ptr<Schedule> make_async_schedule(const ScheduleContext&) {
  throw Error("the async schedule is not available yet", "pipeline.mode", "use sync");
}

}  // namespace aspen
