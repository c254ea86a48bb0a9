#!/usr/bin/env python3
"""A scripted model server speaking the OpenAI and Anthropic wire formats.

It replays a JSON script of model turns so that mevedel's end-to-end tests
(and the offline demo) can drive the real gptel client without a network
or an API key.  Python 3 standard library only.

Endpoints, both streaming (SSE) and non-streaming:

  POST /v1/chat/completions   OpenAI Chat Completions
  POST /v1/messages           Anthropic Messages

A query string is ignored when routing (Claude Code posts to
/v1/messages?beta=true), and HEAD of any path answers 200 with no body
(Claude Code's connectivity check before its first request).

Script (JSON; "repeat": true starts over after the last step):

  {"repeat": false, "steps": [
     {"tool_calls": [{"name": "Read", "arguments": {"file_path": "{{root}}/a.txt"},
                      "id": "call_read"}]},          # id optional
     {"expect": {"results": [{"contains": "hello"}]},   # optional checks
      "text": "The file says hello."},
     {"error": {"status": 429, "message": "slow down", "retry_after": 1}},
     {"fault": "close_mid_stream", "text": "Half an ans", "times": 2}
  ]}

A step answers with text (optionally preceded by "text" before tool calls),
with tool calls, with an HTTP error ("retry_after" adds a Retry-After
header), or with a broken response, its "fault":

  malformed          200 whose body (streaming: its second event) is not JSON
  truncated_json     200 whose JSON is cut; Content-Length matches (curl exit 0);
                     streaming: as truncated_stream
  truncated_stream   the response (text and tool calls) cut after "cut_after"
                     events, or half of them, then a clean close (curl exit 0);
                     not streaming: as truncated_json
  close_mid_stream   as truncated_stream, but Content-Length promised more, so
                     the client sees the connection close early (curl exit 18)
  reset              the connection closes before any response (curl exit 52)
  stall              nothing is sent for "seconds" (default 30), then the
                     connection closes (a client timeout fires first)

On the Anthropic wire a step's "thinking": TEXT puts a thinking block
(with a signature) before its text and calls, "redacted_thinking": DATA
a redacted one, streaming or not.  Every later request that carries
that assistant message (found by its first call's ID, or its text)
must carry those blocks unchanged, first: else it is a mismatch.

On the OpenAI wire a step's "reasoning_tokens": N adds N reasoning tokens
to its usage ("completion_tokens_details.reasoning_tokens", included in
"completion_tokens"), as reasoning models report them.

"times": N serves an error or fault step N times in a row (N failures, then
the next step), so retries can be counted.  Error and fault steps hand out
no calls: the request after them is checked against the last tool-call
step, as its retry.

Each request after a tool-call step must carry one result per call of that
step, identified by the IDs the server handed out; missing, duplicated, unknown or mismatched results, and
results or echoed assistant calls out of the order the server gave the calls
in, are "mismatches".  "expect.results" (in call order) may add "contains" /
"is_error" checks per result, "expect.user_contains" checks the latest user
text.  A mismatch is logged and answered with HTTP 409, so a client under
test fails loudly.

Prompt caching is simulated as each provider documents it, with tokens
counted as characters / 4 of the JSON of each part (stable, so shares are
comparable).  The cached prefix is what the request repeats of earlier
ones, compared part by part as serialized JSON (key order kept):

  anthropic  parts are the tools, the system blocks and each message's
             content blocks, in that order; a block with "cache_control"
             (at most 4) is a breakpoint.  A breakpoint writes the prefix
             ending at its block; a request reads the longest prefix an
             earlier request wrote that ends at one of its breakpoints or
             up to 20 blocks before one.  The usage says
             "cache_read_input_tokens", "cache_creation_input_tokens"
             (from the read end to the last breakpoint) and
             "input_tokens" (the rest).  Prefixes shorter than
             --cache-min-tokens (1024) are not cached.
  openai     parts are the tools and each message; every request of at
             least --cache-min-tokens is cached automatically, and a
             later one with the same "prompt_cache_key" reads the longest
             prefix it shares with an earlier one, rounded down to the
             minimum plus a multiple of 128 tokens, as
             "prompt_tokens_details.cached_tokens".

GET /requests answers the requests received so far, in order, each
{"n", "wire", "raw" (the body as sent), "usage" (as answered)}.

Every request is appended to the JSON-lines log (--log): its path, body,
arrival time ("t", seconds since the epoch), the step served, the fault or
error served, the tool-call IDs handed out, the result IDs and echoed call
IDs it carried (in its order), the usage answered and any mismatches.
Concurrent conversations (child agents): instead of "steps" a script may
list "conversations", each {"match": TEXT, "steps": [...], "repeat": bool}.
A request is served by the first conversation whose "match" occurs in its
system prompt (one without "match" takes every other request); each has its
own position and pending calls, and requests are answered in parallel.
"sleep": SECONDS on a step holds its answer back that long (a slow model).
The log entry names the conversation served ("conversation", its index).

"{{name}}" placeholders in the script are replaced by --var name=value.

The server binds 127.0.0.1 on a free port (or --port), prints "PORT <n>"
on stdout and writes the number to --port-file when given.
"""

