"""Assemble chapter audio into one chaptered, tagged M4B.

How (players read either a QuickTime chapter track or a Nero chpl list, so we write both):

* One AAC-LC encode over the whole book. We read the chapter WAVs chunk by chunk and pipe raw PCM
  into a single ffmpeg process, so memory stays flat however long the book is, and there is never a
  whole-book WAV (WAV stops at 4 GiB). Encoding chapters separately and joining the AAC would add
  encoder priming/padding at every boundary and make chapter marks drift.
* Levels: one gain for the whole book, measured from the stored PCM before the encode, then a
  limiter in the encode itself (levels.py: -19 LUFS integrated, true peak under -3 dBTP).
* Chapter marks come from the real sample counts (WAV frame counts plus silence samples) and are
  written with TIMEBASE=1/<sample_rate>, so they are exact, not rounded to milliseconds.
* ffmpeg's ipod muxer writes both chapter formats: the QuickTime text track that Apple reads and the
  Nero `chpl` atom (mutagen, many Android players). `chpl` holds at most 255 chapters in ffmpeg's
  writer; the QuickTime track keeps them all. We never pass `disable_chpl`, nor `use_metadata_tags`
  (which replaces the iTunes atoms with `mdta` keys and drops the cover).
* Tags ffmpeg cannot write (freeform series/ISBN/... atoms, grouping) are added by mutagen on the
  temporary file afterwards; mutagen keeps both chapter formats and the cover.
* The file appears atomically: we write `.<stem>.<random>.partial.m4b` next to the destination,
  fsync it and `os.replace` it. Whatever goes wrong, the partial file is removed and an existing
  destination is left untouched.
"""

from __future__ import annotations

import glob
import html
import itertools
import os
import re
import secrets
import struct
import subprocess
import tempfile
import threading
import wave
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

from ..book.model import Cover
from ..errors import JobFailed
from . import levels
from .ffmpeg import ffmpeg_exe

if TYPE_CHECKING:
    from ..book.model import Book

# The ipod muxer writes 'M4A ' by default; 'M4B ' is the audiobook brand Apple's tools write and
# both players and ffprobe accept it (verified with ffmpeg 5.1 and 9).
MAJOR_BRAND = "M4B "

# Sample rates the AAC encoder accepts; refusing others here gives a clearer error than ffmpeg's.
AAC_SAMPLE_RATES = frozenset({8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000, 64000, 88200, 96000})

# 32768 frames = 64 KiB per write: large enough to keep the pipe busy, small enough to be noise
# next to ffmpeg's own footprint.
CHUNK_FRAMES = 32768
SAMPLE_WIDTH = 2  # bytes: mono signed 16-bit little-endian

# iTunes shows `desc` as a short blurb (it truncates around 255 characters); longer descriptions
# also go into `ldes` (ffmpeg key `synopsis`), which players show in full.
SHORT_DESCRIPTION_LIMIT = 255

STDERR_LINES_KEPT = 20
ANALYSIS_LINES_KEPT = 200  # the loudness summaries, after ffmpeg's stream listing
ITUNES_FREEFORM = "----:com.apple.iTunes:"


class M4BError(JobFailed):
    """The M4B could not be written. Nothing was left at (or changed at) the destination."""


@dataclass
class AudioChapter:
    title: str
    # Each part is a WAV file (mono, 16-bit, at the book's sample rate) or a number of samples of
    # silence, concatenated in order.
    parts: list[Path | int]


@dataclass
class Tags:
    title: str
    authors: list[str]
    narrator: str
    date: str = ""  # a year is best: players show it as "published"
    description: str = ""
    language: str = ""
    publisher: str = ""
    isbn: str = ""
    series: str = ""
    series_index: str = ""
    genre: str = "Audiobook"
    asin: str = ""


@dataclass
class M4BResult:
    path: Path
    duration_samples: int
    chapter_starts: list[int] = field(default_factory=list)  # in samples; the first is 0
    gain_db: float = 0.0  # applied to the whole book before the limiter


