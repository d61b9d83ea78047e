"""Cause and fix sentence patterns of help pages (the `structural` extractor's only hand rules).

Help pages state causes and fixes in a few stock phrasings ("This can happen because ...", "If the
light stays amber, reset the hub.", "To fix this, ..."). Each pattern returns the phrase and its
character span inside the sentence, so the record's evidence is an exact span of the document.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CAUSE_PATTERNS = [
    re.compile(
        r"\b(?:this|that|it|the (?:problem|issue|error))\s+(?:can|could|may|might|will|is likely to)\s+"
        r"(?:be\s+)?(?:happen|occur|appear|caused)\s+(?:if|when|because(?: of)?|by)\s+(?P<x>[^.;:]{3,160})",
        re.IGNORECASE,
    ),
    re.compile(
        r"\b(?:is|are)\s+(?:often |usually |probably |most likely |likely )?(?:caused by|due to)\s+"
        r"(?P<x>[^.;:]{3,160})",
        re.IGNORECASE,
    ),
    re.compile(r"\b(?:this|it) (?:is|was) because\s+(?P<x>[^.;:]{3,160})", re.IGNORECASE),
    re.compile(
        r"\bthe (?:most )?(?:likely |common |usual )?(?:cause|reason) (?:is|may be|might be|could be)\s+"
        r"(?:that\s+)?(?P<x>[^.;:]{3,160})",
        re.IGNORECASE,
    ),
]

FIX_PATTERNS = [
    re.compile(
        r"^(?:to (?:fix|solve|resolve|correct|work around) (?:this|the problem|the issue|it)[^,]*,\s*)"
        r"(?P<x>[^.;]{3,160})",
        re.IGNORECASE,
    ),
    re.compile(
        r"\b(?:try|you (?:can|could|may|might|should|must|need to|will need to) (?:need to |have to )?(?:try to )?)"
        r"(?P<x>(?:restart|reboot|reinstall|update|upgrade|check|disable|enable|remove|delete|reset|turn|"
        r"switch|unplug|plug|reconnect|connect|disconnect|install|change|use|open|close|log|move|replace|"
        r"make sure|ensure|select|run|set|adjust|charge|clean)\b[^.;]{2,160})",
        re.IGNORECASE,
    ),
]

# "If <condition>, <imperative action>." -- the action must start with a base-form verb (checked by
# the caller with spaCy's tag VB), otherwise "If you want X, the panel shows Y" would count.
CONDITION = re.compile(r"^If (?P<cond>[^,]{3,160}),\s+(?P<x>[^.;]{3,200})")


@dataclass(frozen=True)
class PatternMatch:
    kind: str  # cause | fix | condition
    text: str
    start: int  # offsets inside the sentence
    end: int


def _clean(text: str, start: int) -> tuple[str, int, int]:
    """Strip surrounding spaces and trailing punctuation, keeping offsets exact."""
    stripped = text.rstrip(" ,;:)").rstrip()
    lead = len(stripped) - len(stripped.lstrip())
    stripped = stripped.lstrip()
    return stripped, start + lead, start + lead + len(stripped)


def find_causes(sentence: str) -> list[PatternMatch]:
    out = []
    for pattern in CAUSE_PATTERNS:
        for match in pattern.finditer(sentence):
            text, start, end = _clean(match.group("x"), match.start("x"))
            if text:
                out.append(PatternMatch("cause", text, start, end))
    return _dedupe(out)


def find_fixes(sentence: str) -> list[PatternMatch]:
    out = []
    for pattern in FIX_PATTERNS:
        for match in pattern.finditer(sentence):
            text, start, end = _clean(match.group("x"), match.start("x"))
            if text:
                out.append(PatternMatch("fix", text, start, end))
    return _dedupe(out)


def find_condition(sentence: str) -> tuple[PatternMatch, PatternMatch] | None:
    """(condition, action) of an "If <cond>, <action>" sentence, else None."""
    match = CONDITION.match(sentence)
    if match is None:
        return None
    cond = _clean(match.group("cond"), match.start("cond"))
    action = _clean(match.group("x"), match.start("x"))
    return PatternMatch("condition", *cond), PatternMatch("fix", *action)


def _dedupe(matches: list[PatternMatch]) -> list[PatternMatch]:
    """Drop matches contained in an earlier, longer one (two patterns hitting the same phrase)."""
    kept: list[PatternMatch] = []
    for m in sorted(matches, key=lambda m: (m.start, -(m.end - m.start))):
        if not any(k.start <= m.start and m.end <= k.end for k in kept):
            kept.append(m)
    return kept
