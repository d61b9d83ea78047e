"""Polite HTTP fetching for the support-site scraper: allow-listed domains, robots.txt, a per-host rate
limit (default one request per second), retries with exponential backoff, and an on-disk cache.

Every URL yields a `Fetched` record whose `outcome` says what happened (ok, http_error,
robots_disallowed, off_domain, fetch_error, too_many_redirects), so the corpus can report each page
that did not make it instead of losing it. Robots rules follow RFC 9309: a 4xx robots.txt allows
everything, a 5xx or unreachable one disallows everything.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin, urlsplit
from urllib.robotparser import RobotFileParser

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from fixgraph.io import atomic_path, sha256_text, write_json

RETRY_STATUSES = {429, 500, 502, 503, 504}
CACHED_STATUSES = {200, 203, 301, 302, 303, 307, 308, 404, 410}
REDIRECTS = {301, 302, 303, 307, 308}


@dataclass(frozen=True)
class CrawlPolicy:
    allowed_domains: tuple[str, ...]
    user_agent: str = "fixgraph-corpus/0.1"
    min_interval_s: float = 1.0  # between two requests to one host (raised by a robots.txt Crawl-delay)
    timeout_s: float = 15.0
    retries: int = 3  # further attempts after a 429/5xx answer or a network error
    backoff_s: float = 1.0  # first wait; doubles each attempt, capped at max_backoff_s
    max_backoff_s: float = 30.0
    max_redirects: int = 5
    respect_robots: bool = True
    cache_ttl_s: float = 7 * 24 * 3600.0

    def allows(self, url: str) -> bool:
        """Only http(s) URLs on an allowed domain or one of its subdomains."""
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        return parts.scheme in ("http", "https") and any(
            host == d.lower() or host.endswith("." + d.lower()) for d in self.allowed_domains
        )


@dataclass
class Fetched:
    url: str
    final_url: str
    status: int  # the last HTTP status seen; 0 when no request answered
    outcome: str  # ok | http_error | robots_disallowed | off_domain | fetch_error | too_many_redirects
    detail: str = ""
    body: bytes = b""
    content_type: str = ""
    redirects: list[str] = field(default_factory=list)
    from_cache: bool = True  # every hop came from the disk cache


class Retryable(Exception):
    def __init__(self, status: int, retry_after: float | None, response: httpx.Response | None = None) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.retry_after = retry_after
        self.response = response


class RateLimiter:
    """At most one request per `interval` seconds to each host.

    The interval counts from the end of the previous exchange (`done`), not its start, so two request
    starts are always at least `interval` apart however long the server took to answer.
    """

    def __init__(self, clock: Callable[[], float], sleep: Callable[[float], None]) -> None:
        self.clock = clock
        self.sleep = sleep
        self.last: dict[str, float] = {}

    def wait(self, host: str, interval: float) -> None:
        if host in self.last:
            delay = self.last[host] + interval - self.clock()
            if delay > 0:
                self.sleep(delay)

    def done(self, host: str) -> None:
        self.last[host] = self.clock()


class DiskCache:
    """Responses by URL: `<sha256>.json` (status, headers, time) + `<sha256>.body`."""

    def __init__(self, root: Path | None, ttl_s: float) -> None:
        self.root = root
        self.ttl_s = ttl_s

    def _paths(self, url: str) -> tuple[Path, Path]:
        assert self.root is not None
        key = sha256_text(url)
        return self.root / key[:2] / f"{key}.json", self.root / key[:2] / f"{key}.body"

    def get(self, url: str) -> tuple[int, dict[str, str], bytes] | None:
        if self.root is None:
            return None
        meta_path, body_path = self._paths(url)
        if not meta_path.exists() or not body_path.exists():
            return None
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if time.time() - float(meta["fetched_at"]) > self.ttl_s:
            return None
        return int(meta["status"]), dict(meta["headers"]), body_path.read_bytes()

    def put(self, url: str, status: int, headers: dict[str, str], body: bytes) -> None:
        if self.root is None or status not in CACHED_STATUSES:
            return
        meta_path, body_path = self._paths(url)
        with atomic_path(body_path) as tmp:
            tmp.write_bytes(body)
        write_json(meta_path, {"url": url, "status": status, "headers": headers, "fetched_at": time.time()})


class Fetcher:
    def __init__(
        self,
        policy: CrawlPolicy,
        cache_dir: Path | None = None,
        client: httpx.Client | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.policy = policy
        self.client = client or httpx.Client(timeout=policy.timeout_s, headers={"User-Agent": policy.user_agent})
        self.cache = DiskCache(cache_dir, policy.cache_ttl_s)
        self.limiter = RateLimiter(clock, sleep)
        self.sleep = sleep
        self.robots: dict[str, RobotFileParser | None] = {}  # origin -> rules (None: disallow all)
        self.robots_errors: dict[str, str] = {}  # origin -> why its robots.txt could not be read
        self.requests = 0  # network requests made (not cache hits)

    # --- one HTTP exchange, with rate limit, retries and cache -------------------------------
    def _wait(self, state: RetryCallState) -> float:
        backoff = min(self.policy.max_backoff_s, self.policy.backoff_s * 2 ** (state.attempt_number - 1))
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, Retryable) and exc.retry_after is not None:
            return max(backoff, min(exc.retry_after, self.policy.max_backoff_s))
        return backoff

    def _attempt(self, url: str, interval: float) -> httpx.Response:
        host = urlsplit(url).netloc
        self.limiter.wait(host, interval)
        self.requests += 1
        try:
            response = self.client.get(url, follow_redirects=False)
        finally:
            self.limiter.done(host)
        if response.status_code in RETRY_STATUSES:
            raise Retryable(response.status_code, _retry_after(response), response)
        return response

    def exchange(self, url: str, interval: float) -> tuple[int, dict[str, str], bytes, bool]:
        """(status, headers, body, from_cache); raises httpx.TransportError when every attempt failed."""
        cached = self.cache.get(url)
        if cached is not None:
            return (*cached, True)
        retrying = Retrying(
            stop=stop_after_attempt(self.policy.retries + 1),
            wait=self._wait,
            retry=retry_if_exception_type((Retryable, httpx.TransportError)),
            sleep=self.sleep,
            reraise=True,
        )
        try:
            response = retrying(self._attempt, url, interval)
        except Retryable as exc:  # still failing after the last attempt: report the status
            assert exc.response is not None
            response = exc.response
        headers = {k: response.headers[k] for k in ("content-type", "location") if k in response.headers}
        self.cache.put(url, response.status_code, headers, response.content)
        return response.status_code, headers, response.content, False

    # --- robots.txt ---------------------------------------------------------------------------
    def rules(self, url: str) -> RobotFileParser | None:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        if origin not in self.robots:
            robots_url = f"{origin}/robots.txt"
            try:
                status, _, body, _ = self.exchange(robots_url, self.policy.min_interval_s)
            except httpx.TransportError as exc:
                status, body = 599, b""
                self.robots_errors[origin] = f"{type(exc).__name__}: {exc}"
            parser: RobotFileParser | None = RobotFileParser(robots_url)
            assert parser is not None
            if 200 <= status < 300:
                parser.parse(body.decode("utf-8", "replace").splitlines())
            elif 400 <= status < 500:
                parser.parse([])  # no robots.txt: everything is allowed
            else:  # server error or unreachable: RFC 9309 says assume complete disallow
                parser = None
                self.robots_errors.setdefault(origin, f"HTTP {status}")
            self.robots[origin] = parser
        return self.robots[origin]

    def interval(self, url: str) -> float:
        rules = self.rules(url) if self.policy.respect_robots else None
        delay = rules.crawl_delay(self.policy.user_agent) if rules is not None else None
        return max(self.policy.min_interval_s, float(delay or 0))

    def can_fetch(self, url: str) -> bool:
        if not self.policy.respect_robots:
            return True
        rules = self.rules(url)
        return rules is not None and rules.can_fetch(self.policy.user_agent, url)

    def sitemaps_of(self, url: str) -> list[str]:
        rules = self.rules(url)
        return list(rules.site_maps() or []) if rules is not None else []

    # --- a page, following redirects hop by hop ----------------------------------------------
    def get(self, url: str) -> Fetched:
        current, all_cached = url, True
        redirects: list[str] = []
        for _ in range(self.policy.max_redirects + 1):
            if not self.policy.allows(current):
                reason = f"{current} is not on an allowed domain"
                return Fetched(url, current, 0, "off_domain", reason, redirects=redirects)
            if not self.can_fetch(current):
                parts = urlsplit(current)
                why = self.robots_errors.get(f"{parts.scheme}://{parts.netloc}")
                reason = f"robots.txt disallows {current}" + (f" (robots.txt unreadable: {why})" if why else "")
                return Fetched(url, current, 0, "robots_disallowed", reason, redirects=redirects)
            try:
                status, headers, body, cached = self.exchange(current, self.interval(current))
            except httpx.TransportError as exc:
                return Fetched(url, current, 0, "fetch_error", f"{type(exc).__name__}: {exc}", redirects=redirects)
            all_cached = all_cached and cached
            if status in REDIRECTS and "location" in headers:
                redirects.append(current)
                current = urljoin(current, headers["location"])
                continue
            outcome = "ok" if 200 <= status < 300 else "http_error"
            detail = "" if outcome == "ok" else f"HTTP {status}"
            ctype = headers.get("content-type", "")
            return Fetched(url, current, status, outcome, detail, body, ctype, redirects, all_cached)
        return Fetched(url, current, 0, "too_many_redirects", f"more than {self.policy.max_redirects} redirects")


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after", "")
    try:
        return float(value)
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff
