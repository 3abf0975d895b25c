// The orchestrator: starts the contender processes of one backend, injects
// faults at random for the run's duration, stops the contenders, looks for
// orphans, and hands every record to the checker.
#include <chaos/support.hpp>

#include <dlock/zk/client.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace dlock::chaos {
namespace {

namespace zk = dlock::zk;
using namespace std::chrono_literals;
using std::chrono::milliseconds;

struct worker_process {
  pid_t pid = -1;
  std::string recipe;
  std::string name;
  bool exited = false;
  int status = 0;
};

struct run_ctx {
  std::string backend;
  std::string run_id;
  std::string dir;
  std::string servers_script;
  std::vector<host_port> ensemble;  // zk1..zk3
  std::vector<host_port> masters;   // redis1..redis5
  std::vector<host_port> sentinels;       // sentinel1..3 (backend sentinel)
  std::vector<host_port> sentinel_nodes;  // sredis1..3
  std::string sentinel_master;            // the name they monitor
  std::vector<worker_process> workers;
  recorder* rec = nullptr;
  std::mt19937_64 rng;
  std::string fault;  // the fault in progress, healed by inject_one once it returns

  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
  void sleep_ms(int ms) { std::this_thread::sleep_for(milliseconds(ms)); }
};

// Runs a shell command; its output goes to the run's log, not to ours.
int shell(const run_ctx& r, const std::string& command) {
  std::string full = "timeout 150 " + command + " >> '" + r.dir + "/shell.log' 2>&1";
  int rc = std::system(full.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

// The output of a short command (redis-cli answers).
std::string capture(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(("timeout 10 " + command + " 2>/dev/null").c_str(), "r");
  if (!pipe) return out;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe)) out += buffer;
  ::pclose(pipe);
  return out;
}

int servers(run_ctx& r, const std::string& action, const std::string& name) {
  int rc = shell(r, "'" + r.servers_script + "' " + action + " " + name);
  if (rc != 0) r.rec->write("note", "servers", {action, name, "failed", std::to_string(rc)});
  return rc;
}

// Every fault starts with this record; inject_one writes its `healed` once the
// fault has restored what it changed (the checker's fault intervals).
void start_fault(run_ctx& r, const std::string& kind, std::vector<std::string> fields) {
  r.rec->write("fault", kind, std::move(fields));
  r.fault = kind;
}

// SIGSTOP/SIGCONT a server by its pid file, at once: `servers pause` costs a
// shell, too slow when a pause must fall between a request and its reply.
void signal_server(run_ctx& r, const std::string& name, int signal) {
  const char* run_dir = std::getenv("DLOCK_RUN_DIR");
  std::ifstream in(std::string(run_dir ? run_dir : "") + "/" + name + ".pid");
  pid_t pid = 0;
  if (run_dir && (in >> pid) && pid > 0 && ::kill(pid, signal) == 0) return;
  servers(r, signal == SIGSTOP ? "pause" : "resume", name);
}

// ZooKeeper's "srvr" four-letter word: is the member on `port` the leader?
bool is_leader(const host_port& member) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(member.port);
  ::inet_pton(AF_INET, member.host.c_str(), &addr.sin_addr);
  std::string reply;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && ::write(fd, "srvr", 4) == 4) {
    char buffer[1024];
    for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) reply.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return reply.find("Mode: leader") != std::string::npos;
}

std::string redis_cli(const host_port& m, const std::string& args) {
  return "redis-cli -h " + m.host + " -p " + std::to_string(m.port) + " " + args;
}

// --- faults -----------------------------------------------------------------
// Each fault restores what it broke before it returns, so the next one meets
// a whole cluster (a quorum for ZooKeeper).

void zk_member_kill(run_ctx& r) {
  std::string name = "zk" + std::to_string(r.uniform(1, 3));
  start_fault(r, "member_kill", {name});
  servers(r, "kill", name);
  r.sleep_ms(r.uniform(500, 3000));
  servers(r, "restart", name);
}

void zk_member_pause(run_ctx& r) {
  std::string name = "zk" + std::to_string(r.uniform(1, 3));
  // Longer than two thirds of the session timeout, sometimes longer than all of it.
  int ms = zk_session_timeout_ms * 2 / 3 + r.uniform(100, zk_session_timeout_ms);
  start_fault(r, "member_pause", {name, std::to_string(ms) + "ms"});
  servers(r, "pause", name);
  r.sleep_ms(ms);
  servers(r, "resume", name);
}

void zk_leader_kill(run_ctx& r) {
  std::string leader;
  for (std::size_t i = 0; i < r.ensemble.size(); ++i)
    if (is_leader(r.ensemble[i])) leader = "zk" + std::to_string(i + 1);
  if (leader.empty()) {
    r.rec->write("note", "leader_kill", {"no_leader_found"});
    return;
  }
  start_fault(r, "leader_kill", {leader});
  servers(r, "kill", leader);
  r.sleep_ms(r.uniform(500, 3000));
  servers(r, "restart", leader);
}

