#include "controller/controller.h"

#include <spdlog/spdlog.h>

namespace stasis {

Controller::Controller(std::string name, Reconciler& reconciler, int workers, Metrics* metrics,
                       Clock& clock)
    : name_(std::move(name)), reconciler_(reconciler), workers_(workers), metrics_(metrics),
      clock_(clock) {
  WorkQueueOptions o;
  o.name = name_;
  o.clock = &clock_;
  o.metrics = metrics_;
  queue_ = std::make_unique<WorkQueue>(std::move(o));
  if (metrics_) metrics_->RegisterController(name_);
}

Controller::~Controller() { Stop(std::chrono::seconds(0)); }

EventHandler Controller::EnqueueHandler() {
  auto enqueue = [this](const ObjectPtr& o) { queue_->Add(ObjectKey(*o)); };
  return {enqueue, [enqueue](const ObjectPtr&, const ObjectPtr& n) { enqueue(n); }, enqueue};
}

void Controller::Start() {
  if (started_.exchange(true)) return;
  for (int i = 0; i < workers_; ++i) threads_.emplace_back([this] { Work(); });
}

bool Controller::Stop(std::chrono::milliseconds grace) {
  bool drained = queue_->ShutDownWithDrain(clock_.Now() + grace);
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  return drained;
}

void Controller::Work() {
  while (auto key = queue_->Get()) {
    const auto start = clock_.Now();
    spdlog::debug("component=controller op=reconcile_start controller={} key={}", name_, *key);
    Result<ReconcileOutcome> r = Status(Code::kInternal, "reconciler threw");
    try {
      r = reconciler_.Reconcile(Request::FromKey(*key));
    } catch (const std::exception& e) {
      // A reconciler must not throw; if one does, the key is retried rather than lost.
      r = Status(Code::kInternal, std::string("reconciler threw: ") + e.what());
    }
    const double seconds = std::chrono::duration<double>(clock_.Now() - start).count();
    ReconcileResult label;
    if (!r.ok()) {
      label = ReconcileResult::kError;
      spdlog::warn("reconcile failed controller={} key={} error=\"{}\" requeues={}", name_, *key,
                   r.status().ToString(), queue_->NumRequeues(*key));
      queue_->AddRateLimited(*key);
    } else if (r->requeue_after.count() > 0) {
      label = ReconcileResult::kRequeueAfter;
      queue_->Forget(*key);
      queue_->AddAfter(*key, r->requeue_after);
    } else if (r->requeue) {
      label = ReconcileResult::kRequeue;
      queue_->AddRateLimited(*key);
    } else {
      label = ReconcileResult::kSuccess;
      queue_->Forget(*key);
    }
    if (metrics_) metrics_->ObserveReconcile(name_, label, seconds);
    queue_->Done(*key);
  }
}

}  // namespace stasis
