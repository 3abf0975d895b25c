// The chaos checker's verdicts, from the records the workers and the
// orchestrator wrote. Pure logic (no I/O beyond parsing text), so
// test/unit/chaos_checker.cpp feeds it synthetic records.
//
// One record per line: "<backend> <kind> <lock> <worker> <time_ns> [fields...]".
// Times are CLOCK_MONOTONIC nanoseconds, which every process on one Linux
// machine shares, so records of different processes compare directly.
//   acquire LOCK WORKER T             the contender starts an acquire: it waits for
//                                     the lock until its next `begin` (failed acquires
//                                     in between do not end the wait: it tries again)
//   gave_up LOCK WORKER T REASON      it stopped wanting the lock (an acquire failed
//                                     while the worker was stopping)
//   begin  LOCK WORKER T MODE TOKEN   a critical section starts (MODE w or r;
//                                     TOKEN the fencing token, 0 for none)
//   valid  LOCK WORKER T DEADLINE     the holder was told it may act until DEADLINE
//                                     (the first one stamped with the begin's own time:
//                                     DEADLINE <= T there is a late grant)
//   lost   LOCK WORKER T REASON       the holder was told of its loss
//   end    LOCK WORKER T              the holder stopped acting (before release)
//   released LOCK WORKER T [ERROR]    the release completed (or failed, with ERROR): the hold is over
//   offer  QUEUE WORKER T ITEM        an item was offered (the offer succeeded)
//   offer? QUEUE WORKER T ITEM        an offer failed with an unknown outcome
//   take   QUEUE WORKER T ITEM        an item was claimed
//   ack    QUEUE WORKER T ITEM        an item was acknowledged (delivered)
//   ack?   QUEUE WORKER T ITEM        an ack failed with an unknown outcome
//   left   QUEUE - T ITEM             the item was still in the queue at the end
//   fault  KIND - T DETAIL...         a fault was injected (orchestrator)
//   healed KIND - T [OLD NEW]         that fault restored what it changed: faults
//                                     run one at a time, so it ends the last `fault`.
//                                     A Sentinel set's fault names the master before
//                                     it and after it: they differ after a failover
//   switched MASTER - T OLD NEW       the sentinels were seen naming NEW instead of OLD
//                                     (orchestrator, polling every 100 ms during a fault)
//   orphan WHAT - T DETAIL...         a lock node or key left at the end (orchestrator)
//   error  WHAT WORKER T DETAIL...    a worker failed (threw, crashed, did not stop)
//   note   WHAT - T DETAIL...         informative, ignored by the verdicts
//
// The rules:
//  - A section runs from `begin` to the first of `end`, `lost`, or (when the
//    holder was given one) the last validity deadline it was told. Two
//    sections of one lock that intersect by those ends overlap: a violation,
//    unless both are read sections. A section that begins after the earlier
//    holder was told of its loss (or saw its validity end) but before that
//    holder let go (`released`, else `end`) is an "overlap after loss": allowed,
//    and counted.
//  - One exception, counted apart as "fenced": the earlier holder's session
//    was ended on the servers by someone else (the `session_expiry` fault, a
//    twin handle closing it) after its section began and before the later
//    one began, it was told of the loss afterwards (by its loss signal, or,
//    when its section ended before the news came, by its release failing),
//    and the later holder's
//    fencing token is larger. ZooKeeper tells the holder only when its own
//    server applies the close, which another member may apply first: no
//    client can be warned in time, and the token is what protects a resource.
//  - The same exception, counted apart as "paused": the earlier holder's
//    process was frozen (the `client_pause` fault names it; SIGSTOP) after its
//    section began and before the later one began, the holder has no validity
//    deadline (ZooKeeper: a frozen process cannot count its session timeout),
//    it was told afterwards, and the later token is larger. A holder with a
//    validity deadline gets no exception: its section ends at the deadline.
//  - A section that begins at or after its own first validity deadline (the
//    holder was granted a lock whose validity had already run out: its key
//    may be gone, and another holder may have it) is a "late grant": a
//    violation. The old rule, "a section ends at its last validity deadline",
//    made such a section empty: it overlapped a section already running at
//    its begin, and nothing that began after it (the other holder to come).
//  - A contender waiting for a lock while no holder of it is recorded (from
//    a `begin` to its `released`, else its `end`) is "stuck" once that has
//    lasted longer than the backend's bound (see stuck_bound) outside
//    fault intervals (`fault` to `healed`; the clock pauses during faults,
//    which may make the lock unreachable, and resumes after; a holder
//    recorded meanwhile starts the count again). A violation.
//  - A failover (a fault whose `healed` names another master than the one
//    before it) must reach every holder granted before the fault began: one
//    whose section still runs when the fault is healed (not told of a loss,
//    its validity not run out, not ended) "kept believing": a violation. The
//    losses told with reason failed_over are counted (`failed_over_reason`),
//    and so are the holders granted before the fault began (on the old
//    master, surely) that still held the lock when the new master was seen
//    (`switched`, else the fault's end; a contender may learn of the new
//    master before the orchestrator's poll does, so a grant after the fault
//    began may be on either master and is not counted).
//  - Fencing tokens (non-zero) must grow: a write section's token is above
//    every token of sections begun before it; a read section's token is above
//    every write section's token begun before it.
//  - A queue item offered and neither acknowledged nor left in the queue is
//    lost; an item acknowledged twice was delivered twice.
//  - Every orphan and every error record is a violation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace dlock::chaos {

