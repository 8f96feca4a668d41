// aspen::sim's imports: the aspen modules that aspen_sim declares in the root
// CMakeLists.txt (PUBLIC_DEPS and PRIVATE_DEPS), and only those.
// Every header and source of src/aspen/sim/ includes this file.
// Inside aspen::sim these modules' names need no qualifier, and a name of a module
// outside its declared dependencies (and theirs: using-directives are transitive) does not compile,
// so the compiler, too, keeps the layering (tools/check_layers.py checks this list against
// CMake). util is the root namespace `aspen` (aspen::Error, check_input, log): every module
// sees it without an import. docs/design.md, "Namespaces".
#pragma once

namespace aspen::config {}
namespace aspen::dock {}
namespace aspen::io {}
namespace aspen::pipeline {}
namespace aspen::report {}
namespace aspen::rollout {}

namespace aspen::sim {
using namespace aspen::config;
using namespace aspen::dock;
using namespace aspen::io;
using namespace aspen::pipeline;
using namespace aspen::report;
using namespace aspen::rollout;
}  // namespace aspen::sim
