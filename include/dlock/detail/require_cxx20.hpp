// Stops a build from an older C++ standard at the first dlock header, with a
// message that says what is missing, instead of a page of errors from the
// C++20 names (std::span, concepts, coroutines) dlock's headers use. Every
// public header includes it first (directly or through another dlock header).
#pragma once

#if defined(_MSVC_LANG) ? _MSVC_LANG < 202002L : __cplusplus < 202002L
#error "dlock needs C++20: compile with -std=c++20 (or later); CMake's dlock::dlock and pkg-config's dlock.pc add it"
#endif
