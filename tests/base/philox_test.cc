// Philox-4x32-10 against Random123's published known-answer vectors, and
// the properties the counter stream promises.
#include "ops/cpu/philox.h"
#include "frugal/base.h"

#include <gtest/gtest.h>

namespace frugal::cpu {
namespace {

TEST(Philox, Random123KnownAnswers) {
  EXPECT_EQ(Philox4x32_10({0, 0, 0, 0}, {0, 0}), (PhiloxCounter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(Philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (PhiloxCounter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(Philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (PhiloxCounter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, StableHashIsFnv1a) {
  EXPECT_EQ(StableHash(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(StableHash("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(StableHash("foobar"), 0x85944171f73967e8ull);
}

TEST(Philox, StreamIsAPureFunctionOfSeedNameStepAndIndex) {
  CounterStream s(7, StableHash("drop1"), 3);
  EXPECT_EQ(s.Block(5), CounterStream(7, StableHash("drop1"), 3).Block(5));
  EXPECT_NE(s.Block(5), s.Block(6));
  EXPECT_NE(s.Block(5), CounterStream(8, StableHash("drop1"), 3).Block(5));
  EXPECT_NE(s.Block(5), CounterStream(7, StableHash("drop2"), 3).Block(5));
  EXPECT_NE(s.Block(5), CounterStream(7, StableHash("drop1"), 4).Block(5));
  EXPECT_NE(s.Block(0), s.Block(uint64_t{1} << 32));  // the block's high word counts
}

}  // namespace
}  // namespace frugal::cpu
