"""A local stand-in for the Pexels API that answers in its documented response shape.

``GET /v1/search`` and ``GET /videos/search`` take ``query``, ``per_page`` and ``page`` and answer
like Pexels: ``{"page", "per_page", "total_results", "photos"|"videos": [...], "next_page"}``
(``next_page`` only when a later page exists), each photo with ``id``, ``width``, ``height``,
``url``, ``photographer``, ``photographer_url``, ``alt`` and ``src`` (``original``, ``large2x``,
``large``, ``medium``, ``small``, ``portrait``, ``landscape``, ``tiny``), each video with ``id``,
``width``, ``height``, ``duration``, ``url``, ``image``, ``user`` and ``video_files``
(``id``, ``quality``, ``file_type``, ``width``, ``height``, ``fps``, ``link``). The key must come
in the ``Authorization`` header as is (401 otherwise); after ``rate_limit_after`` requests it
answers 429 like Pexels does when the hourly quota is spent. Media links point at
``media_base`` (e.g. a `MediaServer`), so a crawl's output can be fetched end to end.
"""

from __future__ import annotations

import json
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


class PexelsServer:
    """The fake API; use as a context manager. ``requests`` records ``(path, params)``."""

    def __init__(
        self,
        key: str = "test-key",
        total: int = 7,
        page_cap: int = 3,
        media_base: str = "https://images.example.test",
        rate_limit_after: int | None = None,
    ) -> None:
        self.key = key
        self.total = total
        self.page_cap = page_cap
        self.media_base = media_base
        self.rate_limit_after = rate_limit_after
        self.requests: list[tuple[str, dict[str, str]]] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def photo(self, query: str, i: int) -> dict[str, Any]:
        pid = zlib.crc32(query.encode()) % 100000 * 100 + i
        original = f"{self.media_base}/photos/{pid}.jpeg"
        sizes = {"original": original, "large2x": original + "?dpr=2&h=650&w=940", "large": original + "?h=650&w=940"}
        sizes.update({k: f"{original}?size={k}" for k in ("medium", "small", "portrait", "landscape", "tiny")})
        return {
            "id": pid,
            "width": 4000,
            "height": 3000,
            "url": f"https://www.pexels.com/photo/{query.replace(' ', '-')}-{pid}/",
            "photographer": f"Photographer {i}",
            "photographer_url": f"https://www.pexels.com/@p{i}",
            "photographer_id": i,
            "avg_color": "#7F7F7F",
            "src": sizes,
            "liked": False,
            "alt": f"{query} number {i}",
        }

    def video(self, query: str, i: int) -> dict[str, Any]:
        vid = zlib.crc32(query.encode()) % 100000 * 100 + i
        files = [
            {
                "id": vid * 10 + 1,
                "quality": "hd",
                "file_type": "video/mp4",
                "width": 3840,
                "height": 2160,
                "fps": 25,
                "link": f"{self.media_base}/videos/{vid}-uhd.mp4",
            },
            {
                "id": vid * 10 + 2,
                "quality": "hd",
                "file_type": "video/mp4",
                "width": 1920,
                "height": 1080,
                "fps": 25,
                "link": f"{self.media_base}/videos/{vid}-1080.mp4",
            },
            {
                "id": vid * 10 + 3,
                "quality": "hd",
                "file_type": "video/mp4",
                "width": 1280,
                "height": 720,
                "fps": 25,
                "link": f"{self.media_base}/videos/{vid}-720.mp4",
            },
            {
                "id": vid * 10 + 4,
                "quality": "sd",
                "file_type": "video/mp4",
                "width": 640,
                "height": 360,
                "fps": 25,
                "link": f"{self.media_base}/videos/{vid}-360.mp4",
            },
        ]
        return {
            "id": vid,
            "width": 3840,
            "height": 2160,
            "duration": 12 + i,
            "full_res": None,
            "tags": [],
            "url": f"https://www.pexels.com/video/{query.replace(' ', '-')}-{vid}/",
            "image": f"{self.media_base}/videos/{vid}.jpg",
            "avg_color": None,
            "user": {"id": i, "name": f"Videographer {i}", "url": f"https://www.pexels.com/@v{i}"},
            "video_files": files,
            "video_pictures": [{"id": vid, "picture": f"{self.media_base}/videos/{vid}-0.jpg", "nr": 0}],
        }

    def answer(self, path: str, params: dict[str, str], auth: str | None) -> tuple[int, dict[str, Any], dict[str, str]]:
        self.requests.append((path, params))
        if auth != self.key:
            return 401, {"error": "Unauthorized"}, {}
        if self.rate_limit_after is not None and len(self.requests) > self.rate_limit_after:
            return (
                429,
                {"error": "Too many requests"},
                {"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": "1893456000"},
            )
        if path not in ("/v1/search", "/videos/search") or not params.get("query"):
            return 400, {"error": "bad request"}, {}
        query = params["query"]
        per_page = min(int(params.get("per_page", 15)), 80, self.page_cap)
        page = int(params.get("page", 1))
        start = (page - 1) * per_page
        numbers = range(start, min(start + per_page, self.total))
        key, make = ("photos", self.photo) if path == "/v1/search" else ("videos", self.video)
        body: dict[str, Any] = {
            "page": page,
            "per_page": per_page,
            "total_results": self.total,
            key: [make(query, i) for i in numbers],
        }
        if start + per_page < self.total:
            body["next_page"] = f"https://api.pexels.com{path}/?page={page + 1}&per_page={per_page}&query={query}"
        remaining = {"X-Ratelimit-Limit": "20000", "X-Ratelimit-Remaining": str(20000 - len(self.requests))}
        return 200, body, remaining

    def __enter__(self) -> PexelsServer:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                params = {k: v[0] for k, v in parse_qs(parts.query).items()}
                status, body, headers = outer.answer(parts.path, params, self.headers.get("Authorization"))
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
