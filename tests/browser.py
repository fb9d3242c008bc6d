"""Drive headless Chromium over the DevTools protocol on a pipe.

Chromium started with --remote-debugging-pipe reads protocol commands on its
fd 3 and writes replies and events on fd 4, each a JSON message ended by a NUL
byte: no websocket library is needed, only the standard library. Used by the
HTML report's tests (tests/scenarios/html_report.sh) and its benchmark
(bench/html_load.py).

    with Browser() as b:
        b.open("file:///tmp/run.html")
        b.eval("document.title")
        b.click(100, 200)
        png = b.screenshot()
"""
import base64
import fcntl
import json
import os
import shutil
import struct
import subprocess
import tempfile
import time
import zlib


def chromium_path():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


class BrowserError(Exception):
    pass


class Browser:
    def __init__(self, width=1280, height=900, timeout=60):
        self.width, self.height, self.timeout = width, height, timeout
        self.exe = chromium_path()
        if not self.exe:
            raise BrowserError("no chromium on PATH (apt-get install chromium)")
        self.profile = tempfile.mkdtemp(prefix="sb-chromium.")
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()

        def fds():
            # the protocol's fds 3 (commands in) and 4 (replies out) in the child;
            # dup2 makes them inheritable, every other pipe end closes at exec
            # (moved above 4 first: either end may be fd 3 or 4 already)
            r, w = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
            os.dup2(r, 3)
            os.dup2(w, 4)

        self.stderr = open(os.path.join(self.profile, "stderr"), "w")
        self.proc = subprocess.Popen(
            [self.exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--disable-sync",
             "--disable-background-networking", "--disable-component-update",
             "--mute-audio", "--hide-scrollbars", "--remote-debugging-pipe",
             "--user-data-dir=" + self.profile, "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.stderr,
            preexec_fn=fds, close_fds=False)
        os.close(to_child_r)
        os.close(from_child_w)
        self.buf = b""
        self.next_id = 0
        self.events = []       # (method, params) of the page's session
        self.session = None
        self.errors = []       # console errors and uncaught exceptions
        self.requests = []     # URLs the page asked for
        tid = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": tid, "flatten": True}
                                 )["sessionId"]
        for dom in ("Page.enable", "Runtime.enable", "Log.enable", "Network.enable"):
            self.call(dom)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    # ---- the protocol ----
    def _send(self, msg):
        data = json.dumps(msg).encode() + b"\0"
        while data:
            n = os.write(self.to_child, data)
            data = data[n:]

    def _recv(self, deadline):
        while b"\0" not in self.buf:
            if time.monotonic() > deadline:
                raise BrowserError("no reply from chromium in %d s" % self.timeout)
            import select
            r, _, _ = select.select([self.from_child], [], [], 0.5)
            if not r:
                if self.proc.poll() is not None:
                    raise BrowserError("chromium exited %s" % self.proc.returncode)
                continue
            chunk = os.read(self.from_child, 1 << 20)
            if not chunk:
                raise BrowserError("chromium closed the pipe")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def _event(self, m):
        method, p = m.get("method"), m.get("params", {})
        self.events.append((method, p))
        if method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            self.errors.append("exception: %s %s" % (d.get("text", ""),
                               d.get("exception", {}).get("description", "")))
        elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            self.errors.append("console.%s: %s" % (p.get("type"), " ".join(
                str(a.get("value", a.get("description", ""))) for a in p.get("args", []))))
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            self.errors.append("log: %s" % p["entry"].get("text", ""))
        elif method == "Network.requestWillBeSent":
            self.requests.append(p.get("request", {}).get("url", ""))

    def call(self, method, params=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if self.session:
            msg["sessionId"] = self.session
        self._send(msg)
        deadline = time.monotonic() + self.timeout
        while True:
            m = self._recv(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise BrowserError("%s: %s" % (method, m["error"].get("message")))
                return m.get("result", {})
            if "method" in m:
                self._event(m)

    def wait_event(self, method, timeout=None):
        deadline = time.monotonic() + (timeout or self.timeout)
        for i, (mm, p) in enumerate(self.events):
            if mm == method:
                del self.events[i]
                return p
        while True:
            m = self._recv(deadline)
            if "method" in m:
                self._event(m)
                if m["method"] == method:
                    self.events.pop()
                    return m.get("params", {})

    # ---- what the tests use ----
    def open(self, url):
        self.events = [e for e in self.events if e[0] != "Page.loadEventFired"]
        self.call("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def eval(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True,
                                           "awaitPromise": True})
        if "exceptionDetails" in r:
            raise BrowserError("eval %r: %s" % (expr, r["exceptionDetails"].get("text")))
        return r.get("result", {}).get("value")

    def wait_for(self, expr, timeout=30):
        """until expr is true in the page; its last value"""
        deadline = time.monotonic() + timeout
        while True:
            v = self.eval(expr)
            if v or time.monotonic() > deadline:
                return v
            time.sleep(0.02)

    def mouse(self, kind, x, y, button="none", clicks=0):
        self.call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": button,
                                               "clickCount": clicks,
                                               "buttons": 1 if kind == "mousePressed" else 0})

    def move(self, x, y):
        self.mouse("mouseMoved", x, y)

    def click(self, x, y):
        self.mouse("mouseMoved", x, y)
        self.mouse("mousePressed", x, y, "left", 1)
        self.mouse("mouseReleased", x, y, "left", 1)

    def screenshot(self, full=False):
        p = {"format": "png"}
        if full:
            m = self.call("Page.getLayoutMetrics")
            cs = m.get("cssContentSize") or m.get("contentSize")
            p["clip"] = {"x": 0, "y": 0, "width": cs["width"], "height": cs["height"], "scale": 1}
            p["captureBeyondViewport"] = True
        return base64.b64decode(self.call("Page.captureScreenshot", p)["data"])

    def close(self):
        try:
            self.call("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.to_child)
        os.close(self.from_child)
        self.stderr.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


def png_pixels(png):
    """(width, height, rows of RGB(A) tuples' bytes) of an 8-bit RGB or RGBA PNG."""
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, w = 8, b"", None
    while pos < len(png):
        n, kind = struct.unpack(">I4s", png[pos:pos + 8])
        data = png[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", data[:10])
            if depth != 8 or ctype not in (2, 6):
                raise ValueError("PNG colour type %d depth %d" % (ctype, depth))
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += data
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(h):
        f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + ((a + b) >> 1)) & 255
            elif f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def png_colours(png, step=4):
    """The distinct colours of a PNG, sampled every step pixels each way."""
    w, h, bpp, rows = png_pixels(png)
    seen = set()
    for y in range(0, h, step):
        r = rows[y]
        for x in range(0, w, step):
            seen.add(r[x * bpp:x * bpp + 3])
    return seen
