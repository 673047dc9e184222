// Slurm host lists against hand-expanded answers.
#include "launch/hostlist.h"

#include <gtest/gtest.h>

namespace zerofit::launch {
namespace {

using V = std::vector<std::string>;

TEST(HostlistTest, ExpandsRangesKeepsPaddingAndOrder) {
  EXPECT_EQ(*ExpandHostlist("vm"), V{"vm"});
  EXPECT_EQ(*ExpandHostlist("gpu[01-03,07],login1"), (V{"gpu01", "gpu02", "gpu03", "gpu07", "login1"}));
  EXPECT_EQ(*ExpandHostlist("n[8-10]"), (V{"n8", "n9", "n10"}));
  EXPECT_EQ(*ExpandHostlist("n[08-10]"), (V{"n08", "n09", "n10"}));
  EXPECT_EQ(*ExpandHostlist("rack[1-2]-n[3,5]"), (V{"rack1-n3", "rack1-n5", "rack2-n3", "rack2-n5"}));
  EXPECT_EQ(*ExpandHostlist("a,b[2],c"), (V{"a", "b2", "c"}));
  EXPECT_EQ(ExpandHostlist("gpu[001-128]")->size(), 128u);
}

TEST(HostlistTest, MalformedListsAreErrorsWithAPosition) {
  for (const char* bad : {"", "gpu[01-03", "gpu]", "gpu[3-1]", "gpu[a-b]", "gpu[]", "gpu[1,,2]", "a,,b", "a,",
                          "gpu[1-99999999]"}) {
    auto r = ExpandHostlist(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(std::string(r.status().message()).find("position"), std::string::npos) << bad;
    }
  }
  EXPECT_EQ(std::string(ExpandHostlist("gpu[3-1]").status().message()),
            "host list 'gpu[3-1]' at position 4: range '3-1' runs backwards");
}

}  // namespace
}  // namespace zerofit::launch
