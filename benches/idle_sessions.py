"""Memory per idle MCP session of any streamable-HTTP server, with raw HTTP (stdlib only).

Opens N sessions (initialize, then notifications/initialized), keeps them open, and reads the
server's VmRSS before and after. With --one-connection every session shares one keep-alive
connection, which separates a session's own cost from its connection's.

    python3 benches/idle_sessions.py --port 18300 --pid "$(pgrep -f echo_server)" --sessions 1000
"""

import argparse
import json
import re
import socket
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def post(sock, port, body, session=None):
    """POSTs one JSON-RPC message to /mcp and reads the whole answer; the session id it names."""
    payload = json.dumps(body).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nContent-Length: {len(payload)}\r\n"
    )
    if session:
        head += f"Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-06-18\r\n"
    sock.sendall(head.encode() + b"\r\n" + payload)
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, rest = data.split(b"\r\n\r\n", 1)
    length = re.search(rb"(?i)content-length: *(\d+)", head)
    if length:
        while len(rest) < int(length.group(1)):
            rest += sock.recv(65536)
    elif b"chunked" in head.lower():
        while not rest.endswith(b"0\r\n\r\n"):
            rest += sock.recv(65536)
    named = re.search(rb"(?i)mcp-session-id: *([^\r\n]+)", head)
    return named.group(1).decode() if named else None


def main():
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--port", type=int, required=True)
    args.add_argument("--pid", type=int, required=True, help="the server's process")
    args.add_argument("--sessions", type=int, default=1000)
    args.add_argument("--one-connection", action="store_true")
    opts = args.parse_args()
    time.sleep(0.5)
    before = rss_kib(opts.pid)
    shared = socket.create_connection(("127.0.0.1", opts.port)) if opts.one_connection else None
    kept = []
    for _ in range(opts.sessions):
        sock = shared or socket.create_connection(("127.0.0.1", opts.port))
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "idle", "version": "1"}}
        session = post(sock, opts.port, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        if not session:
            raise SystemExit("the server named no session")
        post(sock, opts.port, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        kept.append(sock)
    time.sleep(2)
    after = rss_kib(opts.pid)
    per_session_kb = (after - before) * 1024 / opts.sessions / 1000
    print(f"RSS {before} KiB, with {opts.sessions} sessions {after} KiB: {per_session_kb:.1f} KB per session")


if __name__ == "__main__":
    main()
