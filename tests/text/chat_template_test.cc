// Chat templates against Python jinja2 goldens (tests/text/oracle/make_chat_golden.py), plus the errors
// the interpreter must report: unsupported constructs with line:column, raise_exception's message, bounds.
#include "text/chat_template.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/civil_time.h"

namespace zerofit::text {
namespace {

using Json = nlohmann::ordered_json;

const std::string kSourceDir = ZEROFIT_SOURCE_DIR;
const std::string kHfDir = kSourceDir + "/../shared/hf-tokenizers";

std::vector<Json> ReadGolden(const std::string& name) {
  std::ifstream in(kSourceDir + "/tests/text/golden/chat_" + name + ".jsonl");
  std::vector<Json> rows;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) rows.push_back(Json::parse(line));
  }
  return rows;
}

ChatTemplateOptions OptionsFrom(const Json& o) {
  ChatTemplateOptions options;
  options.add_generation_prompt = o.value("add_generation_prompt", false);
  if (o.contains("bos_token")) options.bos_token = o["bos_token"].get<std::string>();
  if (o.contains("eos_token")) options.eos_token = o["eos_token"].get<std::string>();
  if (o.contains("tools")) options.tools = o["tools"];
  if (o.contains("documents")) options.documents = o["documents"];
  if (o.contains("extra")) options.extra = o["extra"];
  options.now = absl::FromCivil(absl::CivilSecond(2024, 7, 26, 12, 0, 0), absl::UTCTimeZone());
  return options;
}

// Checks one golden row: the exact output, or an error whose message contains Python's.
void CheckRow(const ChatTemplate& t, const Json& row) {
  SCOPED_TRACE(row["case"].get<std::string>());
  auto out = t.Render(row["messages"], OptionsFrom(row["options"]));
  if (row.contains("output")) {
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(*out, row["output"].get<std::string>());
    return;
  }
  ASSERT_FALSE(out.ok()) << "rendered " << *out << " but Python raised " << row["error"];
  EXPECT_NE(out.status().message().find(row["error"].get<std::string>()), std::string::npos)
      << out.status() << "\nPython: " << row["error_type"] << ": " << row["error"];
}

class HfTemplateGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(HfTemplateGolden, MatchesPythonJinja2) {
  const std::string config = kHfDir + "/" + GetParam() + "/tokenizer_config.json";
  if (!std::filesystem::exists(config)) GTEST_SKIP() << config << " is missing";
  auto t = ChatTemplate::FromTokenizerConfig(config);
  ASSERT_TRUE(t.ok()) << t.status();
  std::vector<Json> rows = ReadGolden(GetParam());
  ASSERT_GT(rows.size(), 10u);
  for (const Json& row : rows) CheckRow(*t, row);
}