void zk_session_expiry(run_ctx& r) {
  std::vector<worker_process*> alive;
  for (auto& w : r.workers)
    if (!w.exited) alive.push_back(&w);
  if (alive.empty()) return;
  auto* victim = alive[static_cast<std::size_t>(r.uniform(0, static_cast<int>(alive.size()) - 1))];
  start_fault(r, "session_expiry", {victim->name});
  ::kill(victim->pid, SIGUSR1);
  r.sleep_ms(zk_session_timeout_ms);
}

// Resets the TCP connections of every client of the ensemble at once, while
// they have requests in flight: ss -K (needs root and INET_DIAG_DESTROY).
void zk_connection_cut(run_ctx& r) {
  std::string filter;
  for (const auto& m : r.ensemble) filter += (filter.empty() ? "" : " or ") + std::string("dport = :") + std::to_string(m.port);
  start_fault(r, "connection_cut", {"all_clients"});
  if (shell(r, "ss -K -tn state established '( " + filter + " )'") != 0)
    r.rec->write("note", "connection_cut", {"ss_-K_failed"});
  r.sleep_ms(1000);
}

// Network partitions through $DLOCK_CHAOS_PARTITION start|stop NAME, when set
// (scripts/soak sets it to scripts/chaos-partition inside its own namespace).
bool partition_available() { return std::getenv("DLOCK_CHAOS_PARTITION") != nullptr; }
void partition(run_ctx& r, const std::string& name) {
  std::string hook = std::getenv("DLOCK_CHAOS_PARTITION");
  int ms = r.uniform(1000, 2 * zk_session_timeout_ms);
  start_fault(r, "partition", {name, std::to_string(ms) + "ms"});
  if (shell(r, "'" + hook + "' start " + name) != 0) r.rec->write("note", "partition", {"start_failed", name});
  r.sleep_ms(ms);
  if (shell(r, "'" + hook + "' stop " + name) != 0) r.rec->write("note", "partition", {"stop_failed", name});
}

// redis1 carries the single-instance lock as well as a fifth of the Redlock:
// it gets two faults in five, so the single lock meets its master's faults too.
std::string random_master(run_ctx& r) {
  return r.uniform(0, 4) < 2 ? "redis1" : "redis" + std::to_string(r.uniform(2, 5));
}
const host_port& master_of(run_ctx& r, const std::string& name) {
  return r.masters.at(static_cast<std::size_t>(std::stoi(name.substr(5)) - 1));
}

void redis_master_stop(run_ctx& r) {
  std::string name = random_master(r);
  int ms = r.uniform(200, 3 * redis_ttl_ms);
  start_fault(r, "master_stop", {name, std::to_string(ms) + "ms"});
  servers(r, "pause", name);
  r.sleep_ms(ms);
  servers(r, "resume", name);
}

// Killed, then restarted empty (no persistence) after more than a TTL, as
// Redlock requires.
void redis_master_kill(run_ctx& r) {
  std::string name = random_master(r);
  start_fault(r, "master_kill_restart", {name});
  servers(r, "kill", name);
  r.sleep_ms(redis_ttl_ms + r.uniform(200, 1500));
  servers(r, "restart", name);
}

void redis_script_flush(run_ctx& r) {
  std::string name = random_master(r);
  start_fault(r, "script_flush", {name});
  shell(r, redis_cli(master_of(r, name), "SCRIPT FLUSH"));
}

// Cuts every client connection of one master while commands are in flight.
void redis_connection_cut(run_ctx& r) {
  std::string name = random_master(r);
  start_fault(r, "connection_cut", {name});
  shell(r, redis_cli(master_of(r, name), "CLIENT KILL TYPE normal SKIPME yes"));
}

// --- time as a fault: the client paused ------------------------------------

std::string random_recipe(run_ctx& r) {
  auto recipes = recipes_of(r.backend);
  return recipes[static_cast<std::size_t>(r.uniform(0, static_cast<int>(recipes.size()) - 1))];
}

// Less than `limit` (0.3-0.8 of it) or more (1.2-2.5 times), half the time each.
int less_or_more_than(run_ctx& r, int limit) {
  return r.uniform(0, 1) ? r.uniform(limit * 3 / 10, limit * 8 / 10) : r.uniform(limit * 12 / 10, limit * 5 / 2);
}

std::string current_master(const run_ctx& r);

std::vector<std::string> servers_of(const run_ctx& r, const std::string& recipe) {
  if (r.backend == "zk") return {"zk1", "zk2", "zk3"};
  if (r.backend == "sentinel") return {current_master(r)};
  if (recipe == "lock") return {"redis1"};
  return {"redis1", "redis2", "redis3", "redis4", "redis5"};
}

