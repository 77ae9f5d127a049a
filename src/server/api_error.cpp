// server/api_error.cpp — constructors for the error kinds the server answers with.
#include "server/api_error.h"

#include <utility>

namespace jllm::server {

ApiError invalid_request(std::string message, std::string param, std::string code) {
    ApiError e;
    e.status = 400;
    e.type = "invalid_request_error";
    e.code = std::move(code);
    e.param = std::move(param);
    e.message = std::move(message);
    return e;
}

ApiError unsupported_feature(const std::string& param) {
    return invalid_request("'" + param + "' is not supported by this server yet", param, "unsupported");
}

ApiError unavailable(std::string message, std::string code, int retry_after_s) {
    ApiError e;
    e.status = 503;
    e.type = "unavailable_error";
    e.code = std::move(code);
    e.message = std::move(message);
    e.retry_after_s = retry_after_s;
    return e;
}

ApiError internal_error(std::string message) {
    ApiError e;
    e.status = 500;
    e.type = "server_error";
    e.code = "internal_error";
    e.message = std::move(message);
    return e;
}

Json error_json(const ApiError& e) {
    Json err = {{"message", e.message}, {"type", e.type}, {"param", nullptr}, {"code", e.code}};
    if (!e.param.empty()) err["param"] = e.param;
    return Json{{"error", err}};
}

}  // namespace jllm::server