using nanos = std::int64_t;
constexpr nanos never = std::numeric_limits<nanos>::max();

/// The session timeout the ZooKeeper contenders ask for, the Redis TTL, and
/// the longest delay between a Redis connection's reconnect attempts: the
/// contenders' settings, from which the stuck-waiter bounds follow.
constexpr int zk_session_timeout_ms = 4000;
constexpr int redis_ttl_ms = 1000;
constexpr int redis_reconnect_max_ms = 2000;
/// How long a Sentinel contender's WAIT gives a replica to acknowledge.
constexpr int sentinel_replica_timeout_ms = 200;

/// How a worker records the loss reason dlock::error::failed_over (the
/// checker counts the holders told of a failover by it).
constexpr const char* failed_over_reason = "failed_over";

/// How long a contender may wait, outside faults, while nobody holds the
/// lock, in nanoseconds.
/// ZooKeeper: a holder whose release failed keeps its node until its session
/// expires (a session timeout after its last contact), and the waiter may be
/// reconnecting meanwhile: two session timeouts. Redis: a key outlives a
/// failed release by up to its TTL, the waiter's connection may be between
/// reconnect attempts, and retries come every 30-50 ms: a TTL, the longest
/// reconnect delay, and two seconds of slack (a loaded machine).
inline nanos stuck_bound(const std::string& backend) {
  nanos ms = backend == "zk" ? 2 * zk_session_timeout_ms : redis_ttl_ms + redis_reconnect_max_ms + 2000;
  return ms * 1'000'000;
}

struct record {
  std::string backend;  // "zk", "redis" or "sentinel"
  std::string kind;
  std::string subject;  // lock, queue, fault kind, orphan kind
  std::string worker;
  nanos time = 0;
  std::vector<std::string> fields;
};

/// Parses one line; false for a blank or malformed line (`error` says why).
inline bool parse_record(const std::string& line, record& out, std::string& error) {
  std::istringstream in(line);
  record r;
  if (!(in >> r.backend)) return false;  // blank
  if (!(in >> r.kind >> r.subject >> r.worker >> r.time)) {
    error = "malformed record: " + line;
    return false;
  }
  for (std::string field; in >> field;) r.fields.push_back(field);
  // The numbers the verdicts read must be numbers.
  auto integer = [](const std::string& text) {
    std::size_t digits = text.size() > 0 && text[0] == '-' ? 1 : 0;
    return digits < text.size() && text.find_first_not_of("0123456789", digits) == std::string::npos;
  };
  if ((r.kind == "begin" && r.fields.size() > 1 && !integer(r.fields[1])) ||
      (r.kind == "valid" && (r.fields.empty() || !integer(r.fields[0])))) {
    error = "malformed number in record: " + line;
    return false;
  }
  out = std::move(r);
  return true;
}

