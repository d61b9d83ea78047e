"""Article metadata of a scraped page, kept as Document.metadata: breadcrumb, "applies to", published and
modified dates (ISO `YYYY-MM-DD`), the canonical URL the page declares; and the ids a `#fragment` may name.

Each field is found by the first matching CSS selector (configurable per corpus: `corpus.metadata`); a
`<meta content>` or `<time datetime>` gives its attribute, anything else its visible text. A date that
cannot be read is kept as written, under `<field>_text`, rather than guessed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from urllib.parse import urljoin

from dateutil import parser as dateparser
from lxml import etree

from fixgraph.corpus.html import element_text, select_first
from fixgraph.corpus.urls import DEFAULT_TRACKING_PARAMS, normalise_url

DEFAULT_METADATA_SELECTORS: dict[str, list[str]] = {
    "breadcrumb": [".breadcrumbs", "nav[aria-label=breadcrumb]", "[itemtype$=BreadcrumbList]"],
    "applies_to": [".applies-to", "[data-applies-to]", "meta[name=applies-to]"],
    "published": [
        "meta[property='article:published_time']",
        "meta[name=date]",
        "time[itemprop=datePublished]",
        ".published time",
        ".published",
    ],
    "modified": [
        "meta[property='article:modified_time']",
        "time[itemprop=dateModified]",
        ".modified time",
        ".modified",
    ],
}
DATES = ("published", "modified")
LABEL = re.compile(r"^\s*(applies to|published( date)?|modified|updated|last updated)\s*:?\s*", re.IGNORECASE)
SEPARATORS = re.compile(r"\s*[›>»/|]\s*")


def _value(elem: etree._Element) -> str:
    for attribute in ("content", "datetime", "data-applies-to"):
        if elem.get(attribute):
            return str(elem.get(attribute)).strip()
    return element_text(elem)


def _breadcrumb(elem: etree._Element) -> str:
    items = [element_text(a) for a in elem.iter("a", "li") if element_text(a)]
    if not items:
        items = [part for part in SEPARATORS.split(element_text(elem)) if part]
    return " › ".join(dict.fromkeys(items))


def iso_date(text: str) -> str | None:
    """`YYYY-MM-DD` of a written date ("March 12, 2024", "2024-03-12T08:00:00Z"), or None."""
    try:
        parsed: datetime = dateparser.parse(LABEL.sub("", text), fuzzy=True, default=datetime(1, 1, 1))
    except (ValueError, OverflowError):
        return None
    return parsed.date().isoformat() if parsed.year > 1 else None


def page_metadata(
    root: etree._Element,
    page_url: str,
    selectors: Mapping[str, Sequence[str]] = DEFAULT_METADATA_SELECTORS,
    tracking: Sequence[str] = DEFAULT_TRACKING_PARAMS,
) -> dict[str, str]:
    """Metadata of the whole page (read before chrome such as breadcrumbs is removed from the article)."""
    found: dict[str, str] = {}
    for field, field_selectors in selectors.items():
        elem = select_first(root, list(field_selectors))
        if elem is None:
            continue
        value = _breadcrumb(elem) if field == "breadcrumb" else LABEL.sub("", _value(elem)).strip()
        if not value:
            continue
        if field in DATES:
            date = iso_date(value)
            found[field if date else f"{field}_text"] = date or value
        else:
            found[field] = value
    canonical = root.find(".//link[@rel='canonical']")
    if canonical is not None and canonical.get("href"):
        found["canonical_url"] = normalise_url(urljoin(page_url, str(canonical.get("href"))), tracking)
    return found


def anchors_of(root: etree._Element) -> list[str]:
    """Every element id and `<a name>` of the page: what a link's `#fragment` can point at."""
    ids = {str(e.get("id")) for e in root.iter() if isinstance(e.tag, str) and e.get("id")}
    ids |= {str(a.get("name")) for a in root.iter("a") if a.get("name")}
    return sorted(ids)
