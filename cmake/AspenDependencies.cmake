# Third-party dependencies: Debian packages and the torch wheel, all installed by
# scripts/setup.

# --- The offline bundle (scripts/gpu-bundle, unpacked by scripts/gpu-check) ----------
# ASPEN_BUNDLE names an install prefix holding every C++ library below, for a machine
# without Debian's -dev packages and without network (a GPU image). Its CMake configs
# and .pc files are found first; its pkgconf is CMake's pkg-config, since the image may
# have none. Unset (the normal build), nothing here changes.
set(ASPEN_BUNDLE "" CACHE PATH "Install prefix of scripts/gpu-bundle's libraries (empty: the system's)")
if(ASPEN_BUNDLE)
  if(NOT EXISTS "${ASPEN_BUNDLE}/include/yaml-cpp/yaml.h")
    message(FATAL_ERROR "ASPEN_BUNDLE=${ASPEN_BUNDLE} is not an unpacked gpu-bundle prefix "
                        "(no include/yaml-cpp/yaml.h): see scripts/gpu-bundle")
  endif()
  list(PREPEND CMAKE_PREFIX_PATH "${ASPEN_BUNDLE}")
  # The bundle keeps Debian's multiarch layout (lib/x86_64-linux-gnu/, where its CMake
  # configs compute their prefix from); CMake searches it only where it knows the
  # architecture, which it does not on distributions without multiarch.
  if(NOT CMAKE_LIBRARY_ARCHITECTURE)
    set(CMAKE_LIBRARY_ARCHITECTURE x86_64-linux-gnu)
  endif()
  set(PKG_CONFIG_EXECUTABLE "${ASPEN_BUNDLE}/bin/pkgconf" CACHE FILEPATH "" FORCE)
endif()

# --- Torch: the PyPI wheel in scripts/setup's virtualenv ------------------------------
# ASPEN_PYTHON names the Python whose torch Aspen builds against. By default it is the
# virtualenv scripts/setup made, found from the same hash of the pinned requirements
# (scripts/venv-path); scripts/gpu-check passes a machine's own CUDA Python instead.
set(ASPEN_PYTHON "" CACHE FILEPATH "Python whose torch Aspen builds against (default: scripts/setup's virtualenv)")
if(NOT ASPEN_PYTHON)
  if(DEFINED ENV{ASPEN_VENV} AND NOT "$ENV{ASPEN_VENV}" STREQUAL "")
    set(aspen_venv "$ENV{ASPEN_VENV}")
  else()
    file(SHA256 ${PROJECT_SOURCE_DIR}/tools/python/requirements.txt aspen_requirements_hash)
    string(SUBSTRING "${aspen_requirements_hash}" 0 16 aspen_requirements_hash)
    set(aspen_venv "$ENV{HOME}/.cache/aspen/venv-${aspen_requirements_hash}")
  endif()
  if(NOT EXISTS "${aspen_venv}/bin/python")
    message(FATAL_ERROR "no torch virtualenv at ${aspen_venv}: run scripts/setup first "
                        "(or pass -DASPEN_PYTHON=/path/to/python that has torch)")
  endif()
  set(ASPEN_PYTHON "${aspen_venv}/bin/python" CACHE FILEPATH "" FORCE)
endif()
execute_process(
  COMMAND "${ASPEN_PYTHON}" -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
  OUTPUT_VARIABLE aspen_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
  ERROR_VARIABLE aspen_torch_error RESULT_VARIABLE aspen_torch_status)
if(NOT aspen_torch_status EQUAL 0)
  message(FATAL_ERROR "ASPEN_PYTHON=${ASPEN_PYTHON} cannot import torch: ${aspen_torch_error}")
endif()
list(PREPEND CMAKE_PREFIX_PATH "${aspen_torch_prefix}")

# The wheel is CUDA-enabled, so torch's config describes its CUDA libraries through
# the installed toolkit: nvcc from PATH or /usr/local/cuda. No GPU is needed to
# configure or build. The architecture list only matters for CUDA sources compiled
# here; without a GPU torch cannot detect one, so it is stated.
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
  find_program(aspen_nvcc nvcc HINTS /usr/local/cuda/bin)
  if(aspen_nvcc)
    set(CMAKE_CUDA_COMPILER "${aspen_nvcc}" CACHE FILEPATH "" FORCE)
  endif()
