// aspen::config's imports: the aspen modules that aspen_config declares in the root
// CMakeLists.txt (PUBLIC_DEPS and PRIVATE_DEPS), and only those.
// Every header and source of src/aspen/config/ includes this file.
// Inside aspen::config these modules' names need no qualifier, and a name of a module
// outside its declared dependencies (and theirs: using-directives are transitive) does not compile,
// so the compiler, too, keeps the layering (tools/check_layers.py checks this list against
// CMake). util is the root namespace `aspen` (aspen::Error, check_input, log): every module
// sees it without an import. docs/design.md, "Namespaces".
#pragma once

namespace aspen::algo {}
namespace aspen::model {}
namespace aspen::parallel {}
namespace aspen::train {}

namespace aspen::config {
using namespace aspen::algo;
using namespace aspen::model;
using namespace aspen::parallel;
using namespace aspen::train;
}  // namespace aspen::config
