"""Every book's parts as a listener meets them, found without our reading rules.

A part is a TOC entry's own text, from its anchor to the next TOC anchor in spine order (the way
tests/corpus/EXPECTED-style sizes are counted), or text that no entry owns: what comes before a
book's first anchor in a spine file (named by the file), and Project Gutenberg's header and
licence boxes or the text after its "*** END OF" line (named "PG header" / "PG footer"), which
the TOC does not separate from the chapter they sit beside. Only zipfile and lxml are used, so a
reading rule cannot change what it is judged against. tests/corpus_labels.py gives each part its
expected class; bench/coverage.py sets them against what load_book reads.
"""

from __future__ import annotations

import posixpath
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

from lxml import etree, html

# A ruby reading (<rt>) is read once, as its base text: the annotation is left out.
NOT_SPOKEN = {"script", "style", "head", "rt", "rp"}
# MathML's token text is kept in a part's text (its size counts it, as EXPECTED.md's sizes do) but
# bracketed by these two private-use characters: a reader speaks a formula in words of its own
# ("x squared"), so bench/coverage.py matches a part's prose around it, not its tokens.
MATH_OPEN, MATH_CLOSE = "\ue020", "\ue021"
# The text of an element whose class the caller names (`parts(marked=…)`) is bracketed by these,
# the first followed by the class's number: bench/coverage.py classes it apart (a link bar).
MARK_OPEN, MARK_CLOSE, MARK_BASE = "\ue022", "\ue023", 0xE030
SENTINELS = re.compile("[\ue020-\ue023\ue030-\ue0ff]")
PG_BOX = re.compile(r"\b(pgheader|pgfooter|pg-boilerplate)\b")
PG_START = re.compile(r"\*\*\*\s*START OF (THE|THIS) PROJECT GUTENBERG", re.I)
PG_END = re.compile(r"\*\*\*\s*END OF (THE|THIS) PROJECT GUTENBERG|End of (the )?Project Gutenberg'?s", re.I)


def _local(tag) -> str:
    return etree.QName(tag).localname if isinstance(tag, str) else ""


def _parse(data: bytes):
    try:
        return etree.fromstring(data, etree.XMLParser(recover=True, resolve_entities=False, huge_tree=True))
    except etree.XMLSyntaxError:
        return html.document_fromstring(data)


@dataclass
class Part:
    label: str  # the TOC label, a spine file's href, "PG header" or "PG footer"
    kind: str  # "toc" (a TOC entry), "spine" (text before any anchor in a file), "pg"
    depth: int = 0
    index: int = -1  # position among the TOC entries (kind "toc")
    chunks: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return " ".join(SENTINELS.sub("", " ".join(self.chunks)).split())

    @property
    def prose(self) -> str:
        """Its text without the token text of its MathML formulas."""
        joined = " ".join(self.chunks)
        return " ".join(re.sub(f"{MATH_OPEN}[^{MATH_CLOSE}]*{MATH_CLOSE}", " ", joined).split())

    @property
    def marked_text(self) -> str:
        """Its text with formulas and the marks around the elements of named classes kept."""
        return " ".join(" ".join(self.chunks).split())

    @property
    def chars(self) -> int:
        return len(self.text)


@dataclass
class Package:
    zf: zipfile.ZipFile
    base: str
    manifest: dict  # id → (path, media type, properties)
    spine: list  # (path, linear)
    nav: str | None
    ncx: str | None


def _package(zf: zipfile.ZipFile) -> Package:
    container = etree.fromstring(zf.read("META-INF/container.xml"))
    opf_path = next(el.get("full-path") for el in container.iter() if _local(el.tag) == "rootfile")
    opf = etree.fromstring(zf.read(opf_path))
    base = posixpath.dirname(opf_path)
    manifest = {}
    for el in opf.iter():
        if _local(el.tag) == "item" and el.get("href"):
            path = posixpath.normpath(posixpath.join(base, unquote(el.get("href").split("#")[0])))
            manifest[el.get("id")] = (path, el.get("media-type", ""), el.get("properties", ""))
    spine, ncx_id = [], None
    for el in opf.iter():
        if _local(el.tag) == "spine":
            ncx_id = el.get("toc")
        if _local(el.tag) == "itemref" and el.get("idref") in manifest:
            spine.append((manifest[el.get("idref")][0], el.get("linear", "yes").strip().lower() != "no"))
    nav = next((p for p, _, props in manifest.values() if "nav" in props.split()), None)
    ncx = manifest[ncx_id][0] if ncx_id in manifest else next(
        (p for p, mt, _ in manifest.values() if mt == "application/x-dtbncx+xml"), None)
    return Package(zf, base, manifest, spine, nav, ncx)


