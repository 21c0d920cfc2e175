// tests/host/llm/fake_llm_server.h - an in-process OpenAI-compatible server for the
// LLM client tests: cpp-httplib on 127.0.0.1, ephemeral port, scripted replies.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace accelopt::llm::testing {

/// A chat-completions body with one choice and usage.
inline std::string OkBody(const std::string& content, int prompt_tokens = 11, int completion_tokens = 7,
                          const std::string& finish_reason = "stop") {
  return nlohmann::json{{"id", "chatcmpl-test"},
                        {"object", "chat.completion"},
                        {"model", "fake-model"},
                        {"choices",
                         {{{"index", 0},
                           {"message", {{"role", "assistant"}, {"content", content}}},
                           {"finish_reason", finish_reason}}}},
                        {"usage",
                         {{"prompt_tokens", prompt_tokens},
                          {"completion_tokens", completion_tokens},
                          {"total_tokens", prompt_tokens + completion_tokens}}}}
      .dump();
}

/// An OpenAI-style error body {"error": {"message": ...}}.
inline std::string ErrorBody(const std::string& message) {
  return nlohmann::json{{"error", {{"message", message}, {"type", "test_error"}}}}.dump();
}

class FakeLlmServer {
 public:
  struct Reply {
    int status = 200;
    std::string body = OkBody("ok");
    std::map<std::string, std::string> headers;
    int delay_ms = 0;
  };
  struct Received {
    std::string body;
    nlohmann::json json;
    std::map<std::string, std::string> headers;  // lower-case names
  };

  FakeLlmServer() {
    server_.set_keep_alive_timeout(1);
    server_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      Reply reply;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        Received received;
        received.body = req.body;
        received.json = nlohmann::json::parse(req.body, nullptr, false);
        for (const auto& [name, value] : req.headers) {
          std::string lower = name;
          for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          received.headers[lower] = value;
        }
        received_.push_back(std::move(received));
        if (!script_.empty()) {
          reply = script_.front();
          script_.pop_front();
        } else {
          reply = default_reply_;
        }
      }
      int now = ++in_flight_;
      int seen = max_in_flight_.load();
      while (now > seen && !max_in_flight_.compare_exchange_weak(seen, now)) {
      }
      if (reply.delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(reply.delay_ms));
      --in_flight_;
      res.status = reply.status;
      for (const auto& [name, value] : reply.headers) res.set_header(name.c_str(), value);
      res.set_content(reply.body, "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    for (int i = 0; i < 500 && !server_.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }

  ~FakeLlmServer() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

  FakeLlmServer(const FakeLlmServer&) = delete;
  FakeLlmServer& operator=(const FakeLlmServer&) = delete;

  /// Queues the next reply (FIFO); the default reply answers when the queue is empty.
  void Push(Reply reply) {
    std::lock_guard<std::mutex> lock(mutex_);
    script_.push_back(std::move(reply));
  }
  void SetDefault(Reply reply) {
    std::lock_guard<std::mutex> lock(mutex_);
    default_reply_ = std::move(reply);
  }
  std::string BaseUrl() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  int port() const { return port_; }
  std::vector<Received> Requests() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return received_;
  }
  int MaxConcurrent() const { return max_in_flight_.load(); }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = -1;
  mutable std::mutex mutex_;
  std::deque<Reply> script_;
  Reply default_reply_;
  std::vector<Received> received_;
  std::atomic<int> in_flight_{0};
  std::atomic<int> max_in_flight_{0};
};

}  // namespace accelopt::llm::testing
