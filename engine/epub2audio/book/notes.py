"""Notes (`--notes`): find the notes a book's references point at, take them out of the text where
they live, and read them inline or at the chapter's end. See epub.py's docstring for the policies."""

from __future__ import annotations

import re

from .text import BLOCK_TAGS, HEADING_TAGS, Block, _is_internal_link, clean, epub_types, find_body, is_noteref, \
    is_unread, local_name, noteref_href
from .toc import resolve

NOTE_POLICIES = ("skip", "inline", "chapter-end")
NOTE_TYPES = frozenset(["footnote", "endnote", "rearnote", "note", "annotation",
                        "z3998:footnote", "z3998:endnote", "z3998:rearnote", "z3998:note"])
NOTE_ROLES = frozenset(["doc-footnote", "doc-endnote"])
NOTE_LABEL = re.compile(r"^[\[(]?\s*(\d{1,4}|[*†‡§¶]{1,3})\s*[\])]?\.?\s+")
NOTES_HEADING = "Notes for this chapter."


class Notes:
    """The notes of one book under one policy ("inline" or "chapter-end")."""

    def __init__(self, policy: str, root):
        self.policy = policy
        self.root = root  # file name → parsed document (or None)
        self.bodies: dict[str, list] = {}  # "doc#id" → the elements that make the note
        self.elements: dict[str, set] = {}  # file name → every element that is part of a note
        self.read: set[str] = set()

    def find(self, spine: list[str]):
        """Every note that a reference in the linear spine points at, and its body elements."""
        targets: dict[str, list[str]] = {}
        for name in spine:
            root = self.root(name)
            for el in find_body(root).iter():
                if (isinstance(el.tag, str) and is_noteref(el)
                        and not any(is_unread(a) or is_note(a) for a in el.iterancestors())):
                    href = noteref_href(el)
                    if href and "#" in href:
                        doc, fragment = resolve(name, href)
                        if fragment:
                            targets.setdefault(doc, [])
                            if fragment not in targets[doc]:
                                targets[doc].append(fragment)
        for doc, fragments in targets.items():
            root = self.root(doc)
            if root is None:
                continue
            by_id = {el.get("id"): el for el in root.iter() if isinstance(el.tag, str) and el.get("id")}
            wanted = set(fragments)
            for fragment in fragments:
                el = by_id.get(fragment)
                if el is not None:
                    body = note_body(el, wanted)
                    if body:
                        self.bodies[f"{doc}#{fragment}"] = body
        for key, body in self.bodies.items():
            self.elements.setdefault(key.partition("#")[0], set()).update(body)

    def lift(self, spans: list):
        """Take note bodies out of the text where they live; report sections left empty."""
        for span in spans:
            if not any(b.in_note for b in span.blocks):
                continue
            kept: list[Block] = []
            removed_after: set[int] = set()  # ids of kept headings that notes followed
            for block in span.blocks:
                if block.in_note:
                    if kept:
                        removed_after.add(id(kept[-1]))
                    continue
                if block.heading and kept and kept[-1].heading and id(kept[-1]) in removed_after:
                    kept.pop()  # a sub-heading whose notes have all moved
                kept.append(block)
            while kept and kept[-1].heading and id(kept[-1]) in removed_after and len(kept) > 1:
                kept.pop()
            span.blocks = kept
            if not span.has_body and span.entry is not None and not span.skip:
                how = "read inline" if self.policy == "inline" else "read at chapter ends"
                span.skip = f"notes ({how})"

    def place(self, span):
        read = self.read
        blocks: list[Block] = []
        at_end: list[Block] = []
        for block in span.blocks:
            blocks.append(block)
            for href in block.notes:
                key = self._key(block, href, span)
                if key is None or key in read:
                    continue
                text = note_text(self.bodies[key], href_marker=None)
                if not text:
                    continue
                read.add(key)
                if self.policy == "inline":
                    blocks.append(Block(f"Note: {text}", notes=[], in_note=True))
                else:
                    at_end.append(Block(f"Note {len(at_end) + 1}: {text}", in_note=True))
        if at_end:
            blocks.append(Block(NOTES_HEADING, heading=True, in_note=True, break_before=True))
            blocks.extend(at_end)
        span.blocks = blocks
        return span

    def _key(self, block: Block, href: str, span) -> str | None:
        source = getattr(block, "source_doc", None)
        for doc in ([source] if source else []) + [s.partition("#")[0] for s in span.sources]:
            target, fragment = resolve(doc, href)
            if fragment is None:  # "#" or "doc.xhtml#": points at no note
                return None
            key = f"{target}#{fragment}"
            if key in self.bodies:
                return key
        return None


