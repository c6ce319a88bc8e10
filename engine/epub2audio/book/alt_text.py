"""What a picture's text alternative says, and whether it is worth saying aloud.

A picture the book marks as content keeps its words as a short spoken note ("Image: a map of the
river."). Read from, in order: `alt` (img), `aria-label`, `title`; for inline SVG its <title> and
<desc> children. Not read:
* decorative pictures: role="presentation"/"none", aria-hidden="true", an empty alt (HTML's own
  mark for decoration), the book's cover image;
* words that carry no information: a file name ("IMG_0012.jpg", "fig3"), a bare kind of picture
  in any of the book languages we know ("image", "illustration", "[Illustration]", "cover",
  "logo", "frontispiece", "Abbildung 3"), a publisher's mark ("The Standard Ebooks logo."), a
  converter's placeholder ("Alternative text not available"), or punctuation;
* words the caption next to the picture already says (a <figcaption>, or the text of the block
  that holds the picture).
Gutenberg's "[Illustration: The Mad Hatter]" keeps its description: "The Mad Hatter".
"""

from __future__ import annotations

import re

SVG_NS = "{http://www.w3.org/2000/svg}"
DECORATIVE_ROLES = frozenset(["presentation", "none"])
# Words naming a kind of picture, not what it shows (English, French, German, Spanish, Italian).
GENERIC_WORDS = frozenset(
    "image images img picture pic photo photograph illustration illustrations figure fig graphic "
    "drawing plate frontispiece cover coverpage cover-image logo icon decoration ornament ornamental "
    "divider separator spacer bullet vignette border banner title titlepage title-page page "
    "book front back chapter headpiece tailpiece dingbat flourish initial dropcap drop-cap line rule "
    "couverture illustration dessin gravure planche vignette bild abbildung illustration titelbild "
    "umschlag imagen ilustración ilustracion portada figura immagine illustrazione copertina tavola "
    "the a an of la le les el los das die der il lo de".split()
)
# A publisher's or a producer's mark ("The Standard Ebooks logo."): packaging, not the book.
BRANDING = frozenset(["logo", "logos", "icon", "badge", "colophon", "watermark", "imprint"])
ILLUSTRATION_PREFIX = re.compile(r"^\[?\s*(illustration|illus\.?|image|figure|fig\.?|plate|picture)\s*[:.\-–—]\s*",
                                 re.IGNORECASE)
FILE_NAME = re.compile(r"^[\w.\-/\\ ]*\.(jpe?g|png|gif|svg|webp|bmp|tiff?|avif)$|^[a-z]*[_\-]?\d+[a-z]?$|"
                       r"^[\w\-]*[_][\w\-]*$", re.IGNORECASE)
# What a converter writes when it has no description ("Alternative text not available").
PLACEHOLDER = re.compile(r"\b(alt(ernative)?[ -]?text|not available|no description|unavailable|"
                         r"description missing|missing description)\b", re.IGNORECASE)
SPOKEN = {"en": "Image: {}", "fr": "Image : {}", "de": "Bild: {}", "es": "Imagen: {}", "it": "Immagine: {}"}


def fold(text: str) -> str:
    return re.sub(r"\W+", " ", text.casefold()).strip()


def is_decorative(el) -> bool:
    roles = set((el.get("role") or "").lower().split())
    return bool(roles & DECORATIVE_ROLES) or (el.get("aria-hidden") or "").lower() == "true"


def raw_alternative(el, svg: bool = False) -> str:
    """The picture's own words, unjudged."""
    if svg:
        for child in el:
            if isinstance(child.tag, str) and child.tag in (SVG_NS + "title", "title"):
                text = " ".join("".join(child.itertext()).split())
                if text:
                    return text
        label = el.get("aria-label") or ""
        if label.strip():
            return " ".join(label.split())
        for child in el:
            if isinstance(child.tag, str) and child.tag in (SVG_NS + "desc", "desc"):
                return " ".join("".join(child.itertext()).split())
        return ""
    for attribute in ("alt", "aria-label", "title"):
        value = el.get(attribute)
        if value is not None:
            return " ".join(value.split())
    return ""


def informative(text: str) -> str:
    """The words worth saying out of an alternative text, or "" if it says nothing."""
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1].strip()
    text = ILLUSTRATION_PREFIX.sub("", text).strip(" []")
    if not text or FILE_NAME.match(text) or PLACEHOLDER.search(text):
        return ""
    words = [w for w in re.split(r"[\W\d_]+", text.casefold()) if w]
    if not words or all(w in GENERIC_WORDS or len(w) == 1 for w in words) or BRANDING & set(words):
        return ""
    return text


def repeats(alt: str, caption: str) -> bool:
    """Whether the caption beside the picture already says what its alternative says."""
    a, c = fold(alt), fold(caption)
    if not a or not c:
        return False
    return a in c or (len(c) >= 0.6 * len(a) and c in a)


def spoken_note(text: str, lang: str | None) -> str:
    code = (lang or "en").split("-")[0].lower()
    note = SPOKEN.get(code, SPOKEN["en"]).format(text)
    return note if note[-1] in ".!?…" else note + "."
