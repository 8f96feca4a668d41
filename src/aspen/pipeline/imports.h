// aspen::pipeline's imports: the aspen modules that aspen_pipeline declares in the root
// CMakeLists.txt (PUBLIC_DEPS and PRIVATE_DEPS), and only those.
// Every header and source of src/aspen/pipeline/ includes this file.
// Inside aspen::pipeline these modules' names need no qualifier, and a name of a module
// outside its declared dependencies (and theirs: using-directives are transitive) does not compile,
// so the compiler, too, keeps the layering (tools/check_layers.py checks this list against
// CMake). util is the root namespace `aspen` (aspen::Error, check_input, log): every module
// sees it without an import. docs/design.md, "Namespaces".
#pragma once

namespace aspen::agent {}
namespace aspen::algo {}
namespace aspen::config {}
namespace aspen::dock {}
namespace aspen::io {}
namespace aspen::model {}
namespace aspen::parallel {}
namespace aspen::report {}
namespace aspen::reward {}
namespace aspen::rollout {}
namespace aspen::serve {}
namespace aspen::tasks {}
namespace aspen::tokenizer {}
namespace aspen::train {}

namespace aspen::pipeline {
using namespace aspen::agent;
using namespace aspen::algo;
using namespace aspen::config;
using namespace aspen::dock;
using namespace aspen::io;
using namespace aspen::model;
using namespace aspen::parallel;
using namespace aspen::report;
using namespace aspen::reward;
using namespace aspen::rollout;
using namespace aspen::serve;
using namespace aspen::tasks;
using namespace aspen::tokenizer;
using namespace aspen::train;
}  // namespace aspen::pipeline
