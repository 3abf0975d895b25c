#include <dlock/error.hpp>
#include <dlock/log.hpp>

#include <iostream>

int main() {
  dlock::error_code ec = dlock::error::taken;
  std::cout << ec.category().name() << ": " << ec.message() << "\n";
  return ec == dlock::error::taken ? 0 : 1;
}
