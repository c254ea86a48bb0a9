#!/usr/bin/env python3
"""A scripted ACP agent (protocol version 1 over stdio) for the ACP client's tests.

It does what no real agent here does on demand: send every kind of
session/update, call the client's fs, terminal and permission methods,
hang until cancelled, crash, leave processes behind.  Python 3 standard
library only.

Usage: fake_agent.py [--no-load] [--state FILE] [--version N] [--die-at-start]
                     [--ignore-term]

  --no-load        do not offer session/load
  --state FILE     keep the sessions' prompts and models in FILE (JSON), so
                   that a later process can load them, as real agents keep
                   theirs on disk
  --version N      answer initialize with protocol version N
  --die-at-start   write two stderr lines and exit 2 before reading anything
  --ignore-term    ignore SIGTERM (so only SIGKILL stops it)

What a prompt does depends on its last text block:

  tour        one update of each kind (text, thought, tool call and its
              update, plan, usage with "used": null, commands, mode, an
              unknown kind), then fs/read_text_file, fs/write_text_file,
              terminal/create, terminal/output, terminal/wait_for_exit,
              terminal/release, session/request_permission and an unknown
              method, and a last message chunk holding the answers as JSON;
              ends with end_turn and usage
  hang        says "waiting", then nothing until session/cancel; ends with
              cancelled
  ask-hang    asks permission, then waits for session/cancel; ends with
              cancelled after a chunk saying the permission's outcome
  crash       writes stderr lines and exits 3 without answering
  leave       starts `sleep 300` twice (one in a session of its own with
              setsid), says their pids in a chunk, ends with end_turn
  leave-hang  as leave, then waits for session/cancel and exits 0 without
              answering, orphaning them
  read PATH   reads PATH with fs/read_text_file; says "read: " and the text
              (or the error's message); ends with end_turn
  write PATH TEXT
              writes TEXT to PATH with fs/write_text_file; says "write: ok"
              or "write: " and the error's message; ends with end_turn
  terminal LIMIT COMMAND
              runs `sh -c COMMAND` in a terminal/create whose outputByteLimit
              is LIMIT (none when 0), waits for its exit, reads its output and
              releases it; says the answers as JSON; ends with end_turn
  terminal-kill
              starts `sleep 30` in a terminal, reads its output, half a second
              later kills it,
              waits for its exit, reads its output again, releases it and
              asks for its output once more; says the answers as JSON
  run-tool    announces a Bash tool call (Claude Code's _meta names it) and
              completes it with "file-a" without asking permission; says
              "ran"; ends with end_turn
  commands    lists three slash commands (available_commands_update), says
              "listed"; ends with end_turn and usage
  ask         thinks, announces a Write tool call (Claude Code's _meta names
              it), asks permission for it (allow_once "allow", reject_once
              "reject"), completes or fails it accordingly, says
              "permission: " and the option chosen (or the outcome)
  history     says the session's earlier prompts (the last text block of
              each) and this prompt's blocks starting with "[mevedel:",
              joined by " | ", then the model: "[MODEL]"
  anything else: echoes the text back and ends with end_turn

session/new answers {"sessionId": "sess-N", "models": two models, fast-model
current, "_meta": {"received": PARAMS}}; session/set_config_option with
configId "model" chooses a model of the session.  session/load replays the
session's prompts as user messages and "earlier answer" (or, without
--state, "earlier question" / "earlier answer") for a session it knows, and
answers -32002 for any other.
"""

import json
import os
import signal
import subprocess
import sys
import time

ARGS = sys.argv[1:]
queue = []  # messages read while waiting for an answer
next_id = [0]
STATE = ARGS[ARGS.index("--state") + 1] if "--state" in ARGS else None
# session id -> {"prompts": [[text, ...], ...], "model": id}
sessions = {}
if STATE and os.path.exists(STATE):
    with open(STATE) as f:
        sessions = json.load(f)
MODELS = [{"modelId": "fast-model", "name": "Fast"}, {"modelId": "smart-model", "name": "Smart"}]


def save_state():
    if STATE:
        with open(STATE, "w") as f:
            json.dump(sessions, f)


def send(message):
    message["jsonrpc"] = "2.0"
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def read():
    if queue:
        return queue.pop(0)
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    return json.loads(line)


def ask(method, params):
    """Send request METHOD and return its (result, error), queueing other messages."""
    next_id[0] += 1
    ident = f"agent-{next_id[0]}"
    send({"id": ident, "method": method, "params": params})
    held = []
    while True:
        line = sys.stdin.readline()
        if not line:
            sys.exit(0)
        message = json.loads(line)
        if message.get("id") == ident and "method" not in message:
            queue.extend(held)
            return message.get("result"), message.get("error")
        held.append(message)


