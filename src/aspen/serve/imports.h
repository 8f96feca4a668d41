// aspen::serve's imports: the aspen modules that aspen_serve declares in the root
// CMakeLists.txt (PUBLIC_DEPS and PRIVATE_DEPS), and only those.
// Every header and source of src/aspen/serve/ includes this file.
// Inside aspen::serve these modules' names need no qualifier, and a name of a module
// outside its declared dependencies (and theirs: using-directives are transitive) does not compile,
// so the compiler, too, keeps the layering (tools/check_layers.py checks this list against
// CMake). util is the root namespace `aspen` (aspen::Error, check_input, log): every module
// sees it without an import. docs/design.md, "Namespaces".
#pragma once

namespace aspen::agent {}
namespace aspen::rollout {}
namespace aspen::tokenizer {}

namespace aspen::serve {
using namespace aspen::agent;
using namespace aspen::rollout;
using namespace aspen::tokenizer;
}  // namespace aspen::serve
