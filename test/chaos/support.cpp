#include <chaos/support.hpp>

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace dlock::chaos {

nanos now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<nanos>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

recorder::recorder(const std::string& path, std::string backend, std::string worker)
    : backend_(std::move(backend)), worker_(std::move(worker)) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot open record file " + path);
}

recorder::~recorder() {
  if (fd_ >= 0) ::close(fd_);
}

void recorder::write(const std::string& kind, const std::string& subject, std::vector<std::string> fields,
                     nanos time) {
  record r{backend_, kind, subject, worker_, time ? time : now_ns(), std::move(fields)};
  std::string line = format_record(r) + "\n";
  // One write per line; a short write on a local file only happens when the disk is full.
  [[maybe_unused]] auto written = ::write(fd_, line.data(), line.size());
}

arguments parse_arguments(int argc, char** argv, int first) {
  arguments out;
  for (int i = first; i + 1 < argc; i += 2) {
    std::string name = argv[i];
    if (name.rfind("--", 0) != 0) throw std::runtime_error("expected --name value, got " + name);
    out[name.substr(2)] = argv[i + 1];
  }
  return out;
}

std::string argument(const arguments& args, const std::string& name, const std::string& fallback) {
  auto it = args.find(name);
  if (it != args.end()) return it->second;
  if (fallback.empty()) throw std::runtime_error("missing --" + name);
  return fallback;
}

std::string required_env(const char* name) {
  const char* value = std::getenv(name);
  if (!value || !*value) throw std::runtime_error(std::string(name) + " is not set (source the servers' env file)");
  return value;
}

std::vector<host_port> parse_hosts(const std::string& list) {
  std::vector<host_port> out;
  std::istringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    auto colon = item.rfind(':');
    if (colon == std::string::npos) throw std::runtime_error("bad host:port " + item);
    out.push_back({item.substr(0, colon), static_cast<std::uint16_t>(std::stoi(item.substr(colon + 1)))});
  }
  return out;
}

std::vector<std::string> recipes_of(const std::string& backend) {
  if (backend == "zk") return {"mutex", "rwlock", "election", "queue"};
  if (backend == "redis") return {"lock", "redlock"};
  if (backend == "sentinel") return {"lock"};
  throw std::runtime_error("unknown backend " + backend + " (zk, redis or sentinel)");
}

std::string zk_root(const std::string& run_id) { return "/dlock-chaos/" + run_id; }
std::string zk_path(const std::string& run_id, const std::string& recipe) { return zk_root(run_id) + "/" + recipe; }
std::string redis_key(const std::string& run_id, const std::string& recipe) {
  return "dlock-chaos:" + run_id + ":" + recipe;
}

}  // namespace dlock::chaos
