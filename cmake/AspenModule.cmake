# aspen_module(<name> [PUBLIC_DEPS <targets...>] [PRIVATE_DEPS <targets...>])
#   Static library aspen_<name> from src/aspen/<name>/*.cpp. Headers are included
#   as "aspen/<name>/<file>.h" from src/.
#   PUBLIC_DEPS: what the module's headers include, so every user of the module needs
#   it too. PRIVATE_DEPS: what only its .cpp files include. Static libraries still link
#   their PRIVATE dependencies into whoever links them (CMake adds them as LINK_ONLY);
#   PRIVATE keeps their usage requirements (include folders, definitions) out of the
#   users' compiles. Every module shares src/ as include folder, so the compiler would
#   not notice an undeclared aspen include: tools/check_layers.py (CTest test `layers`)
#   checks both lists against the includes.
#
# aspen_use_torch_pch(<target>)
#   Compile <target> with the shared torch precompiled header: torch's headers cost
#   ~15 s per translation unit without it.

set(ASPEN_WARNINGS -Wall -Wextra -Wno-unused-parameter)

add_library(aspen_torch_pch STATIC ${CMAKE_CURRENT_LIST_DIR}/torch_pch.cpp)
target_link_libraries(aspen_torch_pch PUBLIC TORCH)
target_precompile_headers(aspen_torch_pch PRIVATE <torch/torch.h>)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_LAUNCHER)
  target_compile_options(aspen_torch_pch PUBLIC -fpch-preprocess)
endif()

function(aspen_use_torch_pch target)
  target_link_libraries(${target} PRIVATE aspen_torch_pch)
  target_precompile_headers(${target} REUSE_FROM aspen_torch_pch)
endfunction()

function(aspen_module name)
  cmake_parse_arguments(ARG "" "" "PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "aspen_module(${name}): unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  file(GLOB sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/aspen/${name}/*.cpp)
  if(NOT sources)
    # A module whose sources are not written yet is header-only for now: its headers
    # are all it has, so every dependency is its users'.
    add_library(aspen_${name} INTERFACE)
    target_include_directories(aspen_${name} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(aspen_${name} INTERFACE ${ARG_PUBLIC_DEPS} ${ARG_PRIVATE_DEPS})
    return()
  endif()
  add_library(aspen_${name} STATIC ${sources})
  target_include_directories(aspen_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(aspen_${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  target_compile_options(aspen_${name} PRIVATE ${ASPEN_WARNINGS})
  if("TORCH" IN_LIST ARG_PUBLIC_DEPS OR "TORCH" IN_LIST ARG_PRIVATE_DEPS)
    aspen_use_torch_pch(aspen_${name})
  endif()
endfunction()