// Contenders are frozen between a request and its reply, for less or for more
// than the TTL (Redis) or the session timeout (ZooKeeper): the servers they
// talk to are stopped for 100-300 ms, so what the contenders send meanwhile
// stays unanswered; the contenders are frozen (SIGSTOP), the servers resume
// and answer into the frozen contenders' sockets, and the contenders are woken
// (SIGCONT) after the pause. One contender of a recipe, or all of its
// contenders (then the lock's holder and its waiters all wake to stale replies).
void client_pause(run_ctx& r) {
  auto recipe = random_recipe(r);
  std::vector<worker_process*> victims;
  for (auto& w : r.workers)
    if (!w.exited && w.recipe == recipe) victims.push_back(&w);
  if (victims.empty()) return;
  if (r.uniform(0, 2) > 0) victims = {victims[static_cast<std::size_t>(r.uniform(0, static_cast<int>(victims.size()) - 1))]};
  int ms = less_or_more_than(r, r.backend == "zk" ? zk_session_timeout_ms : redis_ttl_ms);
  std::vector<std::string> fields = {std::to_string(ms) + "ms"};
  for (auto* v : victims) fields.push_back(v->name);
  start_fault(r, "client_pause", fields);
  auto held = servers_of(r, recipe);
  for (const auto& name : held) signal_server(r, name, SIGSTOP);
  r.sleep_ms(r.uniform(100, 300));
  for (auto* v : victims) ::kill(v->pid, SIGSTOP);
  for (const auto& name : held) signal_server(r, name, SIGCONT);
  r.sleep_ms(ms);
  for (auto* v : victims) ::kill(v->pid, SIGCONT);
}

// Whether `w` holds its lock now, by the tail of its record file: its last
// `begin` not yet followed by a `released`.
bool holds_now(const run_ctx& r, const worker_process& w) {
  std::ifstream in(r.dir + "/" + w.name + ".log", std::ios::binary);
  in.seekg(0, std::ios::end);
  auto size = static_cast<std::streamoff>(in.tellg());
  in.seekg(std::max<std::streamoff>(0, size - 8192));
  bool holding = false;
  for (std::string line; std::getline(in, line);) {
    record rec;
    std::string error;
    if (!parse_record(line, rec, error) || rec.subject != w.recipe) continue;
    if (rec.kind == "begin") holding = true;
    if (rec.kind == "released") holding = false;
  }
  return holding;
}

// The late grant (issue #31, reproduction 1), made likely: a lock's holder
// is frozen, its servers are stopped before its key can expire (so the
// waiters' SETs queue up there), the waiters are frozen once the key has
// expired, and the servers resume: the first SET they run takes the free key
// for a frozen waiter, which reads the reply after its pause, within the TTL
// or after it (a grant that must be refused). Then everyone wakes. The
// servers are stopped for less than the command timeout, so the SETs are
// still awaited.
void client_pause_grant(run_ctx& r) {
  auto recipe = random_recipe(r);
  std::vector<worker_process*> holders, waiters;
  for (auto& w : r.workers)
    if (!w.exited && w.recipe == recipe) (holds_now(r, w) ? holders : waiters).push_back(&w);
  if (holders.empty() || waiters.empty()) {
    r.rec->write("note", "client_pause_grant", {recipe, "no_holder_and_waiter_found"});
    return;
  }
  int ms = less_or_more_than(r, redis_ttl_ms);
  std::vector<std::string> fields = {std::to_string(ms) + "ms"};
  for (auto* v : holders) fields.push_back(v->name);
  for (auto* v : waiters) fields.push_back(v->name);
  start_fault(r, "client_pause_grant", fields);
  auto frozen = std::chrono::steady_clock::now();
  for (auto* v : holders) ::kill(v->pid, SIGSTOP);
  r.sleep_ms(r.uniform(redis_ttl_ms * 4 / 10, redis_ttl_ms * 7 / 10));
  auto held = servers_of(r, recipe);
  for (const auto& name : held) signal_server(r, name, SIGSTOP);
  // Its key has expired a TTL after its last extension, which came before it froze.
  std::this_thread::sleep_until(frozen + milliseconds(redis_ttl_ms + r.uniform(30, 150)));
  for (auto* v : waiters) ::kill(v->pid, SIGSTOP);
  for (const auto& name : held) signal_server(r, name, SIGCONT);
  r.sleep_ms(ms);
  for (auto* v : waiters) ::kill(v->pid, SIGCONT);
  for (auto* v : holders) ::kill(v->pid, SIGCONT);
}

// --- errors from a minority of Redis masters --------------------------------

// The value of one configuration parameter (CONFIG GET answers name, value).
std::string config_get(const host_port& m, const std::string& parameter) {
  std::istringstream answer(capture(redis_cli(m, "CONFIG GET " + parameter)));
  std::string name, value;
  std::getline(answer, name);
  std::getline(answer, value);
  return value;
}

