"""The watcher's web page (`epub2audio watch IN --out OUT --web [HOST:]PORT`): a front door over
the watcher's own queue, on Starlette and uvicorn (the `web` extra).

What it does, and nothing more:
- an upload is written under a hidden `.part` name in IN_DIR (which the scanner ignores), its type
  told by its bytes (book/formats.py), then linked to a free name: the scanner finds it as it finds
  any arrival, so a partial upload never becomes a job;
- the queue is WatchQueue's: the page lists it, and Cancel and Retry are requests written into it
  (the converter stops a cancelled book at its next progress event);
- live progress is the engine's own progress events, kept by hub.Hub, sent as server-sent events;
- a book's plan is what `--list-chapters --progress json` says of it (book/listing.py);
- downloads are the files the watcher wrote for a finished book, found from the queue's record:
  the client names a book by its SHA-256 and a kind, never a path;
- voices are the catalogue's; "try" says a short text with one of them (voices/trial.py).

Security: it binds to 127.0.0.1 unless told otherwise. Any other address needs a token (config.toml
`web_token`, else a new one printed once at start): a request without it gets 401. On a loopback
address only a loopback Host header is served (a web site cannot reach the page by DNS rebinding),
and every request that changes something must carry the X-Epub2audio header, which no other site's
page can send without a CORS preflight this server never grants.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import os
import re
import secrets
import socket
import sys
import tempfile
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

from ..book.formats import BOOK_SUFFIXES, KINDS, kind_of_bytes
from ..errors import InputError
from .converter import move_back
from .names import numbered_names

STATIC = Path(__file__).with_name("static")
DEFAULT_PORT = 8080
DEFAULT_MAX_UPLOAD_MB = 500
TOKEN_COOKIE = "epub2audio_token"
WRITE_HEADER = "x-epub2audio"
NAME_HEADER = "x-epub2audio-name"
TRY_TEXT_LIMIT = 300
MEDIA_TYPES = {".m4b": "audio/mp4", ".mp3": "audio/mpeg", ".opus": "audio/ogg", ".epub": "application/epub+zip",
               ".srt": "application/x-subrip", ".vtt": "text/vtt"}


@dataclass
class WebSettings:
    host: str
    port: int
    token: str | None  # None: no token needed (a loopback address and none configured)
    max_upload: int  # bytes

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    def url(self, port: int | None = None) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port if port is None else port}/"


def text(name: str | None) -> str | None:
    """A file name as valid text: one that is not UTF-8 holds lone surrogates, shown as U+FFFD."""
    return None if name is None else name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_address(text: str) -> tuple[str, int]:
    """'8080' → 127.0.0.1:8080; 'HOST:PORT'; '[::1]:8080'."""
    text = str(text).strip()
    host, port = "127.0.0.1", text
    match = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\]:(\d+)|([^:\[\]]+):(\d+)|(\d+)", text)
    if not match:
        raise InputError(f"--web: {text!r} is not [HOST:]PORT, e.g. 8080 or 0.0.0.0:8080")
    if match.group(1) or match.group(3):
        host, port = match.group(1) or match.group(3), match.group(2) or match.group(4)
    number = int(port)
    if not 0 <= number <= 65535:
        raise InputError(f"--web: port {number} is not between 0 and 65535")
    return host, number


def web_settings(flag: str | None, config: dict) -> WebSettings | None:
    """--web over config.toml's `web`; None when neither asks for the page."""
    address = flag if flag is not None else config.get("web")
    if address in (None, "", False):
        return None
    host, port = parse_address(str(address))
    token = config.get("web_token")
    if token is not None and (not isinstance(token, str) or len(token) < 16):
        raise InputError("setting web_token must be a text of at least 16 characters")
    if token is None and not is_loopback(host):
        token = secrets.token_urlsafe(24)
    try:
        megabytes = float(config.get("web_max_upload_mb", DEFAULT_MAX_UPLOAD_MB))
    except (TypeError, ValueError):
        raise InputError("setting web_max_upload_mb must be a number") from None
    return WebSettings(host, port, token, int(megabytes * 1024 * 1024))


def check_installed() -> None:
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise InputError("--web needs the web page's packages: pip install 'epub2audio[web]'") from None


# ----------------------------------------------------------------------------------------------
# What the page acts on


