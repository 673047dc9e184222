#include "worker/data/pair_batch.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "worker/data/preference_dataset.h"

namespace zerofit::data {
namespace {

constexpr int32_t kPad = 0;

std::vector<PreferencePair> TwoPairs() {
  return {
      PreferencePair{{2, 10, 11}, {20, 3}, {30, 31, 32, 3}, 1},  // chosen row 5 tokens, rejected 7
      PreferencePair{{2, 12}, {21, 22, 3}, {33, 3}, 4},          // chosen row 5 tokens, rejected 4
  };
}

TEST(PairBatchTest, TwoHalvesRightPaddedToLongestInBatch) {
  auto batch = MakePairBatch(TwoPairs(), kPad);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->num_pairs, 2);
  EXPECT_EQ(batch->num_rows(), 4);
  EXPECT_EQ(batch->max_len, 7);  // the longest row, not any dataset max_length
  // Rows: chosen of pair 0, chosen of pair 1, rejected of pair 0, rejected of pair 1.
  const std::vector<int32_t> want = {2, 10, 11, 20, 3,  0,  0,   //
                                     2, 12, 21, 22, 3,  0,  0,   //
                                     2, 10, 11, 30, 31, 32, 3,   //
                                     2, 12, 33, 3,  0,  0,  0};  //
  EXPECT_EQ(batch->tokens, want);
  EXPECT_EQ(batch->lengths, (std::vector<int32_t>{5, 5, 7, 4}));
  EXPECT_EQ(batch->response_start, (std::vector<int32_t>{3, 2, 3, 2}));
  EXPECT_EQ(batch->source_lines, (std::vector<uint64_t>{1, 4}));
  EXPECT_EQ(batch->row_offset(2), 14);
}

TEST(PairBatchTest, SubsetInGivenOrderAndPadId) {
  auto batch = MakePairBatch(TwoPairs(), {1}, /*pad_id=*/3);
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->max_len, 5);
  EXPECT_EQ(batch->tokens, (std::vector<int32_t>{2, 12, 21, 22, 3,  //
                                                 2, 12, 33, 3, 3}));
  EXPECT_EQ(batch->lengths, (std::vector<int32_t>{5, 4}));  // padding with eos is told apart by length
}

TEST(PairBatchTest, EmptySelectionGivesEmptyBatch) {
  auto batch = MakePairBatch(TwoPairs(), std::vector<uint64_t>{}, kPad);
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->num_pairs, 0);
  EXPECT_EQ(batch->max_len, 0);
  EXPECT_TRUE(batch->tokens.empty());
}

TEST(PairBatchTest, Errors) {
  auto out_of_range = MakePairBatch(TwoPairs(), {0, 2}, kPad);
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_NE(out_of_range.status().message().find("index 2 (position 1) is outside the 2 pairs"),
            std::string::npos);
  std::vector<PreferencePair> bad = TwoPairs();
  bad[1].rejected.clear();
  auto empty = MakePairBatch(bad, kPad);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("line 4 has an empty rejected (an SFT example"), std::string::npos)
      << empty.status();
  bad[1].chosen.clear();
  auto no_chosen = MakePairBatch(bad, {1}, kPad, PairRows::kChosenOnly);
  ASSERT_FALSE(no_chosen.ok());
  EXPECT_NE(no_chosen.status().message().find("line 4 has an empty chosen response"), std::string::npos)
      << no_chosen.status();
}

TEST(PairBatchTest, ChosenOnlyHoldsOneRowPerPairPaddedToTheLongestChosen) {
  std::vector<PreferencePair> examples = TwoPairs();
  examples[1].rejected.clear();  // an SFT example: no rejected response, which a chosen-only batch ignores
  auto batch = MakePairBatch(examples, {1, 0}, kPad, PairRows::kChosenOnly);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->num_pairs, 2);
  EXPECT_EQ(batch->rows_per_pair, 1);
  EXPECT_EQ(batch->num_rows(), 2);
  EXPECT_EQ(batch->max_len, 5) << "pair 0's 7-token rejected row is not in the batch";
  EXPECT_EQ(batch->tokens, (std::vector<int32_t>{2, 12, 21, 22, 3,  //
                                                 2, 10, 11, 20, 3}));
  EXPECT_EQ(batch->lengths, (std::vector<int32_t>{5, 5}));
  EXPECT_EQ(batch->response_start, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(batch->source_lines, (std::vector<uint64_t>{4, 1}));
}

// An SFT example that scores some of its completion (assistant_only_loss) gives the batch a `scored` row per
// example; an example without flags scores its whole completion; a batch of such examples alone has none.
TEST(PairBatchTest, ScoredFlagsMarkTheScoredPositionsOfEachRow) {
  std::vector<PreferencePair> examples = TwoPairs();
  for (PreferencePair& e : examples) e.rejected.clear();
  examples[1].chosen_scored = {1, 0, 1};  // 21 scored, 22 not, EOS scored
  auto batch = MakePairBatch(examples, {1, 0}, kPad, PairRows::kChosenOnly);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->scored, (std::vector<uint8_t>{0, 0, 1, 0, 1,  //
                                                 0, 0, 0, 1, 1}));
  EXPECT_EQ(batch->scored_tokens, 4) << "2 of example 1's 3 tokens, both of example 0's";
  EXPECT_EQ(MakePairBatch(TwoPairs(), kPad)->scored_tokens, 5)
      << "pairs: their chosen responses' 2 + 3 tokens";
  auto plain = MakePairBatch(examples, {0}, kPad, PairRows::kChosenOnly);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(plain->scored.empty());
  examples[1].chosen_scored.pop_back();
  auto bad = MakePairBatch(examples, {1}, kPad, PairRows::kChosenOnly);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 4 has 2 scored flags for 3 chosen tokens"), std::string::npos)
      << bad.status();
}

}  // namespace
}  // namespace zerofit::data
