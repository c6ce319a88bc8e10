"""Notes (`--notes`): find the notes a book's references point at, take them out of the text where
they live, and read them inline or at the chapter's end. See epub.py's docstring for the policies.

Under "skip" a note body is taken out of the text only on structural evidence that it is a note
(an epub:type / role / <aside> note, or a link in it back to the reference, as Gutenberg's "[1]"
footnotes have) and only where it sits in the chapter that refers to it (a notes block at the
chapter's end), or in a file no TOC entry starts that a referring chapter runs on into (a notes
file); a notes section that is a chapter of its own is read as it is. Margin notes
(text.is_margin_note) are not read under "skip", read as "Note: …" where they stand under
"inline", and at the chapter's end under "chapter-end". What is not read is accounted in
`skipped()`, one entry per rule.
"""

from __future__ import annotations

import re

from .model import Skipped
from .text import BLOCK_TAGS, HEADING_TAGS, NOTEREF_ROLES, NOTEREF_TYPES, Block, _is_internal_link, clean, epub_types, \
    find_body, is_noteref, is_page_mark, is_unread, local_name, noteref_href
from .toc import resolve

NOTE_POLICIES = ("skip", "inline", "chapter-end")
NOTE_TYPES = frozenset(["footnote", "endnote", "rearnote", "note", "annotation",
                        "z3998:footnote", "z3998:endnote", "z3998:rearnote", "z3998:note"])
NOTE_ROLES = frozenset(["doc-footnote", "doc-endnote"])
NOTE_LABEL = re.compile(r"^[\[(]?\s*(\d{1,4}|[*†‡§¶]{1,3})\s*[\])]?\.?\s+")
NOTES_HEADING = "Notes for this chapter."


