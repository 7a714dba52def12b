"""Untrusted text in a prompt: delimited by tags the text cannot close, open or guess.

Whatever an agent did not write itself (its inputs, the run's goal and context, web pages
and files a tool returns) enters the conversation between ``<untrusted_input_TOKEN ...>``
and ``</untrusted_input_TOKEN>``, where TOKEN is random per node (``DataFence``). Two
layers keep the data inside its block:

- the token: a forged tag must name it, and the data never saw it (each node has its
  own, derived from a per-run nonce it does not show: an upstream agent that was talked
  into leaking its own token leaks nothing of its dependents');
- neutralising: any text a model could read as the start of a tag whose name begins with
  ``untrusted`` (opening or closing, with or without a token) has its ``<`` replaced by
  ``[``. It is looked for in a *skeleton* of the text, where look-alikes are brought
  back to what they look like: HTML entities decoded (``&lt;``, ``&#x3c;``, twice
  encoded ``&amp;lt;``), Unicode NFKD applied (full-width and small "<": U+FF1C, U+FE64),
  invisible characters dropped (zero-width joiners, bidi controls, control characters,
  accents), case folded, and the angle brackets of other scripts mapped to "<".

Rejected: escaping ``</untrusted_input`` as ``<\\/untrusted_input`` (a model still reads
it as a tag, and look-alikes and opening tags passed); a token per run shared by its
nodes (one node's output could quote it to the next); a fresh random token per attempt
(a retry would send another prompt, missing the prompt cache and the response cache).
"""

from __future__ import annotations

import hashlib
import html
import re
import secrets
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

TAG_PREFIX = "untrusted_input"
TOKEN_HEX_CHARS = 16  # 64 bits: not guessable by text that never saw it

# What a model may read as "<" beside ASCII and its compatibility twins (full-width, small,
# which NFKD brings back): single guillemet, angle brackets of mathematics, CJK and
# ornaments, modifier arrowhead, Canadian syllabics PA, presentation-form angle bracket.
OPENERS = frozenset("\u2039\u2329\u3008\u27e8\u276e\u276c\u29fc\u02c2\u1438\ufe3f")
# Between "<" and the name, anything but letters, digits and brackets ("</", "<\\/", "< /",
# "<!--"): a false alarm only turns a "<" into "[", a miss could end a block.
FORGED_TAG = re.compile(r"<[^a-z0-9<>]{0,16}untrusted")
ENTITY = re.compile(r"&(?:#[0-9]{1,7};?|#[xX][0-9a-fA-F]{1,6};?|[A-Za-z][A-Za-z0-9]{1,31};?)")
DECODING_ROUNDS = 3  # &amp;amp;lt; is decoded to "<" too
NEUTRAL_OPENER = "["
INVISIBLE_CATEGORIES = frozenset({"Cf", "Mn", "Me", "Cc", "Zl", "Zp"})
HANGUL_FILLERS = frozenset("\u115f\u1160\u3164\uffa0")
# Control characters but the blanks (which the tag pattern allows between "<" and the name).
ASCII_CONTROLS = frozenset(chr(c) for c in (*range(32), 127)) - frozenset("\t\n\r\x0b\x0c")


