// A checkpoint's manifest.json: the size and CRC32C (util/crc32c.h) of every other file
// in the checkpoint directory, written last, so that `--resume` refuses a checkpoint
// whose bytes changed after it was written (a flipped bit on disk, a truncated copy,
// a hand-edited state.json) instead of training on from it silently.
//
//   {"format": "aspen-checkpoint-manifest-1",
//    "files": {"state.json": {"bytes": 8933, "crc32c": "1a2b3c4d"},
//              "policy/model.safetensors": {...}, ...}}   paths relative, '/'-separated
//
// Checkpoints written before manifests have none: verify_checkpoint_manifest says so
// and the caller decides (load_checkpoint warns and loads them unchecked).
// Errors: aspen::Error naming the file that differs (or the manifest). Thread safety:
// none needed (files only); the directory must not change while these run.
#pragma once

#include <string>

#include "aspen/pipeline/imports.h"

namespace aspen::pipeline {

inline constexpr const char* kCheckpointManifest = "manifest.json";

// Writes DIR/manifest.json (atomically) over every regular file under `dir`; call it
// after the checkpoint's last other file. Files are streamed, not read whole.
void write_checkpoint_manifest(const std::string& dir);

// Checks `dir` against its manifest: every listed file present with its size and
// CRC32C, and no file the manifest does not list (the loader picks files by name,
// e.g. optimizer shares, so an extra file would be read unchecked). Returns false,
// checking nothing, when `dir` has no manifest.
bool verify_checkpoint_manifest(const std::string& dir);

}  // namespace aspen::pipeline
