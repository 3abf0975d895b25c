// The pipelining queue: requests wait, are staged into one write, then are
// answered strictly in order. I/O-free; the connection drives it.
#pragma once

#include <cstddef>
#include <deque>
#include <utility>
#include <vector>

namespace dlock::redis::detail {

/// `Ptr` is a pointer-like handle to a request; `skip(p)` says a waiting
/// request was abandoned before being written (it is dropped, never sent).
template <class Ptr>
class request_queue {
 public:
  void push(Ptr p) { waiting_.push_back(std::move(p)); }
  /// Puts an answered request back at the head of the waiting ones, to be
  /// sent again before them. Keeps the order only while nothing is in
  /// flight (nothing was written after it): the caller checks.
  void push_first(Ptr p) { waiting_.push_front(std::move(p)); }
  bool has_waiting() const noexcept { return !waiting_.empty(); }
  bool empty() const noexcept { return waiting_.empty() && in_flight_.empty(); }
  std::size_t in_flight_size() const noexcept { return in_flight_.size(); }
  std::size_t size() const noexcept { return waiting_.size() + in_flight_.size(); }
  /// The oldest request written and not yet answered (abandoned or not), or null.
  const Ptr* oldest_in_flight() const noexcept { return in_flight_.empty() ? nullptr : &in_flight_.front(); }
  /// Moves every waiting request (but the skipped) to the in-flight FIFO,
  /// calling `on_staged(p)` on each, in order. Returns how many were staged.
  template <class Skip, class OnStaged>
  std::size_t stage_each(Skip skip, OnStaged on_staged) {
    std::size_t staged = 0;
    for (auto& p : waiting_) {
      if (skip(p)) continue;
      on_staged(p);
      in_flight_.push_back(std::move(p));
      ++staged;
    }
    waiting_.clear();
    return staged;
  }
  /// The same, appending each to `batch`.
  template <class Skip>
  std::size_t stage(std::vector<Ptr>& batch, Skip skip) {
    return stage_each(skip, [&batch](const Ptr& p) { batch.push_back(p); });
  }

  /// The request the next reply answers, removed; an empty Ptr when nothing
  /// is in flight (a reply nobody asked for: a protocol violation).
  Ptr pop_answered() {
    if (in_flight_.empty()) return Ptr();
    Ptr p = std::move(in_flight_.front());
    in_flight_.pop_front();
    return p;
  }

  /// Removes every request, in-flight first then waiting, calling f on each.
  template <class F>
  void drain(F f) {
    auto in_flight = std::move(in_flight_);
    auto waiting = std::move(waiting_);
    in_flight_.clear();
    waiting_.clear();
    for (auto& p : in_flight) f(p);
    for (auto& p : waiting) f(p);
  }

  /// Visits requests in order (in-flight, then waiting) while f returns true.
  template <class F>
  void visit(F f) {
    for (auto& p : in_flight_)
      if (!f(p)) return;
    for (auto& p : waiting_)
      if (!f(p)) return;
  }
  template <class F>
  void visit(F f) const {
    for (const auto& p : in_flight_)
      if (!f(p)) return;
    for (const auto& p : waiting_)
      if (!f(p)) return;
  }

 private:
  std::deque<Ptr> waiting_;
  std::deque<Ptr> in_flight_;
};

}  // namespace dlock::redis::detail
