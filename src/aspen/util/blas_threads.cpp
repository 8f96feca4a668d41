#include "aspen/util/blas_threads.h"

#include <dlfcn.h>

namespace aspen {

bool set_blas_threads(int threads) {
  using SetThreads = void (*)(int);
  // Looked up at run time: Debian's libtorch reaches BLAS through the alternatives
  // system, so which library (and whether it has this entry point) is only known here.
  void* symbol = dlsym(RTLD_DEFAULT, "openblas_set_num_threads");
  if (symbol == nullptr) return false;
  reinterpret_cast<SetThreads>(symbol)(threads);
  return true;
}

int blas_threads() {
  using GetThreads = int (*)();
  void* symbol = dlsym(RTLD_DEFAULT, "openblas_get_num_threads");
  return symbol == nullptr ? 0 : reinterpret_cast<GetThreads>(symbol)();
}

}  // namespace aspen
