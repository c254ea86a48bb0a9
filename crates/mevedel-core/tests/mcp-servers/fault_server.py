#!/usr/bin/env python3
"""A scripted MCP stdio server for the core's MCP tests (stdlib only).

Usage: fault_server.py MODE

Modes:
  crash-at-start   write to stderr and exit 3 before reading anything
  hang             read requests, never answer (initialize times out)
  basic            answer; tools: echo, crash (exits 5 mid-call), slow
                   (progress every 50 ms, honours notifications/cancelled),
                   add_tool (adds a tool, sends tools/list_changed and
                   resources/list_changed); resources fault://note (text),
                   fault://empty (no content) and fault://blob (no text);
                   any other URI is an error
  many             like basic plus tool_000 .. tool_099
  big              like basic plus big, answering SIZE characters of
                   numbered lines (default 150000)
  grandchild       like basic, and starts `sleep 300` in its process group;
                   its pid goes to the file $FAULT_PID_FILE
  prompts          like basic plus prompts (greet: a required `name`, an
                   optional `greeting`; refuses the name "nobody") and the
                   tool add_prompt (adds a prompt, sends
                   prompts/list_changed)

$FAULT_LOG, when set, names a file that gets one line per notification
received (e.g. "cancelled 4 cancelled"), so tests can see what arrived.
"""
import json
import os
import subprocess
import sys
import threading
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "basic"
write_lock = threading.Lock()
cancelled = set()
extra_tools = []
extra_prompts = []


def send(message):
    with write_lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def log(line):
    path = os.environ.get("FAULT_LOG")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def tool(name, description, props=None, required=()):
    return {
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": props or {}, "required": list(required)},
    }


def tools():
    listed = [
        tool("echo", "Echo the message back.", {"message": {"type": "string"}}, ["message"]),
        tool("crash", "Exit in the middle of the call."),
        tool("slow", "Report progress until done or cancelled.", {"steps": {"type": "integer"}}),
        tool("add_tool", "Add a tool and announce the changed lists."),
        tool("fail", "Answer with isError."),
    ]
    if MODE == "big":
        listed.append(tool("big", "Answer a long text of numbered lines.",
                           {"size": {"type": "integer"}}))
    if MODE == "many":
        listed += [tool("tool_%03d" % i, "Generated tool number %d." % i,
                        {"n": {"type": "integer", "description": "any number"}})
                   for i in range(100)]
    if MODE == "prompts":
        listed.append(tool("add_prompt", "Add a prompt and announce the changed list."))
    return listed + extra_tools


def prompts():
    return [{"name": "greet", "description": "Greet someone.",
             "arguments": [{"name": "name", "description": "who", "required": True},
                           {"name": "greeting", "description": "how"}]}] + extra_prompts


def get_prompt(params):
    name = params.get("name")
    args = params.get("arguments") or {}
    if name == "greet":
        if "name" not in args:
            raise KeyError("missing argument name")
        if args["name"] == "nobody":
            raise KeyError("greet refuses to greet nobody")
        return {"description": "A greeting",
                "messages": [{"role": "user", "content": {
                    "type": "text",
                    "text": "%s, %s!" % (args.get("greeting", "Hello"), args["name"])}}]}
    if any(p["name"] == name for p in extra_prompts):
        return {"messages": [{"role": "user", "content": {"type": "text", "text": name}}]}
    raise KeyError("no prompt " + str(name))


def text(s, is_error=False):
    return {"content": [{"type": "text", "text": s}], "isError": is_error}


def big_text(size):
    lines = []
    n = 0
    total = 0
    while total < size:
        n += 1
        line = "line %06d of the big answer\n" % n
        lines.append(line)
        total += len(line)
    return "".join(lines)[:size - len("END OF THE BIG ANSWER")] + "END OF THE BIG ANSWER"


