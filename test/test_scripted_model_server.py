"""Unit tests of the scripted model server (python3 -m unittest)."""

import json
import os
import sys
import tempfile
import threading
import unittest
import urllib.error
import urllib.request

# The server lives in the product tree, not beside its tests; no
# __pycache__ there, since that directory ships as it is.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                os.pardir, "scripted-model"))
import server as model_server  # noqa: E402


def post(port, path, body):
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"}, method="POST")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


class ServerCase(unittest.TestCase):
    steps = []

    def setUp(self):
        handle, self.log = tempfile.mkstemp(suffix=".jsonl")
        os.close(handle)
        self.server = model_server.make_server(self.steps, self.log, delay=0)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def tearDown(self):
        self.server.shutdown()
        self.server.server_close()
        os.unlink(self.log)

    def log_entries(self):
        with open(self.log, encoding="utf-8") as handle:
            return [json.loads(line) for line in handle]


class OpenAITest(ServerCase):
    steps = [{"tool_calls": [{"name": "Read", "arguments": {"file_path": "/x"}, "id": "call_a"},
                             {"name": "Read", "arguments": {"file_path": "/x"}, "id": "call_b"}]},
             {"expect": {"results": [{"contains": "one"}, {"contains": "two"}]},
              "text": "done"}]

    def test_stream_splits_arguments_and_checks_results(self):
        status, text = post(self.port, "/v1/chat/completions",
                            {"model": "m", "stream": True,
                             "messages": [{"role": "user", "content": "hi"}]})
        self.assertEqual(status, 200)
        events = [json.loads(line[6:]) for line in text.splitlines()
                  if line.startswith("data: {")]
        pieces = [e["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
                  for e in events if e["choices"] and "tool_calls" in e["choices"][0]["delta"]]
        self.assertGreater(len(pieces), 4)
        self.assertIn("data: [DONE]", text)
        # A result for one call only: a mismatch, answered with 409.
        status, text = post(self.port, "/v1/chat/completions",
                            {"model": "m", "messages": [
                                {"role": "tool", "tool_call_id": "call_a", "content": "one"}]})
        self.assertEqual(status, 409)
        self.assertIn("no tool result for call call_b", text)
        status, text = post(self.port, "/v1/chat/completions",
                            {"model": "m", "messages": [
                                {"role": "tool", "tool_call_id": "call_a", "content": "one"},
                                {"role": "tool", "tool_call_id": "call_b", "content": "two"}]})
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(text)["choices"][0]["message"]["content"], "done")
        entries = self.log_entries()
        self.assertEqual([e["n"] for e in entries], [1, 2, 3])
        self.assertEqual(entries[0]["served_tool_ids"], ["call_a", "call_b"])
        self.assertTrue(entries[1]["mismatches"])
        self.assertEqual(entries[2]["mismatches"], [])


class AnthropicTest(ServerCase):
    steps = [{"text": "Let me look.", "tool_calls": [{"name": "Grep", "arguments": {"pattern": "x"}}]},
             {"expect": {"results": [{"contains": "match"}]}, "text": "found"}]

    def test_non_stream_and_stream(self):
        status, text = post(self.port, "/v1/messages",
                            {"model": "m", "messages": [{"role": "user", "content": "go"}]})
        self.assertEqual(status, 200)
        message = json.loads(text)
        self.assertEqual(message["stop_reason"], "tool_use")
        call_id = message["content"][1]["id"]
        self.assertTrue(call_id.startswith("toolu_"))
        status, text = post(self.port, "/v1/messages", {"model": "m", "stream": True, "messages": [
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id,
                                          "content": "a match"}]}]})
        self.assertEqual(status, 200)
        self.assertIn("event: message_stop", text)
        self.assertIn('"text": "fo', text)
        # The script is exhausted now.
        status, _ = post(self.port, "/v1/messages", {"model": "m", "messages": []})
        self.assertEqual(status, 409)


