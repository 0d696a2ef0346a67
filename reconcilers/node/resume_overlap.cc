// The resume's start beside its API writes. A resume's order is fixed by what a recovery needs:
// the Worker claim before RESUMING (which names the worker), RESUMING before any sandbox runs
// (a recovery that finds RESUMING asks runsc and adopts a running sandbox; one that finds the
// actor at rest deletes any sandbox it finds), RUNNING after the restore returned. Done in
// series, the claim and RESUMING put two API round trips before every restore.
//
// Here they run on their own thread while the sandbox starts. What the order protects is kept
// by the intent record (resume_intent.h), written before runsc starts: a recovery reads the
// actor through it as if RESUMING had landed. RUNNING is written only after both writes have,
// so the API never shows RUNNING without the claim and RESUMING before it. If either write
// fails, the start is undone — the sandbox deleted, a claim that landed given back — and the
// actor is where the API says it rests, to be decided again.
#include <spdlog/spdlog.h>

#include <future>

#include "reconcilers/node/actor_context.h"
#include "reconcilers/node/actor_reconciler.h"
#include "reconcilers/node/resume_intent.h"

namespace stasis {

std::optional<Result<ReconcileOutcome>> ActorReconciler::StartBesideResumingWrite(Ctx& c, const api::Worker& worker,
                                                                                 Status& result, double& took) {
  const std::string intent = IntentPath(c.ref.root);
  if (Status s = WriteIntent(intent, IntentOf(c.before, c.a.status)); !s.ok()) {
    workers_.Unreserve(worker.metadata.name);
    return Result<ReconcileOutcome>(s);
  }
  // What the writes' thread did, on a context of its own: the claim, then RESUMING if it held.
  struct Writes {
    Status claim;
    Status status;
    Ctx written;
  };
  Ctx w;
  w.before = c.before;
  w.a = c.a;
  w.key = c.key;
  w.actor_ref = c.actor_ref;
  auto pending = std::async(std::launch::async, [this, worker, w = std::move(w)]() mutable {
    Writes out;
    out.claim = workers_.ClaimReserved(worker, w.actor_ref);
    if (out.claim.ok()) out.status = WriteStatus(w);
    out.written = std::move(w);
    return out;
  });
  const auto start = clock_.Now();
  result = StartSandbox(c, worker);  // changes c.ref and c.restore_source, never c.a
  took = Seconds(clock_.Now() - start);
  Writes writes = pending.get();
  if (writes.claim.ok() && writes.status.ok()) {
    c.before = std::move(writes.written.before);
    c.a = std::move(writes.written.a);
    c.wrote = c.claimed = true;
    RemoveIntent(intent);  // the API says RESUMING itself now
    return std::nullopt;
  }
  UndoStart(c, worker, writes.claim.ok(), result);
  RemoveIntent(intent);
  c.a.status = c.before.status;  // nothing of RESUMING was written
  if (!writes.claim.ok()) return ClaimFailed(c, writes.claim);
  return Result<ReconcileOutcome>(writes.status);
}

void ActorReconciler::UndoStart(Ctx& c, const api::Worker& worker, bool claimed, const Status& started) {
  spdlog::warn("start undone actor={} worker={} start_ok={} reason=\"{}\"", c.key, worker.metadata.name, started.ok(),
               claimed ? "the RESUMING write failed" : "the worker claim failed");
  WarnIfFailed(c.driver->Delete(c.ref), "sandbox of an undone start not deleted", c.key);
  RemoveSandboxRoot(c.ref);
  if (claimed) WarnIfFailed(workers_.Release(worker.metadata.name, c.actor_ref), "worker of an undone start not freed", c.key);
}

}  // namespace stasis
