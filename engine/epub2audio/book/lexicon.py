"""Pronunciations: the book's own (EPUB 3 PLS lexicons, inline `ssml:ph`) and the user's lexicon.

How a pronunciation reaches the voice
-------------------------------------
Chapter text stays plain: `Chapter.pronunciations` maps a paragraph index to spans
`(start, end, ipa)` over that paragraph, taken from `ssml:ph` attributes (alphabet "ipa"; other
alphabets are read as plain text). When segments are planned (render.plan_segments), each
paragraph is first run through `apply`: its spans, the book's PLS entries and the user's lexicon
turn words into inline markup, which the normaliser leaves alone and which travels in the segment
text (so a changed lexicon changes segment texts and the store re-renders exactly those):

    ⟦TEXT⟧             TEXT is said as written: a user respelling, never normalised further.
    ⟦TEXT|ipa:IPA⟧     TEXT is said as the IPA string IPA (spaces separate words).

Each voice interprets the markup when it receives a segment:

* Piper ("joe") speaks the IPA: `voices.piper.phoneme_input` turns `⟦TEXT|ipa:IPA⟧` into Piper
  1.8's raw-phoneme block `[[ IPA ]]` (see piper/voice.py `PiperVoice.phonemize`: text between
  `[[` and `]]` is taken as phonemes, one symbol per code point), after mapping dictionary-style
  IPA onto the espeak-ng symbol set the model was trained on (g→ɡ, r→ɹ, ɜr→ɜː, ər→ɚ, y→j, stress
  marks moved before the vowel) and dropping symbols the model has no id for.
* Every other voice (CosyVoice3, the test tone) never sees IPA: for them `render.plan_segments`
  leaves the ssml:ph spans, the PLS entries and the user's IPA entries out before normalising (so
  "30° 31′" is read in context as "thirty degrees thirty-one minutes"), and `plain` unwraps the
  respelling markup. CosyVoice3 could take CMU phones inline; IPA→CMU is not done yet.

Precedence, strongest first: inline `ssml:ph` on that very occurrence; the `--lexicon` file; the
per-book file's lexicon (BOOK.epub2audio.toml next to the EPUB); the config file's `lexicon`; the
book's PLS lexicons. Within one lexicon, longer entries win over shorter ones ("New York" before
"York").

User lexicon format
-------------------
A UTF-8 text file, one entry a line, `#` starts a comment:

    Hermione = her-MY-oh-nee        # a respelling: the voice reads this text instead
    Nguyen = /wɪn/                  # IPA between slashes: a phoneme override
    New Orleans = new OR-linz       # several words: matched as a phrase, any spacing
    colonel = kernel                # all lower case: matches any case (Colonel, COLONEL)

Matching is on whole words (a letter or digit may not touch either end). An entry whose key is all
lower case matches in any case; a key with a capital letter matches that exact spelling only
("Reading = redding" leaves the verb "reading" alone). A file ending in .toml is read as TOML: a
table `[lexicon]` (or top-level keys) of the same `key = "value"` pairs.
"""

from __future__ import annotations

import re
import tomllib
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from lxml import etree

from ..errors import InputError

OPEN, CLOSE, SEP = "\u27e6", "\u27e7", "|"
MARKUP = re.compile(r"\u27e6([^\u27e6\u27e7|]*)(?:\|ipa:([^\u27e6\u27e7]*))?\u27e7")
PLS_NS = "{http://www.w3.org/2005/01/pronunciation-lexicon}"
SSML_NS = "http://www.w3.org/2001/10/synthesis"
# Voices that speak the ⟦…|ipa:…⟧ markup themselves; the others get plain text.
PHONEME_VOICES = frozenset(["joe", "piper", "default"])


def mark(text: str, ipa: str | None = None) -> str:
    text = text.replace(OPEN, "").replace(CLOSE, "").replace(SEP, " ")
    if ipa is None:
        return f"{OPEN}{text}{CLOSE}"
    ipa = ipa.replace(OPEN, "").replace(CLOSE, "")
    return f"{OPEN}{text}{SEP}ipa:{ipa}{CLOSE}"