INSTANTIATE_TEST_SUITE_P(Models, HfTemplateGolden,
                         ::testing::Values("qwen2.5", "mistral-v0.3", "tinyllama", "smollm2"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

// A model directory as transformers 4.47+ saves it: the template in chat_template.jinja, none in
// tokenizer_config.json. `config` is written as the directory's tokenizer_config.json.
std::string SavedModelDir(const std::string& name, const Json& config, const std::string& jinja) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer_config.json") << config.dump();
  if (!jinja.empty()) std::ofstream(dir / ChatTemplate::kChatTemplateFile, std::ios::binary) << jinja;
  return dir.string();
}

void WriteNamedTemplate(const std::string& dir, const std::string& name, const std::string& source) {
  const std::filesystem::path extra = std::filesystem::path(dir) / ChatTemplate::kAdditionalTemplatesDir;
  std::filesystem::create_directories(extra);
  std::ofstream(extra / (name + ".jinja"), std::ios::binary) << source;
}

// Every golden row of the shared models, rendered from their templates moved into chat_template.jinja.
TEST_P(HfTemplateGolden, TheSameTemplateSavedAsChatTemplateJinjaRendersAlike) {
  const std::string config_path = kHfDir + "/" + GetParam() + "/tokenizer_config.json";
  if (!std::filesystem::exists(config_path)) GTEST_SKIP() << config_path << " is missing";
  Json config = Json::parse(std::ifstream(config_path));
  const std::string source = config["chat_template"].get<std::string>();
  config.erase("chat_template");
  auto t = ChatTemplate::FromDirectory(SavedModelDir("jinja_" + GetParam(), config, source));
  ASSERT_TRUE(t.ok()) << t.status();
  const std::vector<Json> rows = ReadGolden(GetParam());
  ASSERT_GT(rows.size(), 10u);
  for (const Json& row : rows) CheckRow(*t, row);
}

TEST(ChatTemplateTest, TemplateFilesReplaceTheConfigsTemplatesAsInTransformers) {
  const Json config = {{"bos_token", "<s>"}, {"chat_template", "CONFIG"}};
  auto from_config = ChatTemplate::FromDirectory(SavedModelDir("config_only", config, ""));
  ASSERT_TRUE(from_config.ok()) << from_config.status();
  EXPECT_EQ(*from_config->Render(Json::array(), {}), "CONFIG");

  const std::string dir = SavedModelDir("jinja_and_named", config, "J{{ bos_token }}");
  WriteNamedTemplate(dir, "tool_use", "T{{ tools|length }}");
  std::ofstream(dir + "/" + ChatTemplate::kAdditionalTemplatesDir + "/notes.txt") << "not a template";
  auto t = ChatTemplate::FromDirectory(dir);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t->Render(Json::array(), {}), "J<s>");  // the config's "CONFIG" is ignored
  ChatTemplateOptions with_tools;
  with_tools.tools = Json::array({Json::object()});
  EXPECT_EQ(*t->Render(Json::array(), with_tools), "T1");

  // Named templates alone (no chat_template.jinja) also replace the config's, and have no default.
  const std::string named_only = SavedModelDir("named_only", config, "");
  WriteNamedTemplate(named_only, "rag", "R");
  WriteNamedTemplate(named_only, "x", "X");
  auto n = ChatTemplate::FromDirectory(named_only);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_TRUE(absl::StrContains(n->Render(Json::array(), {}).status().message(), "no default specified"));

  // One named template is no default either (transformers keeps it as a dict): only tools select it.
  const std::string tool_only = SavedModelDir("tool_only", config, "");
  WriteNamedTemplate(tool_only, "tool_use", "T");
  auto one = ChatTemplate::FromDirectory(tool_only);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_TRUE(absl::StrContains(one->Render(Json::array(), {}).status().message(), "no default specified"));
  EXPECT_EQ(*one->Render(Json::array(), with_tools), "T");
}

TEST(ChatTemplateTest, FromDirectoryErrorsNameTheFile) {
  const std::string none = SavedModelDir("no_template", Json{{"eos_token", "</s>"}}, "");
  auto missing = ChatTemplate::FromDirectory(none);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "chat_template.jinja")) << missing.status();

  const std::string bad = SavedModelDir("bad_template", Json::object(), "{% if x %}unclosed");
  auto broken = ChatTemplate::FromDirectory(bad);
  ASSERT_FALSE(broken.ok());
  EXPECT_TRUE(absl::StrContains(broken.status().message(), bad + "/chat_template.jinja: template 'default'"))
      << broken.status();

  const std::string twice = SavedModelDir("two_defaults", Json::object(), "A");
  WriteNamedTemplate(twice, "default", "B");
  auto doubled = ChatTemplate::FromDirectory(twice);
  EXPECT_TRUE(absl::StrContains(doubled.status().message(), "a second 'default' template"))
      << doubled.status();

  const std::string no_config = SavedModelDir("no_config", Json::object(), "{{ eos_token }}");
  std::filesystem::remove(no_config + "/tokenizer_config.json");
  auto plain = ChatTemplate::FromDirectory(no_config);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(*plain->Render(Json::array(), {}), "");
}

