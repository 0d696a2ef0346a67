// stasis: one binary, two roles (DESIGN.md §4). This file only parses the command line and
// hands over to the role; everything it calls lives in a library that tests link.
#include <cstdio>
#include <cstring>
#include <string>

namespace {

constexpr const char* kUsage = R"(stasis — suspend and resume sandboxed GPU workloads, declaratively.

Usage:
  stasis node [flags]         the node agent: runs Actors bound to this node with runsc
  stasis controller [flags]   the cluster controller: binds, detects stuck actors, retention
  stasis --version            print the version
  stasis --help               print this help

Run `stasis <role> --help` for a role's flags.
)";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  if (cmd == "--version" || cmd == "version") {
    std::printf("stasis %s\n", STASIS_VERSION);
    return 0;
  }
  if (cmd == "node" || cmd == "controller") {
    std::fprintf(stderr, "stasis %s: this role is not built yet (see the open issues)\n", cmd.c_str());
    return 2;
  }
  std::fprintf(stderr, "stasis: unknown command %s\n\n%s", cmd.c_str(), kUsage);
  return 2;
}
