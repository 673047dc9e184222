#include "worker/data/hf_tokenizer.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
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

// A model saved by transformers 4.47+ keeps its template in chat_template.jinja; conversations render from
// it as from the same template inside tokenizer_config.json.
TEST(HfTokenizerTest, ReadsTheChatTemplateFromChatTemplateJinja) {
  const std::string qwen = ModelDir("qwen2.5");
  SKIP_IF_MISSING(qwen);
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "qwen_jinja";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(qwen + "/tokenizer.json", dir / "tokenizer.json");
  nlohmann::ordered_json config =
      nlohmann::ordered_json::parse(std::ifstream(qwen + "/tokenizer_config.json"));
  std::ofstream(dir / "chat_template.jinja", std::ios::binary) << config["chat_template"].get<std::string>();
  config.erase("chat_template");
  std::ofstream(dir / "tokenizer_config.json") << config.dump();

  auto original = HfTokenizer::Load(qwen);
  auto saved = HfTokenizer::Load(dir.string());
  ASSERT_TRUE(original.ok() && saved.ok()) << saved.status();
  const std::string messages =
      R"([{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}])";
  auto want = (*original)->RenderChat(messages, /*add_generation_prompt=*/false);
  auto got = (*saved)->RenderChat(messages, /*add_generation_prompt=*/false);
  ASSERT_TRUE(want.ok() && got.ok()) << got.status();
  EXPECT_EQ(*got, *want);

  std::filesystem::remove(dir / "chat_template.jinja");
  auto bare = HfTokenizer::Load(dir.string());
  ASSERT_TRUE(bare.ok()) << bare.status();  // text data needs no template
  auto refused = (*bare)->RenderChat(messages, false);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("conversational data needs one"), std::string::npos)
      << refused.status();
}

TEST(HfTokenizerTest, MissingDirectoryNamesTheFile) {
  auto hf = HfTokenizer::Load("/nonexistent/model");
  ASSERT_FALSE(hf.ok());
  EXPECT_NE(std::string(hf.status().message()).find("/nonexistent/model/tokenizer.json"), std::string::npos)
      << hf.status();
}

}  // namespace
}  // namespace zerofit::data