class ClaudeCodeTest(ServerCase):
    steps = [{"text": "hello from the script"}]

    def test_head_check_and_beta_query(self):
        # Claude Code checks the base URL with HEAD / before its first
        # request, then posts to /v1/messages?beta=true.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/", method="HEAD")
        with opener.open(request, timeout=10) as response:
            self.assertEqual(response.status, 200)
            self.assertEqual(response.read(), b"")
        status, text = post(self.port, "/v1/messages?beta=true", {
            "model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
        self.assertEqual(status, 200)
        self.assertIn("event: message_stop", text)
        self.assertIn("hello", text)
        entry = self.log_entries()[0]
        self.assertEqual((entry["path"], entry["wire"]), ("/v1/messages?beta=true", "anthropic"))
        status, _ = post(self.port, "/v1/other?beta=true", {"model": "m", "messages": []})
        self.assertEqual(status, 404)


def raw_post(port, path, body):
    """POST BODY; return (status line, headers and body bytes) or the error."""
    import socket
    data = json.dumps(body).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks)


class FaultTest(ServerCase):
    steps = [{"tool_calls": [{"name": "Read", "arguments": {}, "id": "call_a"},
                             {"name": "Read", "arguments": {}, "id": "call_b"}]},
             {"error": {"status": 429, "message": "slow down", "retry_after": 1}, "times": 2},
             {"fault": "malformed"},
             {"fault": "truncated_json"},
             {"fault": "close_mid_stream", "text": "Half of an answer"},
             {"fault": "reset"},
             {"text": "done"}]

    def test_faults_in_order_and_results_kept_pending(self):
        answered = [{"role": "assistant", "tool_calls": [{"id": "call_a"}, {"id": "call_b"}]},
                    {"role": "tool", "tool_call_id": "call_a", "content": "one"},
                    {"role": "tool", "tool_call_id": "call_b", "content": "two"}]
        path = "/v1/chat/completions"
        self.assertEqual(post(self.port, path, {"model": "m", "messages": []})[0], 200)
        # Results out of order, or an echo out of order: mismatches.
        status, text = post(self.port, path, {"model": "m", "messages": [
            answered[0], answered[2], answered[1]]})
        self.assertEqual(status, 409)
        self.assertIn("not the calls' order", text)
        status, text = post(self.port, path, {"model": "m", "messages": [
            {"role": "assistant", "tool_calls": [{"id": "call_b"}, {"id": "call_a"}]},
            answered[1], answered[2]]})
        self.assertEqual(status, 409)
        self.assertIn("echoed assistant calls", text)
        for _ in range(2):
            reply = raw_post(self.port, path, {"model": "m", "messages": answered})
            self.assertIn(b" 429 ", reply.split(b"\r\n")[0])
            self.assertIn(b"Retry-After: 1\r\n", reply)
        reply = raw_post(self.port, path, {"model": "m", "messages": answered})
        body = reply.split(b"\r\n\r\n", 1)[1]
        with self.assertRaises(ValueError):
            json.loads(body)
        reply = raw_post(self.port, path, {"model": "m", "messages": answered})
        head, body = reply.split(b"\r\n\r\n", 1)
        self.assertIn(f"Content-Length: {len(body)}".encode(), head)
        with self.assertRaises(ValueError):
            json.loads(body)
        reply = raw_post(self.port, path, {"model": "m", "stream": True, "messages": answered})
        head, body = reply.split(b"\r\n\r\n", 1)
        self.assertIn(b"Content-Length: 10000000", head)
        self.assertIn(b"Half", body)
        self.assertNotIn(b"[DONE]", body)
        self.assertEqual(raw_post(self.port, path, {"model": "m", "messages": answered}), b"")
        status, text = post(self.port, path, {"model": "m", "messages": answered})
        self.assertEqual(status, 200, text)
        entries = self.log_entries()
        self.assertEqual([e.get("fault") for e in entries[3:]],
                         ["http 429", "http 429", "malformed", "truncated_json",
                          "close_mid_stream", "reset", None])
        self.assertEqual([e["mismatches"] for e in entries[3:]], [[]] * 7)
        self.assertEqual(entries[-1]["echo_ids"], ["call_a", "call_b"])
        self.assertGreater(entries[4]["t"], entries[3]["t"])


class ScriptTest(unittest.TestCase):
    def test_variables_and_validation(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
            json.dump({"steps": [{"text": "{{root}}/a"}]}, handle)
        try:
            self.assertEqual(model_server.load_script(handle.name, {"root": "/w"}),
                             [{"match": None, "steps": [{"text": "/w/a"}], "repeat": False}])
        finally:
            os.unlink(handle.name)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
            json.dump({"steps": [{"expect": {}}]}, handle)
        try:
            with self.assertRaises(model_server.ScriptError):
                model_server.load_script(handle.name, {})
        finally:
            os.unlink(handle.name)


class ConversationTest(unittest.TestCase):
    """Requests are routed by their system prompt and answered in parallel."""

    def test_routing_and_parallel_answers(self):
        conversations = [
            {"match": "agent /root/slow", "steps": [{"text": "slow done", "sleep": 0.6}],
             "repeat": False},
            {"match": "agent /root/fast", "steps": [{"text": "fast done"}], "repeat": False},
            {"match": None, "steps": [{"text": "root one"}, {"text": "root two"}],
             "repeat": False}]
        handle, log = tempfile.mkstemp(suffix=".jsonl")
        os.close(handle)
        server = model_server.make_server(None, log, delay=0, conversations=conversations)
        port = server.server_address[1]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        answers = {}

        def ask(name, system):
            answers[name] = post(port, "/v1/messages",
                                 {"model": "m", "system": system,
                                  "messages": [{"role": "user", "content": "go"}]})

        try:
            slow = threading.Thread(target=ask, args=("slow", "You are the agent /root/slow."))
            slow.start()
            ask("fast", "You are the agent /root/fast.")
            # The fast child is answered while the slow one still sleeps.
            self.assertTrue(slow.is_alive())
            ask("root", "You are mevedel.")
            slow.join()
            self.assertIn("fast done", answers["fast"][1])
            self.assertIn("slow done", answers["slow"][1])
            self.assertIn("root one", answers["root"][1])
            with open(log, encoding="utf-8") as stream:
                served = sorted(json.loads(line)["conversation"] for line in stream)
            self.assertEqual(served, [0, 1, 2])
        finally:
            server.shutdown()
            server.server_close()
            os.unlink(log)


class HistoryTest(unittest.TestCase):
    def test_calls_without_results_are_found_for_both_wires(self):
        openai = {"messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "tool_calls": [{"id": "a"}, {"id": "b"}]},
            {"role": "tool", "tool_call_id": "a", "content": "ok"},
            {"role": "user", "content": "again"}]}
        self.assertEqual(model_server.orphan_calls(openai, "openai"), ["b"])
        self.assertEqual(model_server.history_result_ids(openai, "openai"), {"a"})
        anthropic = {"messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t2"}]},
            {"role": "user", "content": "no result"}]}
        self.assertEqual(model_server.orphan_calls(anthropic, "anthropic"), ["t2"])
        self.assertTrue(model_server.ends_with_user_text(anthropic))
        self.assertFalse(model_server.ends_with_user_text({"messages": anthropic["messages"][:3]}))
        self.assertEqual(model_server.history_result_ids(anthropic, "anthropic"), {"t1"})

    def test_openai_image_messages_after_results_belong_to_them(self):
        media = {"role": "user", "content": [
            {"type": "text", "text": "Images the tool call a returned:"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]}
        body = {"messages": [
            {"role": "user", "content": "look"},
            {"role": "assistant", "tool_calls": [{"id": "a"}]},
            {"role": "tool", "tool_call_id": "a", "content": "Image attached."},
            media]}
        self.assertFalse(model_server.ends_with_user_text(body))
        results, user_text, echo = model_server.openai_results(body)
        self.assertEqual(results, [("a", "Image attached.", None)])
        self.assertEqual(user_text, "look")
        self.assertEqual(echo, ["a"])


class PromptCacheTest(unittest.TestCase):
    """The cache simulation follows each provider's published rules."""

    big = "x" * 8000  # 2000 tokens

    def anthropic(self, *messages, tools_mark=True):
        return {"tools": [{"name": "Read", "description": self.big,
                           **({"cache_control": {"type": "ephemeral"}} if tools_mark else {})}],
                "system": [{"type": "text", "text": "sys"}],
                "messages": list(messages)}

    @staticmethod
    def block(text, mark=False):
        return dict({"type": "text", "text": text},
                    **({"cache_control": {"type": "ephemeral"}} if mark else {}))

    def test_anthropic_reads_what_the_previous_request_wrote(self):
        cache = model_server.PromptCache(1024)
        first = cache.anthropic_usage(self.anthropic(
            {"role": "user", "content": [self.block("a" * 400, True)]}))
        self.assertEqual(first["cache_read_input_tokens"], 0)
        self.assertGreater(first["cache_creation_input_tokens"], 2000)
        second = cache.anthropic_usage(self.anthropic(
            {"role": "user", "content": [self.block("a" * 400)]},
            {"role": "assistant", "content": [self.block("b" * 400)]},
            {"role": "user", "content": [self.block("c" * 400, True)]}))
        self.assertEqual(second["cache_read_input_tokens"],
                         first["cache_creation_input_tokens"])
        self.assertEqual(second["input_tokens"], 0)
        self.assertGreater(second["cache_creation_input_tokens"], 200)
        # Without a breakpoint near the end, nothing past the tools is read.
        third = cache.anthropic_usage(self.anthropic(
            {"role": "user", "content": [self.block("a" * 400)]},
            {"role": "assistant", "content": [self.block("b" * 400)]},
            {"role": "user", "content": [self.block("c" * 400)]},
            {"role": "user", "content": [self.block("d" * 400)]}))
        self.assertLess(third["cache_read_input_tokens"], second["cache_read_input_tokens"])
        self.assertGreater(third["cache_read_input_tokens"], 1900)
        self.assertEqual(third["cache_creation_input_tokens"],
                         0 if third["cache_read_input_tokens"] else 1)

    def test_anthropic_changed_block_misses(self):
        cache = model_server.PromptCache(1024)
        cache.anthropic_usage(self.anthropic(
            {"role": "user", "content": [self.block("a" * 400, True)]}))
        changed = cache.anthropic_usage(self.anthropic(
            {"role": "user", "content": [self.block("A" + "a" * 399, True)]}))
        tools = model_server.anthropic_parts(self.anthropic())[0][0]
        self.assertEqual(changed["cache_read_input_tokens"], model_server.tokens(tools))

    def test_anthropic_keys_in_another_order_miss(self):
        cache = model_server.PromptCache(1024)
        cache.anthropic_usage(self.anthropic(
            {"role": "user", "content": [self.block("a" * 400, True)]}))
        reordered = cache.anthropic_usage(self.anthropic(
            {"role": "user", "content": [{"cache_control": {"type": "ephemeral"},
                                          "text": "a" * 400, "type": "text"}]}))
        tools = model_server.anthropic_parts(self.anthropic())[0][0]
        self.assertEqual(reordered["cache_read_input_tokens"], model_server.tokens(tools))

    def test_shared_parts_are_not_serialized_again(self):
        cache = model_server.PromptCache(1024)
        serialized = []
        canonical = model_server.canonical

        def counting(value):
            serialized.append(value)
            return canonical(value)
        model_server.canonical = counting
        try:
            messages = [{"role": "user", "content": [self.block("a" * 400)]},
                        {"role": "assistant", "content": [self.block("b" * 400)]}]
            cache.anthropic_usage(self.anthropic(*messages))
            self.assertEqual(len(serialized), 4)
            serialized.clear()
            second = cache.anthropic_usage(self.anthropic(
                *messages, {"role": "user", "content": [self.block("c" * 400, True)]}))
            self.assertEqual(serialized, [self.block("c" * 400, True)])
            fresh = model_server.PromptCache(1024)
            fresh.anthropic_usage(self.anthropic(*messages))
            self.assertEqual(fresh.anthropic_usage(self.anthropic(
                *messages, {"role": "user", "content": [self.block("c" * 400, True)]})), second)
        finally:
            model_server.canonical = canonical

    def test_openai_prefix_in_128_token_steps_per_key(self):
        cache = model_server.PromptCache(1024)
        system = {"role": "system", "content": self.big}
        first = cache.openai_usage({"messages": [system], "prompt_cache_key": "k"})
        self.assertEqual(first["prompt_tokens_details"]["cached_tokens"], 0)
        second = cache.openai_usage({"messages": [system, {"role": "user", "content": "hi"}],
                                     "prompt_cache_key": "k"})
        cached = second["prompt_tokens_details"]["cached_tokens"]
        self.assertEqual((cached - 1024) % 128, 0)
        self.assertLessEqual(cached, first["prompt_tokens"])
        self.assertGreater(cached, first["prompt_tokens"] - 128)
        other = cache.openai_usage({"messages": [system], "prompt_cache_key": "other"})
        self.assertEqual(other["prompt_tokens_details"]["cached_tokens"], 0)
        # A change inside the system text keeps what precedes it.
        edited = cache.openai_usage({"messages": [{"role": "system",
                                                   "content": self.big[:6000] + "y"}],
                                     "prompt_cache_key": "k"})
        self.assertEqual(edited["prompt_tokens_details"]["cached_tokens"], 1024 + 384)


class ReceivedRequestsTest(ServerCase):
    steps = [{"text": "one"}, {"text": "two"}]

    def test_requests_read_back_raw_with_usage(self):
        raw = '{"messages": [{"role": "user", "content": "hi"}], "stream": false}'
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/v1/messages", data=raw.encode(),
            headers={"Content-Type": "application/json"}, method="POST")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=10) as response:
            answer = json.loads(response.read())
        self.assertIn("cache_read_input_tokens", answer["usage"])
        with opener.open(f"http://127.0.0.1:{self.port}/requests", timeout=10) as response:
            received = json.loads(response.read())
        self.assertEqual([r["raw"] for r in received], [raw])
        self.assertEqual(received[0]["usage"]["input_tokens"], answer["usage"]["input_tokens"])
        self.assertEqual(self.log_entries()[0]["usage"], received[0]["usage"])


