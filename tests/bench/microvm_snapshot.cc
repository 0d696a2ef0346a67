// Benchmark of issue 11: what a micro-VM actor's snapshot costs against a gVisor actor's, both
// through their RuntimeDriver (the calls the node agent makes), in the same process and run.
//
// One QEMU micro-VM (the Debian-kernel + busybox counter guest of hack/make-microvm-bundle.sh,
// accelerator --accel) and one runsc sandbox (the busybox counter bundle of the tests) run side
// by side. Each cycle checkpoints then restores each of them, alternating which goes first (the
// machine is shared: noise must hit both alike), and records checkpoint time, restore time and
// image size. It prints medians and p90s per side and the ratios micro-VM / gVisor; the micro-VM
// guest's counter is checked to continue across every cycle (a benchmark of a broken restore
// would measure nothing).
//
//   bench_microvm_snapshot [--cycles N] [--accel tcg|kvm] [--runsc PATH] [--csv FILE]
//
// hack/bench/microvm-snapshot.sh builds and runs it. Exit status 1 on any error.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "runtimes/qemu_microvm_driver.h"
#include "runtimes/runsc_driver.h"
#include "tests/support/microvm.h"
#include "tests/support/sandbox.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "microvm_snapshot: %s\n", what.c_str());
  std::exit(1);
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

uint64_t DirBytes(const fs::path& dir) {
  uint64_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) total += e.file_size();
  }
  return total;
}

struct Side {
  std::string name;
  RuntimeDriver* driver;
  SandboxRef ref;
  std::vector<double> checkpoint_ms, restore_ms, image_mb;
};

void Check(const Status& s, const std::string& what) {
  if (!s.ok()) Die(what + ": " + s.ToString());
}

// One checkpoint (the sandbox stops) and one restore into a fresh sandbox of the same id.
void Cycle(Side& side, const fs::path& images, int cycle) {
  CheckpointOptions co;
  co.image_dir = (images / (side.name + "-" + std::to_string(cycle))).string();
  co.deadline = 5min;
  auto t0 = Clock::now();
  Check(side.driver->Checkpoint(side.ref, co), side.name + " checkpoint");
  side.checkpoint_ms.push_back(Ms(Clock::now() - t0));
  side.image_mb.push_back(static_cast<double>(DirBytes(co.image_dir)) / (1 << 20));
  Check(side.driver->Delete(side.ref), side.name + " delete");
  RestoreOptions ro;
  ro.image_dir = co.image_dir;
  ro.deadline = 5min;
  t0 = Clock::now();
  Check(side.driver->Restore(side.ref, ro), side.name + " restore");
  side.restore_ms.push_back(Ms(Clock::now() - t0));
  std::error_code ec;
  fs::remove_all(co.image_dir, ec);
}

void Report(const Side& vm, const Side& gv) {
  std::printf("%-22s %12s %12s %12s %12s %10s\n", "", "microvm p50", "microvm p90", "gvisor p50",
              "gvisor p90", "ratio p50");
  auto row = [](const char* what, const std::vector<double>& a, const std::vector<double>& b) {
    std::printf("%-22s %12.1f %12.1f %12.1f %12.1f %9.2fx\n", what, Percentile(a, 50),
                Percentile(a, 90), Percentile(b, 50), Percentile(b, 90),
                Percentile(a, 50) / Percentile(b, 50));
  };
  row("checkpoint (ms)", vm.checkpoint_ms, gv.checkpoint_ms);
  row("restore (ms)", vm.restore_ms, gv.restore_ms);
  row("image (MiB)", vm.image_mb, gv.image_mb);
}

int Main(int argc, char** argv) {
  int cycles = 10;
  std::string accel = testing::MicrovmTestAccel();
  std::string runsc;
  std::string csv;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--cycles")
      cycles = std::stoi(value());
    else if (a == "--accel")
      accel = value();
    else if (a == "--runsc")
      runsc = value();
    else if (a == "--csv")
      csv = value();
    else
      Die("unknown argument " + a);
  }
  if (runsc.empty()) runsc = testing::PinnedRunsc();
  spdlog::set_level(spdlog::level::warn);  // the drivers' per-call lines would bury the report
  testing::TempDir work("stasis-microvm-bench-");
  const fs::path images = work.path() / "images";
  fs::create_directories(images);

  QemuMicrovmOptions mo;
  mo.accel = accel;
  QemuMicrovmDriver qemu(mo);
  RunscDriver gvisor(runsc);
  testing::Bundle bundle(testing::CounterArgs());
  const std::string tag = std::to_string(getpid());
  Side vm{"microvm",
          &qemu,
          SandboxRef{"bench-vm-" + tag, (work.path() / "vm").string(), testing::MicrovmTestBundle(),
                     (work.path() / "vm.log").string()},
          {},
          {},
          {}};
  Side gv{"gvisor",
          &gvisor,
          SandboxRef{"bench-gv-" + tag, (work.path() / "gv").string(), bundle.dir().string(),
                     (work.path() / "gv.log").string()},
          {},
          {},
          {}};
  auto cleanup = [&] {
    (void)qemu.Delete(vm.ref);
    (void)gvisor.Delete(gv.ref);
  };
  auto version = qemu.Version();
  auto runsc_version = gvisor.Version();
  if (!version.ok() || !runsc_version.ok()) Die("runtime versions unavailable");
  std::printf(
      "microvm: %s accel=%s bundle=%s\ngvisor:  runsc %s\ncycles:  %d (alternating order)\n\n",
      version->c_str(), accel.c_str(), vm.ref.bundle.c_str(), runsc_version->c_str(), cycles);

  Check(qemu.Run(vm.ref, 5min), "microvm run");
  Check(gvisor.Run(gv.ref, 5min), "gvisor run");
  // Both workloads up: the guest has printed its first counts, the sandbox has written one.
  const auto until = Clock::now() + 5min;
  while (testing::LastCount(vm.ref.log_path) < 2 && Clock::now() < until)
    std::this_thread::sleep_for(100ms);
  if (testing::LastCount(vm.ref.log_path) < 2) {
    cleanup();
    Die("the micro-VM guest never counted");
  }
  long last = testing::LastCount(vm.ref.log_path);
  for (int c = 0; c < cycles; ++c) {
    if (c % 2 == 0) {
      Cycle(vm, images, c);
      Cycle(gv, images, c);
    } else {
      Cycle(gv, images, c);
      Cycle(vm, images, c);
    }
    // The guest resumed where it was: its counter goes on from the last value, never restarts.
    const auto wait_until = Clock::now() + 60s;
    while (testing::LastCount(vm.ref.log_path) <= last && Clock::now() < wait_until) {
      std::this_thread::sleep_for(50ms);
    }
    const long now = testing::LastCount(vm.ref.log_path);
    if (now <= last || testing::BootCount(vm.ref.log_path) != 1) {
      cleanup();
      Die("the micro-VM counter did not continue after cycle " + std::to_string(c));
    }
    last = now;
  }
  cleanup();
  Report(vm, gv);
  if (!csv.empty()) {
    std::ofstream out(csv);
    out << "cycle,side,checkpoint_ms,restore_ms,image_mib\n";
    for (const Side* s : {&vm, &gv}) {
      for (size_t i = 0; i < s->checkpoint_ms.size(); ++i) {
        out << i << "," << s->name << "," << s->checkpoint_ms[i] << "," << s->restore_ms[i] << ","
            << s->image_mb[i] << "\n";
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace stasis

int main(int argc, char** argv) { return stasis::Main(argc, argv); }