endif()
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST "8.0;9.0" CACHE STRING "CUDA architectures for CUDA sources")
endif()
find_package(Torch 2.10 REQUIRED)

find_package(nlohmann_json 3 REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(CLI11 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
pkg_check_modules(ZMQ REQUIRED IMPORTED_TARGET libzmq)  # cppzmq is header-only on top
# cpp-httplib (Debian's libcpp-httplib-dev, with TLS): the http reward's client.
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
# zstd (Debian's libzstd-dev): the dock's weight deltas (dock/weight_delta.h).
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
find_package(Threads REQUIRED)

# Torch's CMake config exports plain variables; wrap them in one target so modules
# can say TORCH like any other dependency. TORCH_CXX_FLAGS carries the ABI flag.
add_library(TORCH INTERFACE IMPORTED)
target_link_libraries(TORCH INTERFACE ${TORCH_LIBRARIES} Threads::Threads)
target_include_directories(TORCH SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
separate_arguments(ASPEN_TORCH_CXX_FLAGS UNIX_COMMAND "${TORCH_CXX_FLAGS}")
target_compile_options(TORCH INTERFACE ${ASPEN_TORCH_CXX_FLAGS})
# libstdc++ ahead of libtorch in every torch-linked binary's lookup scope. torch 2.11's
# libtorch.so (the PyPI wheel, +cu130: the GPU image's torch) exports 64 std::filesystem
# functions of its own, without needing libstdc++.so; linked before libstdc++ (which the
# compiler adds last), they interpose on Aspen's calls, and their remove_all jumps to
# address 0: `aspen bench pipeline` segfaulted in the rehearsal (docs/gpu-check.md).
# Named first on the link line, libstdc++ is found first. torch 2.15 exports none of
# them; there this changes only the order of the NEEDED entries.
target_link_options(TORCH INTERFACE "SHELL:LINKER:--push-state,--no-as-needed -lstdc++ LINKER:--pop-state")
if(ASPEN_BUNDLE)
  # torch's c10d/ProcessGroupGloo.hpp includes gloo/*.h, which the wheel lacks; the
  # system build finds Debian's in /usr/include.
  target_include_directories(TORCH SYSTEM INTERFACE "${ASPEN_BUNDLE}/include")
endif()
# OpenMP, as torch itself is built: ATen's at::parallel_for is a header template that
# only forks when the including translation unit defines _OPENMP. Without -fopenmp every
# at::parallel_for in Aspen's own kernels (paged attention, RMSNorm, RoPE, the
# small-batch linear) ran on one thread whatever --threads said. The runtime is the
# wheel's libgomp.so.1 (torch/lib, first on the run path), the one torch's pool uses, so
# at::set_num_threads governs both.
find_package(OpenMP REQUIRED COMPONENTS CXX)
target_link_libraries(TORCH INTERFACE OpenMP::OpenMP_CXX)

# The wheel's CUDA libraries (site-packages/nvidia/*/lib: cudart, cuBLAS, NCCL, cuDNN
# of the CUDA release torch was built with) come first, at link time and at run time.
# Torch's config also names the installed toolkit's cudart and nvrtc, and the toolkit's
# lib folder holds an older NCCL: found first, it leaves libtorch_cuda's newer NCCL
# symbols undefined at link time, and a cudart older than torch's would be loaded for
# every library at run time.
get_filename_component(aspen_torch_lib_dir "${TORCH_LIBRARY}" DIRECTORY)
file(GLOB aspen_wheel_cuda_dirs LIST_DIRECTORIES true "${aspen_torch_lib_dir}/../../nvidia/*/lib")
# nccl.h of the NCCL libtorch_cuda links (the wheel's nvidia-nccl package): the
# toolkit's older nccl.h would give ProcessGroupNCCL (parallel/process_group.cpp) a
# different layout. Found when the wheel has it; the toolkit's otherwise.
find_path(ASPEN_NCCL_INCLUDE_DIR nccl.h
  HINTS "${aspen_torch_lib_dir}/../../nvidia/nccl/include" NO_DEFAULT_PATH)
if(aspen_wheel_cuda_dirs)
  string(JOIN ":" aspen_wheel_cuda_path ${aspen_wheel_cuda_dirs})
  target_link_options(TORCH INTERFACE "LINKER:-rpath-link,${aspen_wheel_cuda_path}"
                      "LINKER:-rpath,${aspen_wheel_cuda_path}")
endif()
