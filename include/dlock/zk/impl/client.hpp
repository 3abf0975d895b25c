// The bodies of dlock::zk::client's initiating functions (documented in
// ../client.hpp, which includes this file at its end). Each hands its
// type-erased handler to a compiled detail::start_* function (src/zk/).
// Included alone, it includes client.hpp first (which includes it back at its
// end; #pragma once makes that a no-op).
#pragma once

#include <dlock/zk/client.hpp>

namespace dlock::zk {

template <class CompletionToken>
auto client::connect(CompletionToken&& token) {
  return dlock::detail::async_initiate_on<CompletionToken, void(error_code)>(*this,
      [](auto h, detail::session_ptr s) { detail::start_connect(s, detail::handler<>(std::move(h))); },
      token, impl_);
}

template <class CompletionToken>
auto client::close(CompletionToken&& token) {
  return dlock::detail::async_initiate_on<CompletionToken, void(error_code)>(*this,
      [](auto h, detail::session_ptr s) { detail::start_close(s, detail::handler<>(std::move(h))); },
      token, impl_);
}

template <class CompletionToken>
auto client::create(std::string path, std::string data, create_mode mode, CompletionToken&& token) {
  return dlock::detail::async_initiate_on<CompletionToken, void(error_code, created)>(*this,
      [](auto h, detail::session_ptr s, std::string p, std::string d, create_mode m) {
        detail::start_create(s, std::move(p), std::move(d), m, detail::handler<created>(std::move(h)));
      },
      token, impl_, std::move(path), std::move(data), mode);
}

template <class CompletionToken>
auto client::remove(std::string path, std::int32_t version, CompletionToken&& token) {
  return dlock::detail::async_initiate_on<CompletionToken, void(error_code)>(*this,
      [](auto h, detail::session_ptr s, std::string p, std::int32_t v) {
        detail::start_remove(s, std::move(p), v, detail::handler<>(std::move(h)));
      },
      token, impl_, std::move(path), version);
}

template <detail::not_a_watch CompletionToken>
auto client::get(std::string path, CompletionToken&& token) {
  return get_impl(std::move(path), nullptr, std::forward<CompletionToken>(token));
}

template <class CompletionToken>
auto client::get(std::string path, watch& w, CompletionToken&& token) {
  return get_impl(std::move(path), &w, std::forward<CompletionToken>(token));
}

template <class CompletionToken>
auto client::sync(std::string path, CompletionToken&& token) {
  return dlock::detail::async_initiate_on<CompletionToken, void(error_code)>(*this,
      [](auto h, detail::session_ptr s, std::string p) {
        detail::start_sync(s, std::move(p), detail::handler<>(std::move(h)));
      },
      token, impl_, std::move(path));
}

template <class CompletionToken>
auto client::set(std::string path, std::string data, std::int32_t version, CompletionToken&& token) {
  return dlock::detail::async_initiate_on<CompletionToken, void(error_code, stat)>(*this,
      [](auto h, detail::session_ptr s, std::string p, std::string d, std::int32_t v) {
        detail::start_set(s, std::move(p), std::move(d), v, detail::handler<stat>(std::move(h)));
      },
      token, impl_, std::move(path), std::move(data), version);
}

template <detail::not_a_watch CompletionToken>
auto client::exists(std::string path, CompletionToken&& token) {
  return exists_impl(std::move(path), nullptr, std::forward<CompletionToken>(token));
}

template <class CompletionToken>
auto client::exists(std::string path, watch& w, CompletionToken&& token) {
  return exists_impl(std::move(path), &w, std::forward<CompletionToken>(token));
}

template <detail::not_a_watch CompletionToken>
auto client::get_children(std::string path, CompletionToken&& token) {
  return children_impl(std::move(path), nullptr, std::forward<CompletionToken>(token));
}

template <class CompletionToken>
auto client::get_children(std::string path, watch& w, CompletionToken&& token) {
  return children_impl(std::move(path), &w, std::forward<CompletionToken>(token));
}

template <class CompletionToken>
auto client::multi(std::vector<op> ops, CompletionToken&& token) {
  return dlock::detail::async_initiate_on<CompletionToken, void(error_code, multi_result)>(*this,
      [](auto h, detail::session_ptr s, std::vector<op> o) {
        detail::start_multi(s, std::move(o), detail::handler<multi_result>(std::move(h)));
      },
      token, impl_, std::move(ops));
}

template <class CompletionToken>
auto client::wait_state_change(CompletionToken&& token) {
  return dlock::detail::async_initiate_on<CompletionToken, void(error_code, session_state)>(*this,
      [](auto h, detail::session_ptr s) {
        detail::start_wait_state_change(s, detail::handler<session_state>(std::move(h)));
      },
      token, impl_);
}

template <class Token>
auto client::get_impl(std::string path, watch* w, Token&& token) {
  return dlock::detail::async_initiate_on<Token, void(error_code, std::string, stat)>(*this,
      [](auto h, detail::session_ptr s, std::string p, watch* armed) {
        detail::start_get(s, std::move(p), armed, detail::handler<std::string, stat>(std::move(h)));
      },
      token, impl_, std::move(path), w);
}

template <class Token>
auto client::exists_impl(std::string path, watch* w, Token&& token) {
  return dlock::detail::async_initiate_on<Token, void(error_code, std::optional<stat>)>(*this,
      [](auto h, detail::session_ptr s, std::string p, watch* armed) {
        detail::start_exists(s, std::move(p), armed, detail::handler<std::optional<stat>>(std::move(h)));
      },
      token, impl_, std::move(path), w);
}

template <class Token>
auto client::children_impl(std::string path, watch* w, Token&& token) {
  return dlock::detail::async_initiate_on<Token, void(error_code, std::vector<std::string>, stat)>(*this,
      [](auto h, detail::session_ptr s, std::string p, watch* armed) {
        detail::start_get_children(s, std::move(p), armed,
                                   detail::handler<std::vector<std::string>, stat>(std::move(h)));
      },
      token, impl_, std::move(path), w);
}

}  // namespace dlock::zk
