"""Unit tests of the scripted model server (python3 -m unittest)."""

import json
import os
import tempfile
import threading
import unittest
import urllib.error
import urllib.request

import fake_llm


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
        self.server = fake_llm.make_server(self.steps, self.log, delay=0)
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


class ScriptTest(unittest.TestCase):
    def test_variables_and_validation(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
            json.dump({"steps": [{"text": "{{root}}/a"}]}, handle)
        try:
            self.assertEqual(fake_llm.load_script(handle.name, {"root": "/w"}),
                             ([{"text": "/w/a"}], False))
        finally:
            os.unlink(handle.name)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
            json.dump({"steps": [{"expect": {}}]}, handle)
        try:
            with self.assertRaises(fake_llm.ScriptError):
                fake_llm.load_script(handle.name, {})
        finally:
            os.unlink(handle.name)


if __name__ == "__main__":
    unittest.main()
