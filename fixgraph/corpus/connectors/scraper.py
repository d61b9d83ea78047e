"""Support-site scraper (sites like Apple Support): crawl politely into a snapshot, then parse it.

`fetch` discovers pages from sitemaps (configured ones and those robots.txt lists) and start URLs
(optionally following in-article links), fetches them through `crawl.Fetcher` and writes the
snapshot: `pages/<doc id>.html` plus `index.jsonl`, one line per URL tried with its outcome. The
snapshot holds no timestamps, so the same site content gives the same corpus hash. Every URL is
normalised first (urls.py: tracking parameters such as `utm_*` and `cid` removed, fragment dropped),
so one page reached through several links is fetched once. `parse` reads only the snapshot: the
article element and title come from configurable CSS selectors, article metadata (breadcrumb, applies
to, published / modified date, canonical URL) from `metadata` selectors (page_metadata.py); URLs that
failed (robots.txt, 404/500, off-domain redirects, no article body) are reported one by one, and links
to them are classified `broken` (404/410) or `disallowed` (robots.txt) in the link graph. Document ids
of scraped pages: urls.py.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin

from lxml import etree

from fixgraph.corpus.builder import DocBuilder
from fixgraph.corpus.connectors.folder import html_options
from fixgraph.corpus.crawl import CrawlPolicy, Fetched, Fetcher
from fixgraph.corpus.debian import FetchError
from fixgraph.corpus.files import DEFAULT_MAX_BYTES, Problem
from fixgraph.corpus.html import HtmlError, HtmlOptions, parse_html, render_article, select_first
from fixgraph.corpus.models import Document, Link
from fixgraph.corpus.page_metadata import DEFAULT_METADATA_SELECTORS, anchors_of, page_metadata
from fixgraph.corpus.sources import CORPORA, MissingCorpusError, ParseResult
from fixgraph.corpus.urls import DEFAULT_TRACKING_PARAMS, doc_id_for_url, normalise_url
from fixgraph.io import atomic_dir, read_json, sha256_bytes, write_json, write_jsonl

SITEMAP_NS = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
# crawl outcomes that say a linked page is not there: outcome -> HTTP status (0: any) -> link status
UNAVAILABLE = {"http_error": {404: "broken", 410: "broken"}, "robots_disallowed": {0: "disallowed"}}


def parse_sitemap(body: bytes, where: str) -> tuple[list[str], list[str]]:
    """(page URLs, nested sitemap URLs) of a sitemap or sitemap index; raises ValueError if malformed."""
    if body[:2] == b"\x1f\x8b":
        body = gzip.decompress(body)
    try:
        root = etree.fromstring(body, etree.XMLParser(resolve_entities=False, no_network=True))
    except etree.XMLSyntaxError as exc:
        raise ValueError(f"{where}: sitemap is not well-formed XML: {exc}") from exc
    locs = [(loc.text or "").strip() for loc in root.iter(f"{SITEMAP_NS}loc")]
    if root.tag == f"{SITEMAP_NS}sitemapindex":
        return [], [u for u in locs if u]
    return [u for u in locs if u], []


@CORPORA.register("scraper")
class SupportSiteCorpus:
    def __init__(
        self,
        name: str,
        snapshot_dir: str,
        allowed_domains: Sequence[str] = (),
        sitemaps: Sequence[str] = (),
        start_urls: Sequence[str] = (),
        robots_sitemaps: bool = True,
        follow_links: bool = False,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        max_pages: int = 500,
        user_agent: str = "fixgraph-corpus/0.1",
        min_interval_s: float = 1.0,
        timeout_s: float = 15.0,
        retries: int = 3,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        respect_robots: bool = True,
        cache_dir: str = "",
        cache_ttl_s: float = 7 * 24 * 3600.0,
        refresh: bool = False,
        selectors: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Sequence[str]] | None = None,
        tracking_params: Sequence[str] = DEFAULT_TRACKING_PARAMS,
        license: str = "",
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        if min_interval_s < 0 or max_pages <= 0:
            raise ValueError(f"corpus {name}: min_interval_s must be >= 0 and max_pages > 0")
        self.name = name
        self.snapshot_dir = Path(snapshot_dir)
        self.policy = CrawlPolicy(
            allowed_domains=tuple(allowed_domains),
            user_agent=user_agent,
            min_interval_s=min_interval_s,
            timeout_s=timeout_s,
            retries=retries,
            backoff_s=backoff_s,
            max_backoff_s=max_backoff_s,
            respect_robots=respect_robots,
            cache_ttl_s=cache_ttl_s,
        )
        self.sitemaps = list(sitemaps)
        self.start_urls = list(start_urls)
        self.robots_sitemaps = robots_sitemaps
        self.follow_links = follow_links
        self.include = [re.compile(p) for p in include]
        self.exclude = [re.compile(p) for p in exclude]
        self.max_pages = max_pages
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.refresh = refresh
        self.html: HtmlOptions = html_options(selectors)
        self.metadata_selectors = dict(metadata) if metadata is not None else DEFAULT_METADATA_SELECTORS
        self.tracking_params = tuple(tracking_params)
        self.license = license
        self.max_bytes = max_bytes

    # --- crawl ----------------------------------------------------------------------------------
    def normalise(self, url: str) -> str:
        return normalise_url(url, self.tracking_params)

    def wanted(self, url: str) -> bool:
        if not self.policy.allows(url):
            return False
        if self.include and not any(p.search(url) for p in self.include):
            return False
        return not any(p.search(url) for p in self.exclude)

    def discover(self, fetcher: Fetcher, log: list[dict[str, Any]]) -> list[str]:
        """Page URLs from sitemaps (recursively through sitemap indexes) and the start URLs."""
        sitemaps = list(self.sitemaps)
        if self.robots_sitemaps:
            for seed in [*self.start_urls, *self.sitemaps]:
                sitemaps += [s for s in fetcher.sitemaps_of(seed) if s not in sitemaps]
        pages: list[str] = []
        seen: set[str] = set()
        queue = deque(sitemaps)
        while queue:
            sitemap = queue.popleft()
            if sitemap in seen:
                continue
            seen.add(sitemap)
            fetched = fetcher.get(sitemap)
            if fetched.outcome != "ok":
                log.append(self._entry(fetched, kind="sitemap"))
                continue
            try:
                urls, nested = parse_sitemap(fetched.body, sitemap)
            except ValueError as exc:
                log.append({**self._entry(fetched, kind="sitemap"), "outcome": "malformed_sitemap", "detail": str(exc)})
                continue
            queue.extend(nested)
            pages += [u for u in map(self.normalise, urls) if u not in pages]
        return [*[u for u in map(self.normalise, self.start_urls) if u not in pages], *pages]

    def fetch(self) -> dict[str, Any]:
        if self.is_fetched() and not self.refresh:
            return {**read_json(self.snapshot_dir / "SOURCE.json"), "origin": "already present"}
        if not self.policy.allowed_domains:
            raise MissingCorpusError(f"corpus {self.name!r}: set corpus.allowed_domains before crawling")
        fetcher = Fetcher(self.policy, self.cache_dir)
        log: list[dict[str, Any]] = []
        frontier = deque(self.discover(fetcher, log))  # normalised: tracking parameters and fragments gone
        seen: set[str] = set()
        pages: dict[str, bytes] = {}  # doc id -> html
        while frontier and len(pages) < self.max_pages:
            url = frontier.popleft()
            if url in seen:
                continue
            seen.add(url)
            if not self.wanted(url):
                log.append({"url": url, "final_url": url, "status": 0, "outcome": "excluded", "kind": "page"})
                continue
            fetched = fetcher.get(url)
            fetched.final_url = self.normalise(fetched.final_url)
            entry = self._entry(fetched, kind="page")
            if fetched.outcome == "ok":
                doc_id = doc_id_for_url(fetched.final_url)
                entry["doc_id"] = doc_id
                if doc_id not in pages:
                    pages[doc_id] = fetched.body
                    entry["file"] = f"pages/{doc_id}.html"
                    if self.follow_links and "html" in (fetched.content_type or "text/html"):
                        frontier.extend(self._links(fetched))
            log.append(entry)
        if not pages:  # an empty snapshot would only hide the reason: say what happened to each URL
            outcomes = Counter(e["outcome"] for e in log)
            raise FetchError(
                f"corpus {self.name!r}: crawled 0 pages ({fetcher.requests} requests); outcomes: {dict(outcomes)}; "
                f"first: {[(e['url'], e.get('detail', e['outcome'])) for e in log[:3]]}"
            )
        info = {
            "site": sorted(self.policy.allowed_domains),
            "sitemaps": self.sitemaps,
            "start_urls": self.start_urls,
            "user_agent": self.policy.user_agent,
            "urls": sorted(e["url"] for e in log if e.get("kind") == "page"),
            "license": self.license,
            "version": "",
        }
        with atomic_dir(self.snapshot_dir) as out:
            for doc_id, body in pages.items():
                target = out / "pages" / f"{doc_id}.html"
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(body)
            write_jsonl(out / "index.jsonl", sorted(log, key=lambda e: (e.get("kind", ""), e["url"])))
            write_json(out / "SOURCE.json", info)
        return {**info, "origin": f"crawled {len(pages)} pages ({fetcher.requests} requests)"}

    @staticmethod
    def _entry(fetched: Fetched, kind: str) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "url": fetched.url,
            "final_url": fetched.final_url,
            "status": fetched.status,
            "outcome": fetched.outcome,
            "kind": kind,
            "content_type": fetched.content_type,
        }
        if fetched.detail:
            entry["detail"] = fetched.detail
        if fetched.redirects:
            entry["redirects"] = fetched.redirects
        return entry

    def _links(self, fetched: Fetched) -> list[str]:
        try:
            root = parse_html(fetched.body, fetched.final_url)
        except HtmlError:
            return []
        article = select_first(root, self.html.article)
        hrefs = [] if article is None else [a.get("href", "") for a in article.iter("a")]
        return [self.normalise(urljoin(fetched.final_url, h)) for h in hrefs if h]

    # --- parse ----------------------------------------------------------------------------------
    def is_fetched(self) -> bool:
        return (self.snapshot_dir / "index.jsonl").exists() and (self.snapshot_dir / "SOURCE.json").exists()

    def check(self) -> None:
        if not self.is_fetched():
            raise MissingCorpusError(
                f"corpus {self.name!r}: no crawl snapshot in {self.snapshot_dir}. "
                f"Crawl it with: fixgraph fetch corpus={self.name}"
            )

    def parse(self) -> ParseResult:
        self.check()
        result = ParseResult(documents=[], source_info=dict(read_json(self.snapshot_dir / "SOURCE.json")))
        result.resources.update({"index.jsonl": "crawl log", "SOURCE.json": "snapshot provenance"})
        with open(self.snapshot_dir / "index.jsonl", encoding="utf-8") as fh:
            entries = [json.loads(line) for line in fh if line.strip()]
        for entry in entries:
            where = entry["url"]
            if entry.get("kind") == "page" and (why := UNAVAILABLE.get(entry["outcome"], {}).get(entry["status"])):
                result.unavailable[doc_id_for_url(self.normalise(where))] = why
            if entry["outcome"] != "ok":
                kind = entry["outcome"] if entry["outcome"] != "http_error" else f"http_{entry['status']}"
                action = "ignored" if kind == "excluded" else "skipped"
                result.problems.append(Problem(where, entry.get("detail", entry["outcome"]), kind, action))
                continue
            if entry.get("kind") != "page":
                continue
            for alias in [entry["url"], *entry.get("redirects", [])]:
                alias_id = doc_id_for_url(self.normalise(alias))
                if alias_id != entry["doc_id"]:
                    result.aliases[alias_id] = entry["doc_id"]
            if "file" not in entry:
                continue  # a second URL for a page already kept: recorded as an alias above
            content_type = entry.get("content_type") or "text/html"  # no header: assume HTML, as browsers do
            if "html" not in content_type:
                result.problems.append(
                    Problem(entry["file"], f"{where}: not HTML ({content_type})", "unsupported", "ignored")
                )
                continue
            doc = self.document(entry, result.problems)
            if doc is not None:
                result.documents.append(doc)
        return result

    def document(self, entry: dict[str, Any], problems: list[Problem]) -> Document | None:
        rel = entry["file"]
        url = entry["final_url"]
        data = (self.snapshot_dir / rel).read_bytes()
        if not data.strip():
            problems.append(Problem(rel, f"{url}: empty response body", "empty"))
            return None
        if len(data) > self.max_bytes:
            problems.append(Problem(rel, f"{url}: {len(data)} bytes is over corpus.max_bytes", "too_large"))
            return None
        builder = DocBuilder()
        try:
            root = parse_html(data, url)
            metadata = page_metadata(root, url, self.metadata_selectors, self.tracking_params)
            anchors = anchors_of(root)
            title = render_article(root, builder, self.html, self.resolver(url), url)
        except HtmlError as exc:
            problems.append(Problem(rel, str(exc), "no_article" if "no article body" in str(exc) else "malformed"))
            return None
        if not builder.blocks:
            problems.append(Problem(rel, f"{url}: article renders to no text", "empty"))
            return None
        return builder.build(
            id=entry["doc_id"],
            title=title or entry["doc_id"],
            source=self.name,
            path=entry["file"],
            url=url,
            page_type="html",
            license=self.license,
            content_hash=sha256_bytes(data),
            metadata=metadata,
            anchors=anchors,
        )

    def resolver(self, page_url: str) -> Any:
        def resolve(href: str) -> Link | None:
            absolute, fragment = urldefrag(urljoin(page_url, href))
            if not self.policy.allows(absolute):
                return Link(target_doc="", link_type="external", href=absolute)
            target = doc_id_for_url(self.normalise(absolute))
            return Link(target_doc=target, target_section=fragment, link_type="inline")

        return resolve