@dataclass
class Door:
    """The watcher's queue (a connection of its own), its live view, and a way to wake the converter."""
    in_dir: Path
    out_dir: Path
    queue: object  # WatchQueue
    hub: object  # Hub
    options: object  # render.ConvertOptions: the watcher's own, for plans
    wake: object = lambda: None
    lock: threading.Lock = field(default_factory=threading.Lock)
    plans: dict = field(default_factory=dict)
    trying: threading.Lock = field(default_factory=threading.Lock)

    def books(self) -> list[dict]:
        with self.lock:
            rows = self.queue.books()
        rows.sort(key=lambda b: {"converting": 0, "queued": 1}.get(b.state, 2))  # else in queue order
        return [self._shown(b) for b in rows]

    def _shown(self, book) -> dict:
        state = "cancelled" if book.state == "failed" and book.error_kind == "cancelled" else book.state
        shown = {"id": book.sha256, "name": text(book.name), "state": state, "output": text(book.output),
                 "error": None if state == "cancelled" else text(book.error), "attempts": book.attempts,
                 "live": self.hub.live(book.sha256) if state == "converting" else {},
                 "files": {kind: f"/files/{book.sha256}/{kind}" for kind in self.files(book)}}
        if book.cancel and state == "converting":
            shown["state"] = "cancelling"
        return shown

    def book(self, sha256: str):
        if not re.fullmatch(r"[0-9a-f]{64}", sha256):
            return None
        with self.lock:
            return self.queue.book(sha256)

    def files(self, book) -> dict[str, Path]:
        """kind → path of what the watcher wrote for a finished book, each inside OUT_DIR."""
        if book.state != "done":
            return {}
        audio = self.inside_out(book.written or book.output)
        if audio is None:
            return {}
        found = {"audio": audio}
        for kind, path in (("readalong", audio.with_suffix(".readalong.epub")), ("srt", audio.with_suffix(".srt")),
                           ("vtt", audio.with_suffix(".vtt"))):
            if self.inside_out(path) is not None:
                found[kind] = path
        return found

    def inside_out(self, relative) -> Path | None:
        """OUT_DIR/relative if that is a regular file inside OUT_DIR (links resolved), else None."""
        if not relative:
            return None
        root = self.out_dir.resolve()
        try:
            path = (root / relative).resolve()
        except (OSError, RuntimeError):
            return None
        if not path.is_relative_to(root) or not path.is_file():
            return None
        return path

    def cancel(self, sha256: str) -> str | None:
        with self.lock:
            before = self.queue.cancel(sha256)
        self.hub.logged("cancel", "", "", sha256)
        return before

    def retry(self, sha256: str) -> bool:
        with self.lock:
            book = self.queue.book(sha256)
            if book is None or book.state != "failed":
                return False
            source = move_back(self.in_dir, book.source)  # a broken book moved to failed/ comes back
            done = self.queue.retry(sha256, source)
        if done:
            self.hub.logged("retry", "", "", sha256)
            self.wake()
        return done

    def plan(self, sha256: str) -> dict | None:
        from ..book.epub import load_book
        from ..book.listing import listing
        from ..render import reading_for

        book = self.book(sha256)
        if book is None:
            return None
        if sha256 not in self.plans:
            if not book.source.is_file():
                raise InputError(f"{book.name}: the file is no longer in the folder")
            reading = reading_for(book.source, self.options)
            read = load_book(book.source, notes=reading.notes, keep_front_matter=reading.keep_front_matter,
                             image_alt=reading.image_alt)
            self.plans[sha256] = listing(read, preview=True)
        return self.plans[sha256]


# ----------------------------------------------------------------------------------------------
# Uploads


def upload_stem(name: str) -> str:
    """A file name from the name the client gave: its last part, printable, no leading dot (the
    watcher ignores hidden files), without a book suffix (the content gives that), at most 120 bytes."""
    name = re.split(r"[/\\]", name)[-1]
    name = "".join(c for c in name if c.isprintable() and c not in '<>:"|?*')
    lower = name.lower()
    for suffix in sorted(BOOK_SUFFIXES, key=len, reverse=True):
        if lower.endswith(suffix):
            name = name[: -len(suffix)]
            break
    name = name.strip().lstrip(".").strip().rstrip(". ")
    while len(name.encode("utf-8")) > 120:
        name = name[:-1]
    return name or "book"


def upload_kind(path: Path, client_name: str) -> str | None:
    """The book's kind by its bytes; a zip must really be an EPUB, a DOCX or an ODT."""
    with open(path, "rb") as f:
        head = f.read(1 << 16)
    kind = kind_of_bytes(head, path)
    if kind == "mobi" and client_name.lower().endswith(".azw3"):
        kind = "azw3"
    if kind == "epub":
        try:
            with zipfile.ZipFile(path) as archive:
                names = set(archive.namelist())
                mimetype = archive.read("mimetype")[:64].strip() if "mimetype" in names else b""
        except Exception:
            return None
        if mimetype != b"application/epub+zip" and "META-INF/container.xml" not in names:
            return None
    return kind


def place_upload(in_dir: Path, partial: Path, stem: str, suffix: str) -> Path:
    """Give the finished upload a free name in IN_DIR without ever replacing a file there."""
    for name in numbered_names(stem, suffix):
        target = in_dir / name
        try:
            os.link(partial, target)  # fails if the name exists: no race with another arrival
        except FileExistsError:
            continue
        except OSError:  # a file system without hard links (some network shares)
            if target.exists():
                continue
            os.replace(partial, target)
            return target
        partial.unlink()
        return target
    raise AssertionError("unreachable")


