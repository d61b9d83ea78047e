"""Mechanical checks and the automatic screen of generated questions (no model involved).

Mechanical (a question failing one is wrong, whatever a reviewer thinks):
- every gold quote is found verbatim in its page (whitespace-normalised exact substring);
- the question leaks no content word of the target page's title (bridge questions must not name the
  concept of page C; path questions not the titles of their evidence pages).
Screen (cheap plausibility rules): the question reads as one (3-60 words), there is a reference answer,
1-3 key facts, quotes long enough to be evidence, and no near-duplicate of an earlier question.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from fixgraph.evaluation.questions import Question

WORD = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "how", "i", "if",
        "in", "into", "is", "it", "its", "my", "of", "on", "or", "the", "this", "to", "use", "using", "what",
        "when", "where", "which", "who", "why", "with", "you", "your", "yours",
    }
)  # fmt: skip
MIN_QUOTE_CHARS = 20


def normalise(text: str) -> str:
    return " ".join(text.split())


def content_words(text: str) -> set[str]:
    """Lowercase words of 3+ letters that are not stopwords, with a plural 's' removed."""
    words = {w for w in WORD.findall(text.lower()) if len(w) >= 3 and w not in STOPWORDS}
    return {w[:-1] if w.endswith("s") and len(w) > 3 else w for w in words}


def mechanical_problems(
    question: Question, page_texts: Mapping[str, str], titles: Mapping[str, str], leak_pages: Sequence[str]
) -> list[str]:
    problems = []
    for gold in question.gold:
        text = page_texts.get(gold.page)
        if text is None:
            problems.append(f"gold page {gold.page!r} does not exist")
        elif normalise(gold.quote) not in normalise(text):
            problems.append(f"gold quote not verbatim in {gold.page!r}: {gold.quote[:60]!r}")
    asked = content_words(question.question)
    for page in leak_pages:
        leaked = sorted(asked & content_words(titles.get(page, "")))
        if leaked:
            problems.append(f"question leaks title words of {page!r}: {', '.join(leaked)}")
    return problems


def screen_problems(question: Question, earlier: Iterable[str]) -> list[str]:
    from rapidfuzz import fuzz

    problems = []
    words = len(question.question.split())
    if not 3 <= words <= 60:
        problems.append(f"question has {words} words (3-60 expected)")
    if not question.answer.strip():
        problems.append("no reference answer")
    if not 1 <= len(question.key_facts) <= 3:
        problems.append(f"{len(question.key_facts)} key facts (1-3 expected)")
    if any(len(g.quote.strip()) < MIN_QUOTE_CHARS for g in question.gold):
        problems.append(f"a gold quote is shorter than {MIN_QUOTE_CHARS} characters")
    for other in earlier:
        if fuzz.token_set_ratio(question.question.lower(), other.lower()) >= 90:
            problems.append(f"near-duplicate of an earlier question: {other[:60]!r}")
            break
    return problems
