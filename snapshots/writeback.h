// Starts the kernel writing a snapshot's files back to disk while runsc is still writing them,
// so that the fsyncs that make the snapshot durable find little left to write: on a large
// image the fsyncs after the checkpoint were most of a suspend's time beyond the checkpoint
// itself (seconds at 8 GiB, ~0.4 ms/MB here).
//
// Every `interval` one thread walks the directory and asks for write-out of every regular
// file's dirty pages (sync_file_range SYNC_FILE_RANGE_WRITE: it starts I/O and does not wait
// for it). It proves nothing and decides nothing: durability is still the fsyncs before the
// rename, which wait for whatever is left. Safe whatever order runsc writes in: a page written
// again after its write-out is dirty again, and the fsync writes it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <thread>

namespace stasis {

class WritebackPump {
 public:
  explicit WritebackPump(std::filesystem::path dir,
                         std::chrono::milliseconds interval = std::chrono::milliseconds(100));
  // Stops after a last pass (the files' last pages are asked for too) and joins.
  ~WritebackPump();
  WritebackPump(const WritebackPump&) = delete;
  WritebackPump& operator=(const WritebackPump&) = delete;

  // Passes made over the directory so far, and files asked for write-out (for the tests).
  int64_t passes() const;
  int64_t requests() const;

 private:
  void Loop();
  void Pass();

  const std::filesystem::path dir_;
  const std::chrono::milliseconds interval_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  int64_t passes_ = 0, requests_ = 0;
  std::thread thread_;
};

}  // namespace stasis