// TRL's chat_template_path: another template, rendered with the tokenizer's own special tokens.
TEST(ChatTemplateTest, AReplacementTemplateRendersWithTheTokenizersTokens) {
  const std::string tokenizer =
      SavedModelDir("replacement_target", Json{{"bos_token", "<B>"}, {"eos_token", "<E>"}}, "");
  const std::filesystem::path file = std::filesystem::path(::testing::TempDir()) / "replacement.jinja";
  std::ofstream(file, std::ios::binary)
      << "{{ bos_token }}{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}";
  const Json messages =
      Json::parse(R"([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])");
  auto t = ChatTemplate::FromTemplatePath(file.string(), tokenizer);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t->Render(messages, {}), "<B>a<E>b<E>");
  ASSERT_EQ(t->NamedSources().size(), 1u);
  EXPECT_EQ(t->NamedSources()[0].first, "default");

  // A model directory's templates (here a file and a named one), with the target's tokens, not its own.
  const std::string source =
      SavedModelDir("replacement_source", Json{{"eos_token", "</s>"}}, "S{{ eos_token }}");
  WriteNamedTemplate(source, "tool_use", "T{{ eos_token }}");
  auto d = ChatTemplate::FromTemplatePath(source, tokenizer);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d->Render(messages, {}), "S<E>");
  ChatTemplateOptions with_tools;
  with_tools.tools = Json::array({Json::object()});
  EXPECT_EQ(*d->Render(messages, with_tools), "T<E>");
  const auto named = d->NamedSources();
  ASSERT_EQ(named.size(), 2u);
  EXPECT_EQ(named[0], (std::pair<std::string, std::string>{"default", "S{{ eos_token }}"}));
  EXPECT_EQ(named[1], (std::pair<std::string, std::string>{"tool_use", "T{{ eos_token }}"}));

  // A shared model's template into another's tokens: TinyLlama's ends turns with eos_token, so under
  // SmolLM2's tokens its rendering is TinyLlama's with </s> replaced by <|im_end|>.
  const std::string tinyllama = kHfDir + "/tinyllama", smollm2 = kHfDir + "/smollm2";
  if (!std::filesystem::exists(tinyllama) || !std::filesystem::exists(smollm2))
    GTEST_SKIP() << "shared tokenizers";
  auto own = ChatTemplate::FromDirectory(tinyllama);
  auto moved = ChatTemplate::FromTemplatePath(tinyllama, smollm2);
  ASSERT_TRUE(own.ok() && moved.ok()) << moved.status();
  std::string want = *own->Render(messages, {});
  ASSERT_TRUE(absl::StrContains(want, "</s>")) << want;
  want = absl::StrReplaceAll(want, {{"</s>", "<|im_end|>"}});
  EXPECT_EQ(*moved->Render(messages, {}), want);
}

TEST(ChatTemplateTest, AReplacementTemplateThatCannotBeReadIsNamed) {
  const std::string tokenizer = SavedModelDir("replacement_target2", Json::object(), "");
  const std::string dir = ::testing::TempDir();
  auto missing = ChatTemplate::FromTemplatePath(dir + "/no_such.jinja", tokenizer);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_TRUE(absl::StrContains(missing.status().message(), dir + "/no_such.jinja")) << missing.status();

  // A JSON file would render as its own text: only .jinja and .j2 files are templates.
  std::ofstream(dir + "/tokenizer_config_copy.json") << R"({"chat_template": "x"})";
  auto json = ChatTemplate::FromTemplatePath(dir + "/tokenizer_config_copy.json", tokenizer);
  EXPECT_EQ(json.status().code(), absl::StatusCode::kInvalidArgument) << json.status();
  EXPECT_TRUE(absl::StrContains(json.status().message(), ".jinja or .j2 file")) << json.status();

  std::ofstream(dir + "/broken.j2") << "{% for m in messages %}";
  auto broken = ChatTemplate::FromTemplatePath(dir + "/broken.j2", tokenizer);
  ASSERT_FALSE(broken.ok());
  EXPECT_TRUE(absl::StrContains(broken.status().message(), dir + "/broken.j2: template 'default'"))
      << broken.status();

  const std::string empty = SavedModelDir("replacement_empty", Json::object(), "");
  auto none = ChatTemplate::FromTemplatePath(empty, tokenizer);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound) << none.status();
}

TEST(ChatTemplateTest, SyntheticFeaturesMatchPythonJinja2) {
  std::vector<Json> rows = ReadGolden("synthetic");
  ASSERT_GT(rows.size(), 50u);
  for (const Json& row : rows) {
    SCOPED_TRACE(row["case"].get<std::string>());
    auto t = ChatTemplate::Parse(row["template"].get<std::string>());
    if (!t.ok()) {
      ADD_FAILURE() << t.status();
      continue;
    }
    CheckRow(*t, row);
  }
}

TEST(ChatTemplateTest, Gpt2HasNoChatTemplate) {
  const std::string config = kHfDir + "/gpt2/tokenizer_config.json";
  if (!std::filesystem::exists(config)) GTEST_SKIP() << config << " is missing";
  auto t = ChatTemplate::FromTokenizerConfig(config);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound) << t.status();
}

