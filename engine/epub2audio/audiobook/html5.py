"""XHTML 1.1 / HTML 4 markup as HTML5 says it, for the read-along book's EPUB 2 → EPUB 3 upgrade.

EPUB 3 content documents are HTML5 (XHTML syntax), and EPUBCheck refuses what HTML5 made obsolete.
Books from every Project Gutenberg era and calibre's conversions carry plenty of it: <big>, <font>,
<center>, align=, width="50%", bgcolor=, xml:space= ... Each is mapped to its HTML5 form where
there is one, which for presentational markup is CSS: an element becomes a <span> or <div> with
the same look in a `style` attribute (<big> → font-size: larger; <center> → text-align: center),
an attribute becomes a declaration (align="right" on an image → float: right; width="50%" on an
image → width: 50%, the integer HTML5 allows otherwise kept). What has no HTML5 form (longdesc=,
charset=, compact, xml:space, ...) is dropped, and counted, so the caller can say what went.
The text, its elements' nesting and every id stay as they were: the read-along's highlights point
at them.
"""

from __future__ import annotations

import re
from collections import Counter

XHTML = "http://www.w3.org/1999/xhtml"
XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"

# Obsolete elements with an HTML5 form: (new element, the style that gives the old look).
ELEMENTS = {
    "big": ("span", "font-size: larger"),
    "tt": ("span", "font-family: monospace"),
    "strike": ("s", ""),
    "acronym": ("abbr", ""),
    "center": ("div", "text-align: center"),
    "dir": ("ul", ""),
    "nobr": ("span", "white-space: nowrap"),
    "blink": ("span", ""),
    "font": ("span", ""),  # its face/color/size become the style (_font_style)
    "marquee": ("div", ""),
    "listing": ("pre", ""),
    "xmp": ("pre", ""),
    "plaintext": ("pre", ""),
}
# Obsolete, empty, and without meaning in a book: removed (their tail text stays).
EMPTY_DROPPED = frozenset({"basefont", "isindex", "spacer"})

FONT_SIZES = {"1": "x-small", "2": "small", "3": "medium", "4": "large", "5": "x-large", "6": "xx-large",
              "7": "xx-large", "+1": "larger", "+2": "larger", "+3": "larger", "+4": "larger",
              "-1": "smaller", "-2": "smaller", "-3": "smaller"}
LIST_TYPES = {"1": "decimal", "a": "lower-alpha", "A": "upper-alpha", "i": "lower-roman", "I": "upper-roman",
              "disc": "disc", "circle": "circle", "square": "square"}

# Where width/height may stay as attributes, if they are a plain non-negative integer.
DIMENSIONED = frozenset({"img", "video", "canvas", "iframe", "embed", "object", "input", "source"})
# Replaced content: align= means float (left/right) or vertical-align; elsewhere text-align.
FLOATED = frozenset({"img", "object", "iframe", "embed", "applet", "table"})

# Attributes with no HTML5 form, on any element (where HTML5 does not define them for it).
DROPPED_ANYWHERE = frozenset({"charset", "rev", "longdesc", "compact", "nohref", "scheme", "profile", "version",
                              "language", "char", "charoff", "axis", "datapagesize", "frame", "rules",
                              "noshade", "clear", "link", "vlink", "alink", "marginwidth", "marginheight",
                              "topmargin", "leftmargin", "bottommargin", "rightmargin", "archive", "classid",
                              "codebase", "codetype", "declare", "standby", "valuetype"})
# Attributes HTML5 still has, but not on these elements.
DROPPED_ON = {
    "img": {"name"},
    "td": {"abbr", "scope"},
    "a": {"shape", "coords"},
    "table": {"summary", "cellspacing", "cellpadding"},
    "iframe": {"scrolling", "frameborder"},
}


def _local(el) -> str:
    tag = el.tag
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _add_style(el, declaration: str) -> None:
    if not declaration:
        return
    old = (el.get("style") or "").strip().rstrip(";").strip()
    el.set("style", f"{old}; {declaration}" if old else declaration)


def _length(value: str) -> str | None:
    """An HTML 4 length ("120", "120px", "50%") as CSS, or None."""
    value = value.strip()
    if re.fullmatch(r"\d+(\.\d+)?", value):
        return f"{value}px"
    if re.fullmatch(r"\d+(\.\d+)?(px|%|em)", value):
        return value
    return None


def _colour(value: str) -> str | None:
    value = value.strip()
    if re.fullmatch(r"#?[0-9a-fA-F]{6}|#?[0-9a-fA-F]{3}", value):
        return value if value.startswith("#") else f"#{value}"
    return value if re.fullmatch(r"[A-Za-z]+", value) else None


def _font_style(el) -> list[str]:
    styles = []
    if el.get("face"):
        styles.append(f"font-family: {el.get('face').strip()}")
    if _colour(el.get("color") or ""):
        styles.append(f"color: {_colour(el.get('color'))}")
    size = (el.get("size") or "").strip()
    if size in FONT_SIZES:
        styles.append(f"font-size: {FONT_SIZES[size]}")
    return styles


