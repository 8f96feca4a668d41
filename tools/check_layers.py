#!/usr/bin/env python3
"""The build's module layering, checked against the includes (CTest test `layers`, label
`lint`, so CI fails on an undeclared include).

A module is src/aspen/<name>/, declared in the root CMakeLists.txt as
`aspen_module(<name> PUBLIC_DEPS ... PRIVATE_DEPS ...)`. Every module shares src/ as its
include folder, so the compiler accepts any `#include "aspen/<other>/..."`: this script
is what keeps the declarations true. For each module:

  - every aspen module its sources include is declared, PUBLIC or PRIVATE;
  - a module one of its headers includes is PUBLIC (its users compile that header);
  - a PUBLIC module that only .cpp files include should be PRIVATE, and a declared
    module nothing includes should go;
  - a library of THIRD_PARTY (below) that a header includes reaches the module's users:
    declared PUBLIC, or PUBLIC in a module it declares PUBLIC (and so on down); one it
    declares PUBLIC that no header includes should be PRIVATE. (A PRIVATE library
    nothing includes is allowed: TORCH gives a module torch's precompiled header.)
  - the declared dependencies form no cycle.
  - a header named *_internal.h is the module's own (a class its sources share): its
    includes count as a source's, and no file outside the module may include it.

`cli` is the executable: it links the `aspen` library (every module listed there) and
`bench/`; it may include those. `bench/` links `aspen` too and never includes `cli` (cli
links bench: a cycle). A test target (tests/CMakeLists.txt: `aspen_test(<m> DEPS ...)`,
built from tests/<m>/*.cpp, and the extra targets and sources wired there by name) may
include the modules it links and those they declare PUBLIC, again down the chain; the
test-local headers it includes (tests/support/, fixtures of other test folders) count
as its own.

Namespaces (docs/design.md, "Namespaces"): util is the root namespace `aspen`; every other
module M, cli and bench put their code in `aspen::M`, and M's one imports header
(src/aspen/M/imports.h, bench/imports.h) makes exactly its declared aspen modules visible
there (`using namespace aspen::D;`), so the compiler refuses the names of the others. Checked:

  - each module's imports.h imports exactly the aspen modules it declares (PUBLIC or
    PRIVATE; util is the root and needs no import); cli's and bench's import every module
    of the aspen library they link, and cli's bench too;
  - every header and source of the module (of cli, of bench) includes its imports.h;
  - no source of a module other than util opens `namespace aspen {`: its code belongs in
    `aspen::M` (anonymous and nested namespaces inside that are fine).

Prints one line per problem and exits 1 when there is any; 0 and a summary otherwise.
Reads files only (about 0.1 s).
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src", "aspen")
TESTS = os.path.join(ROOT, "tests")
INCLUDE = re.compile(r'^\s*#\s*include\s+([<"])([^>"]+)[>"]', re.M)
SOURCE_SUFFIXES = (".h", ".cpp", ".cu", ".cuh")
HEADER_SUFFIXES = (".h", ".cuh")
INTERNAL_SUFFIX = "_internal.h"  # a module's private header (see the docstring)

# CMake target -> the include prefixes that mean a source uses it.
THIRD_PARTY = {
    "TORCH": ("torch/", "ATen/", "c10/"),
    "nlohmann_json::nlohmann_json": ("nlohmann/",),
    "yaml-cpp": ("yaml-cpp/",),
    "PkgConfig::ZMQ": ("zmq.h", "zmq.hpp"),
    "PkgConfig::HTTPLIB": ("httplib.h",),
    "PkgConfig::PCRE2": ("pcre2.h",),
    "PkgConfig::UTF8PROC": ("utf8proc.h",),
    "PkgConfig::ZSTD": ("zstd.h",),
}


def rel(path):
    return os.path.relpath(path, ROOT)


def strip_comments(text):
    return re.sub(r"#[^\n]*", "", text)


def declared_modules():
    """{module: (public targets, private targets)} from the aspen_module(...) calls."""
    text = strip_comments(open(os.path.join(ROOT, "CMakeLists.txt")).read())
    deps = {}
    for name, args in re.findall(r"\baspen_module\((\w+)([^)]*)\)", text):
        lists = {"PUBLIC_DEPS": [], "PRIVATE_DEPS": []}
        current = None
        for word in args.split():
            if word in lists:
                current = word
            elif current is None:
                raise SystemExit("CMakeLists.txt: aspen_module(%s): %s before PUBLIC_DEPS or "
                                 "PRIVATE_DEPS" % (name, word))
            else:
                lists[current].append(word)
        deps[name] = (lists["PUBLIC_DEPS"], lists["PRIVATE_DEPS"])
    return deps


def module_of(target):
    return target[len("aspen_"):] if target.startswith("aspen_") else None


def includes(path):
    """[(is_quoted, included path)] of one file."""
    return [(q == '"', inc) for q, inc in INCLUDE.findall(open(path, errors="replace").read())]


def aspen_module_of(include):
    parts = include.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "aspen" else None


def third_party_of(include):
    return [t for t, prefixes in THIRD_PARTY.items() if include.startswith(prefixes)]


def source_files(folder):
    return sorted(os.path.join(folder, f) for f in os.listdir(folder)
                  if f.endswith(SOURCE_SUFFIXES) and os.path.isfile(os.path.join(folder, f)))


def public_closure(start, deps):
    """Targets reachable from `start` (targets) through PUBLIC dependencies, start included."""
    seen, stack = set(), list(start)
    while stack:
        target = stack.pop()
        if target in seen:
            continue
        seen.add(target)
        module = module_of(target)
        if module in deps:
            stack.extend(deps[module][0])
    return seen


def check_module(module, deps, problems):
    public, private = deps[module]
    public_modules = {module_of(t) for t in public if module_of(t)}
    private_modules = {module_of(t) for t in private if module_of(t)}
    by_header, by_source = {}, {}  # module or library -> first file including it
    for path in source_files(os.path.join(SRC, module)):
        public_header = path.endswith(HEADER_SUFFIXES) and not path.endswith(INTERNAL_SUFFIX)
        into = by_header if public_header else by_source
        for _, inc in includes(path):
            for used in [aspen_module_of(inc)] + third_party_of(inc):
                if used and used != module:
                    into.setdefault(used, path)
    name = "aspen_" + module
    first = dict(by_source)
    first.update(by_header)  # a header's include names the file when there is one
    for used, path in sorted(first.items()):
        if used in THIRD_PARTY:
            continue
        if used not in public_modules | private_modules:
            problems.append("%s: includes aspen/%s/ but %s declares no aspen_%s"
                            % (rel(path), used, name, used))
        elif used in by_header and used in private_modules:
            problems.append("%s: a header includes aspen/%s/, so %s must declare aspen_%s PUBLIC"
                            % (rel(path), used, name, used))
    for dep in sorted(public_modules | private_modules):
        if dep not in by_header and dep not in by_source:
            problems.append("CMakeLists.txt: %s declares aspen_%s, which none of its sources "
                            "include" % (name, dep))
        elif dep in public_modules and dep not in by_header:
            problems.append("CMakeLists.txt: %s declares aspen_%s PUBLIC, but only .cpp files "
                            "include it (%s): make it PRIVATE"
                            % (name, dep, rel(by_source[dep])))
    reachable = public_closure(public, deps)
    for library in sorted(set(by_header) & set(THIRD_PARTY)):
        if library not in reachable:
            problems.append("%s: a header includes %s's headers, so %s must get %s PUBLIC "
                            "(itself or through a PUBLIC module)"
                            % (rel(by_header[library]), library, name, library))
    for library in sorted(set(public) & set(THIRD_PARTY)):
        if library not in by_header:
            problems.append("CMakeLists.txt: %s declares %s PUBLIC, but no header of it "
                            "includes it: make it PRIVATE" % (name, library))


def cycle(deps):
    edges = {m: {module_of(t) for t in pub + priv if module_of(t)} for m, (pub, priv) in deps.items()}
    state = {}

    def visit(m, stack):
        state[m] = "open"
        for d in sorted(edges.get(m, ())):
            if state.get(d) == "open":
                return stack + [m, d]
            if d not in state:
                found = visit(d, stack + [m])
                if found:
                    return found
        state[m] = "done"
        return None

    for m in sorted(edges):
        if m not in state:
            found = visit(m, [])
            if found:
                return found
    return None


def umbrella_modules():
    """The modules the `aspen` INTERFACE library (what cli and bench link) lists."""
    text = strip_comments(open(os.path.join(ROOT, "CMakeLists.txt")).read())
    found = re.search(r"target_link_libraries\(aspen\s+INTERFACE([^)]*)\)", text)
    return {module_of(t) for t in (found.group(1).split() if found else []) if module_of(t)}


def check_users(files, allowed, who, problems, forbidden_reason=None):
    """Aspen includes of `files` (and of the test-local headers they include) must be in
    `allowed`."""
    seen, reported = set(), set()
    queue = list(files)
    while queue:
        path = queue.pop()
        if path in seen:
            continue
        seen.add(path)
        for quoted, inc in includes(path):
            used = aspen_module_of(inc)
            if used:
                if used not in allowed and (path, used) not in reported:
                    reported.add((path, used))
                    problems.append("%s: includes aspen/%s/, which %s does not link%s"
                                    % (rel(path), used, who, forbidden_reason(used)
                                       if forbidden_reason else ""))
                continue
            if not quoted:
                continue
            for base in (os.path.dirname(path), TESTS):
                local = os.path.normpath(os.path.join(base, inc))
                if local.startswith(TESTS + os.sep) and os.path.isfile(local):
                    queue.append(local)
                    break


def test_targets(deps):
    """{target: (allowed modules, [files])} for the test targets of tests/CMakeLists.txt."""
    text = strip_comments(open(os.path.join(TESTS, "CMakeLists.txt")).read())
    everything = umbrella_modules()
    targets = {}

    def allowed_from(link_targets):
        if "aspen" in link_targets:
            return set(everything)
        return {module_of(t) for t in public_closure(link_targets, deps) if module_of(t)}

    for call in re.findall(r"^aspen_test\(([^)]*)\)", text, re.M):
        words = call.split()
        module, linked, mode = words[0], [], None
        for word in words[1:]:
            if word in ("DEPS", "LABELS"):
                mode = word
            elif mode == "DEPS":
                linked.append(word)
        folder = os.path.join(TESTS, module)
        if os.path.isdir(folder):
            files = [f for f in source_files(folder)]
            targets["test_" + module] = [allowed_from(linked), files]
    for target, linked in re.findall(r"target_link_libraries\((\w+)\s+PRIVATE([^)]*)\)", text):
        if target.startswith("aspen_") and target not in ("aspen_cli",):
            words = [w for w in linked.split() if not w.startswith("GTest")]
            folder = os.path.join(TESTS, "parallel", "worker") if target == "aspen_dist_worker" else None
            if folder and os.path.isdir(folder):
                targets[target] = [allowed_from(words), source_files(folder)]
    # Sources of bench/ compiled into a test target (target_sources(test_X PRIVATE .../bench/Y.cpp)).
    for target, sources in re.findall(r"target_sources\((\w+)\s+PRIVATE([^)]*)\)", text):
        for source in sources.split():
            path = source.replace("${PROJECT_SOURCE_DIR}", ROOT)
            if target in targets and os.path.isfile(path):
                targets[target][1].append(path)
                header = os.path.splitext(path)[0] + ".h"
                if os.path.isfile(header):
                    targets[target][1].append(header)
    return targets


IMPORT = re.compile(r"^\s*using\s+namespace\s+aspen::(\w+)\s*;", re.M)
ROOT_NAMESPACE = re.compile(r"^\s*namespace\s+aspen\s*\{", re.M)


def check_namespaces(module, folder, include, imports, expected, problems):
    """`module`'s code is in aspen::<module>, importing exactly `expected` through the
    imports header `imports` that every file of `folder` includes as `include`."""
    if not os.path.isfile(imports):
        problems.append("%s: missing; aspen::%s's imports (its declared aspen modules) go "
                        "there" % (rel(imports), module))
        return
    listed = IMPORT.findall(open(imports).read())
    if sorted(listed) != sorted(expected):
        problems.append("%s: imports %s, but %s declares %s"
                        % (rel(imports), ", ".join(sorted(listed)) or "nothing", module,
                           ", ".join(sorted(expected)) or "none (util is the root namespace)"))
    for path in source_files(folder):
        if path == imports:
            continue
        text = open(path, errors="replace").read()
        if include not in [inc for _, inc in includes(path)]:
            problems.append('%s: does not include "%s"' % (rel(path), include))
        if ROOT_NAMESPACE.search(text):
            problems.append("%s: opens `namespace aspen {`; code of %s goes in "
                            "`namespace aspen::%s`" % (rel(path), module, module))


def check_internal_headers(problems):
    """No file outside module M includes one of M's *_internal.h."""
    folders = [os.path.join(SRC, m) for m in sorted(os.listdir(SRC))
               if os.path.isdir(os.path.join(SRC, m))]
    folders.append(os.path.join(ROOT, "bench"))
    tests = os.path.join(ROOT, "tests")
    folders += [os.path.join(tests, t) for t in sorted(os.listdir(tests))
                if os.path.isdir(os.path.join(tests, t))]
    for folder in folders:
        for path in source_files(folder):
            for _, inc in includes(path):
                owner = aspen_module_of(inc)
                if not owner or not inc.endswith(INTERNAL_SUFFIX):
                    continue
                if os.path.dirname(os.path.abspath(path)) != os.path.join(SRC, owner):
                    problems.append("%s: includes %s, internal to aspen_%s"
                                    % (rel(path), inc, owner))


