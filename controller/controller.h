// A controller: a work queue fed by informer handlers, and N worker threads that hand each key
// to a Reconciler. The queue guarantees that one key is never reconciled by two workers at
// once, so a reconciler may assume exclusive ownership of its object for one call.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "controller/informer.h"
#include "controller/metrics.h"
#include "controller/reconciler.h"
#include "controller/work_queue.h"

namespace stasis {

class Controller {
 public:
  // metrics may be nullptr (tests).
  Controller(std::string name, Reconciler& reconciler, int workers, Metrics* metrics,
             Clock& clock = RealClock::Get());
  ~Controller();

  // Enqueues the key of every added, changed or deleted object.
  EventHandler EnqueueHandler();
  WorkQueue& queue() { return *queue_; }
  const std::string& name() const { return name_; }

  void Start();
  // Stops intake, lets in-flight reconciles finish until `grace` passes, joins the workers.
  // Returns false when some were still running at the deadline.
  bool Stop(std::chrono::milliseconds grace);

 private:
  void Work();

  std::string name_;
  Reconciler& reconciler_;
  int workers_;
  Metrics* metrics_;
  Clock& clock_;
  std::unique_ptr<WorkQueue> queue_;
  std::vector<std::thread> threads_;
  std::atomic<bool> started_{false};
};

}  // namespace stasis
