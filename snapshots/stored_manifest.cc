#include "snapshots/stored_manifest.h"

#include <nlohmann/json.hpp>

#include "snapshots/aes_gcm.h"
#include "base/sha256.h"
#include "snapshots/snapshot_reasons.h"

namespace stasis {
namespace {

constexpr int kSealedManifestVersion = 1;

std::string Aad(const std::string& snapshot, const std::string& key_id) {
  std::string aad = "stasis snapshot manifest v1";
  aad.push_back('\0');
  aad += snapshot;
  aad.push_back('\0');
  aad += key_id;
  return aad;
}

Status KeyMismatch(const std::string& message) {
  return Status(Code::kFailedPrecondition, message, snapshot_reason::kSnapshotKeyMismatch);
}

Status Corrupt(const std::string& where, const std::string& why) {
  return Status(Code::kFailedPrecondition, "snapshot manifest " + where + " " + why, snapshot_reason::kSnapshotCorrupt);
}

// The manifest of a sealed object, opened with `key` (already known to be the right one).
Result<SnapshotManifest> OpenSealed(const std::string& sealed_hex, const EncryptionKey& key,
                                    const std::string& snapshot, const std::string& where) {
  const std::string& key_id = key.id();
  const auto sealed = HexDecode(sealed_hex);
  if (!sealed) return Corrupt(where, "is sealed but its \"sealed\" field is not hex");
  std::string text;
  if (Status s = GcmOpen(key, Aad(snapshot, key_id), *sealed, text); !s.ok()) {
    return Status(s.code(), "snapshot manifest " + where + ": " + s.message(), s.reason());
  }
  auto m = ParseManifest(text, where);
  if (!m.ok()) return m.status();
  if (m->encryption != Encryption::kAes256Gcm || m->key_id != key_id) {
    return Corrupt(where, "is sealed with key id " + key_id + " but says encryption " + EncryptionName(m->encryption) +
                              (m->key_id.empty() ? "" : " with key id " + m->key_id));
  }
  return m;
}

}  // namespace

Result<std::string> StoredManifestObject(const SnapshotManifest& m, const EncryptionKey* key) {
  const std::string text = ManifestText(m);
  if (m.encryption == Encryption::kNone) return text;
  if (!key || key->id() != m.key_id) {
    return Status(Code::kInternal, "manifest of " + m.id + " says key id " + m.key_id + " but that key is not given",
                  snapshot_reason::kIoError);
  }
  std::string sealed;
  if (Status s = GcmSeal(*key, Aad(m.ns + "/" + m.name + "/" + m.id, m.key_id), text, sealed); !s.ok()) return s;
  const nlohmann::json envelope = {{"sealedManifest", kSealedManifestVersion},
                                   {"encryption", EncryptionName(m.encryption)},
                                   {"keyId", m.key_id},
                                   {"sealed", HexBytes(reinterpret_cast<const unsigned char*>(sealed.data()),
                                                       static_cast<unsigned int>(sealed.size()))}};
  return envelope.dump() + "\n";
}

Result<SnapshotManifest> ParseStoredManifest(const std::string& object, const EncryptionKey* key,
                                             const std::string& snapshot, const std::string& where) {
  const nlohmann::json j = nlohmann::json::parse(object, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("sealedManifest")) {
    const auto text_of = [&](const char* field) { return j.contains(field) && j[field].is_string() ? j[field].get<std::string>() : ""; };
    if (j["sealedManifest"] != kSealedManifestVersion || text_of("encryption") != "aes-256-gcm" ||
        !j.contains("sealed") || !j["sealed"].is_string()) {
      return Corrupt(where, "is sealed in a way this stasis does not read (version " + j["sealedManifest"].dump() +
                                ", encryption \"" + text_of("encryption") + "\")");
    }
    const std::string key_id = text_of("keyId");
    if (!key) {
      return KeyMismatch("snapshot " + where + " was encrypted with key id " + key_id +
                         "; this agent has no key (--snapshot-store-encryption-key)");
    }
    if (key->id() != key_id) {
      return KeyMismatch("snapshot " + where + " was encrypted with key id " + key_id + "; this agent has key id " +
                         key->id() + ": it needs the key the snapshot was written with");
    }
    return OpenSealed(j["sealed"].get<std::string>(), *key, snapshot, where);
  }
  auto m = ParseManifest(object, where);
  if (!m.ok()) return m.status();
  if (m->encryption != Encryption::kNone) return Corrupt(where, "says it is encrypted but is not sealed");
  if (key) {
    return KeyMismatch("snapshot " + where + " is not encrypted; this agent (key id " + key->id() +
                       ") restores only snapshots encrypted with its key");
  }
  return m;
}

}  // namespace stasis
