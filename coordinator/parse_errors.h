#ifndef TAILOR_COORDINATOR_PARSE_ERRORS_H_
#define TAILOR_COORDINATOR_PARSE_ERRORS_H_

// Requests that do not parse (invalid UTF-8 in a proto3 string, a bad wire type, a truncated
// field, nesting past protobuf's recursion limit) are answered INVALID_ARGUMENT, naming the
// request type and what is wrong with the bytes:
//
//   request: not a valid tailor.v1.GetCampaignRequest (campaign_id: invalid UTF-8 in a string)
//
// gRPC's callback handlers (grpcpp/impl/codegen/server_callback_handlers.h) would answer such
// a call UNIMPLEMENTED with an empty message. ParseChecked wraps each method's handler in a
// ParseErrorHandler: when the request does not parse, it remembers the error, lets the call
// proceed with a default (empty) request, and exposes the error to the service method through
// PendingParseError(), which the services check before anything else (coordinator/services.cc
// Authorize), so nothing is applied.

#include <grpc/byte_buffer.h>

#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/impl/codegen/server_callback_handlers.h"
#include "grpcpp/impl/rpc_service_method.h"
#include "grpcpp/support/message_allocator.h"

namespace tailor::coordinator {

// The parse error of the request whose service method runs on this thread right now, as
// INVALID_ARGUMENT; OK when that request parsed (or outside a ParseErrorHandler).
absl::Status PendingParseError();

// Why `bytes` is not a valid `type` message in protobuf's wire format, e.g. "campaign_id:
// invalid UTF-8 in a string"; "" when this check finds nothing wrong. It follows protobuf's
// parser: unknown fields are skipped (groups are walked), nesting counts against protobuf's
// recursion limit, and proto3 strings must be valid UTF-8.
std::string WireFormatProblem(const google::protobuf::Descriptor* type, absl::string_view bytes);

namespace parse_internal {

// What ParseErrorHandler::Deserialize hands RunHandler in place of the inner handler's data.
struct CallState {
  void* inner_data = nullptr;
  absl::Status error;  // OK when the request parsed
};

// INVALID_ARGUMENT for a `type` request that protobuf could not parse; `bytes` holds what came
// (null when no message came), `parse_status` what gRPC's deserializer said.
absl::Status InvalidRequest(const google::protobuf::Descriptor* type, grpc_byte_buffer* bytes,
                            const grpc::Status& parse_status);

// Makes `error` (may be null) this thread's PendingParseError() while alive.
class ScopedPendingError {
 public:
  explicit ScopedPendingError(const absl::Status* error);
  ~ScopedPendingError();
  ScopedPendingError(const ScopedPendingError&) = delete;
  ScopedPendingError& operator=(const ScopedPendingError&) = delete;

 private:
  const absl::Status* previous_;
};

// The generated method index of `service`'s `method`, from the protobuf service descriptor.
// Aborts when there is no such method or its request/response types or streaming do not match
// the handler about to be installed (a programming error that would be memory corruption).
int MethodIndex(absl::string_view service, absl::string_view method,
                const google::protobuf::Descriptor* request,
                const google::protobuf::Descriptor* response, bool server_streaming);

// Wraps the handler gRPC's generated CallbackService installs (`Inner`: CallbackUnaryHandler
// or CallbackServerStreamingHandler of Req, Resp) so that a request that does not parse
// reaches the service method as a default request with PendingParseError() set, instead of
// being answered UNIMPLEMENTED by the inner handler.
template <class Req, class Resp, class Inner>
class ParseErrorHandler final : public grpc::internal::MethodHandler {
 public:
  template <class GetReactor>
  explicit ParseErrorHandler(GetReactor get_reactor) : inner_(std::move(get_reactor)) {}

