// spec.readinessGate: a command run in a RUNNING sandbox every periodSeconds from the start,
// until it exits 0 (ReadinessGate=True ReadinessGatePassed) or timeoutSeconds have passed
// (False ReadinessGateTimedOut; the actor runs on). What to do at a liveness check is decided
// here from the actor alone; actor_reconciler.cc probes and writes (read → decide → act).
//
// The start of a run is Ready=True's lastTransitionTime: every start (a boot, a restore) writes
// Ready=True after a Ready=False, and resets the gate to ReadinessGatePending, so a gate is
// passed once per run of the sandbox — what a golden snapshot needs (docs/templates.md).
#pragma once

#include "api/actor.h"
#include "base/time.h"

namespace stasis {

enum class GateStep {
  kNone,      // no gate, or it already passed or timed out in this run
  kProbe,     // run the command now
  kTimedOut,  // report the timeout
};

GateStep DecideGate(const api::Actor& a, Time now);

}  // namespace stasis