def upgrade_markup(root) -> Counter:
    """Rewrite `root`'s obsolete HTML 4 markup in place as HTML5; return what was dropped, by name
    ("<basefont>", "img longdesc", "xml:space", ...), how often."""
    dropped: Counter = Counter()
    for el in list(root.iter()):
        if not isinstance(el.tag, str) or not el.tag.startswith(f"{{{XHTML}}}"):
            continue
        name = _local(el)
        if name in EMPTY_DROPPED:
            if len(el) or (el.text or "").strip():  # not empty after all: its content stays, in a span
                el.tag = f"{{{XHTML}}}span"
                el.attrib.clear()
            else:
                _remove_keeping_tail(el)
            dropped[f"<{name}>"] += 1
            continue
        if XML_SPACE in el.attrib:  # XHTML 1.1's DTD default on pre/style/script; HTML5 has none
            del el.attrib[XML_SPACE]
            dropped["xml:space"] += 1
        if name in ELEMENTS:
            new, style = ELEMENTS[name]
            styles = [style] if style else []
            if name == "font":
                styles += _font_style(el)
                for attribute in ("face", "color", "size"):
                    el.attrib.pop(attribute, None)
            el.tag = f"{{{XHTML}}}{new}"
            for declaration in styles:
                _add_style(el, declaration)
            name = new
        _upgrade_attributes(el, name, dropped)
    return dropped


def _upgrade_attributes(el, name: str, dropped: Counter) -> None:
    attrib = el.attrib
    for attribute in [a for a in attrib if a in DROPPED_ANYWHERE or a in DROPPED_ON.get(name, ())]:
        if attribute == "clear" and name == "br":
            value = attrib[attribute].strip().lower()
            _add_style(el, f"clear: {'both' if value == 'all' else value}" if value in ("left", "right", "all", "both") else "")
        elif attribute == "noshade" and name == "hr":
            _add_style(el, "border-style: solid")
        else:
            dropped[f"{name} {attribute}"] += 1
        del attrib[attribute]
    if "align" in attrib:
        value = attrib.pop("align").strip().lower()
        if name in FLOATED and value in ("left", "right"):
            _add_style(el, f"float: {value}")
        elif name == "table" and value == "center":
            _add_style(el, "margin-left: auto; margin-right: auto")
        elif name in FLOATED and value in ("top", "middle", "bottom", "baseline", "texttop", "absmiddle",
                                           "absbottom"):
            _add_style(el, "vertical-align: " + {"absmiddle": "middle", "texttop": "text-top",
                                                 "absbottom": "bottom"}.get(value, value))
        elif name == "caption" and value in ("top", "bottom"):
            _add_style(el, f"caption-side: {value}")
        elif value in ("left", "right", "center", "justify"):
            _add_style(el, f"text-align: {value}")
        else:
            dropped[f"{name} align"] += 1
    if "valign" in attrib:
        value = attrib.pop("valign").strip().lower()
        if value in ("top", "middle", "bottom", "baseline"):
            _add_style(el, f"vertical-align: {value}")
    for attribute, prop in (("width", "width"), ("height", "height")):
        if attribute not in attrib:
            continue
        value = attrib[attribute].strip()
        if name in DIMENSIONED:
            if re.fullmatch(r"\d+", value):
                continue
            if re.fullmatch(r"\d+px", value):
                attrib[attribute] = value[:-2]
                continue
        del attrib[attribute]
        css = _length(value)
        if css:
            _add_style(el, f"{prop}: {css}")
        else:
            dropped[f"{name} {attribute}"] += 1
    if "bgcolor" in attrib:
        colour = _colour(attrib.pop("bgcolor"))
        _add_style(el, f"background-color: {colour}" if colour else "")
    if name == "body":
        if "text" in attrib:
            colour = _colour(attrib.pop("text"))
            _add_style(el, f"color: {colour}" if colour else "")
        if "background" in attrib:
            _add_style(el, f"background-image: url({attrib.pop('background').strip()!r})")
    if name in ("img", "object") and "border" in attrib:
        width = _length(attrib.pop("border"))
        if width and width not in ("0px", "0"):
            _add_style(el, f"border: {width} solid")
    if name in ("img", "object") and ("hspace" in attrib or "vspace" in attrib):
        for attribute, sides in (("hspace", ("left", "right")), ("vspace", ("top", "bottom"))):
            css = _length(attrib.pop(attribute, ""))
            for side in sides:
                _add_style(el, f"margin-{side}: {css}" if css else "")
    if name in ("td", "th") and "nowrap" in attrib:
        del attrib["nowrap"]
        _add_style(el, "white-space: nowrap")
    if name == "hr":
        if "size" in attrib:
            css = _length(attrib.pop("size"))
            _add_style(el, f"height: {css}" if css else "")
        if "color" in attrib:
            colour = _colour(attrib.pop("color"))
            _add_style(el, f"color: {colour}; background-color: {colour}" if colour else "")
    if name in ("ul", "li") and "type" in attrib:
        kind = LIST_TYPES.get(attrib.pop("type").strip()) or ""
        _add_style(el, f"list-style-type: {kind}" if kind else "")
    if name == "pre" and "width" in attrib:
        del attrib["width"]
        dropped["pre width"] += 1


def _remove_keeping_tail(el) -> None:
    parent, previous = el.getparent(), el.getprevious()
    if parent is None:
        return
    if el.tail:
        if previous is not None:
            previous.tail = (previous.tail or "") + el.tail
        else:
            parent.text = (parent.text or "") + el.tail
    parent.remove(el)


def dropped_line(dropped: Counter) -> str:
    """One line naming what the upgrade dropped ('' if nothing)."""
    if not dropped:
        return ""
    parts = ", ".join(f"{what} ×{n}" if n > 1 else what for what, n in sorted(dropped.items()))
    return (f"read-along: the upgrade to EPUB 3 dropped {sum(dropped.values())} piece(s) of HTML 4 markup "
            f"that HTML5 has no form for ({parts})")
