// The node agent's state machine (reconcilers/node/transitions.h), table-driven: every
// status × desired state × sandbox state × snapshot on disk, decided on a quorum read, ends in
// the action the table names; the informer's copy decides only what needs no read. A small
// world answers Decide's observations and preparations the way the reconciler does.
#include "reconcilers/node/transitions.h"

#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace stasis {
namespace {

using api::ActorState;
using api::DesiredState;
using api::SnapshotTrigger;

enum class OnDisk { kNothing, kNewerLocal, kCommittedByTransition };

struct World {
  SandboxState sandbox = SandboxState::kNotFound;
  OnDisk disk = OnDisk::kNothing;
  bool spec_valid = true;
  bool thaw_works = true;
};

// Runs Decide until it names an action, answering what it asks from `world`; the steps taken
// (observations, preparations and the action) are returned in order.
std::vector<Decision> DecideIn(Observation o, const World& world) {
  std::vector<Decision> steps;
  for (int i = 0; i < 16; ++i) {
    const Decision d = Decide(o);
    steps.push_back(d);
    switch (d.step) {
      case Step::kReadQuorum: o.source = ActorSource::kQuorum; o.sandbox.reset(); break;
      case Step::kValidateSpec: o.spec_valid = world.spec_valid; break;
      case Step::kProbeSandbox: o.sandbox = world.sandbox; break;
      case Step::kListSnapshots:
        o.newer_local_snapshot = world.disk == OnDisk::kNewerLocal;
        o.committed_by_transition = world.disk == OnDisk::kCommittedByTransition;
        break;
      case Step::kFreeUnsettledWorker:
      case Step::kForgetUnsettledWorker: o.unsettled_worker = false; break;
      case Step::kAddFinalizer: o.has_finalizer = true; break;
      case Step::kRemoveLeftoverSandbox: o.sandbox_root_exists = false; break;
      case Step::kThawFrozenSandbox:
        if (world.thaw_works) o.sandbox = SandboxState::kRunning; else o.thaw_failed = true;
        break;
      default:
        EXPECT_FALSE(IsObservation(d.step) || IsPreparation(d.step)) << ToString(d.step);
        return steps;
    }
  }
  ADD_FAILURE() << "Decide did not name an action in 16 steps";
  return steps;
}

Decision Final(const Observation& o, const World& w) { return DecideIn(o, w).back(); }

bool Took(const std::vector<Decision>& steps, Step step) {
  for (const auto& d : steps) {
    if (d.step == step) return true;
  }
  return false;
}

Observation Quorum(ActorState status, DesiredState desired) {
  Observation o;
  o.source = ActorSource::kQuorum;
  o.status = status;
  o.desired = desired;
  o.transition_start_known = api::IsTransitioning(status);
  return o;
}

const std::vector<ActorState> kStatuses = {
    ActorState::kUnspecified, ActorState::kResuming, ActorState::kRunning, ActorState::kSuspending,
    ActorState::kSuspended,   ActorState::kPausing,  ActorState::kPaused,  ActorState::kFailed};
const std::vector<DesiredState> kDesired = {DesiredState::kRunning, DesiredState::kPaused, DesiredState::kSuspended};
const std::vector<SandboxState> kSandboxes = {SandboxState::kNotFound, SandboxState::kCreated, SandboxState::kRunning,
                                              SandboxState::kPaused, SandboxState::kStopped};
const std::vector<OnDisk> kDisks = {OnDisk::kNothing, OnDisk::kNewerLocal, OnDisk::kCommittedByTransition};

// One row of the table; nullopt matches anything. The first row that matches decides.
struct Row {
  std::set<ActorState> statuses;
  std::optional<DesiredState> desired;
  std::optional<SandboxState> sandbox;
  std::optional<OnDisk> disk;
  Decision expect;
};

Decision Act(Step step) { return Decision{step, SnapshotTrigger::kPause}; }

const std::vector<Row>& Table() {
  using S = ActorState;
  using D = DesiredState;
  static const std::vector<Row> rows = {
      // Running.
      {{S::kRunning}, D::kRunning, SandboxState::kRunning, {}, Act(Step::kWatchLiveness)},
      {{S::kRunning}, D::kRunning, {}, {}, Act(Step::kForceCleanDeadSandbox)},
      {{S::kRunning}, D::kPaused, {}, {}, Decision{Step::kCheckpoint, SnapshotTrigger::kPause}},
      {{S::kRunning}, D::kSuspended, {}, {}, Decision{Step::kCheckpoint, SnapshotTrigger::kSuspend}},
      // At rest.
      {{S::kPaused}, D::kRunning, {}, {}, Act(Step::kResume)},
      {{S::kPaused}, D::kSuspended, {}, {}, Act(Step::kCommitPaused)},
      {{S::kPaused}, D::kPaused, {}, {}, Act(Step::kNothing)},
      {{S::kSuspended}, D::kRunning, {}, {}, Act(Step::kResume)},
      {{S::kSuspended}, {}, {}, {}, Act(Step::kNothing)},
      {{S::kUnspecified}, D::kRunning, {}, {}, Act(Step::kResume)},
      {{S::kUnspecified}, {}, {}, {}, Act(Step::kRestNeverStarted)},
      {{S::kFailed}, {}, {}, {}, Act(Step::kNothing)},  // left only by a new generation
      // Interrupted by an agent that died.
      {{S::kResuming}, {}, SandboxState::kRunning, {}, Act(Step::kRecoverResumed)},
      {{S::kResuming}, {}, {}, {}, Act(Step::kRestartResume)},
      {{S::kPausing, S::kSuspending}, {}, SandboxState::kRunning, {}, Act(Step::kRecoverCheckpointInterrupted)},
      {{S::kPausing, S::kSuspending}, {}, SandboxState::kPaused, OnDisk::kNewerLocal, Act(Step::kAdoptLocalSnapshot)},
      // Frozen for a Data archive without a snapshot: thawed, and it runs on.
      {{S::kPausing, S::kSuspending}, {}, SandboxState::kPaused, {}, Act(Step::kRecoverCheckpointInterrupted)},
      {{S::kPausing, S::kSuspending}, {}, {}, OnDisk::kNewerLocal, Act(Step::kAdoptLocalSnapshot)},
      {{S::kSuspending}, {}, {}, OnDisk::kCommittedByTransition, Act(Step::kAdoptCommittedSnapshot)},
      {{S::kPausing, S::kSuspending}, {}, {}, {}, Act(Step::kForceCleanDeadSandbox)},
  };
  return rows;
}

TEST(TransitionsTest, EveryStatusDesiredSandboxAndDiskOnAQuorumReadEndsInTheTablesAction) {
  std::vector<int> used(Table().size(), 0);
  int combinations = 0;
  for (ActorState status : kStatuses) {
    for (DesiredState desired : kDesired) {
      for (SandboxState sandbox : kSandboxes) {
        for (OnDisk disk : kDisks) {
          ++combinations;
          const auto& rows = Table();
          size_t i = 0;
          while (i < rows.size() &&
                 !(rows[i].statuses.count(status) && (!rows[i].desired || *rows[i].desired == desired) &&
                   (!rows[i].sandbox || *rows[i].sandbox == sandbox) && (!rows[i].disk || *rows[i].disk == disk))) {
            ++i;
          }
          ASSERT_LT(i, rows.size()) << "no row for " << api::ToString(status) << " " << static_cast<int>(desired);
          ++used[i];
          World w{sandbox, disk};
          const Decision got = Final(Quorum(status, desired), w);
          EXPECT_EQ(got, rows[i].expect)
              << api::ToString(status) << " desired=" << static_cast<int>(desired) << " sandbox=" << ToString(sandbox)
              << " disk=" << static_cast<int>(disk) << ": got " << ToString(got.step) << ", row " << i << " says "
              << ToString(rows[i].expect.step);
        }
      }
    }
  }
  EXPECT_EQ(combinations, 8 * 3 * 5 * 3);
  for (size_t i = 0; i < used.size(); ++i) EXPECT_GT(used[i], 0) << "row " << i << " is never reached";
}

TEST(TransitionsTest, ARestingOrRunningActorIsNeverAskedAboutSnapshotsAndAtRestNotAboutItsSandbox) {
  for (ActorState status : {ActorState::kPaused, ActorState::kSuspended, ActorState::kFailed, ActorState::kRunning}) {
    for (DesiredState desired : kDesired) {
      auto steps = DecideIn(Quorum(status, desired), World{SandboxState::kRunning, OnDisk::kNewerLocal});
      EXPECT_FALSE(Took(steps, Step::kListSnapshots)) << api::ToString(status);
      if (status != ActorState::kRunning) {
        EXPECT_FALSE(Took(steps, Step::kProbeSandbox)) << api::ToString(status);
      }
    }
  }
}

TEST(TransitionsTest, TheCacheStartsAPauseWithoutAReadOrAProbe) {
  Observation o;  // from the cache, running, spec observed
  o.status = ActorState::kRunning;
  o.desired = DesiredState::kPaused;
  auto steps = DecideIn(o, World{SandboxState::kRunning});
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].step, Step::kValidateSpec);
  EXPECT_EQ(steps[1], (Decision{Step::kCheckpoint, SnapshotTrigger::kPause}));
}

