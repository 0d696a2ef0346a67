#include "images/runtime_spec.h"

#include <charconv>
#include <cstdint>

#include "images/image_reasons.h"

namespace stasis::images {
namespace {

using nlohmann::json;

// containerd's default when neither the image nor the actor sets PATH.
constexpr char kDefaultPath[] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

Status Bad(const std::string& why) { return Status(Code::kInvalidArgument, why, pull_reason::kBadImageConfig); }

// Kubernetes' rule: command replaces Entrypoint (and drops Cmd), args replace Cmd.
std::vector<std::string> ProcessArgs(const RuntimeSpecRequest& r) {
  std::vector<std::string> out = r.command.empty() ? r.image.entrypoint : r.command;
  const std::vector<std::string>& rest = !r.args.empty() ? r.args : (r.command.empty() ? r.image.cmd : r.args);
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

std::string EnvName(const std::string& entry) { return entry.substr(0, entry.find('=')); }

// Sets `name`, keeping the position of an earlier value: a variable given again replaces it
// where it first was, as Docker and containerd merge environments.
void SetEnv(std::vector<std::string>& env, const std::string& name, const std::string& entry) {
  for (auto& e : env) {
    if (EnvName(e) == name) {
      e = entry;
      return;
    }
  }
  env.push_back(entry);
}

std::vector<std::string> ProcessEnv(const RuntimeSpecRequest& r) {
  std::vector<std::string> env = {kDefaultPath};
  for (const auto& e : r.image.env) SetEnv(env, EnvName(e), e);
  for (const auto& [name, value] : r.env) SetEnv(env, name, name + "=" + value);
  return env;
}

bool ParseId(const std::string& s, uint32_t& out) {
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, out);
  return !s.empty() && ec == std::errc() && p == end;
}

// "uid" or "uid:gid", numeric; "" is root. A uid alone gets gid 0, as containerd gives it when
// the image has no group for it.
Result<json> ProcessUser(const std::string& user) {
  uint32_t uid = 0, gid = 0;
  if (!user.empty()) {
    const size_t colon = user.find(':');
    const std::string u = user.substr(0, colon);
    const std::string g = colon == std::string::npos ? "" : user.substr(colon + 1);
    if (!ParseId(u, uid) || (colon != std::string::npos && !ParseId(g, gid))) {
      return Bad("the image's User \"" + user +
                 "\" is not numeric (uid or uid:gid): the agent does not read the image's /etc/passwd");
    }
  }
  return json{{"uid", uid}, {"gid", gid}};
}

// Docker's default capability set (moby's oci/caps/defaults.go), which containerd's CRI also
// gives a container that asks for no more.
json DefaultCapabilities() {
  const json caps = {"CAP_CHOWN",  "CAP_DAC_OVERRIDE", "CAP_FSETID",      "CAP_FOWNER",     "CAP_MKNOD",
                     "CAP_NET_RAW", "CAP_SETGID",      "CAP_SETUID",      "CAP_SETFCAP",    "CAP_SETPCAP",
                     "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"};
  return {{"bounding", caps}, {"effective", caps}, {"permitted", caps}};
}

// containerd's default mounts (oci/spec.go populateDefaultUnixSpec), /run left out: the image
// may have its own.
json DefaultMounts() {
  auto mount = [](const char* dest, const char* type, const char* source, json options) {
    return json{{"destination", dest}, {"type", type}, {"source", source}, {"options", std::move(options)}};
  };
  return json::array({
      mount("/proc", "proc", "proc", {"nosuid", "noexec", "nodev"}),
      mount("/dev", "tmpfs", "tmpfs", {"nosuid", "strictatime", "mode=755", "size=65536k"}),
      mount("/dev/pts", "devpts", "devpts", {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}),
      mount("/dev/shm", "tmpfs", "shm", {"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}),
      mount("/dev/mqueue", "mqueue", "mqueue", {"nosuid", "noexec", "nodev"}),
      mount("/sys", "sysfs", "sysfs", {"nosuid", "noexec", "nodev", "ro"}),
  });
}

}  // namespace

Result<nlohmann::json> BuildRuntimeSpec(const RuntimeSpecRequest& request) {
  const std::vector<std::string> args = ProcessArgs(request);
  if (args.empty()) return Bad("nothing to run: the image has no Entrypoint or Cmd and the actor gives no command");
  const std::string cwd = !request.working_dir.empty() ? request.working_dir
                          : !request.image.working_dir.empty() ? request.image.working_dir
                                                               : "/";
  if (cwd.front() != '/') return Bad("the working directory \"" + cwd + "\" is not absolute");
  if (request.rootfs.empty() || request.rootfs.front() != '/') {
    return Status(Code::kInvalidArgument, "the rootfs \"" + request.rootfs + "\" is not absolute", pull_reason::kBadImageConfig);
  }
  auto user = ProcessUser(request.image.user);
  if (!user.ok()) return user.status();
  json process = {
      {"terminal", false},
      {"user", std::move(user).value()},
      {"args", args},
      {"env", ProcessEnv(request)},
      {"cwd", cwd},
      {"capabilities", DefaultCapabilities()},
      {"noNewPrivileges", true},
  };
  json namespaces = json::array();
  for (const char* type : {"pid", "ipc", "uts", "mount", "network"}) namespaces.push_back({{"type", type}});
  return json{
      {"ociVersion", "1.0.2"},
      {"process", std::move(process)},
      // Not read-only: runsc's root overlay takes the writes, leaving the shared rootfs as it is.
      {"root", {{"path", request.rootfs}, {"readonly", false}}},
      {"hostname", request.hostname},
      {"mounts", DefaultMounts()},
      {"linux", {{"namespaces", std::move(namespaces)}}},
  };
}

}  // namespace stasis::images