absl::Status ParseError(const std::string& source) { return ChatTemplate::Parse(source).status(); }
std::string Message(const std::string& source) { return std::string(ParseError(source).message()); }

TEST(ChatTemplateTest, UnsupportedTagsNameLineAndColumn) {
  EXPECT_EQ(Message("{% if x %}\n  {% extends 'base.html' %}{% endif %}"),
            "chat_template:2:6: unsupported tag 'extends'");
  EXPECT_EQ(Message("a\nb\n{% include 'x' %}"), "chat_template:3:4: unsupported tag 'include'");
  EXPECT_EQ(Message("{%- import 'm' as m %}"), "chat_template:1:5: unsupported tag 'import'");
  EXPECT_EQ(Message("{% block body %}{% endblock %}"), "chat_template:1:4: unsupported tag 'block'");
  EXPECT_EQ(Message("{% for x in y %}\n {% autoescape true %}{% endautoescape %}{% endfor %}"),
            "chat_template:2:5: unsupported tag 'autoescape'");
  EXPECT_EQ(Message("{{ x|attr('a') }}"), "chat_template:1:6: No filter named 'attr'.");
  EXPECT_EQ(Message("{% endif %}"), "chat_template:1:4: unexpected tag 'endif'");
}

TEST(ChatTemplateTest, SyntaxErrorsNamePositions) {
  EXPECT_NE(ParseError("{% if x %}open").message().find("chat_template:1:15: unexpected end of template"),
            std::string::npos)
      << ParseError("{% if x %}open");
  EXPECT_EQ(Message("{{ 'abc }}"), "chat_template:1:4: unterminated string literal");
  EXPECT_EQ(Message("\n\n  {{ a $ b }}"), "chat_template:3:8: unexpected char '$'");
  EXPECT_EQ(Message("{# never closed"), "chat_template:1:1: missing end of comment tag");
}

TEST(ChatTemplateTest, UnknownFiltersAndTestsAreParseErrors) {
  // jinja2 rejects them when it compiles the template, even in branches that never run.
  EXPECT_EQ(Message("line one\n{% if false %}{{ messages | no_such_filter }}{% endif %}"),
            "chat_template:2:29: No filter named 'no_such_filter'.");
  EXPECT_EQ(Message("{{ x is frobnicated }}"), "chat_template:1:9: No test named 'frobnicated'.");
  EXPECT_EQ(Message("{% break %}"), "chat_template:1:4: 'break' outside loop");
  EXPECT_EQ(Message("{% for x in y %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}"),
            "chat_template:1:35: 'continue' outside loop");
}

TEST(ChatTemplateTest, RuntimeErrorsNamePositions) {
  auto t = ChatTemplate::Parse("line one\n{{ 'a' + 1 }}");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(std::string(t->Render(Json::array(), {}).status().message()),
            "chat_template:2:8: can only concatenate str (not \"int\") to str");
  auto overflow = ChatTemplate::Parse("{{ 9223372036854775807 + 1 }}");
  EXPECT_EQ(overflow->Render(Json::array(), {}).status().code(), absl::StatusCode::kOutOfRange);
}

