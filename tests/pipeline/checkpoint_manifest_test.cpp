// A checkpoint's manifest.json (pipeline/checkpoint_manifest.h): every file's size and
// CRC32C, checked before a resume reads any of them. A flipped bit, a truncated or
// missing file, or a file slipped in are refused naming the file; a checkpoint of an
// Aspen before manifests is reported, not refused.
#include "aspen/pipeline/checkpoint_manifest.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "aspen/util/error.h"
#include "aspen/util/file.h"

namespace aspen::pipeline {
namespace {

namespace fs = std::filesystem;

// A checkpoint-like directory: a few files, one in a subdirectory, one of 5 MiB (more
// than one of the manifest's read chunks).
std::string checkpoint_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/aspen_manifest_" + name;
  fs::remove_all(dir);
  fs::create_directories(dir + "/policy");
  write_file_atomic(dir + "/state.json", R"({"iteration": 2})");
  write_file_atomic(dir + "/policy/config.json", R"({"hidden_size": 32})");
  std::string weights(5 << 20, '\0');
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<char>(i * 2654435761u >> 24);
  write_file_atomic(dir + "/policy/model.safetensors", weights);
  return dir;
}

std::string refusal(const std::string& dir) {
  try {
    verify_checkpoint_manifest(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void flip_bit(const std::string& path, std::streamoff at) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(at);
  char byte = 0;
  file.read(&byte, 1);
  byte ^= 0x10;
  file.seekp(at);
  file.write(&byte, 1);
}

TEST(CheckpointManifest, VerifiesTheFilesItWasWrittenFor) {
  const std::string dir = checkpoint_dir("intact");
  write_checkpoint_manifest(dir);
  EXPECT_TRUE(verify_checkpoint_manifest(dir));
  const std::string manifest = read_file(dir + "/manifest.json");
  EXPECT_NE(manifest.find("\"policy/model.safetensors\""), std::string::npos) << manifest;
  EXPECT_NE(manifest.find("\"state.json\""), std::string::npos) << manifest;
}

TEST(CheckpointManifest, RefusesAFileWithAFlippedBitNamingIt) {
  const std::string dir = checkpoint_dir("flipped");
  write_checkpoint_manifest(dir);
  flip_bit(dir + "/policy/model.safetensors", (4 << 20) + 12345);  // in the second chunk
  const std::string what = refusal(dir);
  EXPECT_NE(what.find(dir + "/policy/model.safetensors"), std::string::npos) << what;
  EXPECT_NE(what.find("CRC32C is"), std::string::npos) << what;
  EXPECT_NE(what.find("manifest.json records"), std::string::npos) << what;
}

TEST(CheckpointManifest, RefusesATruncatedMissingOrUnlistedFile) {
  std::string dir = checkpoint_dir("truncated");
  write_checkpoint_manifest(dir);
  fs::resize_file(dir + "/policy/model.safetensors", 1000);
  std::string what = refusal(dir);
  EXPECT_NE(what.find("model.safetensors: is 1000 bytes, manifest.json records 5242880"),
            std::string::npos)
      << what;

  dir = checkpoint_dir("missing");
  write_checkpoint_manifest(dir);
  fs::remove(dir + "/policy/config.json");
  what = refusal(dir);
  EXPECT_NE(what.find("policy/config.json: is missing"), std::string::npos) << what;

  // The loader finds optimizer shares by name: an extra one must not be read unchecked.
  dir = checkpoint_dir("unlisted");
  write_checkpoint_manifest(dir);
  write_file_atomic(dir + "/actor_optimizer-00001-of-00002.safetensors", "x");
  what = refusal(dir);
  EXPECT_NE(what.find("actor_optimizer-00001-of-00002.safetensors: is not listed"),
            std::string::npos)
      << what;
}

TEST(CheckpointManifest, ReportsACheckpointWithoutOne) {
  EXPECT_FALSE(verify_checkpoint_manifest(checkpoint_dir("legacy")));
}

TEST(CheckpointManifest, RefusesAMalformedManifestNamingIt) {
  const std::string dir = checkpoint_dir("malformed");
  write_checkpoint_manifest(dir);
  std::string text = read_file(dir + "/manifest.json");
  const size_t crc = text.find("\"crc32c\": \"") + 11;
  text.replace(crc, 8, "XYZ");
  write_file_atomic(dir + "/manifest.json", text);
  const std::string what = refusal(dir);
  EXPECT_NE(what.find("manifest.json"), std::string::npos) << what;
  EXPECT_NE(what.find("crc32c must be 8 lowercase hex digits"), std::string::npos) << what;
  write_file_atomic(dir + "/manifest.json", "{\"files\": {}}");
  EXPECT_NE(refusal(dir).find("is not a checkpoint manifest"), std::string::npos);
}

}  // namespace
}  // namespace aspen::pipeline
