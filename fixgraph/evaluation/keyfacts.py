"""Key-fact coverage without a language model: each key fact is matched against the answer by rules.

A fact is covered when all three hold (thresholds are the `keyfacts` option, conf/keyfacts/lexical.yaml):
1. Exact literals: keyboard shortcuts (Ctrl+L, normalised for spaces and case), URIs (computer:///),
   numbers (1.2, 80%), quoted strings and multi-word UI labels (two or more capitalised words, small
   connectors allowed: "Remove Device", "Use Printer by Default") must appear in the answer verbatim
   (case-insensitive); at least `literal_min` of them. A paraphrased label or a wrong key is a miss.
2. Polarity: a negated fact ("does not improve security") needs a negation in the matching passage.
3. Content: in one passage of at most `window` consecutive answer sentences, either the fact's content
   words (spaCy lemmas of nouns, proper nouns, verbs, adjectives, adverbs and numbers, stop words out)
   are found for at least `lemma_min` of them, or rapidfuzz's partial / token-set ratio of the fact
   against the passage, scaled by the share of the fact's words present, reaches `fuzzy_min`
   (near-verbatim facts whose lemmas spaCy splits oddly; see `fuzzy_score` for why it is one-sided).
Coverage = covered facts / facts. It is cheap (no model call), reproducible and comparable across
runs; its agreement with people's grades is measured on the graded set (docs/ANSWERS.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

from fixgraph.registry import Registry

KEY_NAMES = r"(?:Ctrl|Control|Shift|Alt|AltGr|Super|Fn|Meta|Cmd)"
KEY_COMBO = re.compile(rf"\b{KEY_NAMES}(?:\s*\+\s*[\w/]+)+", re.I)
URI = re.compile(r"\b[a-z][a-z0-9+.-]*:///?[^\s,;)]*", re.I)
NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*%?(?![\w])")
QUOTED = re.compile(r"[\"“']([^\"”']{3,60})[\"”']")
CONNECTORS = r"(?:&|and|or|to|by|of|the|for|on|off|in|a)"
UI_LABEL = re.compile(rf"\b[A-Z][\w-]*(?:\s+(?:{CONNECTORS}\s+)?[A-Z][\w-]*)+")
SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+|\n+")
NEGATIONS = frozenset({"not", "no", "never", "n't", "without", "cannot", "nothing", "none", "neither", "nor"})
CONTENT_POS = frozenset({"NOUN", "PROPN", "VERB", "ADJ", "ADV", "NUM"})


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def _key(text: str) -> str:
    return re.sub(r"\s+", "", text).lower().replace("control", "ctrl")


def literals(fact: str) -> list[str]:
    """The parts of a fact that must appear verbatim: shortcuts, URIs, numbers, quotes, UI labels."""
    found: list[str] = []
    rest = fact
    for pattern in (KEY_COMBO, URI):
        found += [m.group(0) for m in pattern.finditer(rest)]
        rest = pattern.sub(" ", rest)
    found += [m.group(1) for m in QUOTED.finditer(rest)]
    found += [m.group(0) for m in UI_LABEL.finditer(rest)]
    found += [m.group(0) for m in NUMBER.finditer(rest)]
    return list(dict.fromkeys(found))


def literal_found(literal: str, answer: str) -> bool:
    if KEY_COMBO.fullmatch(literal):
        return _key(literal) in _key(answer)
    if NUMBER.fullmatch(literal):
        return literal in {m.group(0) for m in NUMBER.finditer(answer)}
    return _squash(literal) in _squash(answer)


def fuzzy_score(fact: str, passage: str) -> float:
    """How nearly verbatim the fact is in the passage (0-100), one-sided: the fact inside the passage.

    rapidfuzz's partial_ratio aligns the shorter string inside the longer one, and its token_set_ratio
    is 100 whenever one side's words are a subset of the other's: alone, a short passage ("Restart.")
    would match any fact containing its words, and one changed word in a short fact ("close the hub"
    for "close the app") still scores 87. So partial_ratio counts only when the passage is at least as
    long as the fact, and the better of the two ratios is scaled by the share of the fact's words that
    the passage contains.
    """
    from rapidfuzz import fuzz, utils

    a, b = utils.default_process(fact), utils.default_process(passage)
    if not a or not b:
        return 0.0
    partial = fuzz.partial_ratio(a, b) if len(b) >= len(a) else 0.0
    words = set(a.split())
    share = len(words & set(b.split())) / len(words)
    return float(max(partial, fuzz.token_set_ratio(a, b)) * share)


@lru_cache(maxsize=1)
def _nlp(model: str) -> Any:
    import spacy

    # tagger + lemmatizer only: no parser or NER (5x faster, and lemmas are all we use)
    return spacy.load(model, exclude=["parser", "ner", "senter"])


@dataclass(frozen=True)
class FactMatch:
    fact: str
    covered: bool
    literals: tuple[str, ...]
    literals_found: int
    lemma_recall: float
    fuzzy: float  # 0-100
    negation_ok: bool
    passage: str  # the best-matching answer passage


@dataclass(frozen=True)
class Coverage:
    matches: tuple[FactMatch, ...]

    @property
    def covered(self) -> list[int]:
        """1-based numbers of the covered facts (the judge prompt's numbering)."""
        return [i for i, m in enumerate(self.matches, start=1) if m.covered]

    @property
    def recall(self) -> float | None:
        return len(self.covered) / len(self.matches) if self.matches else None


class KeyFactMatcher(Protocol):
    name: str

    def identity(self) -> str: ...

    def coverage(self, facts: Sequence[str], answer: str) -> Coverage: ...


KEYFACT_MATCHERS: Registry[KeyFactMatcher] = Registry("keyfacts")


@KEYFACT_MATCHERS.register("lexical")
class LexicalKeyFactMatcher:
    def __init__(
        self,
        name: str,
        lemma_min: float,
        fuzzy_min: float,
        literal_min: float,
        window: int,
        spacy_model: str,
    ) -> None:
        if not 0 < lemma_min <= 1 or not 0 <= literal_min <= 1 or not 0 < fuzzy_min <= 100 or window < 1:
            raise ValueError(
                f"keyfacts {name}: lemma_min and literal_min are shares in (0, 1], fuzzy_min a score in "
                f"(0, 100], window >= 1; got {lemma_min}, {literal_min}, {fuzzy_min}, {window}"
            )
        self.name = name
        self.lemma_min, self.fuzzy_min, self.literal_min = lemma_min, fuzzy_min, literal_min
        self.window, self.spacy_model = window, spacy_model

    def identity(self) -> str:
        return (
            f"{self.name}:lemma>={self.lemma_min},fuzzy>={self.fuzzy_min},literal>={self.literal_min},"
            f"window={self.window},{self.spacy_model}"
        )

    def passages(self, answer: str) -> list[str]:
        sentences = [s.strip() for s in SENTENCE_END.split(answer) if s and s.strip()]
        if len(sentences) <= self.window:
            return [" ".join(sentences)] if sentences else []
        return [" ".join(sentences[i : i + self.window]) for i in range(len(sentences) - self.window + 1)]

    def coverage(self, facts: Sequence[str], answer: str) -> Coverage:
        nlp = _nlp(self.spacy_model)
        passages = self.passages(answer)
        docs = list(nlp.pipe([*facts, *passages]))
        fact_docs, passage_docs = docs[: len(facts)], docs[len(facts) :]
        passage_lemmas = [{t.lemma_.lower() for t in d} | {t.lower_ for t in d} for d in passage_docs]
        passage_negated = [any(t.lower_ in NEGATIONS for t in d) for d in passage_docs]
        matches = []
        for fact, doc in zip(facts, fact_docs, strict=True):
            content = {t.lemma_.lower() for t in doc if t.pos_ in CONTENT_POS and not t.is_stop and not t.is_punct}
            negated = any(t.lower_ in NEGATIONS for t in doc)
            wanted = literals(fact)
            found = sum(literal_found(lit, answer) for lit in wanted)
            literal_ok = not wanted or found / len(wanted) >= self.literal_min
            best: tuple[bool, float, float, bool, str] = (False, 0.0, 0.0, not negated, "")
            for passage, lemmas, has_negation in zip(passages, passage_lemmas, passage_negated, strict=True):
                recall = len(content & lemmas) / len(content) if content else 0.0
                fuzzy = fuzzy_score(fact, passage)
                polarity = has_negation or not negated
                hit = polarity and (recall >= self.lemma_min or fuzzy >= self.fuzzy_min)
                candidate = (hit, recall, float(fuzzy), polarity, passage)
                if candidate[:3] > best[:3]:
                    best = candidate
            hit, recall, fuzzy, polarity, passage = best
            matches.append(FactMatch(fact, hit and literal_ok, tuple(wanted), found, recall, fuzzy, polarity, passage))
        return Coverage(tuple(matches))


def build_keyfact_matcher(cfg: Any) -> KeyFactMatcher:
    from fixgraph.config import build

    return build(KEYFACT_MATCHERS, cfg)
