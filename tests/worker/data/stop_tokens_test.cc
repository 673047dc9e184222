// The ids a rollout stops at: config.json's whole eos_token_id list, generation_config.json's and the
// tokenizer's EOS, once each; a malformed generation_config.json is named.
#include "worker/data/stop_tokens.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace zerofit::data {
namespace {

namespace fs = std::filesystem;

std::string ModelDir(const std::string& name, const std::string& generation_config) {
  const fs::path d = fs::path(::testing::TempDir()) / ("stop_tokens_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  if (!generation_config.empty()) std::ofstream(d / "generation_config.json") << generation_config;
  return d.string();
}

core::HfModelConfig Config(const std::string& eos_json) {
  const std::string text = R"({"model_type": "llama", "vocab_size": 152064, "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 4,
      "eos_token_id": )" + eos_json +
                           "}";
  auto c = core::ParseHfConfig(text, "config.json");
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : core::HfModelConfig{};
}

TEST(StopTokensTest, Llama31StopsAtEveryEosOfItsConfigAndTheTokenizers) {
  const core::HfModelConfig llama31 = Config("[128001, 128008, 128009]");
  auto ids = StopTokenIds(ModelDir("llama31", ""), llama31, /*tokenizer_eos=*/128009);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(*ids, (std::vector<int64_t>{128001, 128008, 128009}));  // 128008 <|eom_id|> was missed before
}

TEST(StopTokensTest, GenerationConfigAddsItsIds) {
  // Qwen2.5 Instruct: config.json 151645 <|im_end|>; generation_config.json [151645, 151643].
  const core::HfModelConfig qwen = Config("151645");
  auto list =
      StopTokenIds(ModelDir("qwen", R"({"eos_token_id": [151645, 151643], "top_p": 0.8})"), qwen, 151645);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(*list, (std::vector<int64_t>{151645, 151643}));
  auto single = StopTokenIds(ModelDir("single", R"({"eos_token_id": 7})"), qwen, -1);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ(*single, (std::vector<int64_t>{151645, 7}));
  auto none = StopTokenIds(ModelDir("null", R"({"eos_token_id": null})"), Config("null"), -1);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
}

TEST(StopTokensTest, AMalformedGenerationConfigIsNamed) {
  const core::HfModelConfig c = Config("2");
  for (const std::string& bad : {std::string("{not json"), std::string(R"({"eos_token_id": "</s>"})"),
                                 std::string(R"({"eos_token_id": [2, -1]})")}) {
    const std::string dir = ModelDir("bad", bad);
    auto ids = StopTokenIds(dir, c, -1);
    ASSERT_FALSE(ids.ok()) << bad;
    EXPECT_NE(ids.status().message().find(dir + "/generation_config.json"), std::string::npos)
        << ids.status();
  }
}

}  // namespace
}  // namespace zerofit::data
