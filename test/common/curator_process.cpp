#include "common/curator_process.hpp"

#include "common/servers.hpp"

#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>

extern char** environ;

namespace dlock::test {
namespace {

// Debian's jars (libcurator-recipes-java and what it depends on).
std::string classpath() {
  std::string out;
  for (const char* jar : {"curator-client", "curator-framework", "curator-recipes", "zookeeper", "zookeeper-jute",
                          "guava", "slf4j-api", "slf4j-nop", "netty-handler", "netty-transport", "netty-common",
                          "netty-buffer", "netty-codec", "netty-resolver", "netty-transport-native-epoll",
                          "netty-transport-native-unix-common", "metrics-core"})
    out += (out.empty() ? "" : ":") + std::string("/usr/share/java/") + jar + ".jar";
  return out;
}

std::string source_file(const std::string& name) {
  std::string here = __FILE__;
  return here.substr(0, here.rfind("/common/")) + "/interop/" + name + ".java";
}

}  // namespace

curator_process::curator_process(const std::string& name, const std::vector<std::string>& args)
    : output_file_("/tmp/" + unique_name(name) + ".out") {
  std::string command = "exec java -cp '" + classpath() + "' '" + source_file(name) + "' '" + zk_hosts() + "'";
  for (const auto& arg : args) command += " '" + arg + "'";
  command += " > '" + output_file_ + "' 2>&1";
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  BOOST_REQUIRE(posix_spawn(&pid_, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) == 0);
}

curator_process::~curator_process() {
  if (finished()) return;
  ::kill(pid_, SIGKILL);
  int st = 0;
  ::waitpid(pid_, &st, 0);
}

bool curator_process::finished() {
  if (status_ >= 0) return true;
  int st = 0;
  if (::waitpid(pid_, &st, WNOHANG) != pid_) return false;
  status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  return true;
}

std::string curator_process::output() const {
  std::ifstream in(output_file_);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace dlock::test
