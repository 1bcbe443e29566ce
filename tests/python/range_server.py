"""An HTTP server on 127.0.0.1 with Range support (as real servers and hubs have), serving
bytes from memory by path, for the tests that read URLs."""

import contextlib
import http.server
import threading


class RangeHandler(http.server.BaseHTTPRequestHandler):
    files: dict = {}
    # Body bytes sent per path: a late count from another test's file never lands here.
    sent: dict = {}

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = self.files.get(self.path)
        if body is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes="):
            a, b = rng[6:].split("-")
            a, b = int(a), min(int(b), len(body) - 1)
            if a >= len(body):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(body)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            part = body[a:b + 1]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {a}-{b}/{len(body)}")
        else:
            part = body
            self.send_response(200)
        # Counted before the bytes go out: the client may act on them before this thread
        # runs again.
        self.sent[self.path] = self.sent.get(self.path, 0) + len(part)
        self.send_header("Content-Length", str(len(part)))
        self.end_headers()
        self.wfile.write(part)



@contextlib.contextmanager
def serve(files, handler=None):
    """Serves `files` ({"/path": bytes}) until the block ends, with `handler` (RangeHandler
    or a subclass); yields the base URL."""
    handler = handler or RangeHandler
    handler.files = files
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()