def main():
    deps = declared_modules()
    problems = []
    for module in sorted(os.listdir(SRC)):
        if not os.path.isdir(os.path.join(SRC, module)) or module == "cli":
            continue
        if module not in deps:
            problems.append("src/aspen/%s: no aspen_module(%s ...) in CMakeLists.txt" % (module, module))
            continue
        check_module(module, deps, problems)
        if module != "util":
            public, private = deps[module]
            declared = {module_of(t) for t in public + private if module_of(t)} - {"util"}
            folder = os.path.join(SRC, module)
            check_namespaces(module, folder, "aspen/%s/imports.h" % module,
                             os.path.join(folder, "imports.h"), declared, problems)
    check_internal_headers(problems)
    everything = umbrella_modules()
    for module in sorted(set(deps) - everything):
        problems.append("CMakeLists.txt: the aspen library (what cli and bench link) lacks "
                        "aspen_%s" % module)
    check_users(source_files(os.path.join(SRC, "cli")), everything | {"cli"},
                "aspen_cli (the aspen library)", problems)
    check_users(source_files(os.path.join(ROOT, "bench")), everything, "aspen_bench", problems,
                lambda used: " (cli links bench: a cycle)" if used == "cli" else "")
    for target, (allowed, files) in sorted(test_targets(deps).items()):
        check_users(files, allowed, target + " (tests/CMakeLists.txt)", problems)
    check_namespaces("cli", os.path.join(SRC, "cli"), "aspen/cli/imports.h",
                     os.path.join(SRC, "cli", "imports.h"), (everything - {"util"}) | {"bench"},
                     problems)
    check_namespaces("bench", os.path.join(ROOT, "bench"), "bench/imports.h",
                     os.path.join(ROOT, "bench", "imports.h"), everything - {"util"}, problems)
    loop = cycle(deps)
    if loop:
        problems.append("CMakeLists.txt: module dependency cycle " + " -> ".join(loop))
    for p in problems:
        print(p)
    if problems:
        sys.exit(1)
    print("layers: %d modules, every cross-module include declared, PUBLIC exactly where a "
          "header needs it, no cycle; cli, bench and the tests include only what they link; "
          "each module in aspen::<module>, importing exactly its declared modules"
          % len(deps))


if __name__ == "__main__":
    main()
