"""The crash-safe segment store of one conversion job: SQLite (WAL) plus one WAV file a segment.

Segments are content-addressed: a segment's key is a hash of everything its audio depends on
(voice, model identity, normalised text, seed, and the language for a voice whose audio depends
on it), so rerunning a job reuses every finished segment
whose text did not change, wherever it now sits in the book, and re-renders only the changed ones.
A row is marked done only after its WAV is on disk (temp file, fsync, rename), so a crash at any
point loses at most the segments that were in flight.

A segment the voice could not say within its length cap is said in pieces (render.py): the
`pieces` table lists them under the segment's key, each piece is a segment of its own (its own
key, seed and WAV, so it resumes like any other), and once all are done the segment's WAV is
composed from theirs with the pauses between them. So the plan, the assembly and `verify` see
one finished segment, whose audio is all of its text.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sqlite3
import time
import wave
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from .config import cache_dir
from .files import atomic_write, sha256_file

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chapters (
    idx INTEGER PRIMARY KEY, title TEXT NOT NULL, sources TEXT NOT NULL,
    text TEXT NOT NULL DEFAULT '');   -- the book's own words, before normalisation (for verify)
CREATE TABLE IF NOT EXISTS plan (
    chapter INTEGER NOT NULL, idx INTEGER NOT NULL, segment_key TEXT NOT NULL,
    pause_ms INTEGER NOT NULL, lang TEXT, PRIMARY KEY (chapter, idx));
CREATE TABLE IF NOT EXISTS segments (
    key TEXT PRIMARY KEY,
    text TEXT NOT NULL, text_hash TEXT NOT NULL, seed INTEGER NOT NULL,
    voice TEXT NOT NULL, backend TEXT, precision TEXT, model_id TEXT NOT NULL,
    status TEXT NOT NULL,              -- 'done' or 'failed'
    audio_file TEXT, checksum TEXT, samples INTEGER, sample_rate INTEGER,
    synth_seconds REAL, attempts INTEGER NOT NULL DEFAULT 0, error TEXT, updated REAL NOT NULL,
    lang TEXT);
CREATE TABLE IF NOT EXISTS pieces (   -- a segment re-said in pieces, in order (see above)
    parent TEXT NOT NULL, idx INTEGER NOT NULL, segment_key TEXT NOT NULL, text TEXT NOT NULL,
    seed INTEGER NOT NULL, pause_ms INTEGER NOT NULL, PRIMARY KEY (parent, idx));
CREATE TABLE IF NOT EXISTS sources (  -- what each planned segment says in the book's own words
    chapter INTEGER NOT NULL, idx INTEGER NOT NULL,
    paragraph INTEGER NOT NULL,        -- the chapter's paragraph (Chapter.paragraphs) it is from
    start INTEGER NOT NULL,            -- where its sentence starts in that paragraph: segments that
                                       -- share (paragraph, start) say one sentence together
    text TEXT NOT NULL,                -- that sentence, before normalisation
    PRIMARY KEY (chapter, idx));
CREATE TABLE IF NOT EXISTS word_times (  -- when each word of a segment is said (--readalong words)
    segment_key TEXT PRIMARY KEY,
    samples INTEGER,                   -- the length of the audio the times are for
    words TEXT NOT NULL);              -- JSON [[first char, end char, first sample, end sample], ...]
"""
# Columns added since the first schema: a job made before them gets them on open (NULL: the book's
# language, which is what every segment of such a job was). A table added since (`pieces`) is
# created on open by SCHEMA itself, empty, which is what such a job had.
ADDED_COLUMNS = {"chapters": {"text": "TEXT NOT NULL DEFAULT ''"}, "plan": {"lang": "TEXT"},
                 "segments": {"lang": "TEXT"}}


def job_dir_for(out_path: Path) -> Path:
    """Where the job converting to out_path lives: keyed by the output's absolute path."""
    digest = hashlib.sha256(os.fsencode(Path(out_path).resolve())).hexdigest()[:16]
    # The name is for people; a stem that is not UTF-8 gets U+FFFD (SQLite wants a UTF-8 path).
    stem = os.fsencode(Path(out_path).stem).decode("utf-8", "replace")[:40]
    return cache_dir() / "jobs" / f"{stem}-{digest}"