class RequestLogTest(ServerCase):
    steps = [{"text": "one"}, {"text": "two"}]

    def send(self, raw):
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/v1/messages", data=raw.encode(),
            headers={"Content-Type": "application/json"}, method="POST")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=10) as response:
            self.assertEqual(response.status, 200)

    def test_body_logged_as_sent_or_serialized(self):
        raw = '{"messages":  [{"role": "user", "content": "hi"}],"stream":false}'
        self.send(raw)
        # Not one line of ASCII: serialized again.
        other = '{"messages": [{"role": "user",\n "content": "h\u00e9"}], "stream": false}'
        self.send(other)
        with open(self.log, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
        self.assertEqual(len(lines), 2)
        self.assertIn('"body": ' + raw + "}", lines[0])
        entries = self.log_entries()
        self.assertEqual([entry["body"] for entry in entries],
                         [json.loads(raw), json.loads(other)])
        self.assertEqual([entry["n"] for entry in entries], [1, 2])


class ReasoningTokensTest(ServerCase):
    steps = [{"text": "thought hard", "reasoning_tokens": 40}]

    def test_openai_usage_reports_reasoning(self):
        body = {"messages": [{"role": "user", "content": "hi"}], "stream": False}
        status, text = post(self.port, "/v1/chat/completions", body)
        self.assertEqual(status, 200)
        usage = json.loads(text)["usage"]
        self.assertEqual(usage["completion_tokens_details"], {"reasoning_tokens": 40})
        self.assertEqual(usage["completion_tokens"], 45)
        self.assertEqual(usage["total_tokens"], usage["prompt_tokens"] + 45)
        self.assertEqual(self.log_entries()[0]["usage"], usage)


class ThinkingTest(ServerCase):
    steps = [{"thinking": "let me see", "redacted_thinking": "opaque",
              "tool_calls": [{"name": "Read", "arguments": {}, "id": "toolu_t"}]},
             {"text": "done"}, {"text": "again"}]

    def test_blocks_streamed_and_echo_checked(self):
        body = {"messages": [{"role": "user", "content": "hi"}], "stream": True}
        status, text = post(self.port, "/v1/messages", body)
        self.assertEqual(status, 200)
        self.assertIn('"thinking_delta"', text)
        self.assertIn('"signature_delta"', text)
        self.assertIn('"redacted_thinking"', text)
        blocks = model_server.thinking_blocks(self.steps[0])
        call = {"type": "tool_use", "id": "toolu_t", "name": "Read", "input": {}}
        result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_t",
                                               "content": "x"}]}
        dropped = {"messages": [{"role": "user", "content": "hi"},
                                {"role": "assistant", "content": [call]}, result]}
        status, text = post(self.port, "/v1/messages", dropped)
        self.assertEqual(status, 409)
        self.assertIn("not echoed unchanged", text)
        echoed = {"messages": [{"role": "user", "content": "hi"},
                               {"role": "assistant", "content": blocks + [call]}, result]}
        status, _ = post(self.port, "/v1/messages", echoed)
        self.assertEqual(status, 200)

if __name__ == "__main__":
    unittest.main()
