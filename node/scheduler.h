// Internal to node/: the simulation's event queue. Events are ordered by
// (virtual time, sequence number); one thread, no clock but this one.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "node/messages.h"
#include "walfmt/assert.h"

namespace walcut::node::sim {

// The local steps a node schedules on every transaction. They are plain data
// rather than a std::function: a lambda capturing `this` and a TxId does not
// fit std::function's small buffer, so each of the ~1.3 M steps of a 200k
// transaction run cost a heap allocation. Rare steps (timers, recovery,
// driver actions) still use std::function.
enum class StepKind : uint8_t { kNone = 0, kDecide, kSendFinish, kCommitStep, kCutStartStep };

// Events are ordered by (time, sequence); the sequence number makes ties
// deterministic. An event is a message delivery, a local step of a node, or a
// step of the driver (node == kNoNode). Node events are dropped when the node
// is down or restarted since they were scheduled.
class Scheduler {
 public:
  struct Event {
    uint64_t t = 0;
    uint64_t seq = 0;
    uint32_t node = kNoNode;
    uint32_t incarnation = 0;
    bool has_msg = false;
    StepKind step = StepKind::kNone;
    Msg msg;                   // when has_msg
    TxId step_tx;              // the step's transaction (kDecide, kSendFinish, kCommitStep)
    uint64_t step_k = 0;       // the step's cut id (kCutStartStep)
    std::function<void()> fn;  // otherwise
    bool in_use = false;       // between Add and Release
  };

  uint64_t now() const { return now_; }
  // Schedules an event at time t and returns it for the caller to fill in
  // (before anything else is scheduled or popped). The heap holds small keys;
  // events stay put in a slab and are run in place, so a message is never
  // copied to the heap or moved again after it was sent. The slab is a deque:
  // events scheduled while one runs must not move the running one.
  Event& Add(uint64_t t) {
    uint32_t slot;
    if (free_.empty()) {
      slot = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
    } else {
      slot = free_.back();
      free_.pop_back();
    }
    heap_.push_back(Key{t, next_seq_++, slot});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
    Event& e = slots_[slot];
    WALCUT_ASSERT(!e.in_use, "Scheduler::Add: a free slot still holds an event");
    e.in_use = true;
    e.t = t;
    return e;
  }
  // The next event; it stays valid until Release(slot).
  bool Pop(uint32_t& slot) {
    if (heap_.empty()) return false;
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    const Key k = heap_.back();
    heap_.pop_back();
    slot = k.slot;
    WALCUT_ASSERT(slots_[slot].in_use, "Scheduler::Pop: a queued key names a released slot");
    slots_[slot].seq = k.seq;
    now_ = k.t;
    return true;
  }
  Event& at(uint32_t slot) {
    WALCUT_ASSERT(slot < slots_.size() && slots_[slot].in_use, "Scheduler::at: not an event's slot");
    return slots_[slot];
  }
  // Drops what the event holds that matters (the shared plan, the closure);
  // the message's vectors are simply overwritten by the next use of the slot.
  void Release(uint32_t slot) {
    WALCUT_ASSERT(slot < slots_.size() && slots_[slot].in_use, "Scheduler::Release: slot released twice");
    Event& e = slots_[slot];
    e.in_use = false;
    e.has_msg = false;
    e.step = StepKind::kNone;
    e.msg.plan.reset();
    e.fn = nullptr;
    free_.push_back(slot);
  }
  // Nothing runs after this. The slab is kept: the event running now (the one
  // that failed) lives in it.
  void Clear() { heap_.clear(); }

 private:
  struct Key {
    uint64_t t;
    uint64_t seq;
    uint32_t slot;
  };
  struct Later {
    bool operator()(const Key& a, const Key& b) const { return a.t != b.t ? a.t > b.t : a.seq > b.seq; }
  };
  std::vector<Key> heap_;
  std::deque<Event> slots_;
  std::vector<uint32_t> free_;
  uint64_t now_ = 0;
  uint64_t next_seq_ = 0;
};

}  // namespace walcut::node::sim