TEST(TransitionsTest, TheCacheStartsAResumeOnlyWithNoSandboxLeft) {
  Observation o;
  o.status = ActorState::kSuspended;
  o.desired = DesiredState::kRunning;
  EXPECT_EQ(DecideIn(o, World{}).back().step, Step::kResume);
  EXPECT_FALSE(Took(DecideIn(o, World{}), Step::kReadQuorum));
  o.sandbox_root_exists = true;  // a forced cleanup while this agent was away: read, then remove it
  auto steps = DecideIn(o, World{});
  EXPECT_EQ(steps.front().step, Step::kValidateSpec);
  EXPECT_TRUE(Took(steps, Step::kReadQuorum));
  EXPECT_TRUE(Took(steps, Step::kRemoveLeftoverSandbox));
  EXPECT_EQ(steps.back().step, Step::kResume);
}

TEST(TransitionsTest, TheCacheLeavesAnActorAtRestAsWantedWithoutAnyObservation) {
  Observation o;
  o.status = ActorState::kPaused;
  o.desired = DesiredState::kPaused;
  auto steps = DecideIn(o, World{});
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].step, Step::kNothing);
  o.generation_observed = false;  // a new generation is acknowledged on a read
  steps = DecideIn(o, World{});
  EXPECT_EQ(steps.front().step, Step::kValidateSpec);
  EXPECT_EQ(steps.back().step, Step::kWriteObservedGeneration);
  EXPECT_TRUE(Took(steps, Step::kReadQuorum));
}

