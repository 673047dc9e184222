// `zerofit tokenize --tokenizer DIR --in IN.jsonl --out OUT.jsonl`: Hugging Face tokenization of JSONL lines,
// with the schema of ../shared/hf-tokenizers/oracle/encode.mjs so the two outputs compare line by line.
//
// Each input line (blank lines are skipped) is one of
//   {"text": "...", "add_special_tokens": true}            add_special_tokens optional, default true
//   {"messages": [...], "add_generation_prompt": false,     add_generation_prompt optional, default false
//    "tools": [...], "documents": [...], "template_kwargs": {...}}   optional, passed to the chat template
// and each output line is the input object (keys in input order) plus
//   text:     "ids", "tokens", "decoded" (special tokens kept)
//   messages: "rendered" (the chat template's output) and "ids" = Encode(rendered, add_special_tokens=false)
// A line that is refused (bad JSON, a bad field, a conversation the chat template raises on) is still
// written, as the oracle writes it: the input object plus "error": "SOURCE:LINE: why", or
// {"input": "<the line>", "error": ...} when the line is not a JSON object. So output line k is always the
// k-th non-blank input line, and one bad conversation does not cost the rest of the file. With fail_fast
// the first refused line instead stops the run with an InvalidArgument "SOURCE:LINE: ..." error.
#pragma once

#include <istream>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "text/chat_template.h"
#include "text/hf/tokenizer_json.h"

namespace CLI {
class App;
}

namespace zerofit::cli {

struct TokenizeFlags {
  std::string tokenizer_dir;  // holds tokenizer.json and (for messages) tokenizer_config.json
  std::string chat_template;  // a .jinja/.j2 file or model directory whose template replaces the tokenizer's
  std::string in = "-";       // "-": stdin
  std::string out = "-";      // "-": stdout
  int threads = 0;            // lines tokenized in parallel; 0: all cores (std::thread::hardware_concurrency)
  bool fail_fast = false;     // stop at the first refused line instead of writing it with an "error" field
};

struct TokenizeOptions {
  int threads = 1;         // 0: all cores
  bool fail_fast = false;  // the first refused line ends the run with its error; nothing after it is written
};

// What a run wrote. Every non-blank input line gives one output line, refused lines included.
struct TokenizeReport {
  size_t lines_written = 0;  // output lines, refused ones included
  size_t refused = 0;        // lines written with an "error" field
  std::string first_error;   // "SOURCE:LINE: why" of the first refused line; empty when none was refused
};

// Registers the `tokenize` subcommand on `app`; `flags` must outlive parsing.
CLI::App* AddTokenizeCommand(CLI::App& app, TokenizeFlags* flags);

// Tokenizes `in` (named `source` in errors) into `out`. `chat` may be null: then a messages line is refused.
// Refused lines are counted in the report, not returned as errors, unless options.fail_fast; the errors
// returned otherwise are a failed write or read (DataLoss). Lines are tokenized on options.threads threads
// in chunks of a few thousand lines (bounded memory); the output, the report, and with fail_fast the lines
// written before the error and the error itself (the lowest bad line's), are byte-identical for every count.
absl::StatusOr<TokenizeReport> TokenizeJsonl(const text::TokenizerJson& tok, const text::ChatTemplate* chat,
                                             std::istream& in, const std::string& source, std::ostream& out,
                                             const TokenizeOptions& options = {});

// Loads the tokenizer (and chat template, if its config has one) and runs TokenizeJsonl on the flags' files.
// A run that refused lines is not an error here: the caller reports it (RefusedLinesMessage) and exits 1.
absl::StatusOr<TokenizeReport> RunTokenize(const TokenizeFlags& flags);

// "N of M lines refused ..." for a report with refused lines, naming the output and the first error.
std::string RefusedLinesMessage(const TokenizeReport& report, const TokenizeFlags& flags);

}  // namespace zerofit::cli