inline std::string format_record(const record& r) {
  std::string line = r.backend + " " + r.kind + " " + r.subject + " " + r.worker + " " + std::to_string(r.time);
  for (const auto& f : r.fields) line += " " + f;
  return line;
}

struct section {
  std::string lock;
  std::string worker;
  bool write = true;
  std::int64_t token = 0;
  nanos begin = 0;
  nanos end = never;       // the holder stopped acting (its body returned)
  nanos lost = never;      // told of loss
  nanos deadline = never;  // the last validity deadline it was given
  nanos first_deadline = never;  // the validity it was granted with
  nanos released = never;  // the release completed (with_lock returned)
  std::string loss_reason;
  std::string release_error;  // how with_lock failed, if it did
  /// Where the holder stopped being entitled to act.
  nanos effective_end() const { return std::min({end, lost, deadline, released}); }
  /// Until the holder let go, loss notice or not.
  nanos let_go() const { return released != never ? released : end; }
  /// Told of its loss, or its validity ran out, before it stopped acting.
  bool cut_short() const { return effective_end() < std::min(end, released); }
  /// Granted with its validity already gone.
  bool late() const { return first_deadline != never && first_deadline <= begin; }
  /// Until then a holder is recorded: the lock is not free.
  nanos held_until() const { return released != never ? released : end; }
};

struct violation {
  std::string backend;
  std::string what;  // human readable, with the records' figures
};

struct backend_figures {
  std::size_t sections = 0;
  std::map<std::string, std::size_t> sections_by_lock;
  std::map<std::string, std::size_t> faults;  // by kind
  std::size_t losses = 0;
  std::size_t overlaps = 0;             // violations
  std::size_t overlaps_after_loss = 0;  // allowed
  std::size_t overlaps_fenced = 0;      // allowed: session ended by someone else, later token larger
  std::size_t overlaps_paused = 0;      // allowed: holder frozen (no validity deadline), later token larger
  std::size_t late_grants = 0;          // violations: sections begun at or after their validity deadline
  std::size_t waits = 0;                // acquires waited for (a wait spans failed acquires)
  std::size_t stuck_waiters = 0;        // violations: waited past the bound while the lock was free
  nanos longest_free_wait = 0;          // the longest such wait, outside faults (informative)
  std::string longest_free_wait_where;  // who waited for what, from when
  bool masters_tracked = false;         // the faults name the master before and after (Sentinel)
  std::size_t failovers = 0;            // faults after which another server was the master
  std::size_t held_at_failover = 0;     // sections granted before a failover fault, still held at the switch
  std::size_t told_failed_over = 0;     // sections told of their loss (or failed release) with failed_over
  std::size_t kept_believing = 0;       // violations: still entitled after a failover completed, untold
  std::size_t token_checks = 0;         // sections whose token was compared
  std::size_t token_regressions = 0;
  std::size_t unfinished = 0;           // sections with no end record (informative)
  std::size_t orphans = 0;
  std::size_t errors = 0;
  std::size_t offered = 0, uncertain_offers = 0, acked = 0, left = 0, lost_items = 0, duplicated_items = 0;
  bool has_queue = false;
  bool fencing_checked = false;
};

struct report {
  std::map<std::string, backend_figures> backends;
  std::vector<violation> violations;
  std::vector<std::string> parse_errors;
  bool ok() const { return violations.empty() && parse_errors.empty(); }
};