class Notes:
    """The notes of one book under one policy."""

    def __init__(self, policy: str, root):
        self.policy = policy
        self.root = root  # file name → parsed document (or None)
        self.bodies: dict[str, list] = {}  # "doc#id" → the elements that make the note
        self.elements: dict[str, dict] = {}  # file name → {element that is part of a note: its key}
        self.read: set[str] = set()
        self.confirmed: set[str] = set()  # keys of bodies that are notes by structure, not by a link's text
        self.footnote_chars = 0  # under "skip": characters of note bodies taken out of chapters
        self.margin_notes = 0  # under "skip": margin notes not read, and their characters
        self.margin_chars = 0
        self.orphan_chars = 0  # notes in the flow that no reference points at: read under no policy
        self.lifted: dict[str, int] = {}  # inline / chapter-end: note key → characters taken out of the text

    def find(self, spine: list[str]):
        """Every note that a reference in the linear spine points at, and its body elements."""
        targets: dict[str, list[str]] = {}
        references: set[tuple[str, str]] = set()  # (file, id) of every reference and its inline wrappers
        # (file, id) → where the first reference to it is: (spine index, element index in the body).
        # A note comes after its reference; a link to an earlier place is a backlink from a note.
        first_ref: dict[tuple[str, str], tuple[int, int]] = {}
        for number, name in enumerate(spine):
            root = self.root(name)
            for index, el in enumerate(find_body(root).iter()):
                if (isinstance(el.tag, str) and is_noteref(el) and not any(is_unread(a) for a in el.iterancestors())
                        and (is_marked_noteref(el) or not any(is_note(a) for a in el.iterancestors()))):
                    # (inside a note, only a reference its markup names: a number linking back is the label)
                    for node in [el, *el.iterancestors()]:
                        if local_name(node) in BLOCK_TAGS:
                            break
                        if node.get("id"):
                            references.add((name, node.get("id")))
                    href = noteref_href(el)
                    if href and "#" in href:
                        doc, fragment = resolve(name, href)
                        if fragment:
                            first_ref.setdefault((doc, fragment), (number, index))
                            targets.setdefault(doc, [])
                            if fragment not in targets[doc]:
                                targets[doc].append(fragment)
        spine_index = {name: number for number, name in enumerate(spine)}
        for doc, fragments in targets.items():
            root = self.root(doc)
            if root is None:
                continue
            by_id = {el.get("id"): el for el in root.iter() if isinstance(el.tag, str) and el.get("id")}
            order = {el: index for index, el in enumerate(find_body(root).iter())}
            wanted = set(fragments)
            for fragment in fragments:
                el = by_id.get(fragment)
                if el is not None:
                    body = note_body(el, wanted)
                    at = (spine_index.get(doc, len(spine)), order.get(el, len(order)))
                    if body and first_ref[(doc, fragment)] < at:  # else: a note's backlink to the text
                        self.bodies[f"{doc}#{fragment}"] = body
                        if is_structural_note(body) or links_back(doc, body, references):
                            self.confirmed.add(f"{doc}#{fragment}")
        for key, body in self.bodies.items():
            if self.policy != "skip" or key in self.confirmed:
                elements = self.elements.setdefault(key.partition("#")[0], {})
                for el in body:
                    elements.setdefault(el, key)

    def lift(self, spans: list):
        """Take note bodies out of the text where they live; report sections left empty. Under
        "skip", only notes that sit in the chapter that refers to them, or in a file that no TOC
        entry starts (a notes file read on from the last chapter), are taken out."""
        toc_files = {span.entry.doc for span in spans if span.entry is not None and span.entry.doc}
        for span in spans:
            if not any(b.in_note for b in span.blocks):
                continue
            if self.policy == "skip":
                if not span.skip:  # a part skipped whole is accounted as a whole
                    self._lift_unread(span, toc_files)
                continue
            for block in span.blocks:
                if block.in_note and not block.heading and block.note_key:
                    self.lifted[block.note_key] = self.lifted.get(block.note_key, 0) + len(block.text)
            span.blocks = _without(span.blocks, lambda b: b.in_note)
            if not span.has_body and span.entry is not None and not span.skip:
                how = "read inline" if self.policy == "inline" else "read at chapter ends"
                span.skip = f"notes ({how})"

    def _lift_unread(self, span, toc_files: set[str]):
        """--notes skip: take out the notes this span refers to (and, if it refers to any, the
        notes in files no TOC entry starts); the rest are read where they stand, as text."""
        referenced = {self._key(b, href, span) for b in span.blocks if not b.in_note for href in b.notes} - {None}

        def unread(block: Block) -> bool:
            return block.in_note and block.note_key is not None and (block.note_key in referenced or (
                bool(referenced) and getattr(block, "source_doc", None) not in toc_files))

        self.footnote_chars += sum(len(b.text) for b in span.blocks if unread(b) and not b.heading)
        span.blocks = _without(span.blocks, unread)
        for block in span.blocks:
            block.in_note = False  # a note read where it stands (a notes section of its own): text

    def place(self, span):
        read = self.read
        blocks: list[Block] = []
        at_end: list[Block] = []
        for block in span.blocks:
            if block.aside_note:  # read where its reference is, if it has one and notes are read
                if block.note_key not in self.bodies:
                    self.orphan_chars += len(block.text)
                elif self.policy == "skip":
                    self.footnote_chars += len(block.text)
                continue
            if block.margin:
                if self.policy == "skip":
                    self.margin_notes += 1
                    self.margin_chars += len(block.text)
                elif self.policy == "inline":
                    blocks.append(Block(f"Note: {block.text}", in_note=True))
                else:
                    at_end.append(Block(f"Note {len(at_end) + 1}: {block.text}", in_note=True))
                continue
            blocks.append(block)
            if self.policy == "skip":
                continue
            # A note's own references (a note on a note) are read after it, depth first.
            pending = [self._key(block, href, span) for href in block.notes][::-1]
            while pending:
                key = pending.pop()
                if key is None or key in read:
                    continue
                read.add(key)
                pending.extend(self._nested_keys(key)[::-1])
                text = note_text(self.bodies[key], href_marker=None)
                if not text:
                    continue
                if self.policy == "inline":
                    blocks.append(Block(f"Note: {text}", notes=[], in_note=True))
                else:
                    at_end.append(Block(f"Note {len(at_end) + 1}: {text}", in_note=True))
        if at_end:
            blocks.append(Block(NOTES_HEADING, heading=True, in_note=True, break_before=True))
            blocks.extend(at_end)
        span.blocks = blocks
        return span

    def skipped(self) -> list[Skipped]:
        """What the policy left unread, one entry per rule."""
        parts = []
        if self.footnote_chars:
            parts.append(Skipped("Footnotes", "footnotes where they stand (--notes skip)", chars=self.footnote_chars,
                                 evidence="structure"))
        if self.orphan_chars:
            parts.append(Skipped("Notes with no reference", "notes in the text flow that no reference points at",
                                 chars=self.orphan_chars, evidence="structure"))
        unplaced = sum(chars for key, chars in self.lifted.items() if key not in self.read)
        if unplaced:  # taken out where they live, but their reference is in no chapter that is read
            parts.append(Skipped("Notes not placed", "notes whose reference is not read", chars=unplaced,
                                 evidence="structure"))
        if self.margin_notes:
            label = "margin note" if self.margin_notes == 1 else "margin notes"
            parts.append(Skipped(f"{self.margin_notes} {label}", "margin notes (--notes skip)",
                                 chars=self.margin_chars, evidence="structure"))
        return parts

    def _nested_keys(self, key: str) -> list[str]:
        """The notes that note `key` refers to, in its order."""
        doc = key.partition("#")[0]
        keys = []
        for element in self.bodies[key]:
            for el in element.iter():
                if isinstance(el.tag, str) and is_noteref(el) and (href := noteref_href(el)):
                    target, fragment = resolve(doc, href)
                    if fragment and f"{target}#{fragment}" in self.bodies:
                        keys.append(f"{target}#{fragment}")
        return keys

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


