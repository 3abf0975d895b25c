// The one Boost.Test main shared by every test program.
#define BOOST_TEST_MODULE dlock
#include <boost/test/unit_test.hpp>