namespace detail {

inline std::string describe(const section& s) {
  auto show = [](nanos t) { return t == never ? std::string("-") : std::to_string(t); };
  return s.worker + (s.write ? " w" : " r") + " [begin " + std::to_string(s.begin) +
         (s.first_deadline != never ? ", granted until " + std::to_string(s.first_deadline) : "") + ", end " + show(s.end) +
         ", lost " + show(s.lost) + (s.lost != never ? " (" + s.loss_reason + ")" : "") + ", deadline " +
         show(s.deadline) + ", released " + show(s.released) + "] token " + std::to_string(s.token);
}

// Folds the begin/valid/lost/end/released records of each worker into its sections.
inline std::vector<section> build_sections(const std::vector<record>& records) {
  std::vector<section> all;
  std::map<std::pair<std::string, std::string>, std::size_t> current;  // (lock, worker) -> index in `all`
  for (const auto& r : records) {
    auto key = std::make_pair(r.subject, r.worker);
    if (r.kind == "begin") {
      section s;  // an earlier section of this worker never released stays open-ended
      s.lock = r.subject;
      s.worker = r.worker;
      s.begin = r.time;
      s.write = r.fields.empty() || r.fields[0] != "r";
      s.token = r.fields.size() > 1 ? std::stoll(r.fields[1]) : 0;
      current[key] = all.size();
      all.push_back(s);
      continue;
    }
    if (r.kind != "valid" && r.kind != "lost" && r.kind != "end" && r.kind != "released") continue;
    auto it = current.find(key);
    if (it == current.end()) continue;  // nothing held: nothing to trim
    auto& s = all[it->second];
    if (r.kind == "valid") {
      if (!r.fields.empty() && s.first_deadline == never) s.first_deadline = std::stoll(r.fields[0]);
      if (!r.fields.empty() && s.end == never && s.lost == never) s.deadline = std::stoll(r.fields[0]);
    } else if (r.kind == "lost") {
      if (s.lost == never && s.end == never) {
        s.lost = r.time;
        s.loss_reason = r.fields.empty() ? "" : r.fields[0];
      }
    } else if (r.kind == "end") {
      if (s.end == never) s.end = r.time;
    } else {
      s.released = r.time;
      s.release_error = r.fields.empty() ? "" : r.fields[0];
      current.erase(it);
    }
  }
  return all;
}

inline bool intersect(nanos b1, nanos e1, nanos b2, nanos e2) { return b1 < e2 && b2 < e1; }

/// When something happened to each worker (a forced expiry, a pause).
using worker_times = std::map<std::string, std::vector<nanos>>;
/// When each worker's session was ended on the servers by someone else (`fault session_expiry - T WORKER`).
using forced_expiries = worker_times;

inline forced_expiries forced_expiries_of(const std::vector<record>& records) {
  forced_expiries out;
  for (const auto& r : records)
    if (r.kind == "fault" && r.subject == "session_expiry" && !r.fields.empty()) out[r.fields[0]].push_back(r.time);
  return out;
}

// When each fault began and ended (`fault` to `healed`), in order. Faults run
// one at a time; one never healed (an older record set) lasts an instant.
struct fault_span {
  std::string kind;
  nanos begin = 0, end = 0;
  std::vector<std::string> fields;
  std::string master_before, master_after;  // from `healed KIND - T OLD NEW`, when named
  nanos switched = never;                   // the first `switched` seen during the fault
  bool failed_over() const { return !master_before.empty() && master_before != master_after; }
};

inline std::vector<fault_span> fault_spans_of(const std::vector<record>& records) {
  std::vector<fault_span> out;
  bool open = false;
  for (const auto& r : records) {
    if (r.kind == "fault") {
      out.push_back({r.subject, r.time, r.time, r.fields, {}, {}});
      open = true;
    } else if (r.kind == "switched" && open) {
      out.back().switched = std::min(out.back().switched, r.time);
    } else if (r.kind == "healed" && open) {
      out.back().end = r.time;
      if (r.fields.size() >= 2) {
        out.back().master_before = r.fields[0];
        out.back().master_after = r.fields[1];
      }
      open = false;
    }
  }
  return out;
}

/// When each worker's process was frozen (`fault client_pause - T DURATION WORKER...`).
inline worker_times pauses_of(const std::vector<fault_span>& faults) {
  worker_times out;
  for (const auto& f : faults)
    if (f.kind == "client_pause")
      for (std::size_t i = 1; i < f.fields.size(); ++i) out[f.fields[i]].push_back(f.begin);
  return out;
}

// Told afterwards, by its loss signal or its release failing, and fenced by a larger later token.
inline bool told_and_fenced(const section& a, const section& b) {
  bool told = a.lost != never || !a.release_error.empty();
  return told && a.token != 0 && b.token > a.token;
}

inline bool any_between(const worker_times& events, const std::string& worker, nanos from, nanos to) {
  auto it = events.find(worker);
  if (it == events.end()) return false;
  return std::any_of(it->second.begin(), it->second.end(), [&](nanos t) { return from <= t && t <= to; });
}

// See "One exception" above: `a` the earlier section, `b` the later one.
inline bool fenced_after_forced_expiry(const section& a, const section& b, const forced_expiries& expiries) {
  return told_and_fenced(a, b) && any_between(expiries, a.worker, a.begin, b.begin);
}

// See "The same exception, counted apart as paused" above. A holder with a
// validity deadline must stop at it, frozen or not: no exception.
inline bool fenced_after_pause(const section& a, const section& b, const worker_times& pauses) {
  bool validity = a.first_deadline != never || a.deadline != never;
  return !validity && told_and_fenced(a, b) && any_between(pauses, a.worker, a.begin, b.begin);
}

inline void check_overlaps(const std::string& backend, std::vector<section> sections,
                           const forced_expiries& expiries, const worker_times& pauses, backend_figures& fig,
                           std::vector<violation>& out) {
  std::sort(sections.begin(), sections.end(), [](const section& a, const section& b) { return a.begin < b.begin; });
  for (std::size_t i = 0; i < sections.size(); ++i) {
    for (std::size_t j = i + 1; j < sections.size(); ++j) {
      const auto& a = sections[i];
      const auto& b = sections[j];
      if (a.lock != b.lock || a.worker == b.worker) continue;
      if (!a.write && !b.write) continue;
      if (intersect(a.begin, a.effective_end(), b.begin, b.effective_end())) {
        if (fenced_after_forced_expiry(a, b, expiries)) {
          ++fig.overlaps_fenced;
          continue;
        }
        if (fenced_after_pause(a, b, pauses)) {
          ++fig.overlaps_paused;
          continue;
        }
        ++fig.overlaps;
        // Said for the report: a resource checking fencing tokens would have refused the stale holder.
        bool fenced = a.token != 0 && b.token > a.token;
        out.push_back({backend, "overlap on " + a.lock + ": " + describe(a) + " and " + describe(b) +
                                    (fenced ? " (the later token is larger: fencing would refuse the earlier holder)"
                                            : "")});
      } else if (a.cut_short() && intersect(a.begin, a.let_go(), b.begin, b.effective_end())) {
        ++fig.overlaps_after_loss;
      }
    }
  }
}

inline void check_tokens(const std::string& backend, std::vector<section> sections, backend_figures& fig,
                         std::vector<violation>& out) {
  std::sort(sections.begin(), sections.end(), [](const section& a, const section& b) { return a.begin < b.begin; });
  std::map<std::string, const section*> max_any, max_write;  // per lock
  for (const auto& s : sections) {
    if (s.token == 0) continue;
    const section* bound = s.write ? max_any[s.lock] : max_write[s.lock];
    ++fig.token_checks;
    if (bound && s.token <= bound->token) {
      ++fig.token_regressions;
      out.push_back({backend, "fencing token did not grow on " + s.lock + ": " + describe(*bound) + " then " +
                                  describe(s)});
    }
    auto raise = [&s](const section*& m) {
      if (!m || s.token > m->token) m = &s;
    };
    raise(max_any[s.lock]);
    if (s.write) raise(max_write[s.lock]);
  }
}

// See "A section that begins at or after its own first validity deadline" above.
inline void check_late_grants(const std::string& backend, const std::vector<section>& sections,
                              backend_figures& fig, std::vector<violation>& out) {
  for (const auto& s : sections) {
    if (!s.late()) continue;
    ++fig.late_grants;
    out.push_back({backend, "late grant on " + s.lock + ": a section began with no validity left (" +
                                std::to_string((s.begin - s.first_deadline) / 1'000'000) +
                                " ms past the deadline it was granted with): " + describe(s)});
  }
}

// See "A failover ... must reach every holder granted before the fault began" above.
inline void check_failovers(const std::string& backend, const std::vector<section>& sections,
                            const std::vector<fault_span>& faults, backend_figures& fig,
                            std::vector<violation>& out) {
  for (const auto& s : sections)
    if (s.loss_reason == failed_over_reason || s.release_error == failed_over_reason) ++fig.told_failed_over;
  for (const auto& f : faults) {
    if (!f.master_before.empty()) fig.masters_tracked = true;
    if (!f.failed_over()) continue;
    ++fig.failovers;
    nanos switched = std::min(f.switched, f.end);
    for (const auto& s : sections) {
      if (s.begin >= f.begin) continue;  // granted during or after the fault: on either master
      if (s.held_until() > switched) ++fig.held_at_failover;
      if (s.effective_end() <= f.end) continue;
      ++fig.kept_believing;
      out.push_back({backend, "holder kept believing through a failover (" + f.kind + " from " + std::to_string(f.begin) +
                                  " to " + std::to_string(f.end) + ", master " + f.master_before + " -> " +
                                  f.master_after + "): " + describe(s)});
    }
  }
}

struct wait_span {
  std::string lock, worker;
  nanos begin = 0, end = 0;
};

// From a contender's first `acquire` to its next `begin` or `gave_up`, else its last record.
inline std::vector<wait_span> waits_of(const std::vector<record>& records) {
  std::map<std::string, nanos> last_record;  // worker -> time
  for (const auto& r : records) last_record[r.worker] = std::max(last_record[r.worker], r.time);
  std::vector<wait_span> out;
  std::map<std::pair<std::string, std::string>, nanos> open;  // (lock, worker) -> since
  for (const auto& r : records) {
    auto key = std::make_pair(r.subject, r.worker);
    if (r.kind == "acquire") {
      open.emplace(key, r.time);  // already waiting: the earlier acquire failed, this one tries again
    } else if (r.kind == "begin" || r.kind == "gave_up") {
      auto it = open.find(key);
      if (it == open.end()) continue;
      out.push_back({r.subject, r.worker, it->second, r.time});
      open.erase(it);
    }
  }
  for (const auto& [key, since] : open) out.push_back({key.first, key.second, since, last_record[key.second]});
  return out;
}

// [begin, end) spans, sorted and merged.
inline std::vector<std::pair<nanos, nanos>> merged(std::vector<std::pair<nanos, nanos>> spans) {
  std::sort(spans.begin(), spans.end());
  std::vector<std::pair<nanos, nanos>> out;
  for (const auto& s : spans) {
    if (!out.empty() && s.first <= out.back().second)
      out.back().second = std::max(out.back().second, s.second);
    else
      out.push_back(s);
  }
  return out;
}

inline nanos covered(const std::vector<std::pair<nanos, nanos>>& spans, nanos from, nanos to) {
  nanos sum = 0;
  for (const auto& [b, e] : spans)
    if (b < to && from < e) sum += std::min(e, to) - std::max(b, from);
  return sum;
}

// See "A contender waiting for a lock while no holder of it is recorded" above.
inline void check_stuck_waiters(const std::string& backend, const std::vector<record>& records,
                                const std::vector<section>& sections, const std::vector<fault_span>& faults,
                                nanos bound, backend_figures& fig, std::vector<violation>& out) {
  std::map<std::string, std::vector<std::pair<nanos, nanos>>> held;  // lock -> when a holder was recorded
  for (const auto& s : sections) held[s.lock].push_back({s.begin, s.held_until()});
  for (auto& [lock, spans] : held) spans = merged(std::move(spans));
  std::vector<std::pair<nanos, nanos>> faulty;
  for (const auto& f : faults) faulty.push_back({f.begin, f.end});
  faulty = merged(std::move(faulty));

  for (const auto& w : waits_of(records)) {
    ++fig.waits;
    const auto& busy = held[w.lock];
    // The free stretches inside the wait: between the holders recorded.
    auto next = std::lower_bound(busy.begin(), busy.end(), std::make_pair(w.begin, w.begin),
                                 [](const auto& a, const auto& b) { return a.second <= b.first; });
    nanos from = w.begin;
    for (;; ++next) {
      nanos to = next == busy.end() ? w.end : std::min(w.end, next->first);
      if (to > from) {
        nanos quiet = (to - from) - covered(faulty, from, to);
        auto where = w.worker + " waited from " + std::to_string(w.begin) + "; the lock was free from " +
                     std::to_string(from) + " to " + std::to_string(to) + ", " + std::to_string(quiet / 1'000'000) +
                     " ms of it outside faults";
        if (quiet > fig.longest_free_wait) {
          fig.longest_free_wait = quiet;
          fig.longest_free_wait_where = w.lock + ": " + where;
        }
        if (quiet > bound) {
          ++fig.stuck_waiters;
          out.push_back({backend, "stuck waiter on " + w.lock + ": " + where + " (bound " +
                                      std::to_string(bound / 1'000'000) + " ms)"});
        }
      }
      if (next == busy.end() || next->second >= w.end) break;
      from = std::max(w.begin, next->second);
    }
  }
}

struct item_fate {
  bool offered = false, uncertain = false, left = false;
  int acks = 0, uncertain_acks = 0, takes = 0;
};

inline void check_queue(const std::string& backend, const std::vector<record>& records, backend_figures& fig,
                        std::vector<violation>& out) {
  std::map<std::string, item_fate> items;  // "queue item" -> fate
  for (const auto& r : records) {
    if (r.fields.empty()) continue;
    auto& fate = items[r.subject + " " + r.fields[0]];
    if (r.kind == "offer") fate.offered = true;
    else if (r.kind == "offer?") fate.uncertain = true;
    else if (r.kind == "take") ++fate.takes;
    else if (r.kind == "ack") ++fate.acks;
    else if (r.kind == "ack?") ++fate.uncertain_acks;
    else if (r.kind == "left") fate.left = true;
    else continue;
    fig.has_queue = true;
  }
  for (const auto& [item, fate] : items) {
    if (fate.offered) ++fig.offered;
    if (fate.uncertain && !fate.offered) ++fig.uncertain_offers;
    if (fate.acks > 0) ++fig.acked;
    if (fate.left) ++fig.left;
    if (fate.offered && fate.acks == 0 && fate.uncertain_acks == 0 && !fate.left) {
      ++fig.lost_items;
      out.push_back({backend, "queue item lost: " + item + " (offered, taken " + std::to_string(fate.takes) +
                                  " times, never acknowledged, not in the queue at the end)"});
    }
    if (fate.acks > 1 || (fate.acks == 1 && fate.left)) {
      ++fig.duplicated_items;
      out.push_back({backend, "queue item delivered twice: " + item + " (acknowledged " + std::to_string(fate.acks) +
                                  " times" + (fate.left ? ", and still in the queue" : "") + ")"});
    }
  }
}

}  // namespace detail

