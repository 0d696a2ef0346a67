// ClassifyHostError (reconcilers/node/host_errors.h) on the exact texts the real programs print
// for each fault, copied from producing it on this machine (one exception, below): runsc run under a --root whose lock
// file passes PATH_MAX, runsc checkpoint into a full tmpfs, the agent opening its sandbox log in
// a read-only bind mount (base/subprocess.cc's strerror, wrapped by runsc_driver.cc), and
// libstdc++'s filesystem_error for the same faults.
#include "reconcilers/node/host_errors.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "api/conditions.h"

namespace stasis {
namespace {

const std::vector<std::string> kOwn = {"/var/lib/stasis", "/mnt/store"};

std::optional<HostError> Classify(const std::string& message, Code code = Code::kInternal) {
  return ClassifyHostError(Status(code, message, "runtime_error"), kOwn);
}

TEST(HostErrors, RunscLockFilePastPathMaxIsPermanentPathTooLong) {
  const std::string lock = "/var/lib/stasis/qqqq/run/abf/abf_sandbox:abf.lock";
  auto e = Classify("runsc run: exit 128: running container: creating container: cannot lock container metadata "
                    "file: acquiring lock on \"" + lock + "\": open " + lock + ": file name too long");
  ASSERT_TRUE(e);
  EXPECT_STREQ(e->reason, api::kReasonHostPathTooLong);
  EXPECT_TRUE(e->permanent);
}

// The one text not produced here: runsc prints it when its control socket fits in none of the
// root, /var/run, /run, /tmp; this runsc binds a socket under a root of 4,000 characters, so
// the text is runsc's source's (createControlSocket), wrapped as runsc_driver.cc wraps stderr.
TEST(HostErrors, RunscWithNoSocketLocationIsPermanentPathTooLong) {
  auto e = Classify("runsc run: exit 128: running container: creating container: cannot create sandbox: "
                    "unable to find location to write socket file");
  ASSERT_TRUE(e);
  EXPECT_STREQ(e->reason, api::kReasonHostPathTooLong);
  EXPECT_TRUE(e->permanent);
}

TEST(HostErrors, LibstdcxxFileNameTooLongIsPermanent) {
  // Produced for real: a path past PATH_MAX.
  std::string path = std::filesystem::temp_directory_path().string();
  while (path.size() < 5000) path += "/" + std::string(200, 'a');
  std::string what;
  try {
    std::filesystem::create_directories(path);
  } catch (const std::filesystem::filesystem_error& e) {
    what = e.what();
  }
  ASSERT_NE(what.find("cannot create directories: File name too long"), std::string::npos) << what;
  auto e = Classify(what);
  ASSERT_TRUE(e);
  EXPECT_STREQ(e->reason, api::kReasonHostPathTooLong);
  EXPECT_TRUE(e->permanent);
}

TEST(HostErrors, RunscCheckpointIntoAFullDiskIsTransientDiskFull) {
  auto e = Classify("runsc checkpoint: exit 128: checkpoint failed: checkpointing container \"abh\": "
                    "statefile.NewWriter failed: no space left on device");
  ASSERT_TRUE(e);
  EXPECT_STREQ(e->reason, api::kReasonHostDiskFull);
  EXPECT_FALSE(e->permanent);
  // strerror's spelling, from the agent's own writes (a manifest, an archive).
  auto own = Classify("write /var/lib/stasis/snapshots/ns/a/x.partial/manifest.json: No space left on device");
  ASSERT_TRUE(own);
  EXPECT_STREQ(own->reason, api::kReasonHostDiskFull);
}

TEST(HostErrors, AnUnwritableDirectoryOfTheAgentIsTransientNotWritable) {
  for (const std::string& m :
       {std::string("runsc run: cannot start runsc: /var/lib/stasis/logs/a-0123456789abcdef.log: Read-only file system"),
        std::string("filesystem error: cannot create directories: Read-only file system [/var/lib/stasis/run/x]"),
        std::string("create /mnt/store/ns/a: Permission denied"),
        std::string("runsc run: cannot start runsc: /var/lib/stasis/logs/x.log: Operation not permitted")}) {
    SCOPED_TRACE(m);
    auto e = Classify(m, Code::kFailedPrecondition);
    ASSERT_TRUE(e);
    EXPECT_STREQ(e->reason, api::kReasonHostPathNotWritable);
    EXPECT_FALSE(e->permanent);
  }
}

TEST(HostErrors, APermissionErrorOutsideTheAgentsDirectoriesIsNotTheHosts) {
  // The workload's bundle, or a directory that only shares a prefix with the root.
  EXPECT_FALSE(Classify("bad bundle /home/u/bundle: cannot read config.json: Permission denied"));
  EXPECT_FALSE(Classify("open /var/lib/stasis-other/x: Permission denied"));
}

TEST(HostErrors, TheRuntimesOwnFailuresAreNotTheHosts) {
  EXPECT_FALSE(Classify("runsc checkpoint: exit 128: checkpoint failed: can't save with live nvproxy clients"));
  EXPECT_FALSE(Classify("runsc checkpoint: exit 128: cannot checkpoint container \"x\" in state stopped"));
  EXPECT_FALSE(ClassifyHostError(OkStatus(), kOwn));
}

}  // namespace
}  // namespace stasis
