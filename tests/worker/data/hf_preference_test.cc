// Text and conversational preference pairs read with a Hugging Face tokenizer (qwen2.5; skipped when the
// shared tokenizers are missing).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "worker/data/chat_response.h"
#include "worker/data/data_report.h"
#include "worker/data/hf_tokenizer.h"
#include "worker/data/preference_dataset.h"

namespace zerofit::data {
namespace {

using Ids = std::vector<int32_t>;

class HfPreferenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = std::string(ZEROFIT_HF_TOKENIZERS_DIR) + "/qwen2.5";
    if (!std::filesystem::exists(dir + "/tokenizer.json")) GTEST_SKIP() << dir << " is missing";
    auto tok = HfTokenizer::Load(dir);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tok_ = std::move(*tok);
    options_.add_bos = false;  // Qwen has no BOS
    options_.max_length = 0;
  }
  absl::StatusOr<std::vector<PreferencePair>> Parse(const std::string& jsonl) {
    return ParsePreferenceJsonl(jsonl, "t.jsonl", tok_.get(), options_);
  }
  Ids Enc(const std::string& s) { return *tok_->Encode(s); }
  std::string Render(const nlohmann::ordered_json& msgs, bool gen) {
    text::ChatTemplateOptions o;
    o.add_generation_prompt = gen;
    return *tok_->chat_template()->Render(msgs, o);
  }
  Ids WithEos(Ids ids) {
    ids.push_back(tok_->eos_id());
    return ids;
  }
  void ExpectError(const std::string& jsonl, const std::string& want) {
    auto got = Parse(jsonl);
    ASSERT_FALSE(got.ok()) << jsonl;
    EXPECT_NE(std::string(got.status().message()).find(want), std::string::npos) << got.status();
  }

  std::unique_ptr<HfTokenizer> tok_;
  PreferenceDataOptions options_;
};

TEST_F(HfPreferenceTest, TextPairsUseTheTokenizerWithoutSpecials) {
  auto pairs = Parse("{\"prompt\": \"12+7=\", \"chosen\": \" 19\", \"rejected\": \" 18\"}\n");
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  EXPECT_EQ((*pairs)[0].prompt, Enc("12+7="));
  EXPECT_EQ((*pairs)[0].chosen, WithEos(Enc(" 19")));
}

TEST_F(HfPreferenceTest, ConversationalWithExplicitPrompt) {
  const nlohmann::ordered_json prompt =
      nlohmann::ordered_json::parse(R"([{"role":"user","content":"2+2?"}])");
  const nlohmann::ordered_json chosen =
      nlohmann::ordered_json::parse(R"([{"role":"assistant","content":"4"}])");
  const nlohmann::ordered_json rejected =
      nlohmann::ordered_json::parse(R"([{"role":"assistant","content":"5"}])");
  nlohmann::ordered_json line = {{"prompt", prompt}, {"chosen", chosen}, {"rejected", rejected}};
  auto pairs = Parse(line.dump() + "\n");
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  const std::string p = Render(prompt, true);
  nlohmann::ordered_json all = prompt;
  all.push_back(chosen[0]);
  const std::string full = Render(all, false);
  ASSERT_EQ(full.compare(0, p.size(), p), 0);
  EXPECT_EQ((*pairs)[0].prompt, Enc(p));
  EXPECT_EQ((*pairs)[0].chosen, Enc(full.substr(p.size())));
  EXPECT_EQ(full.substr(p.size()), "4<|im_end|>\n");
  EXPECT_TRUE((*pairs)[0].chat_rendered) << "no EOS after the template's end of turn, as in TRL";
}

