#include "aspen/pipeline/checkpoint_manifest.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "aspen/pipeline/imports.h"
#include "aspen/util/bounded_json.h"
#include "aspen/util/crc32c.h"
#include "aspen/util/error.h"
#include "aspen/util/file.h"

namespace aspen::pipeline {
namespace {

namespace fs = std::filesystem;

constexpr const char* kManifestFormat = "aspen-checkpoint-manifest-1";

struct ManifestEntry {
  int64_t bytes = 0;
  uint32_t crc = 0;
};

// Streams the file in chunks: a policy or optimizer file can be many GB, and it is read
// again by its loader right after (from the page cache).
ManifestEntry sum_checkpoint_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  check_input(in.good(), std::string("cannot open for reading: ") + std::strerror(errno),
              path.string());
  std::vector<char> chunk_buffer(size_t{4} << 20);
  ManifestEntry sum;
  while (in) {
    in.read(chunk_buffer.data(), static_cast<std::streamsize>(chunk_buffer.size()));
    const std::streamsize got = in.gcount();
    if (got <= 0) break;
    sum.crc =
        crc32c_extend(sum.crc, std::string_view(chunk_buffer.data(), static_cast<size_t>(got)));
    sum.bytes += got;
  }
  check_input(!in.bad(), "read failed", path.string());
  return sum;
}

std::string crc_hex(uint32_t crc) {
  char text[16];
  std::snprintf(text, sizeof(text), "%08x", crc);
  return text;
}

// Every file under `dir` but the manifest, by '/'-separated relative path. Only regular
// files and directories are expected there (Aspen writes nothing else).
std::vector<std::string> checkpoint_files(const fs::path& dir) {
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    const fs::file_status status = entry.symlink_status();
    if (fs::is_directory(status)) continue;
    check_input(fs::is_regular_file(status), "is not a regular file", entry.path().string(),
                "a checkpoint holds only the files Aspen wrote");
    const std::string name = entry.path().lexically_relative(dir).generic_string();
    if (name != kCheckpointManifest) files.push_back(name);
  }
  return files;
}

uint32_t parse_crc_hex(const nlohmann::json& value, const std::string& where,
                       const std::string& source) {
  const bool ok = value.is_string() && value.get_ref<const std::string&>().size() == 8 &&
                  value.get_ref<const std::string&>().find_first_not_of("0123456789abcdef") ==
                      std::string::npos;
  check_input(ok, where + ".crc32c must be 8 lowercase hex digits (got " + value.dump() + ")",
              source);
  return static_cast<uint32_t>(std::stoul(value.get<std::string>(), nullptr, 16));
}

// The manifest's entries, checked in form.
std::map<std::string, ManifestEntry> read_checkpoint_manifest(const fs::path& path) {
  const std::string source = path.string();
  const nlohmann::json manifest = parse_json_bounded(read_file(source), source, 4);
  check_input(
      manifest.is_object() && manifest.value("format", "") == kManifestFormat,
      std::string("is not a checkpoint manifest (\"format\" is not \"") + kManifestFormat + "\")",
      source);
  const auto files = manifest.find("files");
  check_input(files != manifest.end() && files->is_object(), "has no \"files\" object", source);
  std::map<std::string, ManifestEntry> sums;
  for (const auto& [name, entry] : files->items()) {
    const std::string where = "files[\"" + name + "\"]";
    check_input(entry.is_object() && entry.contains("bytes") && entry.contains("crc32c"),
                where + " is not {\"bytes\": N, \"crc32c\": HEX}", source);
    const nlohmann::json& bytes = entry.at("bytes");
    check_input(bytes.is_number_integer() && bytes.get<int64_t>() >= 0,
                where + ".bytes must be an integer >= 0 (got " + bytes.dump() + ")", source);
    sums[name] =
        ManifestEntry{bytes.get<int64_t>(), parse_crc_hex(entry.at("crc32c"), where, source)};
  }
  return sums;
}

}  // namespace

void write_checkpoint_manifest(const std::string& dir) {
  const fs::path root(dir);
  nlohmann::json files = nlohmann::json::object();
  for (const std::string& name : checkpoint_files(root)) {
    const ManifestEntry sum = sum_checkpoint_file(root / name);
    files[name] = {{"bytes", sum.bytes}, {"crc32c", crc_hex(sum.crc)}};
  }
  const nlohmann::json manifest = {{"format", kManifestFormat}, {"files", files}};
  write_file_atomic((root / kCheckpointManifest).string(), manifest.dump(1));
}

bool verify_checkpoint_manifest(const std::string& dir) {
  const fs::path root(dir);
  const fs::path manifest_path = root / kCheckpointManifest;
  if (!fs::exists(fs::symlink_status(manifest_path))) return false;
  const std::map<std::string, ManifestEntry> listed = read_checkpoint_manifest(manifest_path);
  const std::string hint =
      "the checkpoint changed after it was written; restore the file, or "
      "move " +
      dir + " away to resume from the checkpoint before it";
  const std::vector<std::string> present = checkpoint_files(root);
  for (const std::string& name : present) {
    check_input(listed.count(name) == 1,
                std::string("is not listed in the checkpoint's ") + kCheckpointManifest,
                (root / name).string(), hint);
  }
  for (const auto& [name, expected] : listed) {
    const fs::path path = root / name;
    check_input(
        std::find(present.begin(), present.end(), name) != present.end(),
        std::string("is missing, though the checkpoint's ") + kCheckpointManifest + " lists it",
        path.string(), hint);
    // The size first: cheap, and the clearer message for a truncated file.
    const int64_t bytes = static_cast<int64_t>(fs::file_size(path));
    check_input(bytes == expected.bytes,
                "is " + std::to_string(bytes) + " bytes, " + kCheckpointManifest + " records " +
                    std::to_string(expected.bytes),
                path.string(), hint);
    const ManifestEntry sum = sum_checkpoint_file(path);
    check_input(sum.crc == expected.crc,
                "CRC32C is " + crc_hex(sum.crc) + ", " + kCheckpointManifest + " records " +
                    crc_hex(expected.crc) + " (the file is corrupt)",
                path.string(), hint);
  }
  return true;
}

}  // namespace aspen::pipeline
