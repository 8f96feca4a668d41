# Third-party dependencies. Every one is a Debian package installed by scripts/setup.
find_package(Torch REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(CLI11 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
pkg_check_modules(ZMQ REQUIRED IMPORTED_TARGET libzmq)  # cppzmq is header-only on top
find_package(Threads REQUIRED)

# Torch's CMake config exports plain variables; wrap them in one target so modules
# can say TORCH like any other dependency. TORCH_CXX_FLAGS carries the ABI flag and,
# on Debian, USE_C10D_GLOO / USE_DISTRIBUTED.
add_library(TORCH INTERFACE IMPORTED)
target_link_libraries(TORCH INTERFACE ${TORCH_LIBRARIES} Threads::Threads)
target_include_directories(TORCH SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
separate_arguments(ASPEN_TORCH_CXX_FLAGS UNIX_COMMAND "${TORCH_CXX_FLAGS}")
target_compile_options(TORCH INTERFACE ${ASPEN_TORCH_CXX_FLAGS})
