#include "worker/data/hf_tokenizer.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
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

// TRL's eos_token: the id appended to responses, the pad fallback and the template's eos_token all follow it.
TEST(HfTokenizerTest, AnEosTokenOverrideIsTheEosEverywhere) {
  const std::string dir = ModelDir("mistral-v0.3");
  SKIP_IF_MISSING(dir);
  auto own = HfTokenizer::Load(dir);
  TokenizerOverrides o;
  o.eos_token = "[control_8]";
  auto changed = HfTokenizer::Load(dir, o);
  ASSERT_TRUE(own.ok() && changed.ok()) << changed.status();
  const int32_t control8 = *(*own)->text_tokenizer().TokenToId("[control_8]");
  EXPECT_EQ((*changed)->eos_id(), control8);
  EXPECT_EQ((*changed)->pad_id(), control8);  // Mistral names no pad token: it pads with the EOS
  EXPECT_EQ((*changed)->bos_id(), (*own)->bos_id());
  EXPECT_EQ((*changed)->expectations().eos_id, control8);
  const std::string messages =
      R"([{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}])";
  auto want = (*own)->RenderChat(messages, false);
  auto got = (*changed)->RenderChat(messages, false);
  ASSERT_TRUE(want.ok() && got.ok()) << got.status();
  ASSERT_TRUE(absl::EndsWith(*want, "4</s>")) << *want;  // Mistral's template ends a reply with eos_token
  EXPECT_EQ(*got, want->substr(0, want->size() - 4) + "[control_8]");

  o.eos_token = "<|im_end|>";  // Qwen's, not Mistral's
  auto refused = HfTokenizer::Load(dir, o);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("eos_token \"<|im_end|>\" is not a token of " + dir +
                                            "/tokenizer.json"),
            std::string::npos)
      << refused.status();
}

// TRL's chat_template_path: a model without a template (GPT-2) trained on conversations with Qwen's.
TEST(HfTokenizerTest, AChatTemplateOverrideReplacesTheDirectorysTemplate) {
  const std::string gpt2 = ModelDir("gpt2"), qwen = ModelDir("qwen2.5");
  SKIP_IF_MISSING(gpt2);
  SKIP_IF_MISSING(qwen);
  const std::string messages =
      R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}])";
  auto bare = HfTokenizer::Load(gpt2);
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_FALSE((*bare)->RenderChat(messages, true).ok());
  TokenizerOverrides o;
  o.chat_template = qwen;
  auto with = HfTokenizer::Load(gpt2, o);
  auto reference = HfTokenizer::Load(qwen);
  ASSERT_TRUE(with.ok() && reference.ok()) << with.status();
  auto got = (*with)->RenderChat(messages, true);
  auto want = (*reference)->RenderChat(messages, true);
  ASSERT_TRUE(got.ok() && want.ok()) << got.status();
  EXPECT_EQ(*got, *want);  // Qwen's template names no special token
  EXPECT_EQ((*with)->eos_id(), (*bare)->eos_id());

  // Named, it must load: a missing one fails the tokenizer, not the first conversation.
  o.chat_template = ::testing::TempDir() + "/absent.jinja";
  auto missing = HfTokenizer::Load(gpt2, o);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(o.chat_template), std::string::npos) << missing.status();
}

TEST(HfTokenizerTest, MissingDirectoryNamesTheFile) {
  auto hf = HfTokenizer::Load("/nonexistent/model");
  ASSERT_FALSE(hf.ok());
  EXPECT_NE(std::string(hf.status().message()).find("/nonexistent/model/tokenizer.json"), std::string::npos)
      << hf.status();
}

}  // namespace
}  // namespace zerofit::data
