#include "aspen/parallel/compute_threads.h"

#include <ATen/Parallel.h>

#include "aspen/parallel/imports.h"
#include "aspen/util/blas_threads.h"
#include "aspen/util/error.h"

namespace aspen::parallel {

void set_compute_threads(int threads, const std::string& where) {
  check_input(threads >= 0, "must be >= 0 (0: leave the thread pools as they are)", where);
  if (threads == 0) return;
  at::set_num_threads(threads);
  set_blas_threads(threads);
}

}  // namespace aspen::parallel