// One or two masters (a minority of the five, redis1 two times in five).
std::vector<std::string> minority(run_ctx& r) {
  std::vector<std::string> names = {random_master(r)};
  if (r.uniform(0, 1)) {
    auto other = "redis" + std::to_string(r.uniform(1, 5));
    if (other != names[0]) names.push_back(other);
  }
  return names;
}

// Writes refused with -OOM: maxmemory 1 byte and no eviction, restored after.
void redis_master_oom(run_ctx& r) {
  auto names = minority(r);
  int ms = r.uniform(300, 3 * redis_ttl_ms);
  std::vector<std::string> fields = names;
  fields.push_back(std::to_string(ms) + "ms");
  start_fault(r, "master_oom", fields);
  std::vector<std::pair<std::string, std::string>> saved;  // maxmemory, policy
  for (const auto& name : names) {
    const auto& m = master_of(r, name);
    saved.push_back({config_get(m, "maxmemory"), config_get(m, "maxmemory-policy")});
    shell(r, redis_cli(m, "CONFIG SET maxmemory-policy noeviction"));
    shell(r, redis_cli(m, "CONFIG SET maxmemory 1"));
  }
  r.sleep_ms(ms);
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto& m = master_of(r, names[i]);
    shell(r, redis_cli(m, "CONFIG SET maxmemory " + (saved[i].first.empty() ? "0" : saved[i].first)));
    shell(r, redis_cli(m, "CONFIG SET maxmemory-policy " + (saved[i].second.empty() ? "noeviction" : saved[i].second)));
  }
}

// Writes refused with -READONLY: the master made a replica of a port where
// nothing listens (it keeps its data, never syncs), then a master again.
void redis_master_readonly(run_ctx& r) {
  auto names = minority(r);
  int ms = r.uniform(300, 3 * redis_ttl_ms);
  std::vector<std::string> fields = names;
  fields.push_back(std::to_string(ms) + "ms");
  start_fault(r, "master_readonly", fields);
  for (const auto& name : names) shell(r, redis_cli(master_of(r, name), "REPLICAOF 127.0.0.1 1"));
  r.sleep_ms(ms);
  for (const auto& name : names) shell(r, redis_cli(master_of(r, name), "REPLICAOF NO ONE"));
}

// -BUSY: a script that spins for a while (read-only, so SCRIPT KILL can end
// it), with the busy threshold (lua-time-limit) lowered from 5 s to 100 ms so
// that other clients get -BUSY instead of silence; restored after.
void redis_master_busy(run_ctx& r) {
  auto name = random_master(r);
  const auto& m = master_of(r, name);
  int ms = r.uniform(300, 3 * redis_ttl_ms);
  start_fault(r, "master_busy", {name, std::to_string(ms) + "ms"});
  auto threshold = config_get(m, "busy-reply-threshold");
  shell(r, redis_cli(m, "CONFIG SET busy-reply-threshold 100"));
  const std::string spin =
      "local t = redis.call(\"TIME\") local stop = t[1] * 1000000 + t[2] + tonumber(ARGV[1]) * 1000 "
      "repeat t = redis.call(\"TIME\") until t[1] * 1000000 + t[2] >= stop return 1";
  shell(r, redis_cli(m, "EVAL '" + spin + "' 0 " + std::to_string(ms)));
  shell(r, redis_cli(m, "SCRIPT KILL"));  // only if it is still running: NOTBUSY otherwise
  shell(r, redis_cli(m, "CONFIG SET busy-reply-threshold " + (threshold.empty() ? "5000" : threshold)));
}

// Script errors (and an EXEC with an error inside): each lock's fencing
// counter on the master is swapped, in one step, for a hash holding its
// value, so the INCR of an acquire fails with WRONGTYPE after the SET in the
// same script or transaction has run; swapped back after, value unchanged
// (every INCR meanwhile failed).
void redis_master_script_error(run_ctx& r) {
  auto names = minority(r);
  int ms = r.uniform(300, 3 * redis_ttl_ms);
  std::vector<std::string> fields = names;
  fields.push_back(std::to_string(ms) + "ms");
  start_fault(r, "master_script_error", fields);
  const std::string hide =
      "local v = redis.call(\"GET\", KEYS[1]) redis.call(\"DEL\", KEYS[1]) "
      "redis.call(\"HSET\", KEYS[1], \"saved\", v or \"\") return 1";
  const std::string restore =
      "local v = redis.call(\"HGET\", KEYS[1], \"saved\") redis.call(\"DEL\", KEYS[1]) "
      "if v and v ~= \"\" then redis.call(\"SET\", KEYS[1], v) end return 1";
  auto counters = [&](const std::string& name) {
    std::vector<std::string> keys = {redis_key(r.run_id, "redlock") + ":fencing"};
    if (name == "redis1") keys.push_back(redis_key(r.run_id, "lock") + ":fencing");
    return keys;
  };
  for (const auto& name : names)
    for (const auto& key : counters(name)) shell(r, redis_cli(master_of(r, name), "EVAL '" + hide + "' 1 " + key));
  r.sleep_ms(ms);
  for (const auto& name : names)
    for (const auto& key : counters(name)) shell(r, redis_cli(master_of(r, name), "EVAL '" + restore + "' 1 " + key));
}

