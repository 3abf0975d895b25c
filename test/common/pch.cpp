// Builds test/common/pch.hpp once (see test/CMakeLists.txt).