/// The verdicts over every record of a run (all workers and the orchestrator).
/// `unfenced_backends`: backends whose locks give no fencing token (tokens
/// are then not compared, and the report says so).
inline report analyse(const std::vector<record>& records, const std::set<std::string>& unfenced_backends = {}) {
  report rep;
  std::map<std::string, std::vector<record>> by_backend;
  for (const auto& r : records) by_backend[r.backend].push_back(r);
  for (auto& [backend, recs] : by_backend) {
    std::stable_sort(recs.begin(), recs.end(), [](const record& a, const record& b) { return a.time < b.time; });
    auto& fig = rep.backends[backend];
    auto sections = detail::build_sections(recs);
    fig.sections = sections.size();
    for (const auto& s : sections) {
      ++fig.sections_by_lock[s.lock];
      if (s.lost != never) ++fig.losses;
      if (s.end == never && s.lost == never && s.released == never) ++fig.unfinished;
    }
    for (const auto& r : recs) {
      if (r.kind == "fault") ++fig.faults[r.subject];
      if (r.kind == "orphan") {
        ++fig.orphans;
        std::string detail;
        for (const auto& f : r.fields) detail += " " + f;
        rep.violations.push_back({backend, "orphan " + r.subject + ":" + detail});
      }
      if (r.kind == "error") {
        ++fig.errors;
        std::string detail;
        for (const auto& f : r.fields) detail += " " + f;
        rep.violations.push_back({backend, "error in " + r.worker + " (" + r.subject + "):" + detail});
      }
    }
    auto faults = detail::fault_spans_of(recs);
    detail::check_overlaps(backend, sections, detail::forced_expiries_of(recs), detail::pauses_of(faults), fig,
                           rep.violations);
    detail::check_late_grants(backend, sections, fig, rep.violations);
    detail::check_failovers(backend, sections, faults, fig, rep.violations);
    detail::check_stuck_waiters(backend, recs, sections, faults, stuck_bound(backend), fig, rep.violations);
    fig.fencing_checked = !unfenced_backends.count(backend);
    if (fig.fencing_checked) detail::check_tokens(backend, sections, fig, rep.violations);
    detail::check_queue(backend, recs, fig, rep.violations);
  }
  return rep;
}

