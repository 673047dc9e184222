// A bounded excerpt of a value that someone else wrote, for an error message that quotes it. An error must
// stay readable and small whatever the value: a 40,000-character `task:` quoted whole made the
// coordinator's INVALID_ARGUMENT larger than gRPC's metadata limit, and the client saw "received initial
// metadata size exceeds limit" instead of the field error. Every message that quotes a user's value (a spec
// field, a flag, a key of a tokenizer or model config, a JSONL line) quotes Excerpt(value).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace zerofit::core {

// What Excerpt keeps by default, in bytes: a value longer than this is no longer read in an error anyway.
inline constexpr size_t kExcerptBytes = 64;

// `value` itself when it has at most `max_bytes` bytes; otherwise its first bytes followed by "..." and
// " (N bytes)", the whole at most max_bytes + 24 bytes. The cut never splits a UTF-8 sequence. Control
// characters (a newline, ESC) are written as \n, \r, \t or \xHH, so that a quoted value stays on its line and
// cannot drive a terminal; they count as what they are written as. `max_bytes` >= 8.
std::string Excerpt(std::string_view value, size_t max_bytes = kExcerptBytes);

// Excerpt(value) between single quotes: how a field error quotes the value it refuses ('ppo').
std::string QuotedExcerpt(std::string_view value);

// A whole message (an error that already quotes excerpts, but may hold a long list or a library's text)
// bounded for a channel with a size limit (a gRPC status): `message` itself when it has at most `max_bytes`
// bytes; otherwise its first bytes, cut at a UTF-8 sequence boundary, and " ... (cut at N of M bytes)", the
// whole at most max_bytes + 48 bytes. Unlike Excerpt, keeps newlines and every other byte as they are.
std::string BoundedMessage(std::string_view message, size_t max_bytes);

}  // namespace zerofit::core