TEST(TransitionsTest, TheCacheProbesARunningSandboxAndReadsWhenItIsDead) {
  Observation o;
  o.status = ActorState::kRunning;
  o.desired = DesiredState::kRunning;
  auto alive = DecideIn(o, World{SandboxState::kRunning});
  ASSERT_EQ(alive.size(), 2u);
  EXPECT_EQ(alive[0].step, Step::kProbeSandbox);
  EXPECT_EQ(alive[1].step, Step::kWatchLiveness);
  auto dead = DecideIn(o, World{SandboxState::kStopped});
  EXPECT_TRUE(Took(dead, Step::kReadQuorum));
  EXPECT_EQ(dead.back().step, Step::kForceCleanDeadSandbox);
}

// A CUDA restore still finishing (Restored=False Restoring) is finished before anything else a
// running actor does — a checkpoint too: its CUDA state must be back before it is toggled again
// — and decided on a read; a sandbox that died meanwhile is cleaned up.
TEST(TransitionsTest, ARestoreStillFinishingIsWaitedForWhateverTheDesiredState) {
  for (DesiredState desired : {DesiredState::kRunning, DesiredState::kPaused, DesiredState::kSuspended}) {
    Observation o;
    o.status = ActorState::kRunning;
    o.desired = desired;
    o.restore_pending = true;
    auto steps = DecideIn(o, World{SandboxState::kRunning});
    EXPECT_EQ(steps.front().step, Step::kReadQuorum) << api::ToString(desired);
    EXPECT_TRUE(Took(steps, Step::kProbeSandbox));
    EXPECT_EQ(steps.back().step, Step::kFinishRestore);
    steps = DecideIn(o, World{SandboxState::kStopped});
    EXPECT_EQ(steps.back().step, Step::kForceCleanDeadSandbox) << api::ToString(desired);
    o.being_deleted = true;  // deletion comes first
    EXPECT_EQ(DecideIn(o, World{SandboxState::kRunning}).back().step, Step::kDelete);
  }
}