/// One line of figures for `backend`.
inline std::string summary_line(const std::string& backend, const backend_figures& fig, std::size_t violations) {
  std::ostringstream line;
  line << backend << ": sections=" << fig.sections << " (";
  bool first = true;
  for (const auto& [lock, n] : fig.sections_by_lock) {
    line << (first ? "" : " ") << lock << "=" << n;
    first = false;
  }
  line << ") losses=" << fig.losses << " faults:";
  if (fig.faults.empty()) line << " none";
  for (const auto& [kind, n] : fig.faults) line << " " << kind << "=" << n;
  if (fig.masters_tracked || fig.told_failed_over)
    line << " failovers=" << fig.failovers << " held_at_failover=" << fig.held_at_failover
         << " told_failed_over=" << fig.told_failed_over << " kept_believing=" << fig.kept_believing;
  line << " | overlaps=" << fig.overlaps << " overlaps_after_loss=" << fig.overlaps_after_loss;
  if (fig.overlaps_fenced) line << " overlaps_fenced=" << fig.overlaps_fenced;
  if (fig.overlaps_paused) line << " overlaps_paused=" << fig.overlaps_paused;
  line << " late_grants=" << fig.late_grants << " stuck_waiters=" << fig.stuck_waiters << "/" << fig.waits
       << " (longest free wait " << fig.longest_free_wait / 1'000'000 << " ms)";
  if (fig.fencing_checked)
    line << " token_regressions=" << fig.token_regressions << "/" << fig.token_checks;
  else
    line << " token_regressions=n/a(no fencing token)";
  line << " orphans=" << fig.orphans;
  if (fig.errors) line << " errors=" << fig.errors;
  if (fig.has_queue)
    line << " queue offered=" << fig.offered << " acked=" << fig.acked << " left=" << fig.left
         << " lost=" << fig.lost_items << " duplicated=" << fig.duplicated_items;
  line << " -> " << (violations == 0 ? "OK" : std::to_string(violations) + " VIOLATION(S)");
  return line.str();
}

}  // namespace dlock::chaos