def update(session, body):
    send({"method": "session/update", "params": {"sessionId": session, "update": body}})


def chunk(session, text, kind="agent_message_chunk"):
    update(session, {"sessionUpdate": kind, "content": {"type": "text", "text": text}})


def wait_for_cancel(session):
    while True:
        message = read()
        if message.get("method") == "session/cancel" and \
                message.get("params", {}).get("sessionId") == session:
            return
        if "id" in message and "method" in message:
            send({"id": message["id"], "error": {"code": -32000, "message": "busy"}})


def tour(session):
    chunk(session, "Thinking it over", "agent_thought_chunk")
    chunk(session, "Hello ")
    chunk(session, "world")
    update(session, {"sessionUpdate": "tool_call", "toolCallId": "call-1", "title": "Read notes",
                     "kind": "read", "status": "pending", "rawInput": {"path": "/w/notes.txt"}})
    update(session, {"sessionUpdate": "tool_call_update", "toolCallId": "call-1",
                     "status": "completed", "rawOutput": {"lines": 2}})
    update(session, {"sessionUpdate": "plan", "entries": [
        {"content": "Read the notes", "priority": "high", "status": "completed"},
        {"content": "Write the summary", "priority": "medium", "status": "pending"}]})
    update(session, {"sessionUpdate": "usage_update", "used": None, "size": 200000,
                     "cost": {"amount": 0.25, "currency": "USD"}})
    update(session, {"sessionUpdate": "available_commands_update", "availableCommands": [
        {"name": "review", "description": "Review the diff", "input": {"hint": "[path]"}},
        {"name": "init", "description": "Write a CLAUDE.md", "input": None}]})
    update(session, {"sessionUpdate": "current_mode_update", "currentModeId": "plan"})
    update(session, {"sessionUpdate": "future_thing", "detail": 7})
    answers = {}
    answers["read"] = ask("fs/read_text_file",
                          {"sessionId": session, "path": "/w/notes.txt", "line": 2, "limit": 1})
    answers["read_missing"] = ask("fs/read_text_file",
                                  {"sessionId": session, "path": "/w/missing.txt"})
    answers["write"] = ask("fs/write_text_file",
                           {"sessionId": session, "path": "/w/out.txt", "content": "written"})
    created, _ = ask("terminal/create", {"sessionId": session, "command": "echo",
                                         "args": ["hi"], "outputByteLimit": 1000})
    terminal = (created or {}).get("terminalId")
    answers["create"] = created
    answers["output"] = ask("terminal/output", {"sessionId": session, "terminalId": terminal})
    answers["wait"] = ask("terminal/wait_for_exit", {"sessionId": session, "terminalId": terminal})
    answers["kill"] = ask("terminal/kill", {"sessionId": session, "terminalId": terminal})
    answers["release"] = ask("terminal/release", {"sessionId": session, "terminalId": terminal})
    answers["permission"] = ask("session/request_permission", {
        "sessionId": session,
        "toolCall": {"toolCallId": "call-2", "title": "Run rm", "kind": "execute"},
        "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "no", "name": "Reject", "kind": "reject_once"}]})
    answers["bad_params"] = ask("fs/read_text_file", {"sessionId": session})
    answers["unknown"] = ask("_fake/unknown", {"sessionId": session})
    chunk(session, json.dumps(answers))
    return {"stopReason": "end_turn",
            "usage": {"inputTokens": 12, "outputTokens": 7, "totalTokens": 19,
                      "cachedReadTokens": 3, "cachedWriteTokens": 0}}


def ask_hang(session, request_id):
    next_id[0] += 1
    ident = f"agent-{next_id[0]}"
    send({"id": ident, "method": "session/request_permission", "params": {
        "sessionId": session,
        "toolCall": {"toolCallId": "call-9", "title": "Edit main.rs", "kind": "edit"},
        "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"}]}})
    outcome = None
    cancelled = False
    while outcome is None or not cancelled:
        message = read()
        if message.get("id") == ident and "method" not in message:
            outcome = json.dumps(message.get("result") or message.get("error"))
        elif message.get("method") == "session/cancel":
            cancelled = True
    chunk(session, f"permission: {outcome}")
    send({"id": request_id, "result": {"stopReason": "cancelled"}})


def leave(session):
    near = subprocess.Popen(["sleep", "300"])
    far = subprocess.Popen(["setsid", "sleep", "300"])
    chunk(session, json.dumps({"pids": [near.pid, far.pid]}))
    return {"stopReason": "end_turn"}