import argparse
import http.server
import json
import sys
import threading
import hashlib
import pickle
import time
import urllib.parse
import uuid


class ScriptError(Exception):
    """The script itself is malformed."""


FAULTS = ("malformed", "truncated_json", "truncated_stream", "close_mid_stream", "reset",
          "stall")


def substitute(value, variables):
    """Replace {{name}} placeholders in every string of VALUE."""
    if isinstance(value, str):
        for key, replacement in variables.items():
            value = value.replace("{{" + key + "}}", replacement)
        return value
    if isinstance(value, list):
        return [substitute(item, variables) for item in value]
    if isinstance(value, dict):
        return {key: substitute(item, variables) for key, item in value.items()}
    return value


def check_steps(path, steps, where):
    """Raise ScriptError unless STEPS (of WHERE in PATH) is a list of valid steps."""
    if not isinstance(steps, list) or not steps:
        raise ScriptError(f"{path}: expected {where} to be a non-empty \"steps\" list")
    for index, step in enumerate(steps):
        if not isinstance(step, dict):
            raise ScriptError(f"{path}: {where} step {index} is not an object")
        if not any(key in step for key in ("text", "tool_calls", "error", "fault")):
            raise ScriptError(f"{path}: {where} step {index} has no text, tool_calls, error or fault")
        if "fault" in step and step["fault"] not in FAULTS:
            raise ScriptError(f"{path}: {where} step {index} has an unknown fault {step['fault']!r}")
        for call in step.get("tool_calls", []):
            if not isinstance(call, dict) or "name" not in call:
                raise ScriptError(f"{path}: {where} step {index} has a tool call without a name")


def load_script(path, variables):
    """Read and check the script at PATH; return its conversations.

    Each is a dict with "match" (None: any request), "steps" and "repeat".
    A plain script is one conversation that takes every request.
    """
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    if not isinstance(data, dict):
        raise ScriptError(f"{path}: expected an object with \"steps\" or \"conversations\"")
    if "conversations" in data:
        conversations = data["conversations"]
        if not isinstance(conversations, list) or not conversations:
            raise ScriptError(f"{path}: \"conversations\" must be a non-empty list")
    else:
        conversations = [{"steps": data.get("steps"), "repeat": data.get("repeat")}]
    result = []
    for index, conversation in enumerate(conversations):
        if not isinstance(conversation, dict):
            raise ScriptError(f"{path}: conversation {index} is not an object")
        check_steps(path, conversation.get("steps"), f"conversation {index}")
        result.append({"match": substitute(conversation.get("match"), variables),
                       "steps": substitute(conversation["steps"], variables),
                       "repeat": bool(conversation.get("repeat"))})
    return result


def system_text(body, wire):
    """Return the system prompt of request BODY."""
    if wire == "anthropic":
        return text_of(body.get("system"))
    for message in body.get("messages") or []:
        if message.get("role") == "system":
            return text_of(message.get("content"))
    return ""