// TRL's EOS rule: appended to text (and ids), never to a chat rendering. The data report says so, and the
// template's end of turn is Qwen's EOS (<|im_end|>), so its lint finds every rendering holding it.
TEST_F(HfPreferenceTest, EosIsAppendedToTextAloneAndTheReportSaysSo) {
  const std::string text = R"({"prompt": "2+2?", "chosen": " 4", "rejected": " 5"})";
  const std::string chat =
      R"({"prompt": [{"role":"user","content":"2+2?"}], "chosen": [{"role":"assistant","content":"4"}],)"
      R"( "rejected": [{"role":"assistant","content":"5"}]})";
  auto pairs = Parse(text + "\n" + chat + "\n");
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  EXPECT_FALSE((*pairs)[0].chat_rendered);
  EXPECT_EQ((*pairs)[0].chosen, WithEos(Enc(" 4")));
  EXPECT_TRUE((*pairs)[1].chat_rendered);
  EXPECT_EQ((*pairs)[1].chosen, Enc("4<|im_end|>\n"));
  EXPECT_EQ((*pairs)[1].rejected, Enc("5<|im_end|>\n"));

  const DataReport report = BuildDataReport(*pairs, tok_->expectations(), options_);
  EXPECT_EQ(report.chat_rendered, 1u);
  const std::string shown = FormatDataReport(report, "t.jsonl", /*json=*/false);
  EXPECT_NE(
      shown.find("t.jsonl: 2 pairs (add_bos false, EOS appended to 1, 1 chat template renderings without)"),
      std::string::npos)
      << shown;
  for (const DataLint& l : report.lints) {
    if (l.name.find("never hold the EOS") != std::string::npos) {
      EXPECT_EQ(l.count, 0u) << l.name;
    }
  }
  const std::string only_chat = FormatDataReport(
      BuildDataReport({(*pairs)[1]}, tok_->expectations(), options_), "c.jsonl", /*json=*/false);
  EXPECT_NE(only_chat.find("c.jsonl: 1 pair (add_bos false, chat template renderings, no EOS appended)"),
            std::string::npos)
      << only_chat;

  // Truncation of a chat rendering cuts the template's end of turn, and the lint counts it as a lost end.
  options_.max_length = static_cast<int64_t>((*pairs)[1].prompt.size() + 2);
  options_.max_prompt_length = options_.max_length - 1;
  std::vector<PreferencePair> cut;
  const DataReport truncated = BuildDataReport({(*pairs)[1]}, tok_->expectations(), options_, &cut);
  const Ids turn = Enc("4<|im_end|>\n");
  EXPECT_EQ(cut[0].chosen, Ids(turn.begin(), turn.begin() + 2));
  EXPECT_TRUE(cut[0].chat_rendered);
  for (const DataLint& l : truncated.lints) {
    if (l.name.find("lose their EOS") != std::string::npos) {
      EXPECT_EQ(l.count, 2u) << "chosen and rejected";
    }
  }
}

// A GRPO reward model's input for a chat prompt's completion (chat_response.h) is exactly the response a
// conversational reward pair trains it on.
TEST_F(HfPreferenceTest, AChatReplyIsCutAsAConversationalPairsResponse) {
  const std::string prompt = R"([{"role":"system","content":"Be brief."},{"role":"user","content":"2+2?"}])";
  auto pairs = Parse(R"({"prompt": )" + prompt + R"(, "chosen": [{"role":"assistant","content":"4"}], )" +
                     R"("rejected": [{"role":"assistant","content":"5"}]})" + "\n");
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  auto reply = ChatReplyIds(*tok_, prompt, ChatExtras{}, "4");
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(*reply, (*pairs)[0].chosen);
  EXPECT_EQ(*reply, Enc("4<|im_end|>\n"));
  const ChatExtras tools{R"([{"type": "function", "function": {"name": "add"}}])", ""};
  auto with_tools = ChatReplyIds(*tok_, prompt, tools, "4");
  ASSERT_TRUE(with_tools.ok()) << with_tools.status();
  EXPECT_EQ(*with_tools, *reply) << "tools change the prompt's rendering, not the reply's";
  EXPECT_FALSE(ChatReplyIds(*tok_, "{}", ChatExtras{}, "4").ok());
}

TEST_F(HfPreferenceTest, ConversationalImplicitPromptIsTheSharedPrefix) {
  const std::string implicit =
      R"({"chosen": [{"role":"user","content":"2+2?"},{"role":"assistant","content":"4"}],)"
      R"( "rejected": [{"role":"user","content":"2+2?"},{"role":"assistant","content":"5"}]})";
  const std::string explicit_prompt =
      R"({"prompt": [{"role":"user","content":"2+2?"}], "chosen": [{"role":"assistant","content":"4"}],)"
      R"( "rejected": [{"role":"assistant","content":"5"}]})";
  auto a = Parse(implicit + "\n");
  auto b = Parse(explicit_prompt + "\n");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*a)[0].prompt, (*b)[0].prompt);
  EXPECT_EQ((*a)[0].chosen, (*b)[0].chosen);
  EXPECT_EQ((*a)[0].rejected, (*b)[0].rejected);
}

