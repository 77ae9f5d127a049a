// server/api_error.h — the OpenAI error object every failure becomes:
// {"error": {"message", "type", "param", "code"}} with its HTTP status (STYLE.md error tier 4).
#pragma once

#include <string>

#include "server/json_util.h"

namespace jllm::server {

struct ApiError {
    int status = 400;
    std::string type = "invalid_request_error";
    std::string code = "invalid_value";
    std::string param;      // empty: null
    std::string message;
    int retry_after_s = 0;  // > 0: a Retry-After header (503)
};

ApiError invalid_request(std::string message, std::string param = {}, std::string code = "invalid_value");
ApiError unsupported_feature(const std::string& param);
ApiError unavailable(std::string message, std::string code, int retry_after_s);
ApiError internal_error(std::string message);

Json error_json(const ApiError& e);

}  // namespace jllm::server