# --------------------------------------------------------------------------------------------
# Tags from the book model


def tags_for_book(book: Book, narrator: str) -> Tags:
    return Tags(
        title=book.title.strip(),
        authors=[a.strip() for a in book.authors if a.strip()],
        narrator=narrator,
        date=_year(book.date),
        description=_plain_text(book.description),
        language=book.language.strip(),
        publisher=book.publisher.strip(),
        isbn=_isbn(book.identifier),
        series=book.series.strip(),
        series_index=book.series_index.strip(),
        asin=book.asin.strip(),
    )


def _year(date: str) -> str:
    # dc:date is "2009", "2009-05" or a full timestamp; players show only a year.
    m = re.match(r"\s*(\d{4})", date or "")
    return m.group(1) if m else ""


def _isbn(identifier: str) -> str:
    """The ISBN in a dc:identifier ("urn:isbn:978-...", "ISBN 0-...") or "" if it is not one."""
    text = re.sub(r"^\s*(urn:)?isbn[:\s]*", "", identifier or "", flags=re.IGNORECASE)
    digits = re.sub(r"[\s-]", "", text).upper()
    if re.fullmatch(r"\d{13}", digits):
        ok = sum(int(d) * (3 if i % 2 else 1) for i, d in enumerate(digits)) % 10 == 0
    elif re.fullmatch(r"\d{9}[\dX]", digits):
        ok = sum((10 - i) * (10 if d == "X" else int(d)) for i, d in enumerate(digits)) % 11 == 0
    else:
        ok = False
    # The checksum keeps UUIDs and shop ids that happen to be digits out of the ISBN atom.
    return digits if ok else ""


def _plain_text(text: str) -> str:
    # OPF descriptions are often escaped HTML; tags must not end up in a player's info screen.
    if "<" in (text or ""):
        text = re.sub(r"(?i)<br\s*/?>|</p\s*>", "\n", text)
        text = re.sub(r"<[^>]*>", "", text)
    text = html.unescape(text or "")
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line)


# --------------------------------------------------------------------------------------------
# The writer


def write_m4b(
    out_path: Path,
    chapters: Sequence[AudioChapter],
    tags: Tags,
    cover: Cover | None,
    sample_rate: int,
    *,
    bitrate: str = "64k",
) -> M4BResult:
    if sample_rate not in AAC_SAMPLE_RATES:
        raise ValueError(f"AAC cannot encode at {sample_rate} Hz (allowed: {sorted(AAC_SAMPLE_RATES)})")

    def command(tmp: Path, meta: Path, cover_file: Path | None, audio_filter: str) -> list[str]:
        return _ffmpeg_command(tmp, meta, cover_file, sample_rate, bitrate, audio_filter)

    def finish(tmp: Path, starts: list[int]) -> None:
        _fix_chpl_titles(tmp)
        _add_freeform_tags(tmp, tags)

    return encode_book(out_path, chapters, tags, cover, sample_rate, command, finish, _global_tags(tags))


