// What an export carries beside its weights: the tokenizer of the directory the job read text with and the
// model's generation_config.json, byte for byte; what an earlier export left and the sources lack is removed.
#include "worker/data/companion_files.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "text/chat_template.h"
#include "worker/data/hf_tokenizer.h"

namespace zerofit::data {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void Put(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

fs::path FreshDir(const std::string& name) {
  const fs::path d = fs::path(::testing::TempDir()) / ("companions_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

const std::string kMistral = std::string(ZEROFIT_HF_TOKENIZERS_DIR) + "/mistral-v0.3";

TEST(CompanionFilesTest, TheExportGetsTheTokenizerAndTheGenerationConfigByteForByte) {
  if (!fs::exists(kMistral + "/tokenizer.json")) GTEST_SKIP() << kMistral << " is missing";
  const fs::path model = FreshDir("model"), out = FreshDir("out");
  Put(model / "config.json", "{}");
  Put(model / "tokenizer.json", "the model's own tokenizer, not the one the job read text with");
  Put(model / kGenerationConfigName, R"({"eos_token_id": [1, 2], "do_sample": true})");
  const fs::path tok = FreshDir("tok");
  for (const char* f :
       {"tokenizer.json", "tokenizer.model", "tokenizer_config.json", "special_tokens_map.json"})
    fs::copy_file(fs::path(kMistral) / f, tok / f);
  // As transformers 4.47+ saves templates: a file each, which replace tokenizer_config.json's.
  const auto config = nlohmann::json::parse(std::ifstream(kMistral + "/tokenizer_config.json"));
  Put(tok / "chat_template.jinja", config["chat_template"].get<std::string>());
  Put(tok / text::ChatTemplate::kAdditionalTemplatesDir / "tool_use.jinja", "T{{ tools|length }}");
  Put(tok / text::ChatTemplate::kAdditionalTemplatesDir / "README.txt", "not a template");

  ASSERT_TRUE(WriteCompanionFiles(model.string(), tok.string(), out.string()).ok());
  const std::vector<CompanionFile> files = CompanionFilesOf(model.string(), tok.string());
  std::vector<std::string> names;
  for (const CompanionFile& f : files) names.push_back(f.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                      "tokenizer.model", "chat_template.jinja",
                                      "additional_chat_templates/tool_use.jinja", "generation_config.json"}));
  for (const CompanionFile& f : files) EXPECT_EQ(Slurp(out / f.name), Slurp(f.from)) << f.name;
  EXPECT_FALSE(fs::exists(out / text::ChatTemplate::kAdditionalTemplatesDir / "README.txt"));
  EXPECT_FALSE(fs::exists(out / "config.json"));  // the export's own, written by ExportHf

  // The export reads as the tokenizer did: same ids, same chat rendering.
  auto want = HfTokenizer::Load(tok.string());
  auto got = HfTokenizer::Load(out.string());
  ASSERT_TRUE(want.ok() && got.ok()) << got.status();
  EXPECT_EQ(*(*got)->Encode("Hello 12+7=19"), *(*want)->Encode("Hello 12+7=19"));
  const std::string chat = R"([{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}])";
  EXPECT_EQ(*(*got)->RenderChat(chat, false), *(*want)->RenderChat(chat, false));
  EXPECT_EQ((*got)->eos_id(), (*want)->eos_id());
}

TEST(CompanionFilesTest, WhatAnEarlierExportLeftAndTheSourcesLackIsRemoved) {
  const fs::path model = FreshDir("model2"), tok = FreshDir("tok2"), out = FreshDir("out2");
  Put(tok / "tokenizer.json", "new");
  Put(tok / "tokenizer_config.json", R"({"chat_template": "NEW"})");
  // An earlier export of another model: its template file would override the new tokenizer_config.json's.
  Put(out / "tokenizer.json", "old");
  Put(out / "chat_template.jinja", "OLD");
  Put(out / "vocab.json", "{}");
  Put(out / text::ChatTemplate::kAdditionalTemplatesDir / "tool_use.jinja", "OLD");
  Put(out / kGenerationConfigName, "{}");
  Put(out / "README.md", "the user's notes");
  Put(out / "model.safetensors", "weights");

  ASSERT_TRUE(WriteCompanionFiles(model.string(), tok.string(), out.string()).ok());
  EXPECT_EQ(Slurp(out / "tokenizer.json"), "new");
  EXPECT_EQ(Slurp(out / "tokenizer_config.json"), R"({"chat_template": "NEW"})");
  for (const char* gone : {"chat_template.jinja", "vocab.json", "additional_chat_templates/tool_use.jinja",
                           "generation_config.json"})
    EXPECT_FALSE(fs::exists(out / gone)) << gone;
  EXPECT_EQ(Slurp(out / "README.md"), "the user's notes");
  EXPECT_EQ(Slurp(out / "model.safetensors"), "weights");

  // A model without a tokenizer: the export keeps none, so a later job does not read text with a stale one.
  ASSERT_TRUE(WriteCompanionFiles(model.string(), "", out.string()).ok());
  EXPECT_FALSE(fs::exists(out / "tokenizer.json"));
  EXPECT_FALSE(fs::exists(out / "tokenizer_config.json"));
}

TEST(CompanionFilesTest, ASourceThatIsTheExportItselfIsLeftAlone) {
  const fs::path model = FreshDir("model3"), out = FreshDir("out3");
  Put(out / "tokenizer.json", "mine");
  Put(out / "chat_template.jinja", "mine");
  ASSERT_TRUE(WriteCompanionFiles(model.string(), out.string(), out.string()).ok());
  EXPECT_EQ(Slurp(out / "tokenizer.json"), "mine");
  EXPECT_EQ(Slurp(out / "chat_template.jinja"), "mine");
}

const std::string kQwen = std::string(ZEROFIT_HF_TOKENIZERS_DIR) + "/qwen2.5";

// data.eos_token and data.chat_template: the export holds the tokenizer as the job changed it, as
// Trainer.save_model writes the tokenizer TRL changed, so that it loads (here and in transformers) as the job
// read text.
TEST(CompanionFilesTest, TheExportCarriesTheTokenizerAsTheOverridesChangedIt) {
  if (!fs::exists(kMistral + "/tokenizer.json") || !fs::exists(kQwen + "/tokenizer.json"))
    GTEST_SKIP() << "shared tokenizers are missing";
  const fs::path model = FreshDir("model5"), tok = FreshDir("tok5"), out = FreshDir("out5");
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"})
    fs::copy_file(fs::path(kMistral) / f, tok / f);
  Put(tok / text::ChatTemplate::kAdditionalTemplatesDir / "tool_use.jinja", "Mistral's own, replaced");
  Put(out / "chat_template.json", "{}");  // an earlier export's
  TokenizerOverrides o;
  o.eos_token = "[control_8]";
  o.chat_template = kQwen;  // its template is in its tokenizer_config.json
  ASSERT_TRUE(WriteCompanionFiles(model.string(), tok.string(), out.string(), o).ok());

  EXPECT_EQ(Slurp(out / "tokenizer.json"), Slurp(tok / "tokenizer.json"));
  const auto qwen_config = nlohmann::ordered_json::parse(std::ifstream(kQwen + "/tokenizer_config.json"));
  EXPECT_EQ(Slurp(out / "chat_template.jinja"), qwen_config["chat_template"].get<std::string>());
  EXPECT_FALSE(fs::exists(out / text::ChatTemplate::kAdditionalTemplatesDir / "tool_use.jinja"));
  EXPECT_FALSE(fs::exists(out / "chat_template.json"));
  auto source_config = nlohmann::ordered_json::parse(std::ifstream(tok / "tokenizer_config.json"));
  auto config = nlohmann::ordered_json::parse(std::ifstream(out / "tokenizer_config.json"));
  EXPECT_EQ(config["eos_token"], "[control_8]");
  EXPECT_FALSE(config.contains("chat_template"));
  source_config.erase("chat_template");
  source_config["eos_token"] = "[control_8]";
  EXPECT_EQ(config, source_config);  // nothing else changed, keys in their order
  // transformers' VERY_LARGE_INTEGER stays an integer (nlohmann reads it as a double).
  EXPECT_NE(
      Slurp(out / "tokenizer_config.json").find("\"model_max_length\": 1000000000000000019884624838656,"),
      std::string::npos);
  const auto map = nlohmann::ordered_json::parse(std::ifstream(out / "special_tokens_map.json"));
  EXPECT_EQ(map["eos_token"]["content"], "[control_8]");  // an AddedToken dict keeps its flags
  EXPECT_EQ(map["eos_token"]["normalized"], false);
  EXPECT_EQ(map["bos_token"]["content"], "<s>");

  auto job = HfTokenizer::Load(tok.string(), o);
  auto exported = HfTokenizer::Load(out.string());
  ASSERT_TRUE(job.ok() && exported.ok()) << exported.status();
  EXPECT_EQ((*exported)->eos_id(), (*job)->eos_id());
  const std::string chat = R"([{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}])";
  EXPECT_EQ(*(*exported)->RenderChat(chat, false), *(*job)->RenderChat(chat, false));
}

TEST(CompanionFilesTest, OverridesApplyToAnExportThatIsItsOwnTokenizer) {
  const fs::path model = FreshDir("model6"), out = FreshDir("out6");
  Put(out / "tokenizer.json", "t");
  Put(out / "chat_template.jinja", "old");
  Put(out / text::ChatTemplate::kAdditionalTemplatesDir / "tool_use.jinja", "old tools");
  const fs::path file = FreshDir("templates6") / "chatml.j2";
  Put(file, "new");
  TokenizerOverrides o;
  o.eos_token = "<|im_end|>";
  o.chat_template = file.string();
  ASSERT_TRUE(WriteCompanionFiles(model.string(), out.string(), out.string(), o).ok());
  EXPECT_EQ(Slurp(out / "tokenizer.json"), "t");
  EXPECT_EQ(Slurp(out / "chat_template.jinja"), "new");
  EXPECT_FALSE(fs::exists(out / text::ChatTemplate::kAdditionalTemplatesDir / "tool_use.jinja"));
  // No tokenizer_config.json in the source: one is written to carry the EOS, as transformers saves one.
  EXPECT_EQ(nlohmann::json::parse(Slurp(out / "tokenizer_config.json")),
            nlohmann::json::parse(R"({"eos_token": "<|im_end|>"})"));
}

TEST(CompanionFilesTest, AnOverrideThatCannotBeWrittenWritesNothing) {
  const fs::path model = FreshDir("model7"), tok = FreshDir("tok7"), out = FreshDir("out7");
  Put(tok / "tokenizer.json", "t");
  const fs::path source = FreshDir("source7");
  Put(source / "tokenizer_config.json", R"({"chat_template": [{"name": "../escape", "template": "x"}]})");
  TokenizerOverrides o;
  o.chat_template = source.string();
  const absl::Status s = WriteCompanionFiles(model.string(), tok.string(), out.string(), o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'../escape' cannot name a file"), std::string::npos) << s;
  EXPECT_TRUE(fs::is_empty(out));
}

TEST(CompanionFilesTest, AFileThatCannotBeWrittenIsNamed) {
  const fs::path model = FreshDir("model4"), tok = FreshDir("tok4"), out = FreshDir("out4");
  Put(tok / "tokenizer.json", "t");
  fs::create_directories(out / "tokenizer.json" / "in-the-way");  // a directory where the file goes
  const absl::Status s = WriteCompanionFiles(model.string(), tok.string(), out.string());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find((out / "tokenizer.json").string()), std::string::npos) << s;
  for (const fs::directory_entry& e : fs::directory_iterator(out))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << "left behind: " << e.path();
}

}  // namespace
}  // namespace zerofit::data