TEST(TransitionsTest, AnUnsettledWorkerIsSettledOnAReadBeforeAnythingElse) {
  Observation o;
  o.status = ActorState::kPaused;
  o.desired = DesiredState::kPaused;
  o.unsettled_worker = true;
  auto steps = DecideIn(o, World{});
  ASSERT_GE(steps.size(), 3u);
  EXPECT_EQ(steps[0].step, Step::kReadQuorum);
  EXPECT_EQ(steps[1].step, Step::kFreeUnsettledWorker);
  EXPECT_EQ(steps.back().step, Step::kNothing);
  o.status = ActorState::kRunning;  // a running actor's worker is its own
  o.desired = DesiredState::kRunning;
  steps = DecideIn(o, World{SandboxState::kRunning});
  EXPECT_EQ(steps[1].step, Step::kForgetUnsettledWorker);
  EXPECT_EQ(steps.back().step, Step::kWatchLiveness);
}

TEST(TransitionsTest, OwnershipDeletionFinalizerSpecAndRuntimeComeBeforeTheTable) {
  Observation o = Quorum(ActorState::kRunning, DesiredState::kPaused);
  o.owned_here = false;
  EXPECT_EQ(Final(o, World{}).step, Step::kNothing);
  o = Quorum(ActorState::kRunning, DesiredState::kPaused);
  o.being_deleted = true;
  EXPECT_EQ(Final(o, World{}).step, Step::kDelete);
  o = Quorum(ActorState::kRunning, DesiredState::kPaused);
  o.has_finalizer = false;
  auto steps = DecideIn(o, World{});
  EXPECT_EQ(steps.front().step, Step::kAddFinalizer);
  EXPECT_EQ(steps.back().step, Step::kCheckpoint);
  // An invalid spec: a running actor keeps running; any other fails.
  EXPECT_EQ(Final(Quorum(ActorState::kRunning, DesiredState::kPaused), World{{}, {}, false}).step, Step::kNothing);
  EXPECT_EQ(Final(Quorum(ActorState::kPaused, DesiredState::kRunning), World{{}, {}, false}).step,
            Step::kFailInvalidSpec);
  o = Quorum(ActorState::kSuspended, DesiredState::kRunning);
  o.driver_available = false;
  EXPECT_EQ(Final(o, World{}).step, Step::kFailRuntimeUnavailable);
  o.status = ActorState::kFailed;  // already failed: nothing more to write
  EXPECT_EQ(Final(o, World{}).step, Step::kNothing);
}

TEST(TransitionsTest, BackoffsWaitInsteadOfActing) {
  Observation o = Quorum(ActorState::kRunning, DesiredState::kSuspended);
  o.checkpoint_backoff = true;
  EXPECT_EQ(Final(o, World{}).step, Step::kWaitCheckpointBackoff);
  o = Quorum(ActorState::kPaused, DesiredState::kRunning);
  o.resume_backoff = true;
  EXPECT_EQ(Final(o, World{}).step, Step::kWaitResumeBackoff);
  o = Quorum(ActorState::kResuming, DesiredState::kRunning);
  o.resume_backoff = true;
  EXPECT_EQ(Final(o, World{SandboxState::kStopped}).step, Step::kWaitResumeBackoff);
  o.resume_backoff = false;
  EXPECT_EQ(Final(o, World{SandboxState::kStopped}).step, Step::kRestartResume);
}

