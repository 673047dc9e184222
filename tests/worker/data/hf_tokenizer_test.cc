#include "worker/data/hf_tokenizer.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "text/hf/tokenizer_json.h"

namespace zerofit::data {
namespace {

std::string ModelDir(const std::string& name) { return std::string(ZEROFIT_HF_TOKENIZERS_DIR) + "/" + name; }

#define SKIP_IF_MISSING(dir)                                                 \
  if (!std::filesystem::exists(std::string(dir) + "/tokenizer.json")) {      \
    GTEST_SKIP() << dir << "/tokenizer.json is missing (shared tokenizers)"; \
  }

TEST(HfTokenizerTest, MatchesTextTokenizerAndReadsSpecials) {
  for (const char* name : {"qwen2.5", "smollm2"}) {
    const std::string dir = ModelDir(name);
    SKIP_IF_MISSING(dir);
    auto hf = HfTokenizer::Load(dir);
    ASSERT_TRUE(hf.ok()) << hf.status();
    auto direct = text::TokenizerJson::FromFile(dir + "/tokenizer.json");
    ASSERT_TRUE(direct.ok()) << direct.status();
    for (const std::string s : {"Hello world! 12+7=19", " café 你好 <|im_end|>", ""}) {
      auto got = (*hf)->Encode(s);
      auto want = (*direct)->Encode(s, /*add_special_tokens=*/false);
      ASSERT_TRUE(got.ok() && want.ok());
      EXPECT_EQ(*got, *want) << name << ": " << s;
    }
    EXPECT_EQ((*hf)->vocab_size(), (*direct)->vocab_size());
    EXPECT_EQ((*hf)->eos_id(), *(*direct)->TokenToId("<|im_end|>")) << name;
    EXPECT_NE((*hf)->chat_template(), nullptr) << name;
    // Special ids decode to nothing.
    auto ids = (*hf)->Encode("hi");
    ASSERT_TRUE(ids.ok());
    ids->push_back((*hf)->eos_id());
    auto text = (*hf)->Decode(*ids);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, "hi");
  }
}

TEST(HfTokenizerTest, QwenHasNoBosAndPadsWithEndOfText) {
  const std::string dir = ModelDir("qwen2.5");
  SKIP_IF_MISSING(dir);
  auto hf = HfTokenizer::Load(dir);
  ASSERT_TRUE(hf.ok()) << hf.status();
  EXPECT_EQ((*hf)->bos_id(), -1);
  EXPECT_EQ((*hf)->pad_id(), *(*hf)->text_tokenizer().TokenToId("<|endoftext|>"));
  EXPECT_EQ((*hf)->add_bos_token(), std::optional<bool>(false));
}

TEST(HfTokenizerTest, SmolLmBosIsImStart) {
  const std::string dir = ModelDir("smollm2");
  SKIP_IF_MISSING(dir);
  auto hf = HfTokenizer::Load(dir);
  ASSERT_TRUE(hf.ok()) << hf.status();
  EXPECT_EQ((*hf)->bos_id(), *(*hf)->text_tokenizer().TokenToId("<|im_start|>"));
}

TEST(HfTokenizerTest, MissingDirectoryNamesTheFile) {
  auto hf = HfTokenizer::Load("/nonexistent/model");
  ASSERT_FALSE(hf.ok());
  EXPECT_NE(std::string(hf.status().message()).find("/nonexistent/model/tokenizer.json"), std::string::npos)
      << hf.status();
}

}  // namespace
}  // namespace zerofit::data