def is_note(el) -> bool:
    """An element holding a note (its links are labels and backlinks, not references)."""
    return bool(epub_types(el) & NOTE_TYPES) or (el.get("role") or "") in NOTE_ROLES or (
        local_name(el) == "aside")


def note_body(el, targets: set[str]) -> list:
    """The elements that make up the note an id points at."""
    for node in [el, *el.iterancestors()]:
        if local_name(node) in ("body", "section") and not (epub_types(node) & NOTE_TYPES):
            break
        if epub_types(node) & NOTE_TYPES or (node.get("role") or "") in NOTE_ROLES:
            return [node]
        if local_name(node) == "aside":
            return [node]
    if clean("".join(el.itertext())):
        block = el
        while block is not None and local_name(block) not in BLOCK_TAGS:
            block = block.getparent()
        return [block] if block is not None and local_name(block) not in ("body", "section") else [el]
    # An empty anchor (Gutenberg): the paragraphs with text that follow it, up to the next one.
    start = el
    parent = el.getparent()
    if parent is not None and local_name(parent) in ("p", "div", "span") and not clean("".join(parent.itertext())):
        start = parent
    body = []
    for sibling in start.itersiblings():
        if not isinstance(sibling.tag, str):
            continue
        tag = local_name(sibling)
        if tag in HEADING_TAGS or tag in ("hr", "section", "h1") or not clean("".join(sibling.itertext())):
            break
        if any(d.get("id") in targets for d in sibling.iter() if isinstance(d.tag, str)):
            break
        body.append(sibling)
        if len(body) >= 20:
            break
    return body


def note_text(elements: list, href_marker: str | None = None) -> str:
    """What is read of a note: its text without its label, backlinks or a leading link back to
    the place it annotates ("Line 20."), and without the [ … ] Gutenberg wraps notes in."""
    parts: list[str] = []
    state = {"seen_text": False}

    def read(root):
        # Depth first with an explicit stack (any depth of nesting); strings are tails.
        stack: list = [(root, True)]
        while stack:
            el, top = stack.pop()
            if isinstance(el, str):
                parts.append(el)
                state["seen_text"] = state["seen_text"] or bool(el.strip())
                continue
            if not isinstance(el.tag, str) or (is_unread(el) and not top) or is_noteref(el):
                continue
            if "backlink" in epub_types(el) or el.get("role") == "doc-backlink":
                continue
            tag = local_name(el)
            if tag == "a" and _is_internal_link(el) and not state["seen_text"]:
                state["seen_text"] = True  # the note's own label, linking back to the text
                continue
            if tag in BLOCK_TAGS or tag == "br":
                parts.append(" ")
            if el.text:
                parts.append(el.text)
                state["seen_text"] = state["seen_text"] or bool(el.text.strip())
            after: list = []
            for child in el:
                after.append((child, False))
                if child.tail:
                    after.append((child.tail, False))
            stack.extend(reversed(after))

    for element in elements:
        read(element)
        parts.append(" ")
    text = clean("".join(parts))
    text = NOTE_LABEL.sub("", text, count=1)
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1].strip()
    return text
