"""What is not read, accounted in one place: the evidence behind each skip, the bounds a guess must
keep, the share of the text skipped, and the lines that say so (--list-chapters, the plan event,
the first milestone lines, warnings).

Only structural evidence (epub:type, ARIA role, landmarks, guide, the nav document, non-linear
spine items, Project Gutenberg's START/END markers) may skip a part of any size, and a list whose
lines are found elsewhere in the book (evidence "lines", classify.py: what it skips is said
elsewhere; what is not, a page at most). A guess from text,
a title or a file name may skip a page at most (a list whose lines are each checked to be of its
kind, such as a transcriber's corrections, may be longer), and all guesses together at most
GUESS_BUDGET of the text: past that, the guessed parts are read after all and a warning names them.
"""

from __future__ import annotations

from .model import Book, Skipped

# Characters of text a guessed skip may take in one part, with everything it takes along (the
# lines of a title page, entries nested under it, the rest of its file): a title, copyright or
# imprint page is shorter.
PAGE_SIZE = 2000
# The share of the book's text that guessed skips may cost together; past it they are read.
GUESS_BUDGET = 0.02
# Skipping more than this share on guesses is said in a warning that names the parts.
WARN_SHARE = 0.02
GUESSES = ("guess", "repetition")
# Parts named in one warning line; the rest are counted.
NAMED_PARTS = 12

# The evidence in a skip reason's parentheses, or the whole reason, → its kind.
STRUCTURE = ("epub:type", "landmarks", "guide", "nav document", "non-linear spine item",
             "Project Gutenberg boilerplate", "read inline", "read at chapter ends")
EMPTY = ("no text", "cover image page")
# Guesses made line by line: each of the part's lines is checked, so its size is no risk.
LINE_CHECKED = ("errata lines", "its lines and contents lines")
# A list whose lines are nearly all found elsewhere in the book (classify.py: a contents page, a
# list of theorems): what skipping it loses is said elsewhere, and what is not (a page at most) is
# bounded where it is decided. Evidence "lines": counted in the summary, no guess, no warning.
VERIFIED = ("its lines found elsewhere in the book",)
# A licence named by its title whose text holds one of that licence's fixed sentences: its size is
# the licence's, so only the guesses' budget bounds it.
WHOLE = ("its title and text",)


# --list-chapters --preview: this many words of each chapter and skipped part.
PREVIEW_WORDS = 12


def preview(texts) -> str:
    """The first PREVIEW_WORDS words of some paragraphs, "…" where they go on."""
    words: list[str] = []
    for text in texts:
        words += text.split()
        if len(words) > PREVIEW_WORDS:
            return " ".join(words[:PREVIEW_WORDS]) + " …"
    return " ".join(words)


def short_title(text: str, limit: int = 60) -> str:
    """A skipped part named by its own text: at most `limit` characters, "…" where it is cut."""
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def _detail(reason: str) -> str:
    return reason[reason.rfind("(") + 1:].rstrip(")") if reason.endswith(")") else reason


def evidence_of(reason: str) -> str:
    """"structure", "lines", "guess" or "empty" for a reason the cutter gives ("copyright page (text)"):
    what is not known to be structure is a guess, so it stays bounded."""
    detail = _detail(reason)
    if reason.startswith(EMPTY) or detail in EMPTY:
        return "empty"
    if detail in STRUCTURE or reason in STRUCTURE or reason.startswith("notes ("):
        return "structure"
    if detail in VERIFIED:
        return "lines"
    return "guess"


def page_bound(reason: str) -> float:
    """The characters a guess for `reason` may skip in one part."""
    return float("inf") if _detail(reason) in LINE_CHECKED + VERIFIED + WHOLE else PAGE_SIZE


def kind_of(reason: str) -> str:
    """What a part is, without the evidence: "copyright page (epub:type)" → "copyright page"."""
    return reason.split(" (")[0]


def skipped_chars(book: Book) -> int:
    return sum(s.chars for s in book.skipped)


def share(skipped: int, read: int) -> float:
    """The part of the book's text (read + skipped) that is skipped."""
    total = skipped + read
    return skipped / total if total else 0.0


def over_budget(guessed: int, total: int) -> bool:
    """Whether guessed skips of `guessed` characters cost more of a `total`-character text than a
    guess may."""
    return guessed > GUESS_BUDGET * total


def percent(fraction: float) -> str:
    return f"{fraction * 100:.1f} %"


def summary(book: Book) -> str:
    """One line: "Skipping 5 parts, 3,210 characters (0.4 % of the text): cover, table of contents"."""
    if not book.skipped:
        return "Skipping nothing: every part is read."
    chars = skipped_chars(book)
    parts = len(book.skipped)
    counts: dict[str, int] = {}
    for s in book.skipped:
        counts[kind_of(s.reason)] = counts.get(kind_of(s.reason), 0) + 1
    kinds = ", ".join(kind if n == 1 else f"{kind} ×{n}" for kind, n in counts.items())
    return (f"Skipping {parts} part{'s' if parts != 1 else ''}, {chars:,} character{'s' if chars != 1 else ''} "
            f"({percent(share(chars, book.read_chars))} of the text): {kinds}")


def plan_fields(book: Book) -> dict:
    """The skip accounting for programs: the JSON plan event and `--list-chapters --progress json`."""
    chars = skipped_chars(book)
    by_evidence: dict[str, int] = {}
    for s in book.skipped:
        by_evidence[s.evidence] = by_evidence.get(s.evidence, 0) + s.chars
    return {"parts": len(book.skipped), "characters": chars, "read_characters": book.read_chars,
            "share": round(share(chars, book.read_chars), 4), "by_evidence": by_evidence,
            "summary": summary(book)}


def named(parts: list[Skipped]) -> str:
    """'Title' (reason, N characters), … for a warning; the first NAMED_PARTS, the rest counted."""
    shown = [f"'{s.title}' ({s.reason}, {s.chars:,} characters)" for s in parts[:NAMED_PARTS]]
    if len(parts) > NAMED_PARTS:
        shown.append(f"and {len(parts) - NAMED_PARTS} more")
    return ", ".join(shown)


def large_skip_warning(book: Book) -> str | None:
    """The warning for a book whose guessed skips (text, titles, file names, repetition) cost more
    than WARN_SHARE of its text. What its own markup skips, of any size (Gutenberg's licence,
    epub:type), is no guess: the summary line counts it, no warning."""
    parts = [s for s in book.skipped if s.chars and s.evidence in GUESSES]
    chars = sum(s.chars for s in parts)
    fraction = share(chars, book.read_chars + skipped_chars(book) - chars)
    if fraction <= WARN_SHARE:
        return None
    return (f"{percent(fraction)} of the text is skipped on a guess ({chars:,} characters in {len(parts)} "
            f"part{'s' if len(parts) != 1 else ''}): {named(parts)}; --list-chapters lists them")


def read_back_warning(parts: list[Skipped], guessed: int, total: int) -> str:
    """The warning for guessed skips past the budget (`guessed` characters of a `total`-character
    text, all guesses counted): `parts`, from the one that passed it on, are read after all."""
    return (f"guessed skips would leave {percent(guessed / total if total else 0.0)} of the text unread (more "
            f"than {percent(GUESS_BUDGET)}), so {'these' if len(parts) != 1 else 'this'} {len(parts)} "
            f"part{'s are' if len(parts) != 1 else ' is'} "
            f"read after all: {named(parts)}")


def account(book: Book) -> None:
    """Say in the book's warnings when what guesses skip costs more than WARN_SHARE of its text."""
    warning = large_skip_warning(book)
    if warning:
        book.warnings.append(warning)