// A master restarted empty (after more than a TTL) while another is frozen:
// two of five out at once, and the frozen one wakes with its old keys.
void redis_restart_while_paused(run_ctx& r) {
  auto killed = random_master(r);
  std::string paused;
  do paused = "redis" + std::to_string(r.uniform(1, 5));
  while (paused == killed);
  start_fault(r, "master_restart_while_paused", {killed, "paused", paused});
  signal_server(r, paused, SIGSTOP);
  servers(r, "kill", killed);
  r.sleep_ms(redis_ttl_ms + r.uniform(200, 1500));
  servers(r, "restart", killed);
  r.sleep_ms(r.uniform(0, 1000));
  signal_server(r, paused, SIGCONT);
}

// --- a Sentinel set: failovers ------------------------------------------------
// Every fault here ends with the set settled (one master, its replicas linked,
// the sentinels agreeing), and inject_one names the master before and after
// it in the `healed` record: the checker's failovers.

// The data node (sredisN) the sentinels name as the master; empty if none answers.
std::string current_master(const run_ctx& r) {
  for (const auto& s : r.sentinels) {
    std::istringstream answer(capture(redis_cli(s, "SENTINEL GET-MASTER-ADDR-BY-NAME " + r.sentinel_master)));
    std::string host, port;
    if (!(answer >> host >> port)) continue;
    for (std::size_t i = 0; i < r.sentinel_nodes.size(); ++i)
      if (std::to_string(r.sentinel_nodes[i].port) == port) return "sredis" + std::to_string(i + 1);
  }
  return {};
}

// Asks the sentinels every 100 ms, until `until`, whether they name a master
// other than `old`; records the switch when they do (the checker counts the
// holders still holding then).
bool watch_for_switch(run_ctx& r, const std::string& old, std::chrono::steady_clock::time_point until) {
  while (std::chrono::steady_clock::now() < until) {
    auto now = current_master(r);
    if (!now.empty() && now != old) {
      r.rec->write("switched", "master", {old, now});
      return true;
    }
    r.sleep_ms(100);
  }
  return false;
}

void await_new_master(run_ctx& r, const std::string& old) {
  if (!watch_for_switch(r, old, std::chrono::steady_clock::now() + 30s))
    r.rec->write("note", "failover", {"no_new_master_within_30s", old});
}

// The master killed; once the sentinels promoted a replica, it comes back as a
// replica of the new master (scripts/servers restart).
void sentinel_master_kill(run_ctx& r) {
  auto master = current_master(r);
  if (master.empty()) return r.rec->write("note", "master_kill", {"no_master_named"});
  start_fault(r, "master_kill", {master});
  servers(r, "kill", master);
  await_new_master(r, master);
  servers(r, "restart", master);
}

// A failover the sentinels carry out on request, the old master alive.
void sentinel_failover(run_ctx& r) {
  auto master = current_master(r);
  if (master.empty()) return r.rec->write("note", "sentinel_failover", {"no_master_named"});
  const auto& asked = r.sentinels.at(static_cast<std::size_t>(r.uniform(0, static_cast<int>(r.sentinels.size()) - 1)));
  start_fault(r, "sentinel_failover", {master});
  if (capture(redis_cli(asked, "SENTINEL FAILOVER " + r.sentinel_master)).find("OK") == std::string::npos)
    r.rec->write("note", "sentinel_failover", {"refused"});
  else
    await_new_master(r, master);
}

// A replica frozen (SIGSTOP) for 0.5-3 s: the other one must acknowledge the WAITs.
void sentinel_replica_pause(run_ctx& r) {
  auto master = current_master(r);
  std::vector<std::string> replicas;
  for (std::size_t i = 1; i <= r.sentinel_nodes.size(); ++i)
    if ("sredis" + std::to_string(i) != master) replicas.push_back("sredis" + std::to_string(i));
  auto name = replicas.at(static_cast<std::size_t>(r.uniform(0, static_cast<int>(replicas.size()) - 1)));
  int ms = r.uniform(500, 3000);
  start_fault(r, "replica_pause", {name, std::to_string(ms) + "ms"});
  signal_server(r, name, SIGSTOP);
  r.sleep_ms(ms);
  signal_server(r, name, SIGCONT);
}

const host_port& sentinel_node(const run_ctx& r, const std::string& name) {
  return r.sentinel_nodes.at(static_cast<std::size_t>(std::stoi(name.substr(6)) - 1));
}

// Every client connection of the master cut while commands are in flight
// (the sentinels' and the replicas' links are not normal clients, or reconnect).
void sentinel_connection_cut(run_ctx& r) {
  auto master = current_master(r);
  if (master.empty()) return r.rec->write("note", "connection_cut", {"no_master_named"});
  start_fault(r, "connection_cut", {master});
  shell(r, redis_cli(sentinel_node(r, master), "CLIENT KILL TYPE normal SKIPME yes"));
}