def toc_entries(pkg: Package) -> list[tuple[str, str | None, str | None, int]]:
    """(label, file, fragment, depth) of every TOC entry, from the nav where there is one, else the NCX."""
    entries = []

    def target(src, doc):
        if not src:
            return None, None
        path, _, frag = src.partition("#")
        path = posixpath.normpath(posixpath.join(posixpath.dirname(doc), unquote(path))) if path else doc
        return path, unquote(frag) or None

    if pkg.nav and pkg.nav in pkg.zf.namelist():
        root = _parse(pkg.zf.read(pkg.nav))
        toc = next((n for n in root.iter() if _local(n.tag) == "nav" and any(
            v.endswith("type") and "toc" in val.split() for v, val in n.attrib.items())), None)
        if toc is not None:
            def walk(ol, depth):
                for li in (c for c in ol if _local(c.tag) == "li"):
                    head = next((c for c in li if _local(c.tag) in ("a", "span")), None)
                    label = " ".join("".join(head.itertext()).split()) if head is not None else ""
                    file, frag = target(head.get("href") if head is not None else None, pkg.nav)
                    entries.append((label, file, frag, depth))
                    for sub in (c for c in li if _local(c.tag) == "ol"):
                        walk(sub, depth + 1)
            for ol in (c for c in toc.iter() if _local(c.tag) == "ol"):
                walk(ol, 1)
                break
            return entries
    if pkg.ncx and pkg.ncx in pkg.zf.namelist():
        root = _parse(pkg.zf.read(pkg.ncx))
        nav_map = next((n for n in root.iter() if _local(n.tag) == "navMap"), None)

        def walk_ncx(node, depth):
            for point in (c for c in node if _local(c.tag) == "navPoint"):
                text = next((t for t in point.iter() if _local(t.tag) == "text"), None)
                label = " ".join("".join(text.itertext()).split()) if text is not None else ""
                content = next((c for c in point if _local(c.tag) == "content"), None)
                file, frag = target(content.get("src") if content is not None else None, pkg.ncx)
                entries.append((label, file, frag, depth))
                walk_ncx(point, depth + 1)
        if nav_map is not None:
            walk_ncx(nav_map, 1)
    return entries


def parts(path: Path, marked: tuple[str, ...] = ()) -> list[Part]:
    """The book's parts in TOC order, then the parts no entry owns in spine order (see the module
    docstring). `marked`: class names whose elements' text is bracketed (MARK_OPEN)."""
    with zipfile.ZipFile(path) as zf:
        pkg = _package(zf)
        entries = toc_entries(pkg)
        toc_parts = [Part(label, "toc", depth, i) for i, (label, _, _, depth) in enumerate(entries)]
        starts: dict[tuple[str, str | None], list[Part]] = {}
        for part, (_, file, frag, _) in zip(toc_parts, entries):
            if file:
                starts.setdefault((file, frag), []).append(part)
        extra: dict[str, Part] = {}
        state = {"current": None, "pg": None, "after_end": False}

        def extra_part(label, kind):
            return extra.setdefault(label, Part(label, kind))

        for file, linear in pkg.spine:
            if not linear or file not in zf.namelist():
                continue
            root = _parse(zf.read(file))
            body = next((el for el in root.iter() if _local(el.tag) == "body"), None)
            if body is None:
                continue
            at_start = starts.get((file, None))
            if at_start:
                state["current"] = at_start[-1]
                state["after_end"] = False
            elif state["current"] is None or state["current"].kind == "spine":
                state["current"] = extra_part(file, "spine")
            file_chunks_start = len(state["current"].chunks)
            file_part = state["current"]

            def sink():
                if state["pg"] is not None:
                    return state["pg"]
                if state["after_end"]:
                    return extra_part("PG footer", "pg")
                return state["current"]

            def walk(el):
                tag = _local(el.tag)
                if tag == "math" and state["pg"] is None:
                    sink().chunks.append(MATH_OPEN + "".join(el.itertext()) + MATH_CLOSE)
                    if el.tail:
                        sink().chunks.append(el.tail)
                    return
                classes = set((el.get("class") or "").split()) if isinstance(el.tag, str) else set()
                if marked and classes & set(marked) and state["pg"] is None:
                    number = min(marked.index(c) for c in classes & set(marked))
                    sink().chunks.append(MARK_OPEN + chr(MARK_BASE + number) + " ".join(el.itertext()) + MARK_CLOSE)
                    if el.tail:
                        sink().chunks.append(el.tail)
                    return
                if tag in NOT_SPOKEN:
                    if el.tail:
                        sink().chunks.append(el.tail)
                    return
                ident = el.get("id") if isinstance(el.tag, str) else None
                if ident and (file, ident) in starts:
                    state["current"] = starts[(file, ident)][-1]
                    state["after_end"] = False
                box = None
                if isinstance(el.tag, str):
                    cls = el.get("class", "") + " " + (ident or "")
                    if state["pg"] is None and (PG_BOX.search(cls) or ident in ("pg-header", "pg-footer")):
                        box = extra_part("PG footer" if "footer" in cls else "PG header", "pg")
                        state["pg"] = box
                own = el.text if isinstance(el.tag, str) else None
                if own:
                    if state["pg"] is None and PG_START.search(own):
                        # Everything of this file's part so far is the header, the marker too.
                        head = extra_part("PG header", "pg")
                        if file_part is state["current"]:
                            head.chunks += file_part.chunks[file_chunks_start:]
                            del file_part.chunks[file_chunks_start:]
                        head.chunks.append(own)
                        own = None
                    elif state["pg"] is None and PG_END.search(own):
                        state["after_end"] = True
                    if own:
                        sink().chunks.append(own)
                for child in el:
                    walk(child)
                if box is not None:
                    state["pg"] = None
                if el.tail and el is not body:
                    if state["pg"] is None and PG_END.search(el.tail):
                        state["after_end"] = True
                    sink().chunks.append(el.tail)

            walk(body)
        return toc_parts + [p for p in extra.values() if p.chars]


if __name__ == "__main__":
    import sys
    for arg in sys.argv[1:]:
        for p in parts(Path(arg)):
            print(f"{p.kind:5} {p.index:4d} d{p.depth} {p.chars:9,d}  {p.label[:70]!r}  {p.text[:60]!r}")
