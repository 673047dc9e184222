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
// Unlike the oracle, which writes an "error" field and goes on, the first bad line stops the run with an
// InvalidArgument "SOURCE:LINE: ..." error.
#pragma once

#include <istream>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace CLI {
class App;
}

namespace zerofit::cli {

struct TokenizeFlags {
  std::string tokenizer_dir;  // holds tokenizer.json and (for messages) tokenizer_config.json
  std::string in = "-";       // "-": stdin
  std::string out = "-";      // "-": stdout
  int threads = 0;            // lines tokenized in parallel; 0: all cores (std::thread::hardware_concurrency)
};

// Registers the `tokenize` subcommand on `app`; `flags` must outlive parsing.
CLI::App* AddTokenizeCommand(CLI::App& app, TokenizeFlags* flags);

// Tokenizes `in` (named `source` in errors) into `out`. `chat` may be null: then a messages line is an error.
// Returns the number of lines written through `lines_written` (optional). Lines are tokenized on `threads`
// threads (0: all cores) in chunks of a few thousand lines (bounded memory); the output, and on error the
// lines written before it and the error itself (the lowest bad line's), are byte-identical for every count.
absl::Status TokenizeJsonl(const text::Tokenizer& tok, const text::ChatTemplate* chat, std::istream& in,
                           const std::string& source, std::ostream& out, size_t* lines_written = nullptr,
                           int threads = 1);

// Loads the tokenizer (and chat template, if its config has one) and runs TokenizeJsonl on the flags' files.
absl::Status RunTokenize(const TokenizeFlags& flags);

}  // namespace zerofit::cli