// The master cut off from everyone (clients, replicas, sentinels) for 0.5-4 s:
// often long enough (down-after 1 s) for the sentinels to promote a replica,
// after which the old master comes back as a master with the old keys until
// they demote it.
void sentinel_partition(run_ctx& r) {
  auto master = current_master(r);
  if (master.empty()) return r.rec->write("note", "partition", {"no_master_named"});
  std::string hook = std::getenv("DLOCK_CHAOS_PARTITION");
  int ms = r.uniform(500, 4000);
  auto end = std::chrono::steady_clock::now() + milliseconds(ms);
  start_fault(r, "partition", {master, std::to_string(ms) + "ms"});
  if (shell(r, "'" + hook + "' start " + master) != 0) r.rec->write("note", "partition", {"start_failed", master});
  bool switched = watch_for_switch(r, master, end);
  std::this_thread::sleep_until(end);
  if (shell(r, "'" + hook + "' stop " + master) != 0) r.rec->write("note", "partition", {"stop_failed", master});
  // A failover the sentinels began during the partition may end after it.
  if (!switched) watch_for_switch(r, master, std::chrono::steady_clock::now() + 5s);
}

void inject_sentinel_fault(run_ctx& r) {
  using fault = void (*)(run_ctx&);
  std::vector<fault> kinds = {sentinel_master_kill, sentinel_failover, sentinel_replica_pause,
                              sentinel_connection_cut, client_pause};
  if (partition_available()) kinds.push_back(sentinel_partition);
  auto before = current_master(r);
  kinds[static_cast<std::size_t>(r.uniform(0, static_cast<int>(kinds.size()) - 1))](r);
  if (r.fault.empty()) return;
  // The fault is healed once the set has settled: a failover it caused is over.
  servers(r, "settle", "");
  auto after = current_master(r);
  if (before.empty() || after.empty()) {
    r.rec->write("note", "masters", {"unknown", before.empty() ? "-" : before, after.empty() ? "-" : after});
    r.rec->write("healed", r.fault);
  } else {
    r.rec->write("healed", r.fault, {before, after});
  }
  r.fault.clear();
}

void inject_one(run_ctx& r) {
  if (r.backend == "sentinel") return inject_sentinel_fault(r);
  using fault = void (*)(run_ctx&);
  std::vector<fault> kinds;
  if (r.backend == "zk")
    kinds = {zk_member_kill, zk_member_pause, zk_leader_kill, zk_session_expiry, zk_connection_cut, client_pause};
  else
    kinds = {redis_master_stop,  redis_master_kill,     redis_script_flush, redis_connection_cut,
             client_pause,       client_pause_grant,    redis_master_oom,   redis_master_readonly,
             redis_master_busy,  redis_master_script_error, redis_restart_while_paused};
  std::size_t choices = kinds.size() + (partition_available() ? 1 : 0);
  auto pick = static_cast<std::size_t>(r.uniform(0, static_cast<int>(choices) - 1));
  if (pick == kinds.size())
    partition(r, r.backend == "zk" ? "zk" + std::to_string(r.uniform(1, 3)) : random_master(r));
  else
    kinds[pick](r);
  if (!r.fault.empty()) r.rec->write("healed", r.fault);
  r.fault.clear();
}

// --- workers ----------------------------------------------------------------

void spawn_workers(run_ctx& r, int seconds) {
  for (const auto& recipe : recipes_of(r.backend)) {
    for (int i = 1; i <= processes_per_recipe; ++i) {
      worker_process w;
      w.recipe = recipe;
      w.name = r.backend + "-" + recipe + "-" + std::to_string(i);
      std::string out = r.dir + "/" + w.name + ".log";
      std::vector<std::string> args = {"dlock_chaos", "worker", "--backend", r.backend, "--recipe", recipe,
                                       "--name", w.name, "--out", out, "--run", r.run_id,
                                       "--seconds", std::to_string(seconds), "--parent", std::to_string(::getpid())};
      pid_t pid = ::fork();
      if (pid < 0) throw std::runtime_error("fork failed");
      if (pid == 0) {
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        ::execv("/proc/self/exe", argv.data());
        std::perror("execv");
        ::_exit(127);
      }
      w.pid = pid;
      r.workers.push_back(w);
    }
  }
}

void reap(run_ctx& r) {
  for (auto& w : r.workers) {
    if (w.exited) continue;
    int status = 0;
    if (::waitpid(w.pid, &status, WNOHANG) == w.pid) {
      w.exited = true;
      w.status = status;
    }
  }
}

void note_early_exits(run_ctx& r) {
  for (auto& w : r.workers)
    if (w.exited && !(WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0))
      r.rec->write("error", w.name, {"worker_exited_early_status", std::to_string(w.status)});
}

