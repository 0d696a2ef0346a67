#include "images/image_record.h"

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

namespace stasis::images {

using json = nlohmann::json;

std::string ImageRecordToJson(const ImageRecord& r) {
  const ImageConfig& c = r.config;
  return json{{"digest", r.digest},
              {"configDigest", r.config_digest},
              {"bytes", r.bytes},
              {"config",
               {{"entrypoint", c.entrypoint}, {"cmd", c.cmd}, {"env", c.env}, {"workingDir", c.working_dir},
                {"user", c.user}, {"diffIds", c.diff_ids}}}}
      .dump();
}

Result<ImageRecord> ImageRecordFromJson(const std::string& text) {
  try {
    const json j = json::parse(text);
    ImageRecord r;
    r.digest = j.at("digest").get<std::string>();
    r.config_digest = j.value("configDigest", "");
    r.bytes = j.value("bytes", int64_t{0});
    const json& c = j.at("config");
    r.config.entrypoint = c.value("entrypoint", std::vector<std::string>{});
    r.config.cmd = c.value("cmd", std::vector<std::string>{});
    r.config.env = c.value("env", std::vector<std::string>{});
    r.config.working_dir = c.value("workingDir", "");
    r.config.user = c.value("user", "");
    r.config.diff_ids = c.value("diffIds", std::vector<std::string>{});
    return r;
  } catch (const json::exception& e) {
    return Status(Code::kInvalidArgument, std::string("image record: ") + e.what());
  }
}

std::string DigestHex(const std::string& digest) { return digest.substr(digest.find(':') + 1); }

Result<std::string> ReadCacheFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(Code::kNotFound, "cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace stasis::images
