#!/usr/bin/env python3
"""Clang's thread-safety analysis over the build's annotated code: re-parses, with
`clang++ -fsyntax-only -Wthread-safety -Werror=thread-safety`, the translation units of
build/compile_commands.json that hold annotated code, and fails on any finding: a
GUARDED_BY member touched without its lock, a REQUIRES helper called without it, a lock
left held.

Which units: those with a source that locks, waits or declares guarded state (it, or
its own header beside it, names a lock type of util/mutex.h or util/shared_mutex.h or an
annotation of util/thread_annotations.h). The analysis is per function, so only the
functions that touch annotated state need it; a unit that merely includes such a header
is skipped (all 36 units that reach the annotations took 464 s of CPU, 8.5 minutes on
CI's 2 cores; these take a fraction: see tests/CMakeLists.txt). A header-only annotated
class is checked in every selected unit that includes it.

GCC builds Aspen, so the compile commands are GCC's. Each is rewritten for clang:
the PCH include (`-include .../cmake_pch.hxx`, whose .gch only GCC reads) becomes the
headers it precompiles, GCC-only flags and the build's own warnings are dropped, and
nothing is written (-fsyntax-only). The build is a unity build: a
CMakeFiles/<target>.dir/Unity/unity_N_cxx.cxx entry is checked whole when any of the
sources it includes holds annotated code, which is also how the build compiles them.

Before the build's code, a canary with one deliberate unguarded write
(tools/thread_safety_canary.cpp) must be rejected: a clang that ignores the attributes,
or macros defined empty, would otherwise pass everything.

Usage: tools/check_thread_safety.py [--build DIR] [-j N] [--verbose] [PATH-PART...]
Run by CTest (test `thread_safety`, label `lint`). Exit 0 when clean, 1 on a finding or
a failure to parse, 2 when no clang++ is installed (scripts/setup installs it).
Environment: ASPEN_CLANGXX, the clang++ to use.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CANARY = os.path.join(ROOT, "tools", "thread_safety_canary.cpp")
ANNOTATED = re.compile(r"\b(Mutex|SharedMutex|MutexLock|ReaderMutexLock|WriterMutexLock|CondVar|"
                       r"GUARDED_BY|PT_GUARDED_BY|REQUIRES|REQUIRES_SHARED|EXCLUDES|ACQUIRE|"
                       r"RELEASE|ACQUIRE_SHARED|RELEASE_SHARED)\b")
QUOTE_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
ANGLE_INCLUDE = re.compile(r"^\s*#\s*include\s+<([^>]+)>", re.M)
# Only the analysis speaks: clang's other warnings on GCC-clean code are not this check's.
ANALYSIS_FLAGS = ["-fsyntax-only", "-Wno-everything", "-Wthread-safety", "-Werror=thread-safety"]
# GCC's flags clang does not take, or that only matter to code generation and the PCH.
DROPPED_FLAGS = {"-fpch-preprocess", "-Winvalid-pch", "-c"}


def find_clang():
    wanted = os.environ.get("ASPEN_CLANGXX")
    if wanted:
        return wanted
    for name in ["clang++"] + ["clang++-%d" % v for v in range(14, 21)]:
        path = shutil.which(name)
        if path:
            return path
    return None


def holds_annotated_code(source):
    """Whether `source` or its own header (same path, .h) names a lock or an annotation."""
    for path in (source, os.path.splitext(source)[0] + ".h"):
        try:
            if ANNOTATED.search(open(path, errors="replace").read()):
                return True
        except OSError:
            pass
    return False


def arguments_of(entry):
    if "arguments" in entry:
        return list(entry["arguments"])
    return shlex.split(entry["command"])


def clang_command(clang, args, source):
    """The GCC command line of `source`, rewritten to parse it with clang (see above)."""
    out = [clang]
    i = 1
    while i < len(args):
        a = args[i]
        if a == "-o":
            i += 2
            continue
        if a == "-include" and args[i + 1].endswith("cmake_pch.hxx"):
            # The headers the PCH stands for, included as plain text.
            text = open(args[i + 1], errors="replace").read()
            for header in ANGLE_INCLUDE.findall(text):
                out += ["-include", header]
            for header in QUOTE_INCLUDE.findall(text):
                out += ["-include", header]
            i += 2
            continue
        if a in DROPPED_FLAGS or a.startswith("-W") or a.startswith("-g") or a == source:
            i += 1
            continue
        out.append(a)
        i += 1
    return out + ANALYSIS_FLAGS + [source]


def unity_sources(path):
    if re.search(r"/Unity/unity_\d+_cxx\.cxx$", path):
        return QUOTE_INCLUDE.findall(open(path, errors="replace").read())
    return [path]


def translation_units(build_dir):
    database = os.path.join(build_dir, "compile_commands.json")
    if not os.path.isfile(database):
        sys.exit("check_thread_safety: no %s (configure the build first)" % database)
    units = []
    for entry in json.load(open(database)):
        source = entry["file"]
        if "aspen_torch_pch.dir" in source or not source.endswith((".cpp", ".cxx", ".cc")):
            continue  # the PCH's own entries
        sources = [os.path.join(entry["directory"], s) for s in unity_sources(source)]
        if any(holds_annotated_code(s) for s in sources):
            units.append((source, entry["directory"], arguments_of(entry)))
    return units


def check(clang, unit):
    source, directory, args = unit
    start = time.monotonic()
    run = subprocess.run(clang_command(clang, args, source), cwd=directory,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return source, run.returncode, run.stdout, time.monotonic() - start


def canary_rejected(clang):
    run = subprocess.run([clang, "-std=c++17", "-I", os.path.join(ROOT, "src")] +
                         ANALYSIS_FLAGS + [CANARY],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return run.returncode != 0 and "requires holding mutex" in run.stdout, run.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--verbose", action="store_true", help="print each unit's time")
    parser.add_argument("only", nargs="*",
                        help="check only the units whose path contains one of these")
    options = parser.parse_args()

    clang = find_clang()
    if clang is None:
        print("check_thread_safety: no clang++ found (scripts/setup installs Debian's clang)",
              file=sys.stderr)
        return 2
    rejected, output = canary_rejected(clang)
    if not rejected:
        print("check_thread_safety: %s did not reject the canary's unguarded write; the "
              "analysis is not running:\n%s" % (clang, output), file=sys.stderr)
        return 1

    start = time.monotonic()
    units = [u for u in translation_units(options.build)
             if not options.only or any(o in u[0] for o in options.only)]
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=options.jobs) as pool:
        for source, code, output, seconds in pool.map(lambda u: check(clang, u), units):
            name = os.path.relpath(source, options.build)
            if options.verbose:
                print("%6.1f s  %s" % (seconds, name))
            if code != 0 or output.strip():
                # Any output counts: only the analysis warns, and an error means the unit
                # was not analysed as the build compiles it.
                failed += 1
                print("check_thread_safety: %s\n%s" % (name, output))
    print("check_thread_safety: %d translation units, %d with findings, %.0f s" %
          (len(units), failed, time.monotonic() - start))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
