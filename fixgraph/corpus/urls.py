"""URLs of scraped pages: the normal form used for de-duplication, and the document id derived from it.

Document ids of scraped pages are `<host>/<path>` of the normalised final URL (after redirects), with
characters other than letters, digits, `.`, `/`, `-` and `_` replaced by `_`, and `_q<8 hex>` (sha256
of the remaining query string) appended when a query is left; e.g.
`https://support.example.com/en-us/HT201?cid=mc-123#steps` -> `support.example.com/en-us/HT201`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from fnmatch import fnmatchcase
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from fixgraph.io import sha256_text

# Query parameters that say where a visitor came from, not which page it is (shell-style patterns).
DEFAULT_TRACKING_PARAMS: tuple[str, ...] = (
    "utm_*",
    "cid",
    "gclid",
    "fbclid",
    "msclkid",
    "mc_cid",
    "mc_eid",
    "_ga",
    "_gl",
    "yclid",
)
DEFAULT_PORTS = {"http": 80, "https": 443}
UNSAFE = re.compile(r"[^\w./-]+")


def is_tracking(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatchcase(name.lower(), p.lower()) for p in patterns)


def normalise_url(url: str, tracking: Sequence[str] = DEFAULT_TRACKING_PARAMS) -> str:
    """Scheme and host lower-cased, default port and fragment dropped, tracking parameters removed and the
    rest sorted, so two links to the same page compare equal."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    netloc = host if parts.port in (None, DEFAULT_PORTS.get(scheme)) else f"{host}:{parts.port}"
    if parts.username:
        netloc = f"{parts.username}@{netloc}"
    query = sorted((k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not is_tracking(k, tracking))
    return urlunsplit((scheme, netloc, parts.path or "/", urlencode(query), ""))


def doc_id_for_url(url: str) -> str:
    """`https://support.example.com/en-us/HT201?x=1#s` -> `support.example.com/en-us/HT201_q1a2b3c4`.

    Callers pass a normalised URL; the fragment is ignored either way (it names a section, not a page)."""
    parts = urlsplit(url)
    path = UNSAFE.sub("_", parts.path.strip("/")) or "index"
    query = f"_q{sha256_text(parts.query)[:8]}" if parts.query else ""
    return f"{parts.hostname or ''}/{path}{query}".replace("..", "_")