def encode_book(out_path: Path, chapters: Sequence[AudioChapter], tags: Tags, cover: Cover | None,
                sample_rate: int, command, finish, global_tags: list[tuple[str, str]]) -> M4BResult:
    """What every audiobook format shares: the inputs checked, the chapter marks from sample
    counts, one loudness measurement and one streamed encode through the same gain and limiter
    (`command(tmp, ffmetadata, cover, filter)` is the format's ffmpeg line), then `finish(tmp, starts)`
    (the format's tags; `starts`: the chapter marks in samples), fsync and an atomic rename onto `out_path`."""
    out_path = Path(out_path)
    lengths = _check_inputs(chapters, cover, sample_rate)
    starts = list(itertools.accumulate(lengths[:-1], initial=0))
    total = starts[-1] + lengths[-1]

    _remove_stale_partials(out_path)
    tmp = _create_partial(out_path)
    try:
        with tempfile.TemporaryDirectory(prefix="epub2audio-book-") as work:
            meta = Path(work) / "metadata.txt"
            meta.write_text(ffmetadata(chapters, starts, total, tags, sample_rate, global_tags), encoding="utf-8")
            cover_file = _write_cover(Path(work), cover) if cover else None
            gain = levels.book_gain(lambda chains: _measure(chains, chapters, lengths, sample_rate))
            cmd = command(tmp, meta, cover_file, levels.filter_chain(gain))
            _run_ffmpeg(cmd, _pcm_chunks(chapters, lengths), f"encoding the {out_path.suffix.lstrip('.').upper()}")
        finish(tmp, starts)
        _fsync_file(tmp)
        os.replace(tmp, out_path)
    except BaseException:
        # Also on KeyboardInterrupt: a half-written book must never be left behind.
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(out_path.parent)  # make the rename itself durable
    return M4BResult(path=out_path, duration_samples=total, chapter_starts=starts, gain_db=gain)


def _remove_stale_partials(out_path: Path) -> None:
    """A process killed with SIGKILL mid-write cannot clean up; the next run for the same output does."""
    ending = f".partial{out_path.suffix}"
    for stale in out_path.parent.glob(f".{glob.escape(out_path.stem)}.*{ending}"):
        if re.fullmatch(r"[0-9a-f]{8}", stale.name[len(out_path.stem) + 2 : -len(ending)]):
            stale.unlink(missing_ok=True)


def _create_partial(out_path: Path) -> Path:
    """Reserve a hidden, unique temp file beside the destination (same filesystem: rename is atomic)."""
    while True:
        tmp = out_path.with_name(f".{out_path.stem}.{secrets.token_hex(4)}.partial{out_path.suffix}")
        try:
            # O_EXCL: two jobs writing the same book never share a temp file. Mode 0o666 lets the
            # umask decide, as for any file the user creates (mkstemp would force 0600).
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return tmp
        except FileExistsError:
            continue


def _check_inputs(chapters: Sequence[AudioChapter], cover: Cover | None, sample_rate: int) -> list[int]:
    """Validate everything before ffmpeg starts; return each chapter's length in samples."""
    if not chapters:
        raise ValueError("an audiobook needs at least one chapter")
    if cover is not None and _cover_suffix(cover) is None:
        raise ValueError(f"cover must be JPEG or PNG, not {cover.media_type!r}")
    lengths = []
    for number, chapter in enumerate(chapters, 1):
        length = sum(_part_length(part, sample_rate, number, chapter.title) for part in chapter.parts)
        if length == 0:
            # A zero-length chapter would give two marks at the same time, which players mishandle.
            raise ValueError(f"chapter {number} ({chapter.title!r}) has no audio")
        lengths.append(length)
    return lengths


def _part_length(part: Path | int, sample_rate: int, number: int, title: str) -> int:
    if isinstance(part, int) and not isinstance(part, bool):
        if part < 0:
            raise ValueError(f"chapter {number} ({title!r}): negative silence {part}")
        return part
    try:
        with wave.open(os.fspath(part), "rb") as w:
            fmt = (w.getnchannels(), w.getsampwidth(), w.getframerate())
            frames = w.getnframes()
    except (OSError, EOFError, wave.Error) as exc:
        raise M4BError(f"chapter {number} ({title!r}): cannot read {part}: {exc}") from exc
    if fmt != (1, SAMPLE_WIDTH, sample_rate):
        raise M4BError(
            f"chapter {number} ({title!r}): {part} is {fmt[0]} ch, {8 * fmt[1]}-bit, {fmt[2]} Hz;"
            f" expected mono 16-bit {sample_rate} Hz"
        )
    return frames


def _cover_suffix(cover: Cover) -> str | None:
    return {"image/jpeg": ".jpg", "image/jpg": ".jpg", "image/png": ".png"}.get(cover.media_type.lower())