TEST(TransitionsTest, ANewGenerationLeavesFailedOnlyForRunning) {
  Observation o = Quorum(ActorState::kFailed, DesiredState::kRunning);
  o.generation_observed = false;
  EXPECT_EQ(Final(o, World{}).step, Step::kResume);
  o.desired = DesiredState::kPaused;
  EXPECT_EQ(Final(o, World{}).step, Step::kWriteObservedGeneration);
}

TEST(TransitionsTest, AFrozenSandboxThatWillNotThawIsCleanedUp) {
  const Observation o = Quorum(ActorState::kPausing, DesiredState::kPaused);
  auto steps = DecideIn(o, World{SandboxState::kPaused, OnDisk::kNothing, true, /*thaw_works=*/false});
  EXPECT_TRUE(Took(steps, Step::kThawFrozenSandbox));
  EXPECT_EQ(steps.back().step, Step::kForceCleanDeadSandbox);
}

TEST(TransitionsTest, ACommittedSnapshotIsAdoptedOnlyByTheSuspendThatTookIt) {
  Observation o = Quorum(ActorState::kSuspending, DesiredState::kSuspended);
  o.transition_start_known = false;  // no start time: no way to tell it from an older orphan
  EXPECT_EQ(Final(o, World{SandboxState::kNotFound, OnDisk::kCommittedByTransition}).step,
            Step::kForceCleanDeadSandbox);
}

TEST(TransitionsTest, CheckpointFailuresAreClassifiedByWhatTheSandboxSaysAfterwards) {
  const Status refused(Code::kInternal, "refused", "runtime_error");
  const Status deadline(Code::kDeadlineExceeded, "timed out", "timeout");
  EXPECT_EQ(ClassifyCheckpointFailure(refused, SandboxState::kRunning), CheckpointFailure::kSurvived);
  EXPECT_EQ(ClassifyCheckpointFailure(refused, SandboxState::kStopped), CheckpointFailure::kSandboxLost);
  EXPECT_EQ(ClassifyCheckpointFailure(refused, Status(Code::kInternal, "runsc state failed")),
            CheckpointFailure::kSandboxLost);
  // A checkpoint past its deadline is suspect even if the sandbox still answers.
  EXPECT_EQ(ClassifyCheckpointFailure(deadline, SandboxState::kRunning), CheckpointFailure::kSandboxLost);
}

TEST(TransitionsTest, ResumeFailuresArePermanentOnlyForWhatCannotWork) {
  EXPECT_TRUE(ResumeFailureIsPermanent(Status(Code::kInvalidArgument, "", "bad_bundle")));
  EXPECT_TRUE(ResumeFailureIsPermanent(Status(Code::kFailedPrecondition, "", "version_mismatch")));
  EXPECT_FALSE(ResumeFailureIsPermanent(Status(Code::kUnavailable, "", "cdi_unavailable")));
  EXPECT_FALSE(ResumeFailureIsPermanent(Status(Code::kInternal, "", "runtime_error")));
  EXPECT_FALSE(ResumeFailureIsPermanent(Status(Code::kDeadlineExceeded, "", "timeout")));
}

TEST(TransitionsTest, ACheckpointedSandboxIsDeletedWhereItsStateRequires) {
  EXPECT_EQ(SandboxDeleteAfterCheckpoint(true, false, false), DeleteAt::kBeforeWrite);
  EXPECT_EQ(SandboxDeleteAfterCheckpoint(false, true, true), DeleteAt::kBeforeWrite);
  EXPECT_EQ(SandboxDeleteAfterCheckpoint(false, false, true), DeleteAt::kBeforeRelease);
  EXPECT_EQ(SandboxDeleteAfterCheckpoint(false, false, false), DeleteAt::kAfterRelease);
}