  void* Deserialize(grpc_call* call, grpc_byte_buffer* req, grpc::Status* status,
                    void** handler_data) override {
    // The inner Deserialize consumes `req` (grpc::GenericDeserialize destroys the buffer it
    // parsed); the copy shares its slices, so no bytes are copied on the common path.
    grpc_byte_buffer* copy = req == nullptr ? nullptr : grpc_byte_buffer_copy(req);
    auto state = std::make_unique<CallState>();
    void* request = inner_.Deserialize(call, req, status, &state->inner_data);
    if (!status->ok()) {
      state->error = InvalidRequest(Req::descriptor(), copy, *status);
      ReleaseFailed(state->inner_data);
      state->inner_data = nullptr;
      // Parse an empty message instead, so that the inner handler runs the service method
      // (which answers with state->error) rather than answering UNIMPLEMENTED. Deserialize
      // takes ownership of this buffer too, as of `req`.
      request = inner_.Deserialize(call, grpc_raw_byte_buffer_create(nullptr, 0), status,
                                   &state->inner_data);
    }
    if (copy != nullptr) grpc_byte_buffer_destroy(copy);
    if (handler_data != nullptr) *handler_data = state.release();
    return request;
  }

  void RunHandler(const HandlerParameter& param) override {
    std::unique_ptr<CallState> state(static_cast<CallState*>(param.internal_data));
    if (state == nullptr) {  // Deserialize did not run (no request message)
      inner_.RunHandler(param);
      return;
    }
    // The inner handler calls the service method synchronously, on this thread.
    ScopedPendingError pending(state->error.ok() ? nullptr : &state->error);
    inner_.RunHandler(HandlerParameter(param.call, param.server_context, param.request,
                                       param.status, state->inner_data, param.call_requester));
  }

 private:
  // The unary handler leaves its (arena-allocated) message holder in `inner_data` even when
  // parsing failed; the server-streaming one destroys its request itself.
  static void ReleaseFailed(void* inner_data) {
    if constexpr (std::is_same_v<Inner, grpc::internal::CallbackUnaryHandler<Req, Resp>>) {
      if (inner_data != nullptr) {
        static_cast<grpc::MessageHolder<Req, Resp>*>(inner_data)->Release();
      }
    }
  }

  Inner inner_;
};

}  // namespace parse_internal

// Between a generated service (Grpc: e.g. v1::CampaignService) and its implementation: the
// implementation's constructor lists each unary and server-streaming method with CheckParse,
// which replaces the handler the generated CallbackService installed with a ParseErrorHandler
// around the same kind of handler. Method indices come from the protobuf service descriptor.
template <class Grpc>
class ParseChecked : public Grpc::CallbackService {
 protected:
  template <class Impl, class Req, class Resp>
  void CheckParse(const char* method,
                  grpc::ServerUnaryReactor* (Impl::*fn)(grpc::CallbackServerContext*, const Req*,
                                                        Resp*)) {
    Impl* impl = static_cast<Impl*>(this);
    using Inner = grpc::internal::CallbackUnaryHandler<Req, Resp>;
    this->MarkMethodCallback(
        parse_internal::MethodIndex(Grpc::service_full_name(), method, Req::descriptor(),
                                    Resp::descriptor(), /*server_streaming=*/false),
        new parse_internal::ParseErrorHandler<Req, Resp, Inner>(
            [impl, fn](grpc::CallbackServerContext* ctx, const Req* req, Resp* resp) {
              return (impl->*fn)(ctx, req, resp);
            }));
  }

  template <class Impl, class Req, class Resp>
  void CheckParse(const char* method,
                  grpc::ServerWriteReactor<Resp>* (Impl::*fn)(grpc::CallbackServerContext*,
                                                              const Req*)) {
    Impl* impl = static_cast<Impl*>(this);
    using Inner = grpc::internal::CallbackServerStreamingHandler<Req, Resp>;
    this->MarkMethodCallback(
        parse_internal::MethodIndex(Grpc::service_full_name(), method, Req::descriptor(),
                                    Resp::descriptor(), /*server_streaming=*/true),
        new parse_internal::ParseErrorHandler<Req, Resp, Inner>(
            [impl, fn](grpc::CallbackServerContext* ctx, const Req* req) {
              return (impl->*fn)(ctx, req);
            }));
  }
};

}  // namespace tailor::coordinator

#endif  // TAILOR_COORDINATOR_PARSE_ERRORS_H_