def slow(rid, params):
    steps = int(params.get("arguments", {}).get("steps", 100))
    token = params.get("_meta", {}).get("progressToken")
    for i in range(steps):
        if rid in cancelled:
            log("stopped %s" % rid)
            return
        if token is not None:
            send({"jsonrpc": "2.0", "method": "notifications/progress",
                  "params": {"progressToken": token, "progress": i + 1, "total": steps,
                             "message": "step %d" % (i + 1)}})
        time.sleep(0.05)
    send({"jsonrpc": "2.0", "id": rid, "result": text("done %d" % steps)})


def call(rid, params):
    name = params.get("name")
    args = params.get("arguments") or {}
    if name == "echo":
        return text("Echo: " + str(args.get("message")))
    if name == "crash":
        sys.stderr.write("fault server: crashing in the middle of a call\n")
        sys.stderr.flush()
        os._exit(5)
    if name == "slow":
        threading.Thread(target=slow, args=(rid, params), daemon=True).start()
        return None
    if name == "add_tool":
        extra_tools.append(tool("added_%d" % len(extra_tools), "Added at run time."))
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        send({"jsonrpc": "2.0", "method": "notifications/resources/list_changed"})
        return text("added")
    if name == "fail":
        return text("it went wrong", is_error=True)
    if name == "big" and MODE == "big":
        return text(big_text(int(args.get("size", 150000))))
    if name == "add_prompt" and MODE == "prompts":
        extra_prompts.append({"name": "added_%d" % len(extra_prompts)})
        send({"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"})
        return text("added")
    if name.startswith("tool_"):
        return text(name)
    raise KeyError(name)


def handle(message):
    method = message.get("method")
    rid = message.get("id")
    params = message.get("params") or {}
    if rid is None:
        if method == "notifications/cancelled":
            cancelled.add(params.get("requestId"))
            log("cancelled %s %s" % (params.get("requestId"), params.get("reason")))
        else:
            log("notification " + str(method))
        return
    if MODE == "hang":
        return
    if method == "initialize":
        result = {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                  "capabilities": {"tools": {"listChanged": True},
                                   "resources": {"listChanged": True}},
                  "serverInfo": {"name": "fault-server", "version": "1.0"}}
        if MODE == "prompts":
            result["capabilities"]["prompts"] = {"listChanged": True}
        log("initialize %s %s" % (params.get("protocolVersion"), json.dumps(params.get("clientInfo"))))
    elif method == "prompts/list" and MODE == "prompts":
        result = {"prompts": prompts()}
    elif method == "prompts/get" and MODE == "prompts":
        try:
            result = get_prompt(params)
        except KeyError as e:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": e.args[0]}})
            return
    elif method == "tools/list":
        result = {"tools": tools()}
    elif method == "resources/list":
        result = {"resources": [{"uri": "fault://note", "name": "note", "mimeType": "text/plain"}]}
    elif method == "resources/read":
        uri = params.get("uri")
        if uri == "fault://note":
            result = {"contents": [{"uri": uri, "mimeType": "text/plain", "text": "a note"}]}
        elif uri == "fault://empty":
            result = {"contents": []}
        elif uri == "fault://blob":
            result = {"contents": [{"uri": uri, "mimeType": "image/png", "blob": "iVBORw0KGgo="}]}
        else:
            send({"jsonrpc": "2.0", "id": rid,
                  "error": {"code": -32002, "message": "resource not found: %s" % uri}})
            return
    elif method == "ping":
        result = {}
    elif method == "tools/call":
        try:
            result = call(rid, params)
        except KeyError:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "no such tool"}})
            return
        if result is None:
            return
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "method not found"}})
        return
    send({"jsonrpc": "2.0", "id": rid, "result": result})


def main():
    if MODE == "crash-at-start":
        sys.stderr.write("fault server: cannot open the database\nfault server: giving up\n")
        sys.stderr.flush()
        sys.exit(3)
    if MODE == "grandchild":
        child = subprocess.Popen(["sleep", "300"])
        with open(os.environ["FAULT_PID_FILE"], "w") as f:
            f.write(str(child.pid))
    sys.stderr.write("fault server %s ready\n" % MODE)
    sys.stderr.flush()
    for line in sys.stdin:
        line = line.strip()
        if line:
            handle(json.loads(line))


main()
