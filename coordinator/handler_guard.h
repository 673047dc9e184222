// The exception border of the gRPC service (STYLE 1): every handler body runs inside GuardHandler, so that
// an exception thrown by a library below it (yaml-cpp, nlohmann, the standard library) reaches the client
// as INTERNAL with its message, and the coordinator's log, instead of gRPC's opaque "Unexpected error in
// RPC handling". Parsers translate their own libraries' exceptions; this is the net under them.
//
// It is also where every status message is bounded: gRPC sends the message percent-encoded in the trailing
// metadata (up to 3 bytes a byte) and a client refuses metadata past 8 KiB
// (GRPC_ARG_MAX_METADATA_SIZE): a longer message reaches it as "received initial metadata size exceeds limit"
// instead of the error. Messages quote bounded excerpts of values (core/excerpt.h); this is the net under
// them too.
#pragma once

#include <grpcpp/support/status.h>

#include <exception>
#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/excerpt.h"

namespace zerofit::coordinator {

// The most bytes of a status message a handler returns: 3 x 2 KiB percent-encoded stays under gRPC's 8 KiB.
inline constexpr size_t kMaxStatusMessageBytes = 2048;

// `s` with its message bounded to kMaxStatusMessageBytes (core::BoundedMessage).
inline grpc::Status BoundedStatus(const grpc::Status& s) {
  if (s.error_message().size() <= kMaxStatusMessageBytes) return s;
  return grpc::Status(s.error_code(), core::BoundedMessage(s.error_message(), kMaxStatusMessageBytes),
                      s.error_details());
}

// Runs `body` (returning grpc::Status) and returns its status with the message bounded (BoundedStatus), or
// INTERNAL naming `method` and the exception's message when it throws. Thread-safe as far as `body` is.
template <typename Body>
grpc::Status GuardHandler(const char* method, Body&& body) {
  std::string what;
  try {
    return BoundedStatus(body());
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an exception that is not a std::exception";
  }
  const std::string message =
      core::BoundedMessage(absl::StrCat(method, ": internal error: ", what), kMaxStatusMessageBytes);
  std::cerr << "zerofit coordinator: " << message << std::endl;
  return grpc::Status(grpc::StatusCode::INTERNAL, message);
}

}  // namespace zerofit::coordinator