def read_file(session, path):
    result, error = ask("fs/read_text_file", {"sessionId": session, "path": path})
    chunk(session, "read: " + (result["content"] if result else error["message"]))


def write_file(session, path, text):
    result, error = ask("fs/write_text_file",
                        {"sessionId": session, "path": path, "content": text})
    chunk(session, "write: ok" if error is None else "write: " + error["message"])


def terminal(session, limit, command):
    params = {"sessionId": session, "command": "sh", "args": ["-c", command]}
    if limit:
        params["outputByteLimit"] = limit
    answers = {}
    created, error = ask("terminal/create", params)
    answers["create"] = created or error
    ident = (created or {}).get("terminalId")
    if ident:
        of = {"sessionId": session, "terminalId": ident}
        answers["wait"] = ask("terminal/wait_for_exit", of)[0]
        answers["output"] = ask("terminal/output", of)[0]
        answers["release"] = ask("terminal/release", of)[0]
    chunk(session, json.dumps(answers))


def terminal_kill(session):
    answers = {}
    created, error = ask("terminal/create",
                         {"sessionId": session, "command": "sleep", "args": ["30"]})
    answers["create"] = created or error
    ident = (created or {}).get("terminalId")
    if ident:
        of = {"sessionId": session, "terminalId": ident}
        answers["running"] = ask("terminal/output", of)[0]
        time.sleep(0.5)
        answers["kill"] = ask("terminal/kill", of)[0]
        answers["wait"] = ask("terminal/wait_for_exit", of)[0]
        answers["output"] = ask("terminal/output", of)[0]
        answers["release"] = ask("terminal/release", of)[0]
        answers["after"] = ask("terminal/output", of)[1]
    chunk(session, json.dumps(answers))