// Arithmetic and sequence operators as Python (and so Jinja) evaluates them: floor division and modulo
// round toward minus infinity, / is true division, ** on ints stays an int, sequences concatenate and
// repeat; 64-bit overflow and division by zero are errors, never wrong numbers. Expected values: Python 3.
TEST(ChatTemplateTest, ArithmeticFollowsPython) {
  const std::pair<const char*, const char*> cases[] = {
      {"{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }}", "3 -4 2 -2"},
      {"{{ 7.5 % -2 }} {{ 1 / 4 }} {{ -7.0 // 2 }}", "-0.5 0.25 -4.0"},
      {"{{ 2 ** 10 }} {{ 2 ** -1 }} {{ 1 ** 100000 }} {{ 0 ** 5 }}", "1024 0.5 1 0"},
      {"{{ 'ab' * 3 }}|{{ 2 * 'x' }}|{{ 'x' * -1 }}|{{ [1] + [2] }}|{{ 'a' + 'b' }}", "ababab|xx||[1, 2]|ab"},
      {"{{ 3 - 5 }} {{ 2.5 * 2 }} {{ true + 1 }}", "-2 5.0 2"},
  };
  for (const auto& [text, want] : cases) {
    auto t = ChatTemplate::Parse(text);
    ASSERT_TRUE(t.ok()) << text << ": " << t.status();
    auto out = t->Render(Json::array(), {});
    ASSERT_TRUE(out.ok()) << text << ": " << out.status();
    EXPECT_EQ(*out, want) << text;
  }
  const std::pair<const char*, absl::StatusCode> errors[] = {
      {"{{ 1 // 0 }}", absl::StatusCode::kInvalidArgument},
      {"{{ 1 % 0 }}", absl::StatusCode::kInvalidArgument},
      {"{{ 2 ** 64 }}", absl::StatusCode::kOutOfRange},
      {"{{ -9223372036854775807 - 2 }}", absl::StatusCode::kOutOfRange},
      {"{{ 'a' - 'b' }}", absl::StatusCode::kInvalidArgument},
  };
  for (const auto& [text, code] : errors) {
    auto t = ChatTemplate::Parse(text);
    ASSERT_TRUE(t.ok()) << text << ": " << t.status();
    EXPECT_EQ(t->Render(Json::array(), {}).status().code(), code) << text;
  }
}

TEST(ChatTemplateTest, RaiseExceptionCarriesTheTemplateMessage) {
  auto t = ChatTemplate::Parse(
      "{% if messages[0].role != 'user' %}{{ raise_exception('Roles must start with user!') }}{% endif %}ok");
  ASSERT_TRUE(t.ok()) << t.status();
  auto out = t->Render(Json::parse(R"([{"role": "assistant", "content": "x"}])"), {});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(out.status().message()), "chat_template:1:39: Roles must start with user!");
  EXPECT_EQ(*t->Render(Json::parse(R"([{"role": "user", "content": "x"}])"), {}), "ok");
}