TEST_F(HfPreferenceTest, MalformedConversationsNameFileLineAndField) {
  ExpectError(
      "\n{\"prompt\": [{\"role\":\"user\",\"content\":\"x\"}], \"chosen\": [], \"rejected\": "
      "[{\"role\":\"assistant\",\"content\":\"y\"}]}\n",
      "t.jsonl:2: field 'chosen': no response messages");
  ExpectError(
      "{\"prompt\": [{\"content\":\"x\"}], \"chosen\": [{\"role\":\"assistant\",\"content\":\"a\"}], "
      "\"rejected\": [{\"role\":\"assistant\",\"content\":\"y\"}]}\n",
      "t.jsonl:1: field 'prompt': message 0");
  ExpectError(
      "{\"chosen\": [{\"role\":\"user\",\"content\":\"a\"}], \"rejected\": "
      "[{\"role\":\"user\",\"content\":\"b\"}]}\n",
      "t.jsonl:1: field 'prompt': missing, and chosen and rejected share no leading messages");
  ExpectError(
      "{\"prompt\": \"x\", \"chosen\": [{\"role\":\"assistant\",\"content\":\"a\"}], "
      "\"rejected\": [{\"role\":\"assistant\",\"content\":\"y\"}]}\n",
      "t.jsonl:1: field 'prompt': expected a list of messages");
  ExpectError("{\"prompt\": \"x\", \"chosen\": \"\", \"rejected\": \"y\"}\n",
              "t.jsonl:1: field 'chosen': empty");
}

// SFT's chat formats (TRL's SFTTrainer): "messages" scores the whole rendered conversation; a conversational
// prompt-completion scores the completion's part of the rendering, cut as for conversational pairs.
TEST_F(HfPreferenceTest, SftConversationsAreRenderedWithTheChatTemplate) {
  const nlohmann::ordered_json prompt = nlohmann::ordered_json::parse(
      R"([{"role":"system","content":"Be brief."},{"role":"user","content":"2+2?"}])");
  const nlohmann::ordered_json answer =
      nlohmann::ordered_json::parse(R"([{"role":"assistant","content":"4"}])");
  nlohmann::ordered_json all = prompt;
  all.push_back(answer[0]);
  options_.sft = true;
  const nlohmann::ordered_json messages = {{"messages", all}};
  const nlohmann::ordered_json completion = {{"prompt", prompt}, {"completion", answer}};
  const nlohmann::ordered_json pair = {
      {"prompt", prompt},
      {"chosen", answer},
      {"rejected", nlohmann::ordered_json::parse(R"([{"role":"assistant","content":"5"}])")}};
  auto examples = Parse(messages.dump() + "\n" + completion.dump() + "\n" + pair.dump() + "\n");
  ASSERT_TRUE(examples.ok()) << examples.status();
  ASSERT_EQ(examples->size(), 3u);
  const std::string full = Render(all, false);
  const std::string p = Render(prompt, true);
  EXPECT_TRUE((*examples)[0].prompt.empty()) << "Qwen has no BOS, and the whole conversation is scored";
  EXPECT_EQ((*examples)[0].chosen, Enc(full));
  EXPECT_EQ((*examples)[1].prompt, Enc(p));
  EXPECT_EQ((*examples)[1].chosen, Enc(full.substr(p.size())));
  EXPECT_EQ(full.substr(p.size()), "4<|im_end|>\n");
  EXPECT_EQ((*examples)[2].prompt, (*examples)[1].prompt) << "a conversational pair's chosen response";
  EXPECT_EQ((*examples)[2].chosen, (*examples)[1].chosen);
  for (const PreferencePair& e : *examples) EXPECT_TRUE(e.rejected.empty());
  ExpectError(R"({"prompt": [{"role":"user","content":"x"}], "completion": []})",
              "t.jsonl:1: field 'completion': no response messages after the prompt");
  ExpectError(R"({"prompt": [], "completion": [{"role":"assistant","content":"y"}]})",
              "t.jsonl:1: field 'prompt': no messages (the chat template needs a prompt)");
  ExpectError(R"({"prompt": "x", "completion": [{"role":"assistant","content":"y"}]})",
              "t.jsonl:1: field 'prompt': expected a list of messages, got string");
}