def chunks_of(text, parts):
    """Split TEXT into about PARTS non-empty pieces (at least one)."""
    if not text:
        return [text]
    size = max(1, -(-len(text) // parts))
    return [text[i:i + size] for i in range(0, len(text), size)]


# ---------------------------------------------------------------------------
# Reading tool results out of a request


def openai_results(body):
    """Return (results, user_text, echo) of the last turn of an OpenAI request.

    RESULTS lists (id, content, is_error) of the tool messages after the
    last assistant message (user messages between them, such as mail
    joining a continued request, are passed over); USER_TEXT is the
    latest user message's text;
    ECHO the IDs of the tool calls of the assistant message before them
    (None without one).
    """
    messages = body.get("messages") or []
    results = []
    echo = None
    for message in reversed(messages):
        role = message.get("role")
        if role == "tool":
            results.append((message.get("tool_call_id"), text_of(message.get("content")), None))
        elif role == "user":
            continue
        else:
            if role == "assistant" and results:
                echo = [call.get("id") for call in message.get("tool_calls") or []]
            break
    results.reverse()
    user_text = ""
    for message in reversed(messages):
        if message.get("role") == "user" and not is_media_message(message):
            user_text = text_of(message.get("content"))
            break
    return results, user_text, echo


def anthropic_results(body):
    """Return (results, user_text, echo) of the last turn of an Anthropic request."""
    messages = body.get("messages") or []
    results = []
    user_text = ""
    # Trailing user messages may hold tool_result blocks (gptel sends one
    # user message per batch; a restored transcript may split them).
    tail = []
    echo = None
    for message in reversed(messages):
        if message.get("role") != "user":
            content = message.get("content")
            if message.get("role") == "assistant" and isinstance(content, list):
                echo = [block.get("id") for block in content
                        if isinstance(block, dict) and block.get("type") == "tool_use"]
            break
        tail.append(message)
    tail.reverse()
    for message in tail:
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    results.append((block.get("tool_use_id"), text_of(block.get("content")),
                                    bool(block.get("is_error"))))
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            user_text = content
            break
        if isinstance(content, list):
            texts = [block.get("text", "") for block in content
                     if isinstance(block, dict) and block.get("type") == "text"]
            if texts:
                user_text = "".join(texts)
                break
    if not results:
        echo = None
    return results, user_text, echo


def is_media_message(message):
    """Return True when MESSAGE is an OpenAI user message carrying images."""
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(part, dict) and part.get("type") == "image_url" for part in content)


def text_of(content):
    """Flatten message CONTENT (string or list of blocks) to text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(block.get("text", "") if isinstance(block, dict) else str(block)
                       for block in content)
    return json.dumps(content)


def ends_with_user_text(body):
    """Return True when BODY's last message is the user's text (a new turn).

    Mail that joins a request continued after tool results (user text
    made only of <agent-message> blocks, or the <agent-children>
    reminder, right after the results) continues the turn instead.
    """
    messages = body.get("messages") or []
    if not messages or messages[-1].get("role") != "user" or is_media_message(messages[-1]):
        return False
    content = messages[-1].get("content")
    if not (isinstance(content, str) or (isinstance(content, list) and any(
            isinstance(block, dict) and block.get("type") == "text" for block in content))):
        return False
    texts = []
    for message in reversed(messages):
        role = message.get("role")
        if role == "assistant":
            return True
        if role == "tool":
            break
        blocks = message.get("content")
        if isinstance(blocks, str):
            texts.append(blocks)
            continue
        blocks = [block for block in blocks or [] if isinstance(block, dict)]
        texts.extend(block.get("text", "") for block in blocks if block.get("type") == "text")
        if any(block.get("type") == "tool_result" for block in blocks):
            break
    return not (texts and all(text.lstrip().startswith(("<agent-message", "<agent-children"))
                              for text in texts))


def history_result_ids(body, wire):
    """Return the IDs of every tool result anywhere in request BODY."""
    ids = set()
    for message in body.get("messages") or []:
        if wire == "openai":
            if message.get("role") == "tool":
                ids.add(message.get("tool_call_id"))
        elif isinstance(message.get("content"), list):
            ids.update(block.get("tool_use_id") for block in message["content"]
                       if isinstance(block, dict) and block.get("type") == "tool_result")
    return ids


def orphan_calls(body, wire):
    """Return the IDs of tool calls in BODY's history that have no result.

    Real providers refuse such a request: OpenAI wants a tool message for
    every call of an assistant message, Anthropic a tool_result block in
    the user message right after each tool_use.
    """
    messages = body.get("messages") or []
    orphans = []
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        if wire == "openai":
            calls = [call.get("id") for call in message.get("tool_calls") or []]
            answered = set()
            for later in messages[index + 1:]:
                if later.get("role") != "tool":
                    break
                answered.add(later.get("tool_call_id"))
        else:
            content = message.get("content")
            calls = [block.get("id") for block in content
                     if isinstance(block, dict) and block.get("type") == "tool_use"] \
                if isinstance(content, list) else []
            answered = set()
            following = messages[index + 1] if index + 1 < len(messages) else None
            if following and isinstance(following.get("content"), list):
                answered = {block.get("tool_use_id") for block in following["content"]
                            if isinstance(block, dict) and block.get("type") == "tool_result"}
        orphans.extend(call for call in calls if call not in answered)
    return orphans


def thinking_blocks(step):
    """Return the thinking blocks STEP answers with on the Anthropic wire."""
    blocks = []
    if step.get("thinking"):
        text = step["thinking"]
        blocks.append({"type": "thinking", "thinking": text,
                       "signature": "sig-" + hashlib.sha256(text.encode()).hexdigest()[:32]})
    if step.get("redacted_thinking"):
        blocks.append({"type": "redacted_thinking", "data": step["redacted_thinking"]})
    return blocks


def assistant_key(content):
    """Return what identifies an assistant message: its first call's ID, else its text."""
    if isinstance(content, str):
        return ("text", content)
    for block in content or []:
        if isinstance(block, dict) and block.get("type") == "tool_use":
            return ("call", block.get("id"))
    return ("text", "".join(block.get("text", "") for block in content or []
                            if isinstance(block, dict) and block.get("type") == "text"))


def thinking_problems(body, expected):
    """Return how BODY's assistant messages fail to echo the EXPECTED thinking blocks."""
    problems = []
    for message in body.get("messages") or []:
        if message.get("role") != "assistant":
            continue
        content = message.get("content")
        blocks = expected.get(assistant_key(content))
        if not blocks:
            continue
        sent = [{key: value for key, value in block.items() if key != "cache_control"}
                for block in (content if isinstance(content, list) else [])[:len(blocks)]]
        if sent != blocks:
            problems.append(f"thinking blocks of the assistant message {assistant_key(content)} "
                            f"not echoed unchanged: {json.dumps(sent)[:300]}")
    return problems


def check_request(expected_ids, results, user_text, expect, echo=None):
    """Return the list of mismatches between a request and its expectations."""
    problems = []
    ids = [result[0] for result in results]
    if expected_ids is not None and sorted(ids) == sorted(expected_ids) and ids != expected_ids:
        problems.append(f"tool results in the order {ids}, not the calls' order {expected_ids}")
    if expected_ids is not None and echo is not None and echo != expected_ids:
        problems.append(f"echoed assistant calls {echo}, not the calls {expected_ids} in order")
    if expected_ids is not None:
        for call_id in expected_ids:
            count = ids.count(call_id)
            if count == 0:
                problems.append(f"no tool result for call {call_id}")
            elif count > 1:
                problems.append(f"{count} tool results for call {call_id}")
        for call_id in ids:
            if call_id not in expected_ids:
                problems.append(f"tool result for unknown call {call_id!r}")
    elif results:
        problems.append(f"unexpected tool results for {ids}")
    checks = expect.get("results") or []
    by_id = {result[0]: result for result in results}
    for index, check in enumerate(checks):
        if expected_ids is None or index >= len(expected_ids):
            problems.append(f"expect.results[{index}] has no matching call")
            continue
        result = by_id.get(expected_ids[index])
        if result is None:
            continue
        needle = check.get("contains")
        if needle is not None and needle not in result[1]:
            problems.append(f"result of {expected_ids[index]} lacks {needle!r}: "
                            f"{result[1][:300]!r}")
        absent = check.get("lacks")
        if absent is not None and absent in result[1]:
            problems.append(f"result of {expected_ids[index]} contains {absent!r}")
        if "is_error" in check and result[2] is not None and result[2] != check["is_error"]:
            problems.append(f"result of {expected_ids[index]} is_error={result[2]}")
    needle = expect.get("user_contains")
    if needle is not None and needle not in user_text:
        problems.append(f"latest user text lacks {needle!r}: {user_text[:200]!r}")
    return problems



# ---------------------------------------------------------------------------
# Prompt caching


def tokens(text):
    """Return the token count of TEXT: a fixed approximation, characters / 4."""
    return len(text) // 4


def canonical(value):
    """Return VALUE serialized as a part of the cached prefix.

    "cache_control" marks a breakpoint; it is not part of what is cached.
    """
    if isinstance(value, dict):
        value = {key: item for key, item in value.items() if key != "cache_control"}
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def anthropic_sources(body):
    """Return the cacheable parts of an Anthropic BODY as (prefix, value) pairs."""
    sources = [("tool:", tool) for tool in body.get("tools") or []]
    system = body.get("system")
    if isinstance(system, str):
        sources.append(("system:", {"type": "text", "text": system}))
    else:
        sources.extend(("system:", block) for block in system or [])
    for message in body.get("messages") or []:
        content = message.get("content")
        role = message.get("role", "")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        sources.extend((role + ":", block) for block in content or [])
    return sources


def marked(value):
    """Return whether VALUE, a part of a request, carries a cache breakpoint."""
    return isinstance(value, dict) and "cache_control" in value


def anthropic_parts(body):
    """Return the cacheable parts of an Anthropic BODY as (text, breakpoint?)."""
    return [(prefix + canonical(value), marked(value))
            for prefix, value in anthropic_sources(body)]


def openai_sources(body):
    """Return the cacheable parts of an OpenAI BODY: tools, then messages."""
    sources = [("tools:", body["tools"])] if body.get("tools") else []
    sources.extend(("", message) for message in body.get("messages") or [])
    return sources


def openai_parts(body):
    """Return the cacheable parts of an OpenAI BODY: tools, then messages."""
    return [prefix + canonical(value) for prefix, value in openai_sources(body)]


class PromptCache:
    """What earlier requests wrote to the provider's prompt cache."""

    def __init__(self, min_tokens):
        self.min_tokens = min_tokens
        self.anthropic = {}  # prefix digest -> tokens
        self.openai = {}     # prompt_cache_key -> list of part-digest lists
        self.texts = {}      # prompt_cache_key -> prefix digest -> parts seen after it
        self.last = {}       # wire -> (keys, texts, digests, hashes) of its last request

    def digested(self, wire, sources):
        """Return the texts of SOURCES and the running digest of each prefix.

        Each request of a conversation repeats the previous one and adds
        to its end: the parts it shares with the last request of WIRE,
        from the start, reuse their texts and digests, so a request costs
        what it adds, not its whole size, and the time per request stays
        the client's.
        """
        # Pickles compare as the values serialize: equal bytes mean
        # the same keys in the same order, true apart from 1.
        keys = [(prefix, pickle.dumps(value, 5)) for prefix, value in sources]
        last_keys, last_texts, last_digests, last_hashes = self.last.get(
            wire, ([], [], [], []))
        same = 0
        for mine, theirs in zip(keys, last_keys):
            if mine != theirs:
                break
            same += 1
        texts, digests, hashes = last_texts[:same], last_digests[:same], last_hashes[:same]
        running = hashes[-1].copy() if hashes else hashlib.sha256()
        for prefix, value in sources[same:]:
            text = prefix + canonical(value)
            running.update(text.encode("utf-8"))
            running.update(b"\0")
            texts.append(text)
            hashes.append(running.copy())
            digests.append(running.hexdigest())
        self.last[wire] = (keys, texts, digests, hashes)
        return texts, digests

    def anthropic_usage(self, body):
        """Return the usage of an Anthropic BODY and note what it writes."""
        sources = anthropic_sources(body)
        texts, digests = self.digested("anthropic", sources)
        parts = [(text, marked(value)) for text, (_, value) in zip(texts, sources)]
        sizes = [tokens(text) for text, _ in parts]
        ends = []
        total = 0
        for size in sizes:
            total += size
            ends.append(total)
        marks = [index for index, (_, marked) in enumerate(parts) if marked][:4]
        read_end = -1
        for mark in marks:
            for index in range(mark, max(-1, mark - 21), -1):
                if digests[index] in self.anthropic and index > read_end:
                    read_end = index
                    break
        read = ends[read_end] if read_end >= 0 else 0
        last_mark = marks[-1] if marks else -1
        created = max(0, (ends[last_mark] if last_mark >= 0 else 0) - read)
        if last_mark >= 0 and ends[last_mark] < self.min_tokens:
            created = 0
        for mark in marks:
            if ends[mark] >= self.min_tokens:
                self.anthropic[digests[mark]] = ends[mark]
        return {"input_tokens": total - read - created,
                "cache_read_input_tokens": read,
                "cache_creation_input_tokens": created}

    def openai_usage(self, body):
        """Return the usage of an OpenAI BODY and note what it writes."""
        parts, digests = self.digested("openai", openai_sources(body))
        total = sum(tokens(text) for text in parts)
        seen = self.openai.setdefault(body.get("prompt_cache_key"), [])
        shared = 0
        for earlier in seen:
            count = 0
            for mine, theirs in zip(digests, earlier):
                if mine != theirs:
                    break
                count += 1
            shared = max(shared, count)
        common = sum(tokens(text) for text in parts[:shared])
        if shared < len(parts):
            # Within the first differing part, the characters it shares.
            for earlier_text in self.texts.get(body.get("prompt_cache_key"), {}).get(
                    digests[shared - 1] if shared else "", []):
                mine = parts[shared]
                length = 0
                for a, b in zip(mine, earlier_text):
                    if a != b:
                        break
                    length += 1
                common = max(common, sum(tokens(t) for t in parts[:shared]) + tokens(mine[:length]))
        cached = 0
        if common >= self.min_tokens and total >= self.min_tokens:
            cached = self.min_tokens + (common - self.min_tokens) // 128 * 128
        if total >= self.min_tokens:
            seen.append(digests)
            after = self.texts.setdefault(body.get("prompt_cache_key"), {})
            for index in range(len(parts)):
                key = digests[index - 1] if index else ""
                bucket = after.setdefault(key, [])
                if parts[index] not in bucket:
                    bucket.append(parts[index])
        return {"prompt_tokens": total, "completion_tokens": 5, "total_tokens": total + 5,
                "prompt_tokens_details": {"cached_tokens": cached}}

# ---------------------------------------------------------------------------
# The server


class Track:
    """The position of one conversation of the script."""

    def __init__(self, match, steps, repeat):
        self.match = match
        self.steps = steps
        self.repeat = repeat
        self.position = 0
        self.pending_ids = None  # IDs of the last tool-call step served
        self.served = 0  # times the current step was served ("times")
        self.thinking = {}  # assistant message key -> thinking blocks it was sent with


class State:
    """The script positions shared by all request threads."""

    def __init__(self, conversations, log_path, delay, cache_min_tokens=1024):
        self.tracks = [Track(c["match"], c["steps"], c["repeat"]) for c in conversations]
        self.log_path = log_path
        self.delay = delay
        self.lock = threading.Lock()
        self.requests = 0
        self.cache = PromptCache(cache_min_tokens)
        self.received = []  # {"n", "wire", "raw", "usage"} of every request

    def track_for(self, system):
        """Return (index, track) of the conversation serving SYSTEM, or (None, None)."""
        for index, track in enumerate(self.tracks):
            if track.match is None or track.match in system:
                return index, track
        return None, None

    def log(self, entry, raw=None):
        """Append ENTRY to the log; RAW, the request's bytes, stands for its body.

        Serializing the parsed body again costs as much as parsing it, per
        request; an ASCII body on one line is already what its entry holds.
        """
        if not self.log_path:
            return
        if raw is not None and raw.isascii() and b"\n" not in raw and b"\r" not in raw:
            rest = json.dumps({key: value for key, value in entry.items() if key != "body"})
            line = rest[:-1] + (', "body": ' if len(rest) > 2 else '"body": ') + raw.decode() + "}"
        else:
            line = json.dumps(entry)
        with open(self.log_path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")


class Handler(http.server.BaseHTTPRequestHandler):
    server_version = "mevedel-scripted-model/1"

    def log_message(self, fmt, *args):  # quiet: the JSON log is the record
        pass

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        if self.path == "/health":
            self.send_json(200, {"ok": True})
        elif self.path == "/requests":
            with self.server.state.lock:
                received = list(self.server.state.received)
            self.send_json(200, received)
        else:
            self.send_json(404, {"error": {"type": "not_found", "message": self.path}})

    def do_POST(self):
        state = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as err:
            self.send_json(400, {"error": {"type": "invalid_request_error",
                                           "message": f"bad JSON: {err}"}})
            return
        route = urllib.parse.urlsplit(self.path).path
        if route.endswith("/chat/completions"):
            wire = "openai"
        elif route.endswith("/messages"):
            wire = "anthropic"
        else:
            self.send_json(404, {"error": {"type": "not_found", "message": self.path}})
            return
        with state.lock:
            state.requests += 1
            number = state.requests
            entry = {"n": number, "path": self.path, "wire": wire,
                     "stream": bool(body.get("stream") is True), "body": body}
            usage = (state.cache.openai_usage(body) if wire == "openai"
                     else state.cache.anthropic_usage(body))
            entry["usage"] = usage
            state.received.append({"n": number, "wire": wire,
                                   "raw": raw.decode("utf-8"), "usage": usage})
            conversation, track = state.track_for(system_text(body, wire))
            entry["conversation"] = conversation
            if track is None:
                entry["mismatches"] = ["no conversation matches the system prompt"]
                state.log(entry, raw)
                self.send_error_response(wire, 409, "no conversation matches the system prompt")
                return
            if track.repeat and track.position >= len(track.steps):
                track.position = 0
            index = track.position
            if index >= len(track.steps):
                entry["mismatches"] = ["script exhausted"]
                state.log(entry, raw)
                self.send_error_response(wire, 409, f"script exhausted after {index} steps")
                return
            step = track.steps[index]
            if wire == "openai" and step.get("reasoning_tokens"):
                reasoning = int(step["reasoning_tokens"])
                usage["completion_tokens"] += reasoning
                usage["total_tokens"] += reasoning
                usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
            results, user_text, echo = (openai_results(body) if wire == "openai"
                                        else anthropic_results(body))
            pending = track.pending_ids
            # A new user turn after calls that were settled (cancelled by
            # an abort, or after a crash) carries their results earlier
            # in the history: they answer no call of this request.
            if (ends_with_user_text(body)
                    and (pending is None or set(pending) <= history_result_ids(body, wire))):
                pending = None
                results = []
            problems = check_request(pending, results, user_text,
                                     step.get("expect") or {}, echo)
            problems += [f"tool call {call} in the history has no result"
                         for call in orphan_calls(body, wire)]
            if wire == "anthropic":
                problems += thinking_problems(body, track.thinking)
            entry["t"] = time.time()
            entry["step"] = index
            entry["results"] = [{"id": r[0], "content": r[1][:2000], "is_error": r[2]}
                                for r in results]
            entry["echo_ids"] = echo
            entry["mismatches"] = problems
            if problems:
                state.log(entry, raw)
                self.send_error_response(wire, 409, "; ".join(problems))
                return
            failing = "error" in step or "fault" in step
            track.served += 1
            if track.served >= int(step.get("times", 1)):
                track.position += 1
                track.served = 0
            calls = []
            for position, call in enumerate(step.get("tool_calls", [])):
                prefix = "call_" if wire == "openai" else "toolu_"
                calls.append({"id": call.get("id") or
                              f"{prefix}{index}_{position}_{uuid.uuid4().hex[:8]}",
                              "name": call["name"],
                              "arguments": call.get("arguments", {})})
            thinking = thinking_blocks(step) if wire == "anthropic" else []
            if thinking and not failing:
                key = (("call", calls[0]["id"]) if calls
                       else ("text", step.get("text") or ""))
                track.thinking[key] = thinking
            if failing:
                entry["served_tool_ids"] = []
                entry["fault"] = step.get("fault") or f"http {step['error'].get('status', 500)}"
            else:
                track.pending_ids = [call["id"] for call in calls] if calls else None
                entry["served_tool_ids"] = [call["id"] for call in calls]
            state.log(entry, raw)
        if step.get("sleep"):
            time.sleep(float(step["sleep"]))
        if "error" in step:
            error = step["error"]
            headers = {}
            if "retry_after" in error:
                headers["Retry-After"] = str(error["retry_after"])
            self.send_error_response(wire, int(error.get("status", 500)),
                                     error.get("message", "scripted error"), headers)
            return
        fault = step.get("fault")
        if fault == "stall":
            time.sleep(float(step.get("seconds", 30)))
        if fault in ("reset", "stall"):
            self.close_connection = True
            return
        model = body.get("model") or "fake-model"
        text = step.get("text")
        stream = body.get("stream") is True
        if stream:
            events = (openai_events(model, text, calls, usage) if wire == "openai"
                      else anthropic_events(model, text, calls, usage, thinking))
            self.send_stream(events, fault, step.get("cut_after"))
        else:
            payload = (openai_message(model, text, calls, usage) if wire == "openai"
                       else anthropic_message(model, text, calls, usage, thinking))
            self.send_body(json.dumps(payload).encode("utf-8"), fault)

    # -- plumbing

    def send_json(self, status, payload, headers=None):
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def send_error_response(self, wire, status, message, headers=None):
        if wire == "openai":
            payload = {"error": {"message": message, "type": "scripted_model_error"}}
        else:
            payload = {"type": "error", "error": {"type": "scripted_model_error", "message": message}}
        self.send_json(status, payload, headers)

    def send_body(self, data, fault):
        """Send the 200 body DATA, broken as FAULT says."""
        promised = len(data)
        if fault == "malformed":
            data = b"<html>upstream said: this is not JSON {"
            promised = len(data)
        elif fault in ("truncated_json", "truncated_stream"):
            data = data[:len(data) // 2]
            promised = len(data)
        elif fault == "close_mid_stream":
            data = data[:len(data) // 2]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(promised))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        self.close_connection = True

    def send_stream(self, events, fault, cut_after):
        """Stream EVENTS (SSE strings), cut as FAULT says after CUT_AFTER events."""
        if fault in ("truncated_stream", "close_mid_stream", "truncated_json"):
            events = events[:int(cut_after) if cut_after is not None else len(events) // 2]
        elif fault == "malformed":
            bad = "data: {this is not json\n\n"
            if events[0].startswith("event:"):
                bad = "event: content_block_delta\n" + bad
            events = events[:1] + [bad] + events[1:]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        if fault == "close_mid_stream":
            self.send_header("Content-Length", "10000000")
        self.end_headers()
        for event in events:
            self.emit(event)
        self.close_connection = True

    def emit(self, text):
        self.wfile.write(text.encode("utf-8"))
        self.wfile.flush()
        if self.server.state.delay:
            time.sleep(self.server.state.delay)


def openai_events(model, text, calls, usage):
    """Return the SSE events of a streamed OpenAI chat completion."""
    ident = f"chatcmpl-{uuid.uuid4().hex[:12]}"
    events = []

    def chunk(delta, finish=None, usage=None):
        payload = {"id": ident, "object": "chat.completion.chunk", "created": int(time.time()),
                   "model": model,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if usage is not None:
            payload["choices"] = []
            payload["usage"] = usage
        events.append("data: " + json.dumps(payload) + "\n\n")

    chunk({"role": "assistant", "content": ""})
    if text:
        for piece in chunks_of(text, max(4, len(text) // 12)):
            chunk({"content": piece})
    for position, call in enumerate(calls):
        arguments = json.dumps(call["arguments"])
        chunk({"tool_calls": [{"index": position, "id": call["id"], "type": "function",
                               "function": {"name": call["name"], "arguments": ""}}]})
        for piece in chunks_of(arguments, 3):
            chunk({"tool_calls": [{"index": position, "function": {"arguments": piece}}]})
    chunk({}, finish="tool_calls" if calls else "stop")
    chunk({}, usage=usage)
    events.append("data: [DONE]\n\n")
    return events


def anthropic_events(model, text, calls, usage, thinking=()):
    """Return the SSE events of a streamed Anthropic message."""
    events = []

    def event(name, payload):
        payload = dict(payload, type=name)
        events.append(f"event: {name}\ndata: {json.dumps(payload)}\n\n")

    event("message_start", {"message": {
        "id": f"msg_{uuid.uuid4().hex[:12]}", "type": "message", "role": "assistant",
        "model": model, "content": [], "stop_reason": None,
        "usage": dict(usage, output_tokens=1)}})
    index = 0
    for block in thinking:
        if block["type"] == "thinking":
            event("content_block_start", {"index": index, "content_block": {
                "type": "thinking", "thinking": ""}})
            for piece in chunks_of(block["thinking"], 3):
                event("content_block_delta", {"index": index, "delta": {
                    "type": "thinking_delta", "thinking": piece}})
            event("content_block_delta", {"index": index, "delta": {
                "type": "signature_delta", "signature": block["signature"]}})
        else:
            event("content_block_start", {"index": index, "content_block": block})
        event("content_block_stop", {"index": index})
        index += 1
    if text:
        event("content_block_start", {"index": index,
                                      "content_block": {"type": "text", "text": ""}})
        for piece in chunks_of(text, max(4, len(text) // 12)):
            event("content_block_delta", {"index": index,
                                          "delta": {"type": "text_delta", "text": piece}})
        event("content_block_stop", {"index": index})
        index += 1
    for call in calls:
        event("content_block_start", {"index": index, "content_block": {
            "type": "tool_use", "id": call["id"], "name": call["name"], "input": {}}})
        for piece in chunks_of(json.dumps(call["arguments"]), 3):
            event("content_block_delta", {"index": index, "delta": {
                "type": "input_json_delta", "partial_json": piece}})
        event("content_block_stop", {"index": index})
        index += 1
    event("message_delta", {"delta": {"stop_reason": "tool_use" if calls else "end_turn",
                                      "stop_sequence": None},
                            "usage": dict(usage, output_tokens=5)})
    event("message_stop", {})
    return events


def openai_message(model, text, calls, usage):
    """Return a non-streaming OpenAI chat completion."""
    message = {"role": "assistant", "content": text if text else None}
    if calls:
        message["tool_calls"] = [{"id": call["id"], "type": "function",
                                  "function": {"name": call["name"],
                                               "arguments": json.dumps(call["arguments"])}}
                                 for call in calls]
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion",
            "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": usage}


def anthropic_message(model, text, calls, usage, thinking=()):
    """Return a non-streaming Anthropic message."""
    content = list(thinking)
    if text:
        content.append({"type": "text", "text": text})
    for call in calls:
        content.append({"type": "tool_use", "id": call["id"], "name": call["name"],
                        "input": call["arguments"]})
    return {"id": f"msg_{uuid.uuid4().hex[:12]}", "type": "message", "role": "assistant",
            "model": model, "content": content,
            "stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None,
            "usage": dict(usage, output_tokens=5)}


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, state):
        super().__init__(address, Handler)
        self.state = state


def make_server(steps, log_path=None, delay=0.0, port=0, repeat=False, conversations=None,
                cache_min_tokens=1024):
    """Return a bound (not yet serving) server for STEPS (or CONVERSATIONS)."""
    conversations = conversations or [{"match": None, "steps": steps, "repeat": repeat}]
    return Server(("127.0.0.1", port),
                  State(conversations, log_path, delay, cache_min_tokens))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--script", required=True, help="JSON script of model turns")
    parser.add_argument("--log", help="append every request here (JSON lines)")
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    parser.add_argument("--port-file", help="also write the port number here")
    parser.add_argument("--delay", type=float, default=0.002,
                        help="seconds between streamed chunks (default 0.002)")
    parser.add_argument("--cache-min-tokens", type=int, default=1024,
                        help="shortest prefix cached, in tokens (default 1024)")
    parser.add_argument("--var", action="append", default=[], metavar="NAME=VALUE",
                        help="replace {{NAME}} in the script")
    args = parser.parse_args(argv)
    variables = {}
    for item in args.var:
        name, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--var needs NAME=VALUE, got {item!r}")
        variables[name] = value
    try:
        conversations = load_script(args.script, variables)
    except (OSError, ValueError, ScriptError) as err:
        print(f"scripted model server: {err}", file=sys.stderr)
        return 2
    server = make_server(None, args.log, args.delay, args.port, conversations=conversations,
                         cache_min_tokens=args.cache_min_tokens)
    port = server.server_address[1]
    if args.port_file:
        with open(args.port_file, "w", encoding="utf-8") as handle:
            handle.write(f"{port}\n")
    print(f"PORT {port}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