def plain(text: str) -> str:
    """The markup's written side only: what a voice without phoneme support reads."""
    return MARKUP.sub(lambda m: m.group(1), text)


def voice_text(text: str, voice: str) -> str:
    return text if voice in PHONEME_VOICES else plain(text)


def protect(text: str) -> tuple[str, list[str]]:
    """Replace each markup by one private-use character, so rules that work on words do not see
    inside it; `restore` puts them back."""
    found: list[str] = []

    def keep(m):
        found.append(m.group(0))
        return chr(0xF0000 + len(found) - 1)

    return MARKUP.sub(keep, text), found


def restore(text: str, found: list[str]) -> str:
    if not found:
        return text
    return re.sub("[\U000f0000-\U000fffff]", lambda m: found[ord(m.group(0)) - 0xF0000], text)


# ----------------------------------------------------------------------------------------------
# Lexicons


@dataclass
class Entry:
    key: str
    respelling: str | None = None  # text to read instead
    ipa: str | None = None  # or phonemes

    @property
    def exact_case(self) -> bool:
        return self.key != self.key.lower()


@dataclass
class Lexicon:
    entries: list[Entry] = field(default_factory=list)
    _pattern: re.Pattern | None = field(default=None, init=False, repr=False)
    _exact: dict = field(default_factory=dict, init=False, repr=False)
    _folded: dict = field(default_factory=dict, init=False, repr=False)

    def __bool__(self) -> bool:
        return bool(self.entries)

    def merged_over(self, weaker: Lexicon) -> Lexicon:
        """This lexicon's entries win over `weaker`'s for the same key."""
        keys = {_fold_key(e.key, e.exact_case) for e in self.entries}
        return Lexicon(self.entries + [e for e in weaker.entries if _fold_key(e.key, e.exact_case) not in keys])

    def _compile(self):
        if self._pattern is not None or not self.entries:
            return
        self._exact, self._folded = {}, {}
        for e in self.entries:
            words = " ".join(e.key.split())
            if e.exact_case:
                self._exact.setdefault(words, e)
            else:
                self._folded.setdefault(words.casefold(), e)
        keys = sorted({" ".join(e.key.split()) for e in self.entries}, key=len, reverse=True)
        alternatives = "|".join(r"\s+".join(map(re.escape, k.split(" "))) for k in keys)
        self._pattern = re.compile(rf"(?<![\w\u27e6|])(?:{alternatives})(?![\w\u27e7])", re.IGNORECASE)

    def lookup(self, found: str) -> Entry | None:
        words = " ".join(found.split())
        return self._exact.get(words) or self._folded.get(words.casefold())

    def apply(self, text: str) -> str:
        """Words with an entry → markup (outside existing markup)."""
        if not self.entries:
            return text
        self._compile()
        protected, kept = protect(text)

        def sub(m):
            entry = self.lookup(m.group(0))
            if entry is None:
                return m.group(0)
            if entry.ipa is not None:
                return mark(m.group(0), entry.ipa)
            return mark(entry.respelling or "")

        return restore(self._pattern.sub(sub, protected), kept)


def _fold_key(key: str, exact: bool) -> str:
    key = " ".join(key.split())
    return key if exact else key.casefold()


def _entry(key: str, value: str, where: str) -> Entry:
    key, value = key.strip(), value.strip()
    if not key or not value:
        raise InputError(f"{where}: an entry needs `word = pronunciation`")
    if len(value) >= 2 and value[0] == value[-1] == "/":
        return Entry(key, ipa=value[1:-1].strip())
    return Entry(key, respelling=value)


def parse_user_lexicon(text: str, name: str = "lexicon") -> Lexicon:
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip() if not line.lstrip().startswith("#") else ""
        if not line:
            continue
        key, eq, value = line.partition("=")
        if not eq:
            raise InputError(f"{name} line {number}: expected `word = pronunciation`, got {line!r}")
        entries.append(_entry(key, value, f"{name} line {number}"))
    return Lexicon(entries)