def job_voice(job_dir: Path) -> str | None:
    """The voice the job in job_dir began with (None: no job there yet, or one that never got so
    far), read before the job's voice is chosen."""
    db = Path(job_dir) / "job.sqlite3"
    if not db.exists():
        return None
    try:
        with closing(sqlite3.connect(db)) as connection:
            row = connection.execute("SELECT value FROM meta WHERE key = 'voice'").fetchone()
    except sqlite3.Error:
        return None
    return row[0] if row and isinstance(row[0], str) else None


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def segment_seed(job_seed: int, text: str, occurrence: int) -> int:
    """A segment's seed: from the job seed and the segment itself (its text, and which repeat of
    that text in the book it is), never from its position, so inserting a sentence elsewhere
    leaves every other segment's seed, and audio, as it was."""
    digest = hashlib.sha256(f"{job_seed}\x00{occurrence}\x00{text}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1  # fits a signed 64-bit SQLite integer


def segment_key(voice: str, model_id: str, text: str, seed: int, lang: str | None = None) -> str:
    """lang: only for a voice whose audio depends on the language it is told (None otherwise), so
    the keys, and the finished audio, of every job made before languages were known stay valid."""
    identity = f"{voice}\x00{model_id}\x00{seed}\x00{text}" + (f"\x00lang={lang}" if lang else "")
    return hashlib.sha256(identity.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class PlannedSegment:
    chapter: int
    index: int
    key: str
    text: str
    seed: int
    pause_ms: int
    lang: str | None = None  # BCP 47 tag of a passage not in the book's language; None: the book's
    # (paragraph, start, text): the sentence of the book this segment says (see the `sources`
    # table); None where the plan could not tell.
    source: tuple[int, int, str] | None = None
    # The voice that reads it where that is not the job's voice (--voice auto gives a passage in
    # another language to a voice that speaks it: voices/passages.py); None: the job's voice.
    voice: str | None = None


def write_wav_atomically(path: Path, pcm: bytes, sample_rate: int) -> None:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(pcm)
    atomic_write(path, buffer.getvalue())


def _db_text(value: str) -> str | bytes:
    """SQLite text must be UTF-8; a file name that is not (b'caf\\xe9.epub' on Linux, which Python
    holds as 'caf\\udce9.epub') is stored as its bytes, and get_meta gives the same str back."""
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogateescape")


class SegmentStore:
    def __init__(self, job_dir: Path):
        self.job_dir = Path(job_dir)
        self.audio_dir = self.job_dir / "audio"
        self.audio_dir.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.job_dir / "job.sqlite3", isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(SCHEMA)
        for table, columns in ADDED_COLUMNS.items():
            have = {row[1] for row in self.db.execute(f"PRAGMA table_info({table})")}
            for column, kind in columns.items():
                if column not in have:
                    self.db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")

    def close(self) -> None:
        self.db.close()

    # --- job metadata -------------------------------------------------------------------
    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        if row and isinstance(row[0], bytes):  # a path that is not UTF-8, stored as its bytes
            return row[0].decode("utf-8", "surrogateescape")
        return row[0] if row else default

    def set_meta(self, **values: str) -> None:
        with self.db:
            self.db.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [(k, _db_text(str(v))) for k, v in values.items()],
            )

    # --- the plan: which segments make up the book now ------------------------------------
    def replace_plan(self, chapters: list[tuple], segments: list[PlannedSegment]) -> None:
        """chapters: (index, title, sources) or (index, title, sources, the book's own text)."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute("DELETE FROM chapters")
            self.db.execute("DELETE FROM plan")
            self.db.executemany("INSERT INTO chapters (idx, title, sources, text) VALUES (?, ?, ?, ?)",
                                [(*c[:3], c[3] if len(c) > 3 else "") for c in chapters])
            self.db.executemany(
                "INSERT INTO plan (chapter, idx, segment_key, pause_ms, lang) VALUES (?, ?, ?, ?, ?)",
                [(s.chapter, s.index, s.key, s.pause_ms, s.lang) for s in segments],
            )
            self.db.execute("DELETE FROM sources")
            self.db.executemany(
                "INSERT INTO sources (chapter, idx, paragraph, start, text) VALUES (?, ?, ?, ?, ?)",
                [(s.chapter, s.index, *s.source) for s in segments if s.source is not None])
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def plan(self) -> list[tuple[int, int, str, int]]:
        return self.db.execute(
            "SELECT chapter, idx, segment_key, pause_ms FROM plan ORDER BY chapter, idx"
        ).fetchall()

    def plan_langs(self) -> dict[tuple[int, int], str]:
        """(chapter, index) → language of the planned segments not in the book's language."""
        rows = self.db.execute("SELECT chapter, idx, lang FROM plan WHERE lang IS NOT NULL").fetchall()
        return {(c, i): lang for c, i, lang in rows}

    def chapters(self) -> list[tuple[int, str]]:
        return self.db.execute("SELECT idx, title FROM chapters ORDER BY idx").fetchall()

    def plan_languages(self) -> dict[tuple[int, int], str]:
        """(chapter, index) → the segment's language, where the plan records one (a `lang` column)."""
        if "lang" not in {row[1] for row in self.db.execute("PRAGMA table_info(plan)")}:
            return {}
        return {(c, i): lang for c, i, lang in self.db.execute("SELECT chapter, idx, lang FROM plan") if lang}

    def sources(self) -> dict[tuple[int, int], tuple[int, int, str]]:
        """(chapter, index) → (paragraph, start, the book's own sentence) of each planned segment
        the plan could place in the book (none for a job planned before sources were kept)."""
        rows = self.db.execute("SELECT chapter, idx, paragraph, start, text FROM sources").fetchall()
        return {(c, i): (p, start, text) for c, i, p, start, text in rows}

    def chapter_sources(self) -> dict[int, list[str]]:
        """Each planned chapter's source documents (spine hrefs, with #fragment where a TOC entry cut one)."""
        return {idx: [s for s in sources.split("\n") if s]
                for idx, sources in self.db.execute("SELECT idx, sources FROM chapters ORDER BY idx")}

    def chapter_texts(self) -> dict[int, str]:
        """The book's own words of each planned chapter ("" for a job planned before they were kept)."""
        return dict(self.db.execute("SELECT idx, text FROM chapters ORDER BY idx").fetchall())

    def layout(self, sample_rate: int) -> list[tuple[int, str, list[tuple[str, int]]]]:
        """The book's audio as it is assembled: per chapter in plan order (index, title, parts), each
        part a segment key and the pause after its WAV in samples. render.assemble() encodes this
        and `verify` measures against it, so both read it from here."""
        titles = dict(self.chapters())
        chapters: dict[int, tuple[int, str, list]] = {}
        for chapter, _idx, key, pause_ms in self.plan():
            chapters.setdefault(chapter, (chapter, titles[chapter], []))[2].append(
                (key, pause_ms * sample_rate // 1000))
        return list(chapters.values())

    # --- segments -------------------------------------------------------------------------
    def audio_path(self, key: str) -> Path:
        return self.audio_dir / f"{key}.wav"

    def finished(self, key: str, *, verify: bool = True) -> bool:
        row = self.db.execute(
            "SELECT audio_file, checksum FROM segments WHERE key = ? AND status = 'done'", (key,)
        ).fetchone()
        if not row:
            return False
        path = self.audio_dir / row[0]
        if not path.exists():
            return False
        return not verify or sha256_file(path) == row[1]

    def record_done(self, segment: PlannedSegment, voice: str, details, pcm: bytes,
                    synth_seconds: float, attempts: int = 1) -> None:
        path = self.audio_path(segment.key)
        write_wav_atomically(path, pcm, details.sample_rate)
        with self.db:
            self.db.execute("DELETE FROM word_times WHERE segment_key = ?", (segment.key,))  # new audio
            self.db.execute(
                "INSERT INTO segments (key, text, text_hash, seed, voice, backend, precision, model_id,"
                " status, audio_file, checksum, samples, sample_rate, synth_seconds, attempts, error, updated,"
                " lang) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'done', ?, ?, ?, ?, ?, ?, NULL, ?, ?)"
                " ON CONFLICT(key) DO UPDATE SET status='done', backend=excluded.backend,"
                " precision=excluded.precision, audio_file=excluded.audio_file,"
                " checksum=excluded.checksum, samples=excluded.samples,"
                " sample_rate=excluded.sample_rate, synth_seconds=excluded.synth_seconds,"
                " attempts=segments.attempts + excluded.attempts, error=NULL, updated=excluded.updated",
                (segment.key, segment.text, text_hash(segment.text), segment.seed, voice,
                 details.backend, details.precision, details.model_id, path.name,
                 sha256_file(path), len(pcm) // 2, details.sample_rate, synth_seconds, attempts,
                 time.time(), segment.lang),
            )

    def record_failed(self, segment: PlannedSegment, voice: str, model_id: str, reason: str) -> None:
        with self.db:
            self.db.execute(
                "INSERT INTO segments (key, text, text_hash, seed, voice, model_id, status, attempts,"
                " error, updated, lang) VALUES (?, ?, ?, ?, ?, ?, 'failed', 1, ?, ?, ?)"
                " ON CONFLICT(key) DO UPDATE SET status='failed', error=excluded.error,"
                " attempts=segments.attempts + 1, updated=excluded.updated",
                (segment.key, segment.text, text_hash(segment.text), segment.seed, voice, model_id,
                 reason, time.time(), segment.lang),
            )

    # --- segments said in pieces -----------------------------------------------------------
    def record_pieces(self, parent: PlannedSegment, pieces: list[PlannedSegment]) -> None:
        """`parent` is said as `pieces`, in order; each piece's pause_ms is the silence after it
        inside the parent's WAV (the last one's is the parent's own, from the plan, and unused)."""
        with self.db:
            self.db.execute("DELETE FROM pieces WHERE parent = ?", (parent.key,))
            self.db.executemany(
                "INSERT INTO pieces (parent, idx, segment_key, text, seed, pause_ms) VALUES (?, ?, ?, ?, ?, ?)",
                [(parent.key, i, p.key, p.text, p.seed, p.pause_ms) for i, p in enumerate(pieces)])

    def pieces(self, parent: PlannedSegment) -> list[PlannedSegment]:
        """The pieces `parent` is said in ([] if it is said whole), as segments of its chapter,
        index, language and voice."""
        rows = self.db.execute("SELECT segment_key, text, seed, pause_ms FROM pieces WHERE parent = ? ORDER BY idx",
                               (parent.key,)).fetchall()
        return [PlannedSegment(parent.chapter, parent.index, key, text, seed, pause, parent.lang, voice=parent.voice)
                for key, text, seed, pause in rows]

    def compose(self, parent: PlannedSegment, voice: str, details) -> None:
        """Record `parent` done, its WAV its finished pieces' WAVs with the pauses between them."""
        pieces = self.pieces(parent)
        pcm, seconds = bytearray(), 0.0
        for i, piece in enumerate(pieces):
            with wave.open(str(self.audio_path(piece.key)), "rb") as w:
                pcm += w.readframes(w.getnframes())
            seconds += self.segment_row(piece.key)["synth_seconds"] or 0.0
            if i < len(pieces) - 1:
                pcm += bytes(2 * (piece.pause_ms * details.sample_rate // 1000))
        self.record_done(parent, voice, details, bytes(pcm), seconds)

    # --- word times (--readalong words) ----------------------------------------------------
    def word_times(self) -> dict[str, tuple[int | None, list]]:
        """segment key → (samples, [[first char, end char, first sample, end sample], ...])."""
        return {k: (n, json.loads(w)) for k, n, w in self.db.execute("SELECT segment_key, samples, words FROM word_times")}

    def record_word_times(self, key: str, samples: int | None, words: list) -> None:
        with self.db:
            self.db.execute("INSERT INTO word_times (segment_key, samples, words) VALUES (?, ?, ?) "
                            "ON CONFLICT(segment_key) DO UPDATE SET samples=excluded.samples, words=excluded.words",
                            (key, samples, json.dumps(words, separators=(",", ":"))))

    def forget(self, key: str) -> None:
        with self.db:
            self.db.execute("DELETE FROM segments WHERE key = ?", (key,))
        self.audio_path(key).unlink(missing_ok=True)

    def segment_row(self, key: str) -> dict | None:
        cursor = self.db.execute("SELECT * FROM segments WHERE key = ?", (key,))
        row = cursor.fetchone()
        return dict(zip([c[0] for c in cursor.description], row)) if row else None
