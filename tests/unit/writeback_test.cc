// WritebackPump: asks for write-out of every regular file under its directory, files that
// appear while it runs included, never through a symlink, and stops with its owner.
#include "snapshots/writeback.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/support/sandbox.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

TEST(WritebackPumpTest, AsksForWriteOutOfEveryFileAsItIsWritten) {
  TempDir dir("stasis-writeback-");
  int64_t passes = 0, requests = 0;
  {
    WritebackPump pump(dir.path(), std::chrono::milliseconds(5));
    // A file written while the pump runs, as runsc writes an image: 4 MiB in 64 KiB writes.
    std::ofstream out(dir.path() / "pages.img", std::ios::binary);
    const std::string block(64 << 10, 'p');
    for (int i = 0; i < 64; ++i) {
      out.write(block.data(), static_cast<std::streamsize>(block.size()));
      out.flush();
      if (i % 16 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    fs::create_directories(dir.path() / "sub");
    std::ofstream(dir.path() / "sub" / "state.img") << "state";
    fs::create_symlink("/etc/hostname", dir.path() / "link.img");
    const int64_t before = pump.passes();
    while (pump.passes() < before + 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    passes = pump.passes();
    requests = pump.requests();
  }
  EXPECT_GE(passes, 2);
  // sync_file_range succeeded on the read-only descriptors (it fails with EBADF otherwise) for
  // both files on at least one pass; the symlink is never opened.
  EXPECT_GE(requests, 3) << "pages.img on two passes at least, state.img on one";
}

TEST(WritebackPumpTest, ADirectoryThatIsNotThereYetIsNoError) {
  TempDir dir("stasis-writeback-");
  WritebackPump pump(dir.path() / "later", std::chrono::milliseconds(1));
  while (pump.passes() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(pump.requests(), 0);
}

}  // namespace
}  // namespace stasis
