"""BM25 ranking of tools for a query in words: over each tool's name (split at ``_``, ``-``, ``.``
and camelCase humps), title, description and arguments' names and descriptions, the name counting
most.

Pure scoring, no I/O: :class:`ToolIndex` is built from what one principal sees and answers
:meth:`ToolIndex.search`. Words are lowercased, common English words dropped and light suffixes
cut ("tickets", "closing", "closed" all match "close"), and the verbs of the usual CRUD tools
have a few synonyms ("remove" matches delete_*, "show" list_*).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

# BM25's usual constants: term-frequency saturation, and how much a long text is discounted.
K1 = 1.2
B = 0.75
# How many times a word of each field counts (a simple BM25F): the name says what a tool does.
NAME_WEIGHT, TITLE_WEIGHT, DESCRIPTION_WEIGHT = 3, 2, 1

_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_STOP_WORDS = frozenset((
    "a", "about", "an", "and", "any", "are", "as", "at", "be", "by", "can", "do", "does", "for",
    "from", "has", "have", "how", "i", "in", "into", "is", "it", "its", "me", "my", "of", "on",
    "or", "our", "please", "some", "that", "the", "their", "them", "then", "this", "those", "to",
    "use", "want", "was", "we", "what", "when", "which", "who", "will", "with", "you", "your",
))


# Verbs of the usual create / read / update / delete / list tools, by their stem: a query saying
# "remove" finds delete_*, "show" finds list_*. Applied to tools' words and queries alike.
_SYNONYMS = {
    "show": "list", "enumerat": "list", "brows": "list",
    "fetch": "get", "retriev": "get", "read": "get", "view": "get", "look": "get",
    "add": "creat", "new": "creat", "mak": "creat", "regist": "creat",
    "edit": "updat", "chang": "updat", "modify": "updat", "renam": "updat",
    "remov": "delet", "eras": "delet", "destroy": "delet",
}


def words(text: str | None) -> list[str]:
    """The searchable words of ``text``: split, lowercased, without stop words, stemmed."""
    if not text:
        return []
    found = [_SYNONYMS.get(word, word) for word in (stem(part.lower()) for part in _PARTS.findall(text))]
    return [word for word in found if word and word not in _STOP_WORDS]


@lru_cache(maxsize=8192)
def stem(word: str) -> str:
    """A light suffix cut, the same for a query's words and a tool's (not a linguist's stemmer)."""
    if word in _STOP_WORDS or len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


@lru_cache(maxsize=8192)
def _document(name: str, title: str | None, description: str | None, arguments: str) -> tuple[str, ...]:
    return tuple(words(name) * NAME_WEIGHT + words(title) * TITLE_WEIGHT
                 + words(description) * DESCRIPTION_WEIGHT + words(arguments))


def _arguments_text(tool: Any) -> str:
    """The names and descriptions of a tool's arguments (its input schema's properties)."""
    schema = getattr(getattr(tool, "input_schema", None), "schema", None) or {}
    properties = schema.get("properties") or {}
    parts = []
    for key, value in properties.items():
        parts.append(key)
        if isinstance(value, dict) and isinstance(value.get("description"), str):
            parts.append(value["description"])
    return " ".join(parts)


@dataclass(frozen=True)
class Match:
    tool: Any
    score: float


class ToolIndex:
    """The BM25 statistics of a set of tools (anything with ``name``, ``title``, ``description``)."""

    def __init__(self, tools: Iterable[Any]):
        self.tools = list(tools)
        self._terms = [Counter(_document(tool.name, tool.title, tool.description, _arguments_text(tool)))
                       for tool in self.tools]
        self._lengths = [sum(terms.values()) for terms in self._terms]
        count = len(self.tools)
        self._average = (sum(self._lengths) / count) if count else 0.0
        frequency: Counter[str] = Counter()
        for terms in self._terms:
            frequency.update(terms.keys())
        # BM25's idf, kept positive (the "+1" form) so a word in most tools still counts a little.
        self._idf = {term: math.log(1 + (count - seen + 0.5) / (seen + 0.5))
                     for term, seen in frequency.items()}

    def search(self, query: str, limit: int) -> list[Match]:
        """The ``limit`` best tools for ``query``, best first (ties by name); those matching no
        word of it are left out."""
        terms = set(words(query))
        matches = []
        for tool, counts, length in zip(self.tools, self._terms, self._lengths, strict=True):
            score = 0.0
            for term in terms:
                frequency = counts.get(term)
                if frequency:
                    norm = K1 * (1 - B + B * length / self._average)
                    score += self._idf[term] * frequency * (K1 + 1) / (frequency + norm)
            if score > 0:
                matches.append(Match(tool, score))
        matches.sort(key=lambda match: (-match.score, match.tool.name))
        return matches[:limit]