// assistant_only_loss (TRL's SFTConfig name): a conversation's assistant turns are scored and the messages
// between them are not; the prompt is what comes before the first scored token. Each piece is tokenized on
// its own (chat_turns.h), so the expected ids are the pieces' ids joined.
TEST_F(HfPreferenceTest, SftAssistantOnlyLossScoresTheAssistantsTurnsAlone) {
  const nlohmann::ordered_json sys_user = nlohmann::ordered_json::parse(
      R"([{"role":"system","content":"Be brief."},{"role":"user","content":"2+2?"}])");
  const nlohmann::ordered_json a1 = {{"role", "assistant"}, {"content", "4"}};
  const nlohmann::ordered_json u2 = {{"role", "user"}, {"content", "and 3+5?"}};
  const nlohmann::ordered_json a2 = {{"role", "assistant"}, {"content", "8"}};
  nlohmann::ordered_json all = sys_user;
  for (const auto& m : {a1, u2, a2}) all.push_back(m);
  const std::string p0 = Render(sys_user, true);
  const std::string span1 = "4<|im_end|>\n";
  const std::string between = "<|im_start|>user\nand 3+5?<|im_end|>\n<|im_start|>assistant\n";
  const std::string span3 = "8<|im_end|>\n";
  ASSERT_EQ(p0 + span1 + between + span3, Render(all, false));
  const Ids s1 = Enc(span1), gap = Enc(between), s3 = Enc(span3);
  Ids turns = s1;
  turns.insert(turns.end(), gap.begin(), gap.end());
  turns.insert(turns.end(), s3.begin(), s3.end());
  std::vector<uint8_t> mask(s1.size(), 1);
  mask.insert(mask.end(), gap.size(), 0);
  mask.insert(mask.end(), s3.size(), 1);  // no EOS appended: the template ends the turn (TRL's rule)

  options_.sft = true;
  options_.assistant_only_loss = true;
  nlohmann::ordered_json prompt_with_turn = sys_user;
  for (const auto& m : {a1, u2}) prompt_with_turn.push_back(m);
  const nlohmann::ordered_json lines[] = {
      {{"messages", all}},
      {{"prompt", sys_user}, {"completion", {a1}}},
      {{"prompt", prompt_with_turn}, {"completion", {a2}}},
  };
  std::string jsonl;
  for (const auto& l : lines) jsonl += l.dump() + "\n";
  auto got = Parse(jsonl);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 3u);
  EXPECT_EQ((*got)[0].prompt, Enc(p0));
  EXPECT_EQ((*got)[0].chosen, turns);
  EXPECT_EQ((*got)[0].chosen_scored, mask);
  EXPECT_EQ((*got)[1].prompt, Enc(p0)) << "one assistant turn: as a prompt-completion line";
  EXPECT_EQ((*got)[1].chosen, s1);
  EXPECT_TRUE((*got)[1].chosen_scored.empty()) << "every completion token is scored";
  Ids before = Enc(p0);
  before.insert(before.end(), s1.begin(), s1.end());
  before.insert(before.end(), gap.begin(), gap.end());
  EXPECT_EQ((*got)[2].prompt, before) << "completion_only_loss: the prompt's assistant turn is not scored";
  EXPECT_EQ((*got)[2].chosen, s3);

  options_.completion_only_loss = false;  // TRL: completion mask off, assistant mask on
  auto scored_prompt = Parse(lines[2].dump() + "\n");
  ASSERT_TRUE(scored_prompt.ok()) << scored_prompt.status();
  EXPECT_EQ((*scored_prompt)[0].prompt, Enc(p0));
  EXPECT_EQ((*scored_prompt)[0].chosen, turns);
  EXPECT_EQ((*scored_prompt)[0].chosen_scored, mask);

  options_.max_length = static_cast<int64_t>(Enc(p0).size() + s1.size() + 2);  // cut inside the user's turn
  options_.max_prompt_length = options_.max_length - 1;
  auto cut = Parse(lines[0].dump() + "\n");
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_EQ((*cut)[0].chosen, Ids(turns.begin(), turns.begin() + s1.size() + 2));
  EXPECT_EQ((*cut)[0].chosen_scored, std::vector<uint8_t>(mask.begin(), mask.begin() + s1.size() + 2));
}

TEST_F(HfPreferenceTest, SftAssistantOnlyLossRefusesLinesWithoutAssistantMessages) {
  options_.sft = true;
  options_.assistant_only_loss = true;
  ExpectError(R"({"text": "12+7=19"})",
              "t.jsonl:1: field 'text': assistant_only_loss scores the assistant's "
              "messages, and this line has none");
  ExpectError(R"({"prompt": "12+7=", "completion": "19"})",
              "t.jsonl:1: field 'completion': assistant_only_loss");
  ExpectError(R"({"prompt_ids": [1], "completion_ids": [2]})",
              "t.jsonl:1: field 'completion_ids': assistant_only");
  ExpectError(R"({"prompt": "x", "chosen": "a", "rejected": "b"})",
              "t.jsonl:1: a preference pair, but assistant_only_loss scores");
  ExpectError(R"({"messages": [{"role":"user","content":"hi"}]})",
              "t.jsonl:1: field 'messages': no assistant message to score (assistant_only_loss)");
  options_.sft = false;
  ExpectError(R"({"prompt": "x", "chosen": "a", "rejected": "b"})", "assistant_only_loss applies to SFT");
}