// SIGTERM, then up to 30 s for each to release and leave; SIGKILL after that.
void stop_workers(run_ctx& r) {
  reap(r);
  for (auto& w : r.workers)
    if (!w.exited) ::kill(w.pid, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + 30s;
  for (;;) {
    reap(r);
    bool all = true;
    for (auto& w : r.workers) all = all && w.exited;
    if (all || std::chrono::steady_clock::now() > deadline) break;
    r.sleep_ms(100);
  }
  for (auto& w : r.workers) {
    if (!w.exited) {
      r.rec->write("error", w.name, {"did_not_stop_within_30s", "stacks_in", w.name + ".stacks"});
      // Where it hangs, for the report (gdb is optional).
      std::string gdb = "timeout 60 gdb -p " + std::to_string(w.pid) + " -batch -ex 'thread apply all bt' > '" + r.dir +
                        "/" + w.name + ".stacks' 2>&1";
      [[maybe_unused]] int rc = std::system(gdb.c_str());
      ::kill(w.pid, SIGKILL);
      ::waitpid(w.pid, &w.status, 0);
      w.exited = true;
    } else if (!(WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0)) {
      r.rec->write("error", w.name, {"exit_status", std::to_string(w.status)});
    }
  }
}

// Every server of the backend answers again (a fault may have failed half way).
void restore_servers(run_ctx& r) {
  std::vector<std::string> names;
  if (r.backend == "zk")
    names = {"zk1", "zk2", "zk3"};
  else if (r.backend == "sentinel")
    names = {"sredis1", "sredis2", "sredis3", "sentinel1", "sentinel2", "sentinel3"};
  else
    names = {"redis1", "redis2", "redis3", "redis4", "redis5"};
  for (const auto& n : names) servers(r, "resume", n);
  std::string status = capture("'" + r.servers_script + "' status");
  for (const auto& n : names)
    if (status.find(n + " stopped") != std::string::npos) servers(r, "restart", n);
  for (auto& w : r.workers)
    if (!w.exited) ::kill(w.pid, SIGCONT);
  if (r.backend == "sentinel") servers(r, "settle", "");
  if (r.backend != "redis") return;
  // What the error faults change, should one have stopped half way.
  for (const auto& m : r.masters) {
    shell(r, redis_cli(m, "SCRIPT KILL"));
    shell(r, redis_cli(m, "REPLICAOF NO ONE"));
    shell(r, redis_cli(m, "CONFIG SET maxmemory 0"));
    shell(r, redis_cli(m, "CONFIG SET busy-reply-threshold 5000"));
  }
}

// --- the end: orphans and what is left in the queue ---------------------------

asio::awaitable<void> zk_inventory(run_ctx* r) {
  zk::options o;
  o.hosts = required_env("DLOCK_ZK_ENSEMBLE");
  o.session_timeout = milliseconds(zk_session_timeout_ms);
  zk::client session(co_await asio::this_coro::executor, o);
  co_await session.connect();
  for (const std::string recipe : {"mutex", "rwlock", "election", "queue.claims"}) {
    auto path = zk_path(r->run_id, recipe);
    auto [ec, children, st] = co_await session.get_children(path, asio::as_tuple(asio::use_awaitable));
    if (ec && ec != zk::error::no_node) r->rec->write("note", "inventory", {path, "list_failed"});
    for (const auto& child : children) r->rec->write("orphan", "node", {path + "/" + child});
  }
  auto queue = zk_path(r->run_id, "queue");
  auto [ec, items, st] = co_await session.get_children(queue, asio::as_tuple(asio::use_awaitable));
  if (ec && ec != zk::error::no_node) r->rec->write("error", "inventory", {queue, "list_failed"});
  for (const auto& item : items) {
    auto [get_ec, data, item_stat] = co_await session.get(queue + "/" + item, asio::as_tuple(asio::use_awaitable));
    if (!get_ec) r->rec->write("left", "queue", {data, item});
  }
  r->rec->write("note", "inventory", {"queue_items_left", std::to_string(items.size())});
  co_await session.close();
}

// The lock's key on the master the sentinels name now (its replicas follow it).
void sentinel_inventory(run_ctx& r) {
  auto master = current_master(r);
  if (master.empty()) return r.rec->write("error", "inventory", {"no_master_named"});
  auto key = redis_key(r.run_id, "lock");
  std::string answer = capture(redis_cli(sentinel_node(r, master), "EXISTS " + key));
  if (answer.find('1') != std::string::npos)
    r.rec->write("orphan", "key", {master, key});
  else if (answer.find('0') == std::string::npos)
    r.rec->write("error", "inventory", {master, "no_answer"});
}

void inventory(run_ctx& r) {
  if (r.backend == "zk") {
    // Nodes of a dead session may live until its timeout: wait it out.
    r.sleep_ms(zk_session_timeout_ms + 2000);
    asio::io_context io;
    std::exception_ptr failure;
    asio::co_spawn(io, zk_inventory(&r), [&](std::exception_ptr e) { failure = e; });
    io.run_for(60s);
    if (failure) {
      try {
        std::rethrow_exception(failure);
      } catch (const std::exception& e) {
        r.rec->write("error", "inventory", {"zk_inventory_failed", e.what()});
      }
    }
    return;
  }
  r.sleep_ms(redis_ttl_ms + 1000);  // past every TTL
  if (r.backend == "sentinel") return sentinel_inventory(r);
  for (const auto& recipe : recipes_of("redis")) {
    auto key = redis_key(r.run_id, recipe);
    for (std::size_t i = 0; i < r.masters.size(); ++i) {
      std::string answer = capture(redis_cli(r.masters[i], "EXISTS " + key));
      if (answer.find('1') != std::string::npos)
        r.rec->write("orphan", "key", {"redis" + std::to_string(i + 1), key});
      else if (answer.find('0') == std::string::npos)
        r.rec->write("error", "inventory", {"redis" + std::to_string(i + 1), "no_answer"});
    }
  }
}

}  // namespace

