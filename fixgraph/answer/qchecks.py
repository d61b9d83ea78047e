"""Mechanical checks and the automatic screen of generated questions (no model involved).

Mechanical (a question failing one is wrong, whatever a reviewer thinks):
- every gold quote is found verbatim in its page (whitespace-normalised exact substring);
- the question does not name the concept it must hide: for a bridge question the title of page C, for a
  path question the answer end of the path. "Naming" = using MORE THAN HALF of that text's concept words
  (content words, Snowball-stemmed, minus stop words and generic help verbs such as "change" or "use").
  One shared word is not a leak: page A's situation and page C's fix often share a word ("files" in
  "restore files from a backup" vs "Copy or move files and folders"); the concept is named when most of
  its words are there ("control the mouse pointer using the keypad" for "Click and move the mouse
  pointer using the keypad").
Screen (cheap plausibility rules): the question reads as one (3-60 words), there is a reference answer,
1-3 key facts, quotes long enough to be evidence, no near-duplicate of an earlier question, no copy of
its own evidence (retrieval would be trivial), and no reference to the material it was written from
("in the desktop help manual", "the passage"): a user has not seen it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache

from fixgraph.evaluation.questions import Question

WORD = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "how", "i", "if",
        "in", "into", "is", "it", "its", "my", "of", "on", "or", "the", "this", "to", "use", "using", "what",
        "when", "where", "which", "who", "why", "with", "you", "your", "yours", "not", "t", "don",
        "cannot", "won", "doesn", "isn", "will", "there", "that", "these", "those", "some", "any", "all",
    }
)  # fmt: skip
# verbs of almost every help title: sharing one says nothing about the concept
GENERIC = frozenset({"change", "set", "make", "get", "turn", "find", "add", "open", "help", "work", "problem"})
MIN_QUOTE_CHARS = 20
SOURCE_MENTION = re.compile(r"\b(help manual|passages?|sentences?|the text|page [ac])\b", re.IGNORECASE)


def normalise(text: str) -> str:
    return " ".join(text.split())


@lru_cache(maxsize=1)
def _stemmer() -> object:
    import Stemmer  # PyStemmer, already a dependency of the BM25 index

    return Stemmer.Stemmer("english")


def content_words(text: str) -> set[str]:
    """Stems of the lowercase words of 3+ letters that are not stop words."""
    words = [w for w in WORD.findall(text.lower()) if len(w) >= 3 and w not in STOPWORDS]
    return set(_stemmer().stemWords(words))  # type: ignore[attr-defined]


def concept_words(text: str) -> set[str]:
    """Content words minus generic help verbs: what names a page's concept."""
    return content_words(text) - content_words(" ".join(GENERIC))


def leaked_words(question: str, concept: str) -> list[str]:
    """The concept words the question uses, when they are more than half of them (else [])."""
    words = concept_words(concept)
    shared = sorted(words & concept_words(question))
    return shared if words and 2 * len(shared) > len(words) else []


def mechanical_problems(question: Question, page_texts: Mapping[str, str], leak: Mapping[str, str]) -> list[str]:
    """Problems of one question; `leak` maps a label (page id, or "answer") to the text it must not name."""
    problems = []
    for gold in question.gold:
        text = page_texts.get(gold.page)
        if text is None:
            problems.append(f"gold page {gold.page!r} does not exist")
        elif normalise(gold.quote) not in normalise(text):
            problems.append(f"gold quote not verbatim in {gold.page!r}: {gold.quote[:60]!r}")
    for label, concept in leak.items():
        leaked = leaked_words(question.question, concept)
        if leaked:
            problems.append(f"question names the concept of {label!r} ({concept!r}): {', '.join(leaked)}")
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
    if any(fuzz.ratio(normalise(question.question).lower(), normalise(g.quote).lower()) >= 90 for g in question.gold):
        problems.append("question copies its evidence")
    mention = SOURCE_MENTION.search(question.question)
    if mention:
        problems.append(f"question refers to its source material: {mention.group(0)!r}")
    for other in earlier:
        if fuzz.token_set_ratio(question.question.lower(), other.lower()) >= 90:
            problems.append(f"near-duplicate of an earlier question: {other[:60]!r}")
            break
    return problems