TEST(TransitionsTest, RestingStateFollowsTheLatestSnapshot) {
  api::Actor a;
  EXPECT_EQ(RestingState(a), ActorState::kFailed);
  a.status.latest_snapshot = api::Snapshot{};
  a.status.latest_snapshot->trigger = SnapshotTrigger::kPause;
  a.status.latest_snapshot->node_name = "n1";
  EXPECT_EQ(RestingState(a), ActorState::kPaused);
  a.status.latest_snapshot->node_name = "";  // committed
  EXPECT_EQ(RestingState(a), ActorState::kSuspended);
  a.status.latest_snapshot->trigger = SnapshotTrigger::kSuspend;
  EXPECT_EQ(RestingState(a), ActorState::kSuspended);
}

TEST(TransitionsTest, FailureClassesBecomeConditionReasons) {
  EXPECT_EQ(ConditionReason("nvproxy_live_clients"), "NvproxyLiveClients");
  EXPECT_EQ(ConditionReason("container-stopped"), "ContainerStopped");
  EXPECT_EQ(ConditionReason(""), "Unknown");
}

// A commit refused for its credentials or its bucket says so; waiting fixes neither.
TEST(TransitionsTest, ACommitRefusedForItsConfigurationNamesIt) {
  EXPECT_STREQ(CommitFailedReason("store_auth_failed"), "StoreAuthFailed");
  EXPECT_STREQ(CommitFailedReason("store_bucket_missing"), "StoreBucketMissing");
  EXPECT_STREQ(CommitFailedReason("store_unreachable"), "StoreUnavailable");
  EXPECT_STREQ(CommitFailedReason(""), "StoreUnavailable");
}

// On a draining node every actor is decided as if it asked for Suspended, from the cache and on
// a quorum read alike: a running actor is suspended, a paused one committed, and one at rest
// that wants to run is not resumed here (the binder sends it elsewhere).
TEST(TransitionsTest, ADrainingNodeDecidesEveryActorAsIfItAskedForSuspended) {
  for (ActorState status : kStatuses) {
    for (DesiredState desired : kDesired) {
      for (SandboxState sandbox : kSandboxes) {
        for (OnDisk disk : kDisks) {
          Observation draining = Quorum(status, desired);
          draining.node_draining = true;
          const World world{sandbox, disk};
          EXPECT_EQ(Final(draining, world), Final(Quorum(status, DesiredState::kSuspended), world))
              << api::ToString(status) << " " << api::ToString(desired) << " " << ToString(sandbox);
        }
      }
    }
  }
  Observation o = Quorum(ActorState::kRunning, DesiredState::kRunning);
  o.node_draining = true;
  EXPECT_EQ(Final(o, World{SandboxState::kRunning}), (Decision{Step::kCheckpoint, SnapshotTrigger::kSuspend}));
  o = Quorum(ActorState::kPaused, DesiredState::kPaused);
  o.node_draining = true;
  EXPECT_EQ(Final(o, World{}).step, Step::kCommitPaused);
  o = Quorum(ActorState::kSuspended, DesiredState::kRunning);
  o.node_draining = true;
  EXPECT_EQ(Final(o, World{}).step, Step::kNothing) << "not resumed on a draining node";

  // The Event says so only where the drain, not the user, chose the suspend.
  const Decision suspend{Step::kCheckpoint, SnapshotTrigger::kSuspend};
  o = Quorum(ActorState::kRunning, DesiredState::kRunning);
  EXPECT_FALSE(ChosenByDrain(o, suspend)) << "not draining";
  o.node_draining = true;
  EXPECT_TRUE(ChosenByDrain(o, suspend));
  EXPECT_TRUE(ChosenByDrain(o, Decision{Step::kCommitPaused}));
  EXPECT_FALSE(ChosenByDrain(o, Decision{Step::kWatchLiveness}));
  o.desired = DesiredState::kSuspended;
  EXPECT_FALSE(ChosenByDrain(o, suspend)) << "the user asked for it";

  Observation cached;  // from the cache: the suspend starts without a read, as a user's would
  cached.status = ActorState::kRunning;
  cached.node_draining = true;
  const auto steps = DecideIn(cached, World{SandboxState::kRunning});
  EXPECT_FALSE(Took(steps, Step::kReadQuorum));
  EXPECT_EQ(steps.back(), (Decision{Step::kCheckpoint, SnapshotTrigger::kSuspend}));
}

}  // namespace
}  // namespace stasis