def load_user_lexicon(path: str | Path) -> Lexicon:
    path = Path(path).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: cannot read the lexicon ({error})") from None
    if path.suffix.lower() == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise InputError(f"{path}: not a valid TOML lexicon ({error})") from None
        table = data.get("lexicon", data)
        return Lexicon([_entry(k, str(v), str(path)) for k, v in table.items() if isinstance(v, str)])
    return parse_user_lexicon(text, str(path))


def parse_pls(data: bytes) -> Lexicon:
    """A W3C PLS document → entries (IPA phonemes, or aliases as respellings)."""
    root = etree.fromstring(data, etree.XMLParser(recover=True, no_network=True, resolve_entities=False))
    if root is None:
        return Lexicon()
    alphabet = (root.get("alphabet") or "ipa").lower()
    entries = []
    for lexeme in root.iter(f"{PLS_NS}lexeme"):
        graphemes = [g.text.strip() for g in lexeme.iter(f"{PLS_NS}grapheme") if g.text and g.text.strip()]
        phoneme = next((p for p in lexeme.iter(f"{PLS_NS}phoneme") if p.text and p.text.strip()), None)
        alias = next((a.text.strip() for a in lexeme.iter(f"{PLS_NS}alias") if a.text and a.text.strip()), None)
        ipa = None
        if phoneme is not None and (phoneme.get("alphabet") or alphabet).lower() == "ipa":
            ipa = unicodedata.normalize("NFC", phoneme.text.strip())
        for grapheme in graphemes:
            if ipa:
                entries.append(Entry(grapheme, ipa=ipa))
            elif alias:
                entries.append(Entry(grapheme, respelling=alias))
    return Lexicon(entries)


# ----------------------------------------------------------------------------------------------
# Per-book settings and the lexicon a job uses


def book_settings_path(book_path: str | Path) -> Path:
    """`Book.epub` → `Book.epub2audio.toml` beside it."""
    book_path = Path(book_path)
    return book_path.with_name(book_path.stem + ".epub2audio.toml")


def load_book_settings(book_path: str | Path) -> dict:
    """The per-book settings file, if there is one. Keys: lexicon (a path, relative to the book's
    folder), notes, say_titles, keep_front_matter, image_alt, and a [lexicon] table of entries given inline."""
    path = book_settings_path(book_path)
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as error:
        raise InputError(f"{path}: not a valid TOML settings file ({error})") from None
    return data


def job_lexicon(book_path: str | Path | None, config: dict | None = None, cli_path: str | Path | None = None) -> Lexicon:
    """The user's lexicon for one job: --lexicon over the per-book file over config.toml."""
    layers: list[Lexicon] = []
    if cli_path:
        layers.append(load_user_lexicon(cli_path))
    if book_path is not None:
        settings = load_book_settings(book_path)
        inline = settings.get("lexicon")
        if isinstance(inline, dict):
            layers.append(Lexicon([_entry(k, str(v), str(book_settings_path(book_path)))
                                   for k, v in inline.items() if isinstance(v, str)]))
        elif isinstance(inline, str) and inline:
            layers.append(load_user_lexicon(Path(book_path).parent / Path(inline).expanduser()))
    if config and config.get("lexicon"):
        layers.append(load_user_lexicon(config["lexicon"]))
    result = Lexicon()
    for layer in reversed(layers):
        result = layer.merged_over(result)
    return result


def apply(text: str, spans: list[tuple[int, int, str]] | None = None, book: Lexicon | None = None,
          user: Lexicon | None = None) -> str:
    """One paragraph's text → text with pronunciation markup: inline spans first (they are for that
    occurrence), then the user's lexicon, then the book's PLS entries on what is left."""
    if spans:
        out, pos = [], 0
        for start, end, ipa in sorted(spans):
            if start < pos or end > len(text) or start >= end:
                continue
            out.append(text[pos:start])
            out.append(mark(text[start:end], ipa))
            pos = end
        out.append(text[pos:])
        text = "".join(out)
    if user:
        text = user.apply(text)
    if book:
        text = book.apply(text)
    return text
