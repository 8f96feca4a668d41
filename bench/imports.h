// aspen::bench's imports: every aspen module, as aspen_bench links the aspen
// library (all modules).
// Every header and source of bench/ includes this file.
// Inside aspen::bench these modules' names need no qualifier, and a name of a module
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
namespace aspen::kernels {}
namespace aspen::model {}
namespace aspen::parallel {}
namespace aspen::pipeline {}
namespace aspen::report {}
namespace aspen::reward {}
namespace aspen::rollout {}
namespace aspen::serve {}
namespace aspen::sim {}
namespace aspen::tasks {}
namespace aspen::tokenizer {}
namespace aspen::train {}

namespace aspen::bench {
using namespace aspen::agent;
using namespace aspen::algo;
using namespace aspen::config;
using namespace aspen::dock;
using namespace aspen::io;
using namespace aspen::kernels;
using namespace aspen::model;
using namespace aspen::parallel;
using namespace aspen::pipeline;
using namespace aspen::report;
using namespace aspen::reward;
using namespace aspen::rollout;
using namespace aspen::serve;
using namespace aspen::sim;
using namespace aspen::tasks;
using namespace aspen::tokenizer;
using namespace aspen::train;
}  // namespace aspen::bench