def _without(blocks: list[Block], taken) -> list[Block]:
    """The blocks without those `taken` picks, and without the headings that only they followed
    ("FOOTNOTES:", a sub-heading whose notes have all moved)."""
    kept: list[Block] = []
    removed_after: set[int] = set()  # ids of kept headings that notes followed
    for block in blocks:
        if taken(block):
            if kept:
                removed_after.add(id(kept[-1]))
            continue
        if block.heading and kept and kept[-1].heading and id(kept[-1]) in removed_after:
            kept.pop()
        kept.append(block)
    while kept and kept[-1].heading and id(kept[-1]) in removed_after and len(kept) > 1:
        kept.pop()
    return kept


def is_note(el) -> bool:
    """An element holding a note (its links are labels and backlinks, not references)."""
    return bool(epub_types(el) & NOTE_TYPES) or (el.get("role") or "") in NOTE_ROLES or (
        local_name(el) == "aside")


def is_marked_noteref(el) -> bool:
    """A note reference by its epub:type or role, not by a link's text."""
    return bool(epub_types(el) & NOTEREF_TYPES) or (el.get("role") or "") in NOTEREF_ROLES


def is_structural_note(body: list) -> bool:
    """Whether the markup says the body is a note (its type or role, or an <aside>)."""
    return any(epub_types(el) & NOTE_TYPES or (el.get("role") or "") in NOTE_ROLES or local_name(el) == "aside"
               for el in body)


def links_back(doc: str, body: list, references: set[tuple[str, str]]) -> bool:
    """Whether a note links back to a note reference (Gutenberg's "[1]" label does)."""
    for element in body:
        for el in element.iter():
            if isinstance(el.tag, str) and local_name(el) == "a" and "#" in (el.get("href") or ""):
                if resolve(doc, el.get("href")) in references:
                    return True
    return False


def note_body(el, targets: set[str]) -> list:
    """The elements that make up the note an id points at. A printed page's mark is none: a
    contents list's page numbers link to it ("… (II.) 3" → #page_3), and what follows it is the
    book's text."""
    if is_page_mark(el):
        return []
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
        if block is None or local_name(block) in ("body", "section"):
            return [el]
        wrapper = block.getparent()  # Gutenberg's <div class="footnote">: the label's paragraph and the rest
        if (wrapper is not None and local_name(wrapper) == "div" and "footnote" in (wrapper.get("class") or "").split()
                and next((c for c in wrapper if isinstance(c.tag, str)), None) is block):
            return [wrapper]
        return [block]
    # An empty anchor (Gutenberg): the paragraphs with text that follow it, up to the next one;
    # where it opens a paragraph ("<p><a id='Footnote_5'/><a href='…'>[5]</a> Lettre xxxviii.</p>"),
    # that paragraph first.
    start = el
    parent = el.getparent()
    body = []
    if parent is not None and local_name(parent) in ("p", "div", "span") and not clean("".join(parent.itertext())):
        start = parent
    elif parent is not None and local_name(parent) in BLOCK_TAGS and _opens(el, parent):
        start = parent
        body.append(parent)
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


def _opens(el, parent) -> bool:
    """Whether no text comes before `el` in `parent`."""
    if clean(parent.text or ""):
        return False
    for sibling in el.itersiblings(preceding=True):
        if clean("".join(sibling.itertext())) or clean(sibling.tail or ""):
            return False
    return True


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