TEST_F(HfPreferenceTest, EmptyBlankAndCutFilesAreErrorsWithLine) {
  ExpectError("", "t.jsonl:1: empty file");
  ExpectError("\n  \n\n", "t.jsonl:3: no preference pairs (all 3 lines are blank)");
  ExpectError("{\"prompt\": \"x\", \"chosen\": \"a\", \"rejected\": \"b\"}\n{\"prompt\": \"x\", \"cho",
              "t.jsonl:2: invalid JSON");
  ExpectError("{\"prompt\": \"x\", \"chosen\": \"a\", \"rejected\": \"b\"}\n{\"prompt\": \"x\", \"cho",
              "was the file cut off");
}

// Text and conversational lines past one chunk (4096 lines), with truncation: every thread count gives the
// serial pairs and stats; with bad lines late in the file, the serial (lowest) error.
TEST_F(HfPreferenceTest, ParallelParsingEqualsSerial) {
  std::string jsonl;
  for (int i = 1; i <= 5000; ++i) {
    const std::string n = std::to_string(i);
    if (i % 7 == 0) {
      jsonl += R"({"prompt": [{"role": "user", "content": "what is )" + n +
               R"(?"}], )"
               R"("chosen": [{"role": "assistant", "content": "it is )" +
               n +
               R"( 😀"}], )"
               R"("rejected": [{"role": "assistant", "content": "no idea"}]})"
               "\n";
    } else if (i % 11 == 0) {
      jsonl += "\n";
    } else {
      jsonl += R"({"prompt": "Q)" + n + R"(: how many é in 中文 )" + std::string(i % 50, 'x') +
               R"(", "chosen": "A: )" + n + R"(", "rejected": "B: don't know )" + n + "\"}\n";
    }
  }
  options_.max_length = 24;
  options_.max_prompt_length = 12;
  auto parse = [&](const std::string& contents, int threads, PreferenceDataStats* stats) {
    PreferenceDataOptions o = options_;
    o.threads = threads;
    return ParsePreferenceJsonl(contents, "t.jsonl", tok_.get(), o, stats);
  };
  PreferenceDataStats serial_stats;
  auto serial = parse(jsonl, 1, &serial_stats);
  ASSERT_TRUE(serial.ok()) << serial.status();
  ASSERT_GT(serial_stats.prompts_truncated, 0u);
  for (int threads : {0, 2, 3}) {
    PreferenceDataStats stats;
    auto parallel = parse(jsonl, threads, &stats);
    ASSERT_TRUE(parallel.ok()) << parallel.status();
    ASSERT_EQ(parallel->size(), serial->size());
    for (size_t i = 0; i < serial->size(); ++i) {
      const PreferencePair &a = (*serial)[i], &b = (*parallel)[i];
      ASSERT_TRUE(a.prompt == b.prompt && a.chosen == b.chosen && a.rejected == b.rejected &&
                  a.source_line == b.source_line)
          << "pair " << i << ", " << threads << " threads";
    }
    EXPECT_EQ(stats.pairs, serial_stats.pairs);
    EXPECT_EQ(stats.prompts_truncated, serial_stats.prompts_truncated);
    EXPECT_EQ(stats.responses_truncated, serial_stats.responses_truncated);
    EXPECT_EQ(stats.longest_sequence, serial_stats.longest_sequence);
  }
  // Errors at lines 4321 (conversational, no response after the prompt) and 4800 (bad JSON).
  std::vector<std::string> lines = absl::StrSplit(jsonl, '\n');
  lines[4320] =
      R"({"chosen": [{"role": "user", "content": "a"}], "rejected": [{"role": "user", "content": "a"}]})";
  lines[4799] = "{not json";
  const std::string bad = absl::StrJoin(lines, "\n");
  auto serial_bad = parse(bad, 1, nullptr);
  ASSERT_FALSE(serial_bad.ok());
  EXPECT_EQ(serial_bad.status().message().rfind("t.jsonl:4321: ", 0), 0u) << serial_bad.status();
  for (int threads : {0, 2, 5}) EXPECT_EQ(parse(bad, threads, nullptr).status(), serial_bad.status());
  // A cut-off last line keeps its hint.
  const std::string cut = jsonl.substr(0, jsonl.size() - 5);
  auto serial_cut = parse(cut, 1, nullptr);
  EXPECT_NE(serial_cut.status().message().find("was the file cut off"), std::string::npos);
  EXPECT_EQ(parse(cut, 3, nullptr).status(), serial_cut.status());
}

}  // namespace
}  // namespace zerofit::data