def ask_write(session):
    chunk(session, "I should write the file.", "agent_thought_chunk")
    meta = {"claudeCode": {"toolName": "Write"}}
    update(session, {"sessionUpdate": "tool_call", "toolCallId": "call-w", "title": "Write x.txt",
                     "kind": "edit", "status": "pending", "_meta": meta,
                     "rawInput": {"file_path": "x.txt", "content": "x"}})
    result, error = ask("session/request_permission", {
        "sessionId": session,
        "toolCall": {"toolCallId": "call-w", "title": "Write x.txt", "kind": "edit",
                     "rawInput": {"file_path": "x.txt", "content": "x"}, "_meta": meta},
        "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "reject", "name": "Reject", "kind": "reject_once"}]})
    outcome = (result or {}).get("outcome") or {}
    chosen = outcome.get("optionId") or outcome.get("outcome") or json.dumps(error)
    if chosen == "allow":
        update(session, {"sessionUpdate": "tool_call_update", "toolCallId": "call-w",
                         "status": "completed", "content": [
                             {"type": "content", "content": {"type": "text", "text": "wrote x.txt"}}]})
    else:
        update(session, {"sessionUpdate": "tool_call_update", "toolCallId": "call-w",
                         "status": "failed", "content": [
                             {"type": "content", "content": {"type": "text", "text": "rejected"}}]})
    chunk(session, "permission: " + chosen)


def prompt(message):
    params = message["params"]
    session = params["sessionId"]
    blocks = params.get("prompt") or []
    texts = [b.get("text", "") for b in blocks if b.get("type") == "text"]
    text = texts[-1] if texts else ""
    known = sessions.setdefault(session, {"prompts": [], "model": "fast-model"})
    earlier = list(known["prompts"])
    known["prompts"].append(texts)
    save_state()
    if text == "history":
        told = [p[-1] for p in earlier if p] + [t for t in texts[:-1] if t.startswith("[mevedel:")]
        chunk(session, " | ".join(told) + " [" + known["model"] + "]")
        send({"id": message["id"], "result": {"stopReason": "end_turn"}})
    elif text == "tour":
        send({"id": message["id"], "result": tour(session)})
    elif text == "hang":
        chunk(session, "waiting")
        wait_for_cancel(session)
        send({"id": message["id"], "result": {"stopReason": "cancelled"}})
    elif text == "ask-hang":
        ask_hang(session, message["id"])
    elif text == "crash":
        sys.stderr.write("fatal: the model backend went away\nbye\n")
        sys.stderr.flush()
        os._exit(3)
    elif text == "leave":
        send({"id": message["id"], "result": leave(session)})
    elif text == "leave-hang":
        leave(session)
        wait_for_cancel(session)
        os._exit(0)
    elif text.startswith("read "):
        read_file(session, text[5:])
        send({"id": message["id"], "result": {"stopReason": "end_turn"}})
    elif text.startswith("write "):
        path, _, body = text[6:].partition(" ")
        write_file(session, path, body)
        send({"id": message["id"], "result": {"stopReason": "end_turn"}})
    elif text.startswith("terminal "):
        limit, _, command = text[9:].partition(" ")
        terminal(session, int(limit), command)
        send({"id": message["id"], "result": {"stopReason": "end_turn"}})
    elif text == "terminal-kill":
        terminal_kill(session)
        send({"id": message["id"], "result": {"stopReason": "end_turn"}})
    elif text == "run-tool":
        meta = {"claudeCode": {"toolName": "Bash"}}
        update(session, {"sessionUpdate": "tool_call", "toolCallId": "call-b", "title": "ls",
                         "kind": "execute", "status": "pending", "_meta": meta,
                         "rawInput": {"command": "ls"}})
        update(session, {"sessionUpdate": "tool_call_update", "toolCallId": "call-b",
                         "status": "completed", "content": [
                             {"type": "content", "content": {"type": "text", "text": "file-a"}}]})
        chunk(session, "ran")
        send({"id": message["id"], "result": {"stopReason": "end_turn"}})
    elif text == "commands":
        update(session, {"sessionUpdate": "available_commands_update", "availableCommands": [
            {"name": "summarize", "description": "Summarize a file", "input": {"hint": "[path]"}},
            {"name": "init", "description": "Write a CLAUDE.md", "input": None},
            {"name": "review", "description": "Review the diff", "input": None}]})
        chunk(session, "listed")
        send({"id": message["id"], "result": {
            "stopReason": "end_turn",
            "usage": {"inputTokens": 12, "outputTokens": 7, "totalTokens": 22,
                      "cachedReadTokens": 3}}})
    elif text == "ask":
        ask_write(session)
        send({"id": message["id"], "result": {"stopReason": "end_turn"}})
    else:
        chunk(session, text)
        send({"id": message["id"], "result": {"stopReason": "end_turn"}})


def main():
    if "--die-at-start" in ARGS:
        sys.stderr.write("fake-agent: cannot start\nfake-agent: no configuration found\n")
        sys.stderr.flush()
        sys.exit(2)
    if "--ignore-term" in ARGS:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    version = 1
    if "--version" in ARGS:
        version = int(ARGS[ARGS.index("--version") + 1])
    sys.stderr.write("fake-agent: ready\n")
    sys.stderr.flush()
    while True:
        message = read()
        method = message.get("method")
        if method == "initialize":
            send({"id": message["id"], "result": {
                "protocolVersion": version,
                "agentCapabilities": {"loadSession": "--no-load" not in ARGS},
                "agentInfo": {"name": "fake-agent", "title": "Fake Agent", "version": "0.1"},
                "authMethods": [],
                "_meta": {"clientCapabilities": message["params"].get("clientCapabilities"),
                          "clientInfo": message["params"].get("clientInfo")}}})
        elif method == "session/new":
            name = f"sess-{len(sessions) + 1}"
            sessions[name] = {"prompts": [], "model": "fast-model"}
            save_state()
            send({"id": message["id"], "result": {
                "sessionId": name,
                "modes": {"currentModeId": "default", "availableModes": []},
                "models": {"availableModels": MODELS, "currentModelId": "fast-model"},
                "_meta": {"received": message["params"]}}})
        elif method == "session/load":
            session = message["params"]["sessionId"]
            if session not in sessions:
                send({"id": message["id"], "error": {
                    "code": -32002, "message": f"Resource not found: session {session}"}})
                continue
            for texts in sessions[session]["prompts"] or [["earlier question"]]:
                chunk(session, "\n".join(texts), "user_message_chunk")
                chunk(session, "earlier answer")
            send({"id": message["id"], "result": {
                "models": {"availableModels": MODELS,
                           "currentModelId": sessions[session]["model"]}}})
        elif method == "session/set_config_option":
            params = message["params"]
            known = sessions.get(params.get("sessionId"))
            if known is None or params.get("configId") != "model" or \
                    params.get("value") not in [m["modelId"] for m in MODELS]:
                send({"id": message["id"], "error": {
                    "code": -32602, "message": f"Invalid config option: {json.dumps(params)}"}})
                continue
            known["model"] = params["value"]
            save_state()
            send({"id": message["id"], "result": {"configOptions": []}})
        elif method == "session/prompt":
            prompt(message)
        elif "id" in message and method is not None:
            send({"id": message["id"], "error": {"code": -32601, "message": "Method not found"}})


if __name__ == "__main__":
    main()