@dataclass(frozen=True)
class DataFence:
    """The tags of one node's untrusted data: ``<untrusted_input_TOKEN ...>`` blocks."""

    token: str

    @classmethod
    def for_node(cls, run_nonce: str, node_id: str) -> DataFence:
        """The node's fence: the same for every attempt of the node (a retry sends the
        same prompt), different for every node and every run."""
        if not run_nonce:  # a run created before nonces: random, kept in the checkpoint
            return cls.random()
        digest = hashlib.sha256(f"{run_nonce}\x00{node_id}".encode()).hexdigest()
        return cls(digest[:TOKEN_HEX_CHARS])

    @classmethod
    def random(cls) -> DataFence:
        return cls(secrets.token_hex(TOKEN_HEX_CHARS // 2))

    @property
    def tag(self) -> str:
        return f"{TAG_PREFIX}_{self.token}"

    def block(self, text: str, **attributes: str) -> str:
        """``text`` as one delimited block; ``attributes`` say where it comes from."""
        shown = "".join(f' {name}="{quoted(value)}"' for name, value in attributes.items())
        return f"<{self.tag}{shown}>\n{neutralised(text)}\n</{self.tag}>"


def quoted(value: str) -> str:
    """An attribute value that cannot end its quotes or its tag."""
    return neutralised(value).replace('"', "'").replace(">", ")").replace("\n", " ")


def neutralised(text: str) -> str:
    """``text`` with every look-alike of an ``<untrusted...`` tag start made inert."""
    for _ in range(len(text) + 1):  # each round removes one opener: it ends
        spans = forged_openers(text)
        if not spans:
            return text
        for start, end in reversed(spans):
            text = text[:start] + NEUTRAL_OPENER + text[end:]
    raise AssertionError("unreachable: every round removes an opener")


def forged_openers(text: str) -> list[tuple[int, int]]:
    """The spans of ``text`` that a model could read as the "<" of an untrusted tag."""
    if not might_hold_a_tag(text):
        return []
    chars, origins = skeleton(text)
    found = sorted({origins[match.start()] for match in FORGED_TAG.finditer("".join(chars))})
    return merged(found)


def merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted spans, the overlapping ones joined (a character NFKD splits in several
    shares its span with its pieces)."""
    out: list[tuple[int, int]] = []
    for start, end in spans:
        if out and start < out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def might_hold_a_tag(text: str) -> bool:
    """A cheap first look: plain ASCII text with no "<" or "&" cannot hold a tag."""
    return not (text.isascii() and "<" not in text and "&" not in text)


def skeleton(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """``text`` as a model might read it, one character at a time, with the span of
    ``text`` each character comes from."""
    chars = list(text)
    origins = [(i, i + 1) for i in range(len(text))]
    for _ in range(DECODING_ROUNDS):
        chars, origins = folded(chars, origins)
        decoded = decode_entities(chars, origins)
        if decoded is None:
            break
        chars, origins = decoded
    return folded(chars, origins)


def folded(
    chars: list[str], origins: list[tuple[int, int]]
) -> tuple[list[str], list[tuple[int, int]]]:
    """Each character decomposed (NFKD) and case-folded, look-alikes mapped, invisibles dropped."""
    out_chars: list[str] = []
    out_origins: list[tuple[int, int]] = []
    for char, origin in zip(chars, origins, strict=True):
        for piece in fold(char):
            out_chars.append(piece)
            out_origins.append(origin)
    return out_chars, out_origins


@lru_cache(maxsize=8192)
def fold(char: str) -> str:
    """One character as a model might read it: "" if it shows nothing."""
    if char.isascii():
        return "" if char in ASCII_CONTROLS else char.lower()
    if char in OPENERS:
        return "<"
    if char in HANGUL_FILLERS or unicodedata.category(char) in INVISIBLE_CATEGORIES:
        return ""
    # NFKD: compatibility forms (full-width, small) to ASCII, accents split off and dropped
    decomposed = unicodedata.normalize("NFKD", char).casefold()
    return "".join(piece if piece == char else fold(piece) for piece in decomposed)


def decode_entities(
    chars: list[str], origins: list[tuple[int, int]]
) -> tuple[list[str], list[tuple[int, int]]] | None:
    """HTML entities decoded, each decoded character from the entity's whole span
    (None: there was none to decode)."""
    text = "".join(chars)  # one code point per item: indexes match ``chars``
    out_chars: list[str] = []
    out_origins: list[tuple[int, int]] = []
    position, changed = 0, False
    for match in ENTITY.finditer(text):
        decoded = html.unescape(match.group())
        if decoded == match.group():
            continue
        out_chars += chars[position : match.start()]
        out_origins += origins[position : match.start()]
        span = (origins[match.start()][0], origins[match.end() - 1][1])
        out_chars += list(decoded)
        out_origins += [span] * len(decoded)
        position, changed = match.end(), True
    if not changed:
        return None
    return out_chars + chars[position:], out_origins + origins[position:]
