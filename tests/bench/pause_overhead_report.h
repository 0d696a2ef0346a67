// The figures of the pause-overhead benchmark, one entry per measured cycle, and its report:
// a table per side, the ratios to the runtime, the step tables, a target line for each mode.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tests/bench/pause_overhead_common.h"

namespace stasis::pause_bench {

struct Samples {
  // The measured checkpoint: PATCH Paused → PAUSED, or PATCH Suspended → SUSPENDED.
  std::vector<double> rest_e2e, agent_checkpoint, overhead, direct_checkpoint;
  // The resume after it, and the direct restore of the direct side's own image.
  std::vector<double> resume_e2e, direct_restore, direct_delete;
  std::vector<double> direct_sha256, direct_fsync, direct_remove;
  std::vector<double> agent_image, direct_image;
  // The same agent driving a second actor of the same bundle with checkpointPolicy
  // LeaveRunningThenStop (checkpoint -leave-running, then delete -force before the worker goes).
  std::vector<double> lr_rest_e2e, lr_checkpoint, lr_resume_e2e;
  // The agent's log split into steps (pause_overhead_steps.h), and the resume's overhead:
  // end-to-end − the agent's runsc restore, for the resumes that could be split.
  std::map<std::string, std::vector<double>> pause_steps, resume_steps;
  std::vector<double> resume_overhead;
  // --peer-object-store: curl's upload and download of the direct side's image, and the
  // baselines they make: checkpoint + upload (a suspend), download + restore (a resume).
  std::vector<double> peer_upload, peer_download, peer_suspend, peer_resume;
};

// Prints the report of `measured` cycles (cfg.cycles, or fewer when the time budget ended the
// run); 0 when every series has them all (targets met or not), 1 when there are not enough
// samples for a verdict.
int PrintReport(const Config& cfg, const Samples& s, bool have_log, int measured);

}  // namespace stasis::pause_bench
