#!/usr/bin/env python3
"""The build's module layering, checked: every `#include "aspen/<module>/..."` in a
module's sources (src/aspen/<name>/) names the module itself or one it declares in its
`aspen_module(<name> DEPS ...)` line of the root CMakeLists.txt, and the declared
dependencies form no cycle. `cli` is the executable (aspen_cli), which links every
module and aspen_bench. `bench/` sources may include any module but never `cli`.

Prints one line per violation and exits 1 when there is any; 0 and a summary otherwise.
Run by CTest (test `layers`), so CI fails on an undeclared include.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = re.compile(r'^\s*#\s*include\s+"aspen/([a-z_]+)/[^"]+"', re.M)


def declared_modules():
    text = open(os.path.join(ROOT, "CMakeLists.txt")).read()
    deps = {}
    for name, args in re.findall(r"^aspen_module\((\w+)\s+DEPS\s+([^)]*)\)", text, re.M):
        deps[name] = {d[len("aspen_"):] for d in args.split() if d.startswith("aspen_")}
    return deps


def includes_of(folder):
    found = {}
    for dirpath, _, files in os.walk(folder):
        for f in sorted(files):
            if f.endswith((".h", ".cpp", ".cu", ".cuh")):
                path = os.path.join(dirpath, f)
                found[path] = INCLUDE.findall(open(path, errors="replace").read())
    return found


def cycle(deps):
    state = {}

    def visit(m, stack):
        state[m] = "open"
        for d in sorted(deps.get(m, ())):
            if state.get(d) == "open":
                return stack + [m, d]
            if d not in state:
                found = visit(d, stack + [m])
                if found:
                    return found
        state[m] = "done"
        return None

    for m in sorted(deps):
        if m not in state:
            found = visit(m, [])
            if found:
                return found
    return None


def main():
    deps = declared_modules()
    problems = []
    src = os.path.join(ROOT, "src", "aspen")
    for module in sorted(os.listdir(src)):
        if not os.path.isdir(os.path.join(src, module)) or module == "cli":
            continue
        if module not in deps:
            problems.append("src/aspen/%s: no aspen_module(%s ...) line in CMakeLists.txt" % (module, module))
            continue
        for path, included in includes_of(os.path.join(src, module)).items():
            for other in sorted(set(included)):
                if other != module and other not in deps[module]:
                    problems.append("%s: includes aspen/%s/ but aspen_%s does not declare aspen_%s"
                                    % (os.path.relpath(path, ROOT), other, module, other))
    for path, included in includes_of(os.path.join(ROOT, "bench")).items():
        if "cli" in included:
            problems.append("%s: bench includes aspen/cli/ (cli links bench: a cycle)"
                            % os.path.relpath(path, ROOT))
    loop = cycle(deps)
    if loop:
        problems.append("CMakeLists.txt: module dependency cycle " + " -> ".join(loop))
    for p in problems:
        print(p)
    if problems:
        sys.exit(1)
    print("layers: %d modules, every cross-module include declared, no cycle" % len(deps))


if __name__ == "__main__":
    main()
