"""A JSON-RPC endpoint on 127.0.0.1 that answers badly, in one of several ways."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODES = ("html", "rpc_error", "bad_block", "http_500", "short_batch")


class JunkNode:
    def __init__(self, mode: str, *, chain_id: int = 31337):
        assert mode in MODES
        self.mode = mode
        self.chain_id = chain_id
        self.requests = 0
        self._server: ThreadingHTTPServer | None = None

    def answer(self, call: dict):
        method = call.get("method")
        if self.mode == "rpc_error":
            return {"jsonrpc": "2.0", "id": call.get("id"), "error": {"code": -32000, "message": "header not found"}}
        if method == "eth_chainId":
            result = hex(self.chain_id)
        elif method == "eth_getBlockByNumber":
            result = {"number": "0xzz", "hash": "0x12", "timestamp": "yesterday", "transactions": "none"}
        else:
            result = "0x1"
        return {"jsonrpc": "2.0", "id": call.get("id"), "result": result}

    def start(self) -> "JunkNode":
        node = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                node.requests += 1
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"null")
                if node.mode == "http_500":
                    self.send_response(500)
                    self.end_headers()
                    self.wfile.write(b"Internal Server Error")
                    return
                if node.mode == "html":
                    payload = b"<html><body>502 Bad Gateway</body></html>"
                elif isinstance(body, list):
                    answers = [node.answer(c) for c in body]
                    payload = json.dumps(answers[:-1] if node.mode == "short_batch" else answers).encode()
                else:
                    payload = json.dumps(node.answer(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format, *args):  # noqa: A002
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v3/SECRETKEY123"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