def _write_cover(work: Path, cover: Cover) -> Path:
    # ffmpeg tells JPEG from PNG by probing; the suffix only keeps the image2 demuxer happy.
    path = work / f"cover{_cover_suffix(cover)}"
    path.write_bytes(cover.data)
    return path


# --------------------------------------------------------------------------------------------
# FFMETADATA


def ffmetadata(
    chapters: Sequence[AudioChapter], starts: Sequence[int], total: int, tags: Tags, sample_rate: int,
    global_tags: list[tuple[str, str]] | None = None,
) -> str:
    """The FFMETADATA1 text: global tags (the M4B's unless given) plus one [CHAPTER] per chapter,
    in sample units."""
    lines = [";FFMETADATA1"]
    lines += [f"{key}={_escape(value)}" for key, value in (global_tags or _global_tags(tags)) if value]
    ends = [*starts[1:], total]
    for chapter, start, end in zip(chapters, starts, ends):
        lines += [
            "",
            "[CHAPTER]",
            f"TIMEBASE=1/{sample_rate}",
            f"START={start}",
            f"END={end}",
            f"title={_escape(chapter.title)}",  # exactly as given (the reader makes titles one line)
        ]
    return "\n".join(lines) + "\n"


def _global_tags(tags: Tags) -> list[tuple[str, str]]:
    authors = ", ".join(a for a in tags.authors if a)
    description = tags.description.strip()
    long_description = description if len(description) > SHORT_DESCRIPTION_LIMIT else ""
    # ffmpeg key -> iTunes atom in the ipod muxer: title ©nam, album ©alb, artist ©ART,
    # album_artist aART, composer ©wrt, genre ©gen, date ©day, description desc, synopsis ldes,
    # media_type stik (2 = audiobook).
    return [
        ("title", tags.title),
        ("album", tags.title),
        ("artist", authors),
        ("album_artist", authors),
        ("composer", tags.narrator),
        ("genre", tags.genre),
        ("date", tags.date),
        ("description", description),
        ("synopsis", long_description),
        ("media_type", "2"),
    ]


def _escape(value: str) -> str:
    # FFMETADATA treats = ; # \ and newline as syntax; a backslash makes the next character literal.
    value = value.replace("\r\n", "\n").replace("\r", "\n").replace("\0", "")
    escaped = re.sub(r"([=;#\\\n])", r"\\\1", value)
    # ffmpeg's line reader takes any newline after a backslash as escaped, even after an escaped
    # backslash ("a\\" + newline), so a value ending in a backslash would swallow the next line.
    # After a NUL it ends the line again, and its tag parser reads the value as a C string, so
    # the NUL also ends the value.
    return escaped + "\0" if value.endswith("\\") else escaped


# --------------------------------------------------------------------------------------------
# Encoding


def _ffmpeg_command(
    out: Path, meta: Path, cover: Path | None, sample_rate: int, bitrate: str, audio_filter: str
) -> list[str]:
    cmd = [ffmpeg_exe(), "-hide_banner", "-nostats", "-loglevel", "error", "-y"]
    cmd += ["-f", "s16le", "-ar", str(sample_rate), "-ac", "1", "-i", "pipe:0"]
    cmd += ["-f", "ffmetadata", "-i", str(meta)]
    if cover:
        cmd += ["-i", str(cover)]
    cmd += ["-map", "0:a"]
    if cover:
        cmd += ["-map", "2:v", "-c:v", "copy", "-disposition:v:0", "attached_pic"]
    cmd += ["-map_metadata", "1", "-map_chapters", "1"]
    cmd += ["-af", audio_filter, "-c:a", "aac", "-b:a", bitrate, "-ac", "1", "-ar", str(sample_rate)]
    # -f ipod explicitly: the temp file's name ends in .partial.m4b, but the muxer must not depend
    # on the name anyway.
    cmd += ["-f", "ipod", "-brand", MAJOR_BRAND, "-movflags", "+faststart", str(out)]
    return cmd