# ----------------------------------------------------------------------------------------------
# The application


class Guard:
    """Token, Host and write-header checks in front of every route (plain ASGI, so that the event
    stream passes through unbuffered)."""

    def __init__(self, app, settings: WebSettings, port_of=lambda: None):
        self.app, self.settings, self.port_of = app, settings, port_of

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        from starlette.requests import Request
        from starlette.responses import PlainTextResponse, RedirectResponse

        request = Request(scope)
        if self.settings.loopback and not self._loopback_host(request.headers.get("host", "")):
            return await PlainTextResponse("403: this page answers on its loopback address only",
                                           status_code=403)(scope, receive, send)
        token = self.settings.token
        if token is not None:
            given = request.query_params.get("token")
            if given is not None and request.url.path == "/" and _same(given, token):
                response = RedirectResponse("/", status_code=303)  # the token leaves the address bar
                response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
                return await response(scope, receive, send)
            header = request.headers.get("authorization", "")
            offered = header[7:] if header.lower().startswith("bearer ") else request.cookies.get(TOKEN_COOKIE, "")
            if not _same(offered, token):
                return await PlainTextResponse(
                    "401: this page needs its token: open the address with ?token= that the watcher printed "
                    "at start (or the web_token in config.toml)", status_code=401,
                    headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
        if request.method not in ("GET", "HEAD") and request.headers.get(WRITE_HEADER) != "1":
            return await PlainTextResponse("403: a change needs the X-Epub2audio: 1 header (the page sends it)",
                                           status_code=403)(scope, receive, send)
        return await self.app(scope, receive, send)

    def _loopback_host(self, host: str) -> bool:
        name = re.sub(r":\d+$", "", host).strip("[]").lower()
        return is_loopback(name) or name == self.settings.host.lower()


def _same(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("utf-8"))


def create_app(door: Door, settings: WebSettings):
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    def problem(status: int, message: str) -> JSONResponse:
        return JSONResponse({"error": " ".join(str(message).split())}, status_code=status)

    async def index(request):
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})

    async def state(request):
        return JSONResponse({"books": await run_in_threadpool(door.books),
                             "max_upload": settings.max_upload})

    async def events(request):
        async def stream():
            seen, last = None, 0.0
            while not door_closing.is_set():
                version = door.hub.version
                if version != seen:
                    seen, last = version, time.monotonic()
                    books = await run_in_threadpool(door.books)
                    yield f"event: state\ndata: {json.dumps({'books': books}, ensure_ascii=False)}\n\n"
                elif time.monotonic() - last > 15:
                    last = time.monotonic()
                    yield ": still here\n\n"  # keeps proxies from closing an idle stream
                if await request.is_disconnected():
                    return
                await asyncio.sleep(0.25)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    async def upload(request):
        client_name = unquote(request.headers.get(NAME_HEADER, ""))
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > settings.max_upload:
            return problem(413, f"the book is larger than the limit ({settings.max_upload // (1024 * 1024)} MB)")
        fd, name = tempfile.mkstemp(prefix=".upload-", suffix=".part", dir=door.in_dir)
        partial = Path(name)
        try:
            size = 0
            with os.fdopen(fd, "wb") as f:
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > settings.max_upload:
                        return problem(413, f"the book is larger than the limit "
                                            f"({settings.max_upload // (1024 * 1024)} MB)")
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
            if size == 0:
                return problem(400, "the upload is empty")
            kind = await run_in_threadpool(upload_kind, partial, client_name)
            if kind is None:
                return problem(415, "not a book: the page takes EPUB, MOBI, AZW3, DOCX, FB2, ODT, RTF, TXT, "
                                    "HTML and PDF files (told by their content, not their name)")
            suffix = ".epub" if kind == "epub" else KINDS[kind][0]
            placed = await run_in_threadpool(place_upload, door.in_dir, partial, upload_stem(client_name), suffix)
            door.hub.logged("upload", placed.name, "", None)
            return JSONResponse({"name": placed.name, "kind": kind, "bytes": size}, status_code=201)
        finally:
            partial.unlink(missing_ok=True)

    async def plan(request):
        sha256 = request.path_params["sha256"]
        try:
            found = await run_in_threadpool(door.plan, sha256)
        except InputError as error:
            return problem(422, str(error))
        return JSONResponse(found) if found is not None else problem(404, "no such book in the queue")

    async def cancel(request):
        sha256 = request.path_params["sha256"]
        if door.book(sha256) is None:
            return problem(404, "no such book in the queue")
        before = await run_in_threadpool(door.cancel, sha256)
        if before not in ("queued", "converting"):
            return problem(409, f"the book is {before}: there is nothing to cancel")
        return JSONResponse({"was": before})

    async def retry(request):
        sha256 = request.path_params["sha256"]
        if door.book(sha256) is None:
            return problem(404, "no such book in the queue")
        if not await run_in_threadpool(door.retry, sha256):
            return problem(409, "only a failed or cancelled book can be retried")
        return JSONResponse({"state": "queued"})

    async def download(request):
        book = door.book(request.path_params["sha256"])
        path = door.files(book).get(request.path_params["kind"]) if book else None
        if path is None:
            return problem(404, "no such file")
        return FileResponse(path, media_type=MEDIA_TYPES.get(path.suffix.lower(), "application/octet-stream"),
                            filename=text(path.name), content_disposition_type="inline"
                            if request.path_params["kind"] == "audio" else "attachment")

    async def voices(request):
        from ..voices.catalog import listing

        rows = await run_in_threadpool(listing)
        return JSONResponse({"voices": [{"name": r.name, "family": r.family, "languages": list(r.languages),
                                         "sample_rate": r.sample_rate, "about": r.about} for r in rows],
                             "current": getattr(door.options, "voice", None)})

    async def try_a_voice(request):
        try:
            asked = await request.json()
        except ValueError:
            return problem(400, "send JSON: {\"voice\": NAME, \"text\": TEXT}")
        if not isinstance(asked, dict):
            return problem(400, "send JSON: {\"voice\": NAME, \"text\": TEXT}")
        voice, text = asked.get("voice"), asked.get("text") or None
        if text is not None and (not isinstance(text, str) or len(text) > TRY_TEXT_LIMIT):
            return problem(400, f"the text to try must be at most {TRY_TEXT_LIMIT} characters")
        try:
            wav = await run_in_threadpool(_try_voice, door, voice, text)
        except InputError as error:
            return problem(400, str(error))
        except Exception as error:  # JobFailed and the like: the engine's one line
            return problem(500, f"{type(error).__name__}: {error}")
        return Response(wav, media_type="audio/wav", headers={"Cache-Control": "no-store"})

    door_closing = threading.Event()
    routes = [
        Route("/", index), Route("/api/state", state), Route("/api/events", events),
        Route("/api/upload", upload, methods=["POST"]),
        Route("/api/books/{sha256}/plan", plan), Route("/api/books/{sha256}/cancel", cancel, methods=["POST"]),
        Route("/api/books/{sha256}/retry", retry, methods=["POST"]),
        Route("/files/{sha256}/{kind}", download),
        Route("/api/voices", voices), Route("/api/voices/try", try_a_voice, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(routes=routes)
    app.state.closing = door_closing
    return Guard(app, settings)


def _try_voice(door: Door, voice, text: str | None) -> bytes:
    from ..voices.catalog import listing
    from ..voices.trial import try_voice

    if not isinstance(voice, str) or voice not in {row.name for row in listing()}:
        raise InputError(f"no voice {voice!r} here (see the voice list)")
    with door.trying, tempfile.TemporaryDirectory(prefix="epub2audio-try-") as tmp:
        out = Path(tmp) / "try.wav"
        try_voice(voice, text, out)
        return out.read_bytes()


# ----------------------------------------------------------------------------------------------
# The server, in a thread of the watcher


class WebServer:
    """uvicorn serving the page in a background thread; stop() and join() as the watcher's
    other threads."""

    def __init__(self, settings: WebSettings, door: Door, log):
        import uvicorn

        self.settings, self.door = settings, door
        family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.socket.bind((settings.host, settings.port))
        except OSError as error:
            self.socket.close()
            raise InputError(f"--web: cannot listen on {settings.host}:{settings.port} ({error.strerror})") from None
        # Listen now, before the address is printed: uvicorn's thread may start seconds later on a busy
        # machine, and a connection in that gap would be refused rather than wait in the backlog.
        self.socket.listen(128)
        self.port = self.socket.getsockname()[1]
        self.app = create_app(door, settings)
        config = uvicorn.Config(self.app, log_level="warning", access_log=False, timeout_graceful_shutdown=2,
                                lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]},
                                       name="watch-web", daemon=True)
        url = settings.url(self.port)
        if settings.token:  # printed once, on the terminal only: the log file may be readable by others
            print(f"epub2audio watch: the web page is at {url}?token={settings.token}", file=sys.stderr, flush=True)
        log.say("web", url, "(token needed)" if settings.token else "")

    def start(self) -> "WebServer":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.app.app.state.closing.set()
        self.server.should_exit = True

    def join(self, timeout: float | None = None) -> None:
        self.thread.join(timeout)
        if not self.thread.is_alive():
            self.socket.close()
            self.door.queue.close()

    def is_alive(self) -> bool:
        return self.thread.is_alive()