TEST(ChatTemplateTest, NestingDepthIsBounded) {
  std::string deep;
  for (int i = 0; i < 300; ++i) deep += "{% if true %}";
  EXPECT_NE(ParseError(deep).message().find("nesting deeper than"), std::string::npos);
  std::string parens = "{{ " + std::string(500, '(') + "1" + std::string(500, ')') + " }}";
  EXPECT_NE(ParseError(parens).message().find("nesting deeper than"), std::string::npos);
  auto recursive = ChatTemplate::Parse("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_TRUE(recursive.ok());
  EXPECT_EQ(recursive->Render(Json::array(), {}).status().code(), absl::StatusCode::kResourceExhausted);
}

// A recursive loop over self-similar data nests no deeper than max_call_depth; arguments of the rarer
// filters that would size an allocation are bounded.
TEST(ChatTemplateTest, RecursiveLoopsAndRareFiltersAreBounded) {
  auto t =
      ChatTemplate::Parse("{% for x in [[[[[[]]]]]] recursive %}{{ loop.depth }}{{ loop(x) }}{% endfor %}");
  ASSERT_TRUE(t.ok()) << t.status();
  ChatTemplateOptions options;
  EXPECT_EQ(*t->Render(Json::array(), options), "12345");
  options.limits.max_call_depth = 3;
  EXPECT_EQ(t->Render(Json::array(), options).status().code(), absl::StatusCode::kResourceExhausted);
  auto forever = ChatTemplate::Parse("{% for x in [1] recursive %}{{ loop([x]) }}{% endfor %}");
  ASSERT_TRUE(forever.ok());
  EXPECT_EQ(forever->Render(Json::array(), {}).status().code(), absl::StatusCode::kResourceExhausted);
  for (const char* source : {"{{ [1]|batch(100000000000, 0) }}", "{{ [1]|slice(100000000) }}",
                             "{{ 'x'|center(100000000000) }}", "{{ [1]|batch(0) }}", "{{ [1]|slice(0) }}"}) {
    auto bad = ChatTemplate::Parse(source);
    ASSERT_TRUE(bad.ok()) << source;
    EXPECT_FALSE(bad->Render(Json::array(), {}).ok()) << source;
  }
}

// Fuzzer finds (tests/fuzz): each failed with an uncaught exception (std::length_error, std::out_of_range),
// padded for seconds or grew to gigabytes; now an error.
TEST(ChatTemplateTest, HugeWidthsAndIndicesFailCleanly) {
  for (const char* source :
       {"{{ 'a\\nb'|indent(42949672962) }}", "{{ ('a\\n' * 100000)|indent(100000) }}",
        "{{ '%2000000000d' % 1 }}", "{{ '%-999999999s' % 'x' }}", "{{ '%.99999999f' % 1.5 }}",
        "{{ '{99999999999999999999999}'.format(1) }}", "{{ '%d' % 1e300 }}",
        // Unbounded growth: joins of a string by a longer separator, replace, tojson.
        "{{ messages|map(attribute='role')|join(',role')|join(',role')|join(',role')"
        "|join(',role')|join(',role')|join(',role')|join(',role')|join(',') }}",
        "{{ ('x' * 1000)|replace('x', 'x' * 100000) }}", "{{ ('x' * 1000).replace('', 'y' * 100000) }}",
        "{{ {'a': [1]}|tojson(indent=1000000000) }}", "{{ ('ab' * 1000000)|list|length }}"}) {
    auto t = ChatTemplate::Parse(source);
    ASSERT_TRUE(t.ok()) << source;
    const Json messages = Json::parse(R"([{"role": "user"}, {"role": "assistant"}, {"role": "user"}])");
    EXPECT_FALSE(t->Render(messages, {}).ok()) << source;
  }
}

TEST(ChatTemplateTest, OutputSizeIsBounded) {
  auto t = ChatTemplate::Parse("{% for i in range(1000) %}0123456789{% endfor %}");
  ASSERT_TRUE(t.ok());
  ChatTemplateOptions options;
  options.limits.max_output_bytes = 5000;
  EXPECT_EQ(t->Render(Json::array(), options).status().code(), absl::StatusCode::kResourceExhausted);
  options.limits.max_output_bytes = 10000;
  EXPECT_TRUE(t->Render(Json::array(), options).ok());
  EXPECT_FALSE(ChatTemplate::Parse("{{ 'x' * 100000000000 }}")->Render(Json::array(), {}).ok());
  EXPECT_FALSE(ChatTemplate::Parse("{{ [1, 2] * 100000000 }}")->Render(Json::array(), {}).ok());
  // Nested loops with no output are bounded by steps, not by output size.
  auto nested = ChatTemplate::Parse(
      "{% for a in range(60000) %}{% for b in range(60000) %}{% if false %}x{% endif %}{% endfor %}{% endfor "
      "%}");
  options.limits.max_steps = 100000;
  EXPECT_EQ(nested->Render(Json::array(), options).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(ChatTemplate::Parse("{{ range(100000000000) }}")->Render(Json::array(), {}).ok());
}

TEST(ChatTemplateTest, MessagesJsonDepthIsBounded) {
  Json deep = Json::array();
  for (int i = 0; i < 100; ++i) deep = Json::array({deep});
  auto t = ChatTemplate::Parse("x");
  EXPECT_EQ(t->Render(Json::array({deep}), {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ChatTemplateTest, StrftimeNowUsesTheGivenClock) {
  auto t = ChatTemplate::Parse("{{ strftime_now('%d %b %Y') }}");
  ChatTemplateOptions options;
  options.now = absl::FromCivil(absl::CivilSecond(2024, 7, 26, 12, 0, 0), absl::UTCTimeZone());
  options.time_zone = absl::UTCTimeZone();
  EXPECT_EQ(*t->Render(Json::array(), options), "26 Jul 2024");
}

std::string WriteTempConfig(const std::string& name, const Json& config) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << config.dump();
  return path;
}

TEST(ChatTemplateTest, NamedTemplatesPickToolUseWhenToolsAreGiven) {
  Json config = {
      {"bos_token", {{"__type", "AddedToken"}, {"content", "<s>"}, {"lstrip", false}}},
      {"eos_token", "</s>"},
      {"chat_template", Json::array({{{"name", "default"}, {"template", "D{{ bos_token }}{{ eos_token }}"}},
                                     {{"name", "tool_use"}, {"template", "T{{ tools|length }}"}}})}};
  auto t = ChatTemplate::FromTokenizerConfig(WriteTempConfig("named_config.json", config));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t->Render(Json::array(), {}), "D<s></s>");
  ChatTemplateOptions with_tools;
  with_tools.tools = Json::array({Json::object(), Json::object()});
  EXPECT_EQ(*t->Render(Json::array(), with_tools), "T2");
  ChatTemplateOptions own_tokens;
  own_tokens.bos_token = "[B]";
  EXPECT_EQ(*t->Render(Json::array(), own_tokens), "D[B]</s>");

  Json no_default = {{"chat_template", Json::array({{{"name", "rag"}, {"template", "R"}},
                                                    {{"name", "x"}, {"template", "X"}}})}};
  auto nd = ChatTemplate::FromTokenizerConfig(WriteTempConfig("no_default_config.json", no_default));
  ASSERT_TRUE(nd.ok()) << nd.status();
  EXPECT_NE(nd->Render(Json::array(), {}).status().message().find("no default specified"), std::string::npos);
}

TEST(ChatTemplateTest, PlainJsonMessagesConvert) {
  auto t = ChatTemplate::Parse("{% for m in messages %}{{ m.role }}:{{ m|tojson }};{% endfor %}");
  nlohmann::json messages = nlohmann::json::parse(R"([{"role": "user", "content": "hi"}])");
  EXPECT_EQ(*t->Render(messages, {}), R"(user:{"content": "hi", "role": "user"};)");  // sorted keys
}

TEST(ChatTemplateTest, LongConversationRendersInLinearTime) {
  const std::string config = kHfDir + "/qwen2.5/tokenizer_config.json";
  if (!std::filesystem::exists(config)) GTEST_SKIP() << config << " is missing";
  auto t = ChatTemplate::FromTokenizerConfig(config);
  ASSERT_TRUE(t.ok()) << t.status();
  Json messages = Json::array();
  const std::string text(2000, 'x');
  for (int i = 0; i < 4000; ++i)
    messages.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", text}});
  absl::Time start = absl::Now();
  auto out = t->Render(messages, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_GT(out->size(), 4000u * 2000u);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));  // ~8 MB of prompt; quadratic copying would blow this
}

TEST(ChatTemplateTest, MissingConfigIsNotFound) {
  EXPECT_EQ(ChatTemplate::FromTokenizerConfig("/nonexistent/tokenizer_config.json").status().code(),
            absl::StatusCode::kNotFound);
}

// A deterministic stand-in for a fuzz target: mangled templates (byte flips, cuts, duplicated spans) must
// parse or fail cleanly, and render or fail cleanly, never crash or hang.
TEST(ChatTemplateTest, MangledTemplatesFailCleanly) {
  std::vector<std::string> seeds;
  for (const Json& row : ReadGolden("synthetic")) seeds.push_back(row["template"].get<std::string>());
  for (const char* model : {"qwen2.5", "mistral-v0.3"}) {
    auto t = ChatTemplate::FromTokenizerConfig(kHfDir + "/" + model + "/tokenizer_config.json");
    if (t.ok()) seeds.push_back(*t->Source({}));
  }
  const Json messages = Json::parse(R"([{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
      {"role": "assistant", "content": "a", "tool_calls": [{"id": "abc123XYZ", "function": {"name": "f",
      "arguments": {"x": 1}}}]}, {"role": "tool", "tool_call_id": "abc123XYZ", "content": "r"}])");
  const char kAlphabet[] = "{}%#-+()[]|.,:'\"~=<>!*/ \nabcdefghijklmnopqrstuvwxyz0123456789_";
  uint64_t state = 42;
  auto next = [&state](uint64_t bound) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % bound;
  };
  int parsed = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string src = seeds[next(seeds.size())];
    for (int edits = 1 + next(4); edits > 0 && !src.empty(); --edits) {
      size_t pos = next(src.size());
      switch (next(4)) {
        case 0:
          src[pos] = kAlphabet[next(sizeof(kAlphabet) - 1)];
          break;
        case 1:
          src.erase(pos, 1 + next(8));
          break;
        case 2:
          src.insert(pos, src.substr(next(src.size()), 1 + next(16)));
          break;
        default:
          src.resize(pos);
      }
    }
    auto t = ChatTemplate::Parse(src);
    if (!t.ok()) {
      EXPECT_TRUE(absl::StartsWith(t.status().message(), "chat_template:")) << t.status() << "\n" << src;
      continue;
    }
    ++parsed;
    ChatTemplateOptions options;
    options.limits.max_output_bytes = 1 << 16;
    options.tools = Json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}});
    (void)t->Render(messages, options);
  }
  EXPECT_GT(parsed, 100);
}

}  // namespace
}  // namespace zerofit::text