def _pcm_chunks(chapters: Sequence[AudioChapter], lengths: Sequence[int]) -> Iterable[bytes]:
    """The whole book as raw PCM, 64 KiB at a time; re-checks every chapter's length as it goes."""
    silence = bytes(CHUNK_FRAMES * SAMPLE_WIDTH)
    for number, (chapter, expected) in enumerate(zip(chapters, lengths), 1):
        sent = 0
        for part in chapter.parts:
            if isinstance(part, int):
                remaining = part
                while remaining:
                    n = min(remaining, CHUNK_FRAMES)
                    yield silence[: n * SAMPLE_WIDTH]
                    remaining -= n
                sent += part
            else:
                for chunk in _wav_chunks(part):
                    sent += len(chunk) // SAMPLE_WIDTH
                    yield chunk
        if sent != expected:
            # The marks were computed from the WAV headers; a file that changed or was truncated
            # in the meantime would put every later chapter mark in the wrong place.
            raise M4BError(
                f"chapter {number} ({chapter.title!r}) delivered {sent} samples, its WAV headers said {expected}"
            )


def _wav_chunks(path: Path) -> Iterable[bytes]:
    try:
        with wave.open(os.fspath(path), "rb") as w:
            while chunk := w.readframes(CHUNK_FRAMES):
                yield chunk
    except (OSError, EOFError, wave.Error) as exc:
        raise M4BError(f"cannot read {path}: {exc}") from exc


def _measure(
    chains: Mapping[str, str], chapters: Sequence[AudioChapter], lengths: Sequence[int], sample_rate: int
) -> dict[str, levels.Level]:
    """One analysis pass over the book's PCM: the loudness after each named filter chain."""
    cmd = levels.analysis_command(ffmpeg_exe(), sample_rate, chains)
    output = _run_ffmpeg(cmd, _pcm_chunks(chapters, lengths), "measuring the loudness", ANALYSIS_LINES_KEPT)
    try:
        return levels.parse_levels("\n".join(output), list(chains))
    except ValueError as exc:
        raise M4BError(f"could not measure the book's loudness: {exc}") from exc


def _run_ffmpeg(cmd: list[str], chunks: Iterable[bytes], doing: str, keep: int = STDERR_LINES_KEPT) -> list[str]:
    """Run ffmpeg, feed it the PCM and return its last stderr lines; M4BError with them if it fails."""
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # Drain stderr in a thread: a full stderr pipe would block ffmpeg while we block on stdin.
    tail: deque[str] = deque(maxlen=keep)
    reader = threading.Thread(target=_collect_lines, args=(proc.stderr, tail), daemon=True)
    reader.start()
    stopped_reading = False
    try:
        try:
            for chunk in chunks:
                proc.stdin.write(chunk)
            proc.stdin.close()
        except BrokenPipeError:
            stopped_reading = True  # ffmpeg exited early; its stderr says why
        returncode = proc.wait()
    finally:
        if proc.poll() is None:  # we are leaving on an exception (or Ctrl-C): stop the encoder
            proc.kill()
            proc.wait()
        _close_quietly(proc.stdin)
        reader.join(timeout=5)
    if returncode != 0 or stopped_reading:
        detail = "\n".join(list(tail)[-STDERR_LINES_KEPT:]) or "(no error output)"
        raise M4BError(f"ffmpeg failed (exit code {returncode}) while {doing}:\n{detail}")
    return list(tail)


def _collect_lines(stream: IO[bytes], tail: deque[str]) -> None:
    for raw in stream:
        line = raw.decode("utf-8", "replace").rstrip()
        if line:
            tail.append(line)
    stream.close()


def _close_quietly(stream: IO[bytes] | None) -> None:
    if stream is None:
        return
    try:
        stream.close()
    except (BrokenPipeError, OSError):
        pass  # closing flushes; after ffmpeg died that flush can only fail, and nothing is lost


