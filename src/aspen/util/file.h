// Whole-file reads and writes with errors that name the path, and the check every
// command runs on its output paths before any work.
#pragma once

#include <string>

namespace aspen {

// Returns the bytes of `path`. Throws aspen::Error naming the path if it cannot be read.
std::string read_file(const std::string& path);

// Writes `bytes` to `path` atomically (a temporary file in the same directory, then a
// rename), so a crash never leaves a half-written file under the final name. A symlink
// at `path` is followed (the chain, as the kernel would) and its target is replaced;
// the link stays. Throws aspen::Error naming the path when the target exists and is not
// a regular file (a device, FIFO, socket or directory would otherwise be replaced by a
// regular file: the last line of defence behind check_output_file), or when the write
// fails. The file keeps the mode of the one it replaces.
void write_file_atomic(const std::string& path, const std::string& bytes);

// The output-path rule of every command, checked at option-validation time, before any
// work: `path` must name an existing regular file that can be written, a new name in an
// existing directory where files can be created, or a symlink (chain) to either.
// Returns the path it resolves to (the symlinks' final target; `path` itself otherwise).
// Throws aspen::Error whose input is "`what` `path`" (what: the key or flag, e.g.
// "logging.trace", "--out") for anything else: a character or block device, a FIFO
// (opening it would block until a reader comes), a socket, a directory, a symlink loop,
// a missing or unwritable directory. Nothing is left behind: the directory is probed
// with a temporary file that is removed at once.
std::string check_output_file(const std::string& path, const std::string& what);

// An output directory (a run's --out, OUT/tensorboard): `path` (or a symlink's target)
// is an existing directory or is created now with its parents, and files can be created
// in it. Throws aspen::Error naming "`what` `path`" when it exists as anything but a
// directory or cannot be created or written.
void check_output_directory(const std::string& path, const std::string& what);

// An input directory (a model's --model, model.path): `path` (or a symlink's target) is
// an existing directory. Throws aspen::Error naming "`what` `path`" when it is missing or
// is something else (a model directory's files would otherwise be looked up under a
// file's name, and the first one read would report a puzzling error of its own).
void check_input_directory(const std::string& path, const std::string& what,
                           const std::string& hint = {});

}  // namespace aspen