int run_main(const arguments& args) {
  run_ctx r;
  r.backend = argument(args, "backend");
  int seconds = std::stoi(argument(args, "seconds", "60"));
  r.dir = argument(args, "dir");
  auto seed = std::stoull(argument(args, "seed", std::to_string(std::random_device{}())));
  r.rng.seed(seed);
  r.run_id = r.backend + "-" + std::to_string(::getpid()) + "-" + std::to_string(seed % 100000);
  r.servers_script = required_env("DLOCK_SERVERS_SCRIPT");
  r.ensemble = parse_hosts(required_env("DLOCK_ZK_ENSEMBLE"));
  r.masters = parse_hosts(required_env("DLOCK_REDIS_MASTERS"));
  if (r.ensemble.size() != 3 || r.masters.size() != 5)
    throw std::runtime_error("expected 3 ensemble members and 5 redis masters");
  if (r.backend == "sentinel") {
    r.sentinels = parse_hosts(required_env("DLOCK_SENTINELS"));
    r.sentinel_nodes = parse_hosts(required_env("DLOCK_SENTINEL_NODES"));
    r.sentinel_master = required_env("DLOCK_SENTINEL_MASTER");
  }
  std::filesystem::create_directories(r.dir);
  recorder rec(r.dir + "/orchestrator-" + r.backend + ".log", r.backend, "-");
  r.rec = &rec;
  rec.write("note", "run", {r.run_id, "seconds", std::to_string(seconds), "seed", std::to_string(seed)});
  std::cerr << "chaos " << r.backend << ": run " << r.run_id << " for " << seconds << " s (seed " << seed
            << "), records in " << r.dir << "\n";

  spawn_workers(r, seconds);
  r.sleep_ms(3000);  // let them connect and contend before the first fault
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < end) {
    reap(r);
    inject_one(r);
    r.sleep_ms(r.uniform(1000, 3000));
  }
  reap(r);
  note_early_exits(r);
  restore_servers(r);
  r.sleep_ms(2000);  // the contenders get back to work on a whole cluster
  stop_workers(r);
  inventory(r);
  rec.write("note", "run", {"done"});
  return check_main({r.dir});
}

int check_main(const std::vector<std::string>& dirs) {
  std::vector<record> records;
  std::vector<std::string> errors;
  for (const auto& dir : dirs) {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().extension() != ".log" || entry.path().filename() == "shell.log") continue;
      std::ifstream in(entry.path());
      for (std::string line; std::getline(in, line);) {
        record r;
        std::string error;
        if (parse_record(line, r, error))
          records.push_back(r);
        else if (!error.empty())
          errors.push_back(entry.path().string() + ": " + error);
      }
    }
  }
  auto rep = analyse(records);
  rep.parse_errors = errors;
  for (const auto& e : errors) std::cout << "unreadable record: " << e << "\n";
  std::size_t shown = 0;
  for (const auto& v : rep.violations) {
    if (++shown > 30) {
      std::cout << "... and " << rep.violations.size() - 30 << " more violations\n";
      break;
    }
    std::cout << "VIOLATION " << v.backend << ": " << v.what << "\n";
  }
  for (const auto& [backend, fig] : rep.backends)
    if (!fig.longest_free_wait_where.empty()) std::cout << "longest free wait on " << fig.longest_free_wait_where << "\n";
  for (const auto& [backend, fig] : rep.backends) {
    std::size_t count = 0;
    for (const auto& v : rep.violations) count += v.backend == backend;
    std::cout << summary_line(backend == "zk" ? "zookeeper" : backend, fig, count)
              << (backend == "redis" ? " (fencing checked on redlock; the single lock's counter is lost with redis1's empty restarts)" : "")
              << "\n";
  }
  if (rep.backends.empty()) {
    std::cout << "no records found\n";
    return 1;
  }
  return rep.ok() ? 0 : 1;
}

}  // namespace dlock::chaos