# --------------------------------------------------------------------------------------------
# After encoding


def _fix_chpl_titles(path: Path) -> None:
    """ffmpeg cuts Nero chapter titles at 255 bytes, even inside a UTF-8 character, and mutagen
    then refuses the whole file. Cut such titles back to a character boundary, in place: the
    entries after one move up and the box ends in zeros (readers stop after the counted entries),
    so no box changes size and no offset moves."""
    with open(path, "r+b") as f:
        chpl = _find_box(f, [b"moov", b"udta", b"chpl"])
        if chpl is None:
            return
        start, size = chpl
        f.seek(start)
        data = f.read(size)
        count, pos, out = data[8], 9, bytearray(data[:9])
        for _ in range(count):
            if pos + 9 > len(data):
                return  # not the layout ffmpeg writes; leave it alone
            length = data[pos + 8]
            title = data[pos + 9:pos + 9 + length]
            while title:
                try:
                    title.decode("utf-8")
                    break
                except UnicodeDecodeError as exc:
                    if exc.start < len(title) - 3:
                        return  # broken for another reason than the cut; not ours to fix
                    title = title[:exc.start]
            out += data[pos:pos + 8] + bytes([len(title)]) + title
            pos += 9 + length
        if len(out) < pos:
            f.seek(start)
            f.write(bytes(out) + bytes(len(data) - len(out)))


def _find_box(f: IO[bytes], names: list[bytes]) -> tuple[int, int] | None:
    """(payload offset, payload size) of the box at the path `names` (e.g. moov/udta/chpl)."""
    f.seek(0, os.SEEK_END)
    start, end = 0, f.tell()
    for depth, name in enumerate(names):
        pos = start
        while pos + 8 <= end:
            f.seek(pos)
            size, kind = struct.unpack(">I4s", f.read(8))
            header = 8
            if size == 1:
                (size,) = struct.unpack(">Q", f.read(8))
                header = 16
            elif size == 0:
                size = end - pos
            if size < header:
                return None
            if kind == name:
                start, end = pos + header, pos + size
                break
            pos += size
        else:
            return None
    return start, end - start


def _add_freeform_tags(path: Path, tags: Tags) -> None:
    """Atoms ffmpeg's muxer has no key for; Audiobookshelf reads them via ffprobe by their names."""
    from mutagen.mp4 import MP4, AtomDataType, MP4FreeForm

    freeform = {
        "series": tags.series,
        "series-part": tags.series_index,
        "ISBN": tags.isbn,
        "ASIN": tags.asin,
        "language": tags.language,
        "publisher": tags.publisher,
    }
    freeform = {name: value.strip() for name, value in freeform.items() if value and value.strip()}
    if not freeform:
        return
    try:
        mp4 = MP4(path)
        for name, value in freeform.items():
            mp4[ITUNES_FREEFORM + name] = [MP4FreeForm(value.encode("utf-8"), dataformat=AtomDataType.UTF8)]
        if "series" in freeform:
            mp4["©grp"] = [freeform["series"]]  # grouping: where Apple's apps and Plex guides put a series
            # movement name and number: where tone and the players that follow it (and Audiobookshelf's
            # mvnm/mvin) look for a series and its part; the number only when the part is a whole one
            mp4["©mvn"] = [freeform["series"]]
            if freeform.get("series-part", "").isdigit() and 0 < int(freeform["series-part"]) < 1 << 16:
                mp4["©mvi"] = [int(freeform["series-part"])]
        mp4.save()
    except Exception as exc:  # mutagen raises its own error types; the caller expects M4BError
        raise M4BError(f"could not add tags to the encoded M4B: {exc}") from exc


def _fsync_file(path: Path) -> None:
    # Data on disk before the rename: after a crash the destination is the old or the new book,
    # never a truncated one.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return  # directories cannot be opened on Windows; the rename is atomic there all the same
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on directories; the book itself is already on disk
    finally:
        os.close(fd)
