#include "dlock/server_options.hpp"

#include "dlock/secrets.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace dlock::cli {
namespace {

constexpr const char* redis_only[] = {"redis-user", "redis-password-file", "tls",        "tls-ca",
                                      "tls-cert",   "tls-key",             "tls-server-name", "sentinel-user",
                                      "sentinel-password-file"};
constexpr const char* tls_files[] = {"tls-ca", "tls-cert", "tls-key", "tls-server-name"};

bool given(const po::variables_map& values, const char* name) { return values.count(name) > 0; }

// A secret file's contents (one trailing line ending dropped). Throws usage_error.
std::string read_secret_file(const std::string& option, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw usage_error("--" + option + ": cannot read '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return std::string(without_line_end(text.str()));
}

// The secret from --OPTION FILE, else from the environment variable, else nullopt.
std::optional<std::string> secret(const po::variables_map& values, const char* option, const char* variable) {
  if (auto path = string_option(values, option)) return read_secret_file(option, *path);
  if (const char* value = std::getenv(variable)) return std::string(value);
  return std::nullopt;
}

void refuse_redis_options(const po::variables_map& values) {
  for (const char* name : redis_only)
    if (given(values, name)) throw usage_error("--" + std::string(name) + " is for --redis");
}

}  // namespace

void add_connect_timeout_option(po::options_description& options) {
  options.add_options()
      ("connect-timeout", po::value<std::string>(),
       "give up connecting after D (default: ZooKeeper 15s, Redis 2s); --timeout, if shorter, ends it first");
}

void add_zk_auth_options(po::options_description& options) {
  options.add_options()
      ("zk-auth-file", po::value<std::string>(),
       "ZooKeeper: digest credentials \"user:password\" from FILE (else from $DLOCK_ZK_AUTH)");
}

void add_redis_auth_options(po::options_description& options) {
  options.add_options()
      ("redis-user", po::value<std::string>(), "Redis: the ACL user (AUTH user password)")
      ("redis-password-file", po::value<std::string>(),
       "Redis: the AUTH password from FILE (else from $DLOCK_REDIS_PASSWORD)")
      ("tls", "Redis: connect with TLS (to the servers' tls-port)")
      ("tls-ca", po::value<std::string>(), "Redis TLS: CA certificates (PEM) to check the server against "
                                           "(default: the system's)")
      ("tls-cert", po::value<std::string>(), "Redis TLS: client certificate (PEM), with --tls-key")
      ("tls-key", po::value<std::string>(), "Redis TLS: the client certificate's key (PEM)")
      ("tls-server-name", po::value<std::string>(), "Redis TLS: the name the server's certificate must carry "
                                                    "(default: its host)")
      ("sentinel-user", po::value<std::string>(), "Sentinel: the sentinels' ACL user")
      ("sentinel-password-file", po::value<std::string>(),
       "Sentinel: the sentinels' AUTH password from FILE (else from $DLOCK_SENTINEL_PASSWORD)");
}

zk_settings zk_settings_from(const po::variables_map& values, std::string hosts,
                             std::chrono::milliseconds session_timeout) {
  refuse_redis_options(values);
  zk_settings s;
  s.hosts = std::move(hosts);
  s.session_timeout = session_timeout;
  if (auto timeout = duration_option(values, "connect-timeout")) s.connect_timeout = *timeout;
  if (s.connect_timeout.count() == 0) throw usage_error("--connect-timeout must be more than 0");
  if (auto credentials = secret(values, "zk-auth-file", zk_auth_variable)) {
    s.auth = parse_digest(*credentials);
    if (!s.auth) throw usage_error("ZooKeeper credentials are not \"user:password\"");
  }
  return s;
}

redis_settings redis_settings_from(const po::variables_map& values, std::vector<host_port> masters) {
  if (given(values, "zk-auth-file")) throw usage_error("--zk-auth-file is for --zk");
  redis_settings s;
  s.masters = std::move(masters);
  if (auto timeout = duration_option(values, "connect-timeout")) s.connect_timeout = *timeout;
  if (s.connect_timeout.count() == 0) throw usage_error("--connect-timeout must be more than 0");
  s.username = string_option(values, "redis-user").value_or("");
  s.password = secret(values, "redis-password-file", redis_password_variable).value_or("");
  if (!s.username.empty() && s.password.empty())
    throw usage_error("--redis-user needs a password ($DLOCK_REDIS_PASSWORD or --redis-password-file)");
  s.tls.enabled = given(values, "tls");
  for (const char* name : tls_files)
    if (given(values, name) && !s.tls.enabled) throw usage_error("--" + std::string(name) + " needs --tls");
  s.tls.ca_file = string_option(values, "tls-ca").value_or("");
  s.tls.cert_file = string_option(values, "tls-cert").value_or("");
  s.tls.key_file = string_option(values, "tls-key").value_or("");
  s.tls.server_name = string_option(values, "tls-server-name").value_or("");
  if (s.tls.cert_file.empty() != s.tls.key_file.empty()) throw usage_error("--tls-cert and --tls-key go together");
  return s;
}

redis_settings sentinel_settings_from(const po::variables_map& values, std::vector<host_port> sentinels,
                                      std::string master_name) {
  auto s = redis_settings_from(values, {});
  for (auto& sentinel : sentinels) s.sentinel.sentinels.push_back({std::move(sentinel.host), sentinel.port});
  s.sentinel.master_name = std::move(master_name);
  s.sentinel.username = string_option(values, "sentinel-user").value_or("");
  s.sentinel.password = secret(values, "sentinel-password-file", sentinel_password_variable).value_or("");
  if (!s.sentinel.username.empty() && s.sentinel.password.empty())
    throw usage_error("--sentinel-user needs a password ($DLOCK_SENTINEL_PASSWORD or --sentinel-password-file)");
  s.sentinel.tls = s.tls;  // the sentinels of a TLS deployment speak TLS too
  return s;
}

std::string_view secrets_help_text(bool with_redis) noexcept {
  if (with_redis)
    return "Secrets never go on the command line (any local user can read it): the Redis\n"
           "password comes from --redis-password-file FILE or $DLOCK_REDIS_PASSWORD, ZooKeeper\n"
           "digest credentials (\"user:password\") from --zk-auth-file FILE or $DLOCK_ZK_AUTH.\n"
           "A file's one trailing newline is ignored.\n\n";
  return "ZooKeeper digest credentials (\"user:password\") come from --zk-auth-file FILE or\n"
         "$DLOCK_ZK_AUTH, never from the command line. A file's one trailing newline is ignored.\n\n";
}

}  // namespace dlock::cli
