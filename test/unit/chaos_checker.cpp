// The chaos checker's verdicts on synthetic records (test/chaos/checker.hpp).
#include <chaos/checker.hpp>

#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

using namespace dlock::chaos;

namespace {

std::vector<record> parse(const std::vector<std::string>& lines) {
  std::vector<record> out;
  for (const auto& line : lines) {
    record r;
    std::string error;
    BOOST_REQUIRE_MESSAGE(parse_record(line, r, error), "parses: " << line << " " << error);
    out.push_back(r);
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(chaos_checker)

BOOST_AUTO_TEST_CASE(records_round_trip_and_bad_lines_are_reported) {
  record r;
  std::string error;
  BOOST_TEST(parse_record("zk begin /l w1 100 w 7", r, error));
  BOOST_TEST(format_record(r) == "zk begin /l w1 100 w 7");
  BOOST_TEST(!parse_record("   ", r, error));
  BOOST_TEST(error.empty());
  BOOST_TEST(!parse_record("zk begin /l w1 not-a-time", r, error));
  BOOST_TEST(!error.empty());
  error.clear();
  BOOST_TEST(!parse_record("zk begin /l w1 100 w 6.8e+12", r, error));
  BOOST_TEST(!error.empty());
  error.clear();
  BOOST_TEST(!parse_record("redis valid k w1 100", r, error));
  BOOST_TEST(!error.empty());
}

BOOST_AUTO_TEST_CASE(successive_sections_are_clean) {
  auto rep = analyse(parse({"zk begin /l a 100 w 5", "zk end /l a 200", "zk begin /l b 210 w 6", "zk end /l b 300",
                            "zk fault member_kill - 150 zk2"}));
  BOOST_TEST(rep.ok());
  BOOST_TEST(rep.backends["zk"].sections == 2u);
  BOOST_TEST(rep.backends["zk"].faults["member_kill"] == 1u);
  BOOST_TEST(rep.backends["zk"].token_checks == 2u);
}

BOOST_AUTO_TEST_CASE(an_overlap_is_a_violation) {
  auto rep = analyse(parse({"zk begin /l a 100 w 5", "zk begin /l b 150 w 6", "zk end /l a 200", "zk end /l b 300"}));
  BOOST_TEST(!rep.ok());
  BOOST_TEST(rep.backends["zk"].overlaps == 1u);
  BOOST_REQUIRE(rep.violations.size() == 1u);
  BOOST_TEST(rep.violations[0].what.find("overlap on /l") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(an_overlap_after_the_holder_was_told_of_its_loss_is_allowed) {
  auto rep = analyse(parse({"zk begin /l a 100 w 5", "zk lost /l a 140 session_expired", "zk begin /l b 150 w 6",
                            "zk released /l a 200", "zk end /l b 300"}));
  BOOST_TEST(rep.ok());
  BOOST_TEST(rep.backends["zk"].overlaps == 0u);
  BOOST_TEST(rep.backends["zk"].overlaps_after_loss == 1u);
  BOOST_TEST(rep.backends["zk"].losses == 1u);
}

BOOST_AUTO_TEST_CASE(a_section_ends_when_its_holder_is_released_and_only_a_loss_makes_an_allowed_overlap) {
  // b begins between a's end and a's release: no overlap, and none "after loss" (a was not lost).
  auto rep = analyse(parse({"zk begin /l a 100 w 5", "zk end /l a 140", "zk begin /l b 150 w 6",
                            "zk released /l a 160", "zk end /l b 300", "zk released /l b 310",
                            "zk begin /l a 400 w 7", "zk end /l a 500"}));
  BOOST_TEST(rep.ok());
  BOOST_TEST(rep.backends["zk"].sections == 3u);
  BOOST_TEST(rep.backends["zk"].overlaps_after_loss == 0u);
}

BOOST_AUTO_TEST_CASE(a_loss_told_after_the_next_holder_began_is_still_an_overlap) {
  auto rep = analyse(parse({"zk begin /l a 100 w 5", "zk begin /l b 150 w 6", "zk lost /l a 160 session_expired",
                            "zk end /l a 200", "zk end /l b 300"}));
  BOOST_TEST(rep.backends["zk"].overlaps == 1u);
  BOOST_TEST(!rep.ok());
}

BOOST_AUTO_TEST_CASE(a_session_ended_by_someone_else_is_a_fenced_overlap_only_with_a_larger_later_token) {
  // a's session is closed on the servers at 120 (the fault names a), b begins at 150 with a larger
  // token, a is told at 160: counted apart, not a violation.
  auto fenced = analyse(parse({"zk begin /l a 100 w 5", "zk fault session_expiry - 120 a", "zk begin /l b 150 w 6",
                               "zk lost /l a 160 session_expired", "zk end /l a 200", "zk end /l b 300"}));
  BOOST_TEST(fenced.ok());
  BOOST_TEST(fenced.backends["zk"].overlaps == 0u);
  BOOST_TEST(fenced.backends["zk"].overlaps_fenced == 1u);
  // a's section ends (160) before the news reaches it; its release then fails: told, fenced.
  auto told_at_release = analyse(parse({"zk begin /l a 100 w 5", "zk fault session_expiry - 120 a",
                                        "zk begin /l b 150 w 6", "zk end /l a 160",
                                        "zk released /l a 170 connection_lost", "zk end /l b 300"}));
  BOOST_TEST(told_at_release.ok());
  BOOST_TEST(told_at_release.backends["zk"].overlaps_fenced == 1u);
  // The same with a smaller later token, with the fault on another worker, with the fault after b
  // began, or with a never told (its release succeeding): violations.
  const std::vector<std::vector<std::string>> violating = {
      {"zk begin /l a 100 w 7", "zk fault session_expiry - 120 a", "zk begin /l b 150 w 6",
       "zk lost /l a 160 session_expired", "zk end /l a 200", "zk end /l b 300"},
      {"zk begin /l a 100 w 5", "zk fault session_expiry - 120 c", "zk begin /l b 150 w 6",
       "zk lost /l a 160 session_expired", "zk end /l a 200", "zk end /l b 300"},
      {"zk begin /l a 100 w 5", "zk begin /l b 150 w 6", "zk fault session_expiry - 155 a",
       "zk lost /l a 160 session_expired", "zk end /l a 200", "zk end /l b 300"},
      {"zk begin /l a 100 w 5", "zk fault session_expiry - 120 a", "zk begin /l b 150 w 6", "zk end /l a 200",
       "zk end /l b 300"},
      {"zk begin /l a 100 w 5", "zk fault session_expiry - 120 a", "zk begin /l b 150 w 6", "zk end /l a 160",
       "zk released /l a 170", "zk end /l b 300"},
  };
  for (const auto& lines : violating) {
    auto rep = analyse(parse(lines));
    BOOST_TEST(!rep.ok());
    BOOST_TEST(rep.backends["zk"].overlaps == 1u);
    BOOST_TEST(rep.backends["zk"].overlaps_fenced == 0u);
  }
}

BOOST_AUTO_TEST_CASE(a_section_ends_at_its_validity_deadline) {
  // a's validity ran out at 140: b may begin at 150 even though a's end record is later.
  auto ok = analyse(parse({"redis begin k a 100 w 0", "redis valid k a 100 140", "redis begin k b 150 w 0",
                           "redis end k a 200", "redis end k b 300"}),
                    {"redis"});
  BOOST_TEST(ok.ok());
  BOOST_TEST(!ok.backends["redis"].fencing_checked);
  // A later deadline (an extension) keeps it alive past b's begin: overlap.
  auto bad = analyse(parse({"redis begin k a 100 w 0", "redis valid k a 100 140", "redis valid k a 130 170",
                            "redis begin k b 150 w 0", "redis end k a 200", "redis end k b 300"}),
                     {"redis"});
  BOOST_TEST(bad.backends["redis"].overlaps == 1u);
}

BOOST_AUTO_TEST_CASE(a_section_begun_after_its_own_validity_ended_is_a_late_grant) {
  // Reproduction 1 of issue #31: a paused its acquire past the TTL and was granted anyway (its
  // validity 0 at its begin); the key had expired on the server, and b acquired it next. The old
  // rule ended a's section at its deadline, its begin: an empty section that overlaps nothing
  // that begins after it, so the run was clean.
  auto late = analyse(parse({"redis begin k a 500 w 0", "redis valid k a 500 500", "redis begin k b 550 w 0",
                             "redis valid k b 550 1500", "redis end k a 600", "redis end k b 800"}),
                      {"redis"});
  BOOST_TEST(!late.ok());
  BOOST_TEST(late.backends["redis"].late_grants == 1u);
  BOOST_TEST(late.backends["redis"].overlaps == 0u);
  BOOST_REQUIRE(late.violations.size() == 1u);
  BOOST_TEST(late.violations[0].what.find("late grant on k") != std::string::npos);
  auto line = summary_line("redis", late.backends["redis"], late.violations.size());
  BOOST_TEST(line.find("late_grants=1") != std::string::npos);
  // While another holder's section runs, it is an overlap as well (the old rule saw that one).
  auto during = analyse(parse({"redis begin k b 100 w 0", "redis valid k b 100 900", "redis begin k a 500 w 0",
                               "redis valid k a 500 500", "redis end k a 600", "redis end k b 800"}),
                        {"redis"});
  BOOST_TEST(during.backends["redis"].late_grants == 1u);
  BOOST_TEST(during.backends["redis"].overlaps == 1u);
  // A deadline already past at the begin: late too, alone, whatever later deadlines say.
  auto past = analyse(parse({"redis begin k a 500 w 0", "redis valid k a 500 450", "redis valid k a 520 900",
                             "redis end k a 600"}),
                      {"redis"});
  BOOST_TEST(past.backends["redis"].late_grants == 1u);
  BOOST_TEST(!past.ok());
  // One nanosecond of validity left at the begin: a grant in time.
  auto in_time = analyse(parse({"redis begin k a 500 w 0", "redis valid k a 500 501", "redis end k a 501"}),
                         {"redis"});
  BOOST_TEST(in_time.ok());
  BOOST_TEST(in_time.backends["redis"].late_grants == 0u);
}

namespace {
// Seconds in the records' nanoseconds, for the liveness cases.
std::string s(double seconds) { return std::to_string(static_cast<long long>(seconds * 1e9)); }
}  // namespace

BOOST_AUTO_TEST_CASE(a_waiter_that_sleeps_through_a_free_lock_is_stuck) {
  // a holds until 1 s; b waits from 0.5 s and begins only at 20 s: the lock was free 19 s (bound 8 s).
  const std::vector<std::string> stuck = {"zk begin /l a " + s(0) + " w 5", "zk acquire /l b " + s(0.5),
                                          "zk end /l a " + s(0.9),  "zk released /l a " + s(1),
                                          "zk begin /l b " + s(20) + " w 6", "zk end /l b " + s(21)};
  auto rep = analyse(parse(stuck));
  BOOST_TEST(!rep.ok());
  BOOST_TEST(rep.backends["zk"].stuck_waiters == 1u);
  BOOST_TEST(rep.backends["zk"].waits == 1u);
  BOOST_REQUIRE(rep.violations.size() == 1u);
  BOOST_TEST(rep.violations[0].what.find("stuck waiter on /l: b") != std::string::npos);
  auto line = summary_line("zk", rep.backends["zk"], rep.violations.size());
  BOOST_TEST(line.find("stuck_waiters=1/1") != std::string::npos);

  // Its acquire failing and starting again does not end the wait.
  auto retried = stuck;
  retried.push_back("zk acquire /l b " + s(4));
  retried.push_back("zk released /l b " + s(3.9) + " connection_loss");
  BOOST_TEST(analyse(parse(retried)).backends["zk"].stuck_waiters == 1u);

  // A wait never answered ends at the worker's last record.
  auto never = analyse(parse({"zk begin /l a " + s(0) + " w 5", "zk acquire /l b " + s(0.5),
                              "zk released /l a " + s(1), "zk note mutex b " + s(30) + " worker_exit 0"}));
  BOOST_TEST(never.backends["zk"].stuck_waiters == 1u);
}

BOOST_AUTO_TEST_CASE(a_wait_while_the_lock_is_held_or_the_servers_are_faulty_is_not_stuck) {
  // c holds from 5 s to 13 s: the free stretches inside b's wait are 4 s and 7 s, each within the bound.
  auto held = analyse(parse({"zk begin /l a " + s(0) + " w 5", "zk acquire /l b " + s(0.5),
                             "zk released /l a " + s(1), "zk begin /l c " + s(5) + " w 6",
                             "zk released /l c " + s(13), "zk begin /l b " + s(20) + " w 7"}));
  BOOST_TEST(held.ok());
  BOOST_TEST(held.backends["zk"].stuck_waiters == 0u);
  // A fault from 2 s to 14 s: its time does not count (7 s outside it).
  auto faulty = analyse(parse({"zk begin /l a " + s(0) + " w 5", "zk acquire /l b " + s(0.5),
                               "zk released /l a " + s(1), "zk fault member_kill - " + s(2) + " zk1",
                               "zk healed member_kill - " + s(14), "zk begin /l b " + s(20) + " w 7"}));
  BOOST_TEST(faulty.ok());
  BOOST_TEST(faulty.backends["zk"].faults["member_kill"] == 1u);
  BOOST_TEST(faulty.backends["zk"].longest_free_wait == 7'000'000'000);
  BOOST_TEST(faulty.backends["zk"].longest_free_wait_where.find("/l: b waited from 500000000") == 0u);
  // The clock pauses during a fault, it does not start again: two stretches of 5 s outside faults.
  auto paused_clock = analyse(parse({"zk begin /l a " + s(0) + " w 5", "zk acquire /l b " + s(1),
                                     "zk released /l a " + s(1), "zk fault member_kill - " + s(6) + " zk1",
                                     "zk healed member_kill - " + s(8), "zk begin /l b " + s(13) + " w 7"}));
  BOOST_TEST(paused_clock.backends["zk"].stuck_waiters == 1u);
  // A waiter that gave up (the worker stopping) waits no more.
  auto gave_up = analyse(parse({"zk begin /l a " + s(0) + " w 5", "zk acquire /l b " + s(0.5),
                                "zk released /l a " + s(1), "zk gave_up /l b " + s(5) + " operation_aborted",
                                "zk note mutex b " + s(30) + " worker_exit 0"}));
  BOOST_TEST(gave_up.ok());
  // Redis has a bound of its own (5 s): 6 s free is stuck.
  auto redis = analyse(parse({"redis begin k a " + s(0) + " w 0", "redis acquire k b " + s(0.5),
                              "redis released k a " + s(1), "redis begin k b " + s(7) + " w 0"}),
                       {"redis"});
  BOOST_TEST(redis.backends["redis"].stuck_waiters == 1u);
}

BOOST_AUTO_TEST_CASE(a_frozen_holder_without_validity_is_a_paused_overlap_only_with_a_larger_later_token) {
  // a's process is frozen at 120 (client_pause names it), its session expires, b begins with a
  // larger token, a is told when it wakes: counted apart.
  auto paused = analyse(parse({"zk begin /l a 100 w 5", "zk fault client_pause - 120 6000ms a",
                               "zk begin /l b 150 w 6", "zk healed client_pause - 170",
                               "zk lost /l a 180 session_expired", "zk end /l b 300"}));
  BOOST_TEST(paused.ok());
  BOOST_TEST(paused.backends["zk"].overlaps_paused == 1u);
  BOOST_TEST(paused.backends["zk"].faults["client_pause"] == 1u);
  // A smaller later token, another worker frozen, or a holder with a validity deadline
  // (it must stop at its deadline, frozen or not): violations.
  const std::vector<std::vector<std::string>> violating = {
      {"zk begin /l a 100 w 7", "zk fault client_pause - 120 6000ms a", "zk begin /l b 150 w 6",
       "zk lost /l a 180 session_expired", "zk end /l b 300"},
      {"zk begin /l a 100 w 5", "zk fault client_pause - 120 6000ms c", "zk begin /l b 150 w 6",
       "zk lost /l a 180 session_expired", "zk end /l b 300"},
      {"zk begin /l a 100 w 5", "zk valid /l a 100 400", "zk fault client_pause - 120 6000ms a",
       "zk begin /l b 150 w 6", "zk lost /l a 180 expired", "zk end /l b 300"},
  };
  for (const auto& lines : violating) {
    auto rep = analyse(parse(lines));
    BOOST_TEST(!rep.ok());
    BOOST_TEST(rep.backends["zk"].overlaps == 1u);
    BOOST_TEST(rep.backends["zk"].overlaps_paused == 0u);
  }
}

BOOST_AUTO_TEST_CASE(readers_may_overlap_each_other_but_not_a_writer) {
  auto readers = analyse(parse({"zk begin /rw a 100 r 5", "zk begin /rw b 110 r 6", "zk end /rw a 200",
                                "zk end /rw b 210"}));
  BOOST_TEST(readers.ok());
  auto writer = analyse(parse({"zk begin /rw a 100 r 5", "zk begin /rw b 110 w 6", "zk end /rw a 200",
                               "zk end /rw b 210"}));
  BOOST_TEST(writer.backends["zk"].overlaps == 1u);
}

BOOST_AUTO_TEST_CASE(sections_of_different_locks_do_not_overlap) {
  auto rep = analyse(parse({"zk begin /a x 100 w 5", "zk begin /b y 110 w 6", "zk end /a x 200", "zk end /b y 210"}));
  BOOST_TEST(rep.ok());
}

BOOST_AUTO_TEST_CASE(a_token_that_did_not_grow_is_a_violation) {
  auto rep = analyse(parse({"zk begin /l a 100 w 9", "zk end /l a 200", "zk begin /l b 210 w 7", "zk end /l b 300"}));
  BOOST_TEST(rep.backends["zk"].token_regressions == 1u);
  BOOST_TEST(rep.backends["zk"].overlaps == 0u);
  BOOST_TEST(!rep.ok());
  // A reader's token is compared with writers only: concurrent readers may begin out of token order.
  auto readers = analyse(parse({"zk begin /rw a 100 r 9", "zk begin /rw b 110 r 8", "zk end /rw a 200",
                                "zk end /rw b 210", "zk begin /rw c 220 w 10", "zk end /rw c 230"}));
  BOOST_TEST(readers.ok());
  // Unfenced backends are not compared.
  auto unfenced = analyse(parse({"redis begin k a 100 w 9", "redis end k a 200", "redis begin k b 210 w 7",
                                 "redis end k b 300"}),
                          {"redis"});
  BOOST_TEST(unfenced.ok());
}

BOOST_AUTO_TEST_CASE(a_lost_queue_item_is_a_violation) {
  auto rep = analyse(parse({"zk offer /q p 100 i1", "zk offer /q p 110 i2", "zk take /q c 120 i1", "zk ack /q c 130 i1",
                            "zk take /q c 140 i2"}));
  BOOST_TEST(rep.backends["zk"].lost_items == 1u);
  BOOST_TEST(rep.backends["zk"].offered == 2u);
  BOOST_REQUIRE(rep.violations.size() == 1u);
  BOOST_TEST(rep.violations[0].what.find("i2") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(an_item_left_in_the_queue_or_acked_uncertainly_is_not_lost) {
  auto rep = analyse(parse({"zk offer /q p 100 i1", "zk offer /q p 110 i2", "zk take /q c 120 i1",
                            "zk ack? /q c 130 i1", "zk left /q - 500 i2"}));
  BOOST_TEST(rep.ok());
  BOOST_TEST(rep.backends["zk"].left == 1u);
}

BOOST_AUTO_TEST_CASE(an_item_delivered_twice_is_a_violation) {
  auto rep = analyse(parse({"zk offer /q p 100 i1", "zk take /q c 120 i1", "zk ack /q c 130 i1",
                            "zk take /q d 125 i1", "zk ack /q d 135 i1"}));
  BOOST_TEST(rep.backends["zk"].duplicated_items == 1u);
  BOOST_TEST(!rep.ok());
  // Acknowledged and still in the queue: delivered, and will be again.
  auto left = analyse(parse({"zk offer /q p 100 i1", "zk ack /q c 130 i1", "zk left /q - 500 i1"}));
  BOOST_TEST(left.backends["zk"].duplicated_items == 1u);
}

BOOST_AUTO_TEST_CASE(an_orphan_is_a_violation_and_the_line_shows_the_figures) {
  auto rep = analyse(parse({"zk begin /l a 100 w 5", "zk end /l a 200", "zk orphan node - 900 /l/_c_x-lock-0001",
                            "zk fault leader_kill - 150 zk3"}));
  BOOST_TEST(rep.backends["zk"].orphans == 1u);
  BOOST_TEST(!rep.ok());
  auto line = summary_line("zk", rep.backends["zk"], rep.violations.size());
  BOOST_TEST(line.find("sections=1") != std::string::npos);
  BOOST_TEST(line.find("leader_kill=1") != std::string::npos);
  BOOST_TEST(line.find("orphans=1") != std::string::npos);
  BOOST_TEST(line.find("VIOLATION") != std::string::npos);
}

// Sentinel: a failover is a fault whose `healed` names another master.
BOOST_AUTO_TEST_CASE(a_sentinel_overlap_before_the_earlier_holder_was_told_is_a_violation) {
  // a was granted until 1000 on the old master, b on the new one at 300; a is told only at 400.
  auto rep = analyse(parse({"sentinel fault master_kill - 150 sredis1", "sentinel begin lock a 100 w 5",
                            "sentinel valid lock a 100 1000", "sentinel begin lock b 300 w 6",
                            "sentinel valid lock b 300 1300", "sentinel lost lock a 400 failed_over",
                            "sentinel released lock a 410 failed_over", "sentinel healed master_kill - 500 sredis1 sredis2",
                            "sentinel end lock b 600"}));
  BOOST_TEST(!rep.ok());
  BOOST_TEST(rep.backends["sentinel"].overlaps == 1u);
  BOOST_TEST(rep.backends["sentinel"].failovers == 1u);
  BOOST_TEST(rep.backends["sentinel"].told_failed_over == 1u);
  BOOST_TEST(rep.backends["sentinel"].kept_believing == 0u);
}

BOOST_AUTO_TEST_CASE(a_sentinel_overlap_after_the_holder_was_told_failed_over_is_allowed_and_counted) {
  // c (another lock), granted before the fault too, let go before the new master was seen (at 240): not held at it.
  auto rep = analyse(parse({"sentinel begin lock a 100 w 5", "sentinel valid lock a 100 1000",
                            "sentinel begin other c 50 w 4", "sentinel end other c 200", "sentinel released other c 210",
                            "sentinel fault sentinel_failover - 150 sredis1", "sentinel switched master - 240 sredis1 sredis3",
                            "sentinel lost lock a 250 failed_over",
                            "sentinel begin lock b 300 w 6", "sentinel valid lock b 300 1300",
                            "sentinel released lock a 350 failed_over",
                            "sentinel healed sentinel_failover - 500 sredis1 sredis3", "sentinel end lock b 600"}));
  BOOST_TEST(rep.ok());
  BOOST_TEST(rep.backends["sentinel"].overlaps_after_loss == 1u);
  BOOST_TEST(rep.backends["sentinel"].held_at_failover == 1u);
  BOOST_TEST(rep.backends["sentinel"].told_failed_over == 1u);
  auto line = summary_line("sentinel", rep.backends["sentinel"], 0);
  BOOST_TEST(line.find("failovers=1 held_at_failover=1 told_failed_over=1 kept_believing=0") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_holder_still_entitled_after_a_failover_kept_believing) {
  // a keeps extending (on the new master) past the failover's end, never told.
  auto rep = analyse(parse({"sentinel begin lock a 100 w 5", "sentinel valid lock a 100 1000",
                            "sentinel fault sentinel_failover - 150 sredis1", "sentinel valid lock a 400 1400",
                            "sentinel healed sentinel_failover - 500 sredis1 sredis2", "sentinel valid lock a 800 1800",
                            "sentinel end lock a 900"}));
  BOOST_TEST(rep.backends["sentinel"].kept_believing == 1u);
  BOOST_TEST(!rep.ok());
  // The same fault with no master change is no failover: nothing to tell.
  auto same = analyse(parse({"sentinel begin lock a 100 w 5", "sentinel valid lock a 100 1000",
                             "sentinel fault sentinel_failover - 150 sredis1", "sentinel valid lock a 400 1400",
                             "sentinel healed sentinel_failover - 500 sredis1 sredis1", "sentinel end lock a 900"}));
  BOOST_TEST(same.ok());
  BOOST_TEST(same.backends["sentinel"].failovers == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
