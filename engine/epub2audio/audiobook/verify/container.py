"""Container checks: chapters in both formats, tags, cover, codec.

The QuickTime chapter text track is read straight from the boxes (and compared with ffmpeg's
listing of it); the Nero `chpl` atom and the tags through mutagen.
"""

from __future__ import annotations

import itertools
import re
import struct
import subprocess
from fractions import Fraction
from pathlib import Path

from ..ffmpeg import ffmpeg_exe
from .report import Problem, VerifyInputError


REQUIRED_TAGS = {"©nam": "title", "©ART": "artist", "©alb": "album", "©wrt": "composer (narrator)",
                 "©gen": "genre"}
DURATION_TOLERANCE_SAMPLES = 2048  # a decoder that keeps the last AAC frame's padding (ffmpeg 5.1)
NERO_TITLE_BYTES = 255
NERO_TOLERANCE_SECONDS = 0.001  # chpl stores 100 ns units; QuickTime stores samples



def _check_container(path: Path, problems: list[Problem]) -> tuple[dict, list[tuple[int, int, str]], int]:
    from mutagen import MutagenError
    from mutagen.mp4 import MP4

    try:
        mp4 = MP4(path)
    except MutagenError as error:
        raise VerifyInputError(f"{path.name}: not an MP4/M4B file ({error})") from None
    info = {"codec": mp4.info.codec, "channels": mp4.info.channels, "sample_rate": mp4.info.sample_rate}
    sample_rate = int(mp4.info.sample_rate or 0)
    if not sample_rate:
        raise VerifyInputError(f"{path.name}: has no audio track")
    if not str(mp4.info.codec).startswith("mp4a.40"):
        problems.append(Problem("container", f"audio codec is {mp4.info.codec}, not AAC"))
    if mp4.info.channels != 1:
        problems.append(Problem("container", f"audio has {mp4.info.channels} channels, not mono"))

    tags = mp4.tags or {}
    # Judged in verify_m4b once the job says which tags the book could have given.
    info["missing_tags"] = [atom for atom in REQUIRED_TAGS if not tags.get(atom)]
    if tags.get("stik") != [2]:
        problems.append(Problem("container", f"stik (media kind) is {tags.get('stik')}, not [2] (audiobook)"))
    info["tags"] = {k: str(tags[k][0]) for k in (*REQUIRED_TAGS, "stik") if tags.get(k)}
    info["cover"] = bool(tags.get("covr"))

    # QuickTime chapter track, from the boxes themselves; ffmpeg's listing for the titles.
    qt = _qt_chapters(path, sample_rate)
    listing = _ffmpeg_chapters(path, sample_rate)
    nero = [(float(c.start), c.title) for c in mp4.chapters] if mp4.chapters is not None else None
    info["chapters_quicktime"] = len(qt) if qt is not None else 0
    info["chapters_nero"] = len(nero) if nero is not None else 0
    marks: list[tuple[int, int, str]] = []
    if not qt:
        problems.append(Problem("container", "no QuickTime chapter track (the chapters Apple Books reads)"))
    if nero is None or not nero:
        problems.append(Problem("container", "no Nero chpl chapters (the chapters mutagen and Android players read)"))
    if qt:
        marks = qt
        if listing and [(s, e) for s, e, _t in listing] != [(s, e) for s, e, _t in marks]:
            problems.append(Problem("container", "ffmpeg's chapter times differ from the QuickTime chapter track"))
    elif listing:
        marks = listing
    if marks:
        if marks[0][0] != 0:
            problems.append(Problem("container", f"the first chapter starts at {marks[0][0] / sample_rate:.3f} s, not 0"))
        for i, ((s, e, _t), nxt) in enumerate(zip(marks, [*marks[1:], None]), 1):
            if e <= s:
                problems.append(Problem("container", f"chapter {i} ends at or before its start", i))
            if nxt is not None and e != nxt[0]:
                problems.append(Problem("container", f"chapter {i} ends at {e / sample_rate:.3f} s but chapter "
                                                     f"{i + 1} starts at {nxt[0] / sample_rate:.3f} s", i))
    if qt and nero:
        if len(nero) != len(qt) and not (len(qt) > 255 and len(nero) == 255):
            problems.append(Problem("container", f"{len(qt)} QuickTime chapters but {len(nero)} Nero chapters"))
        else:
            for i, ((ns, nt), (s, _e, t)) in enumerate(zip(nero, marks), 1):
                if abs(ns - s / sample_rate) > NERO_TOLERANCE_SECONDS or nt != nero_title(t):
                    problems.append(Problem("container", f"chapter {i}: Nero chpl says {nt!r} at {ns:.3f} s, "
                                                         f"QuickTime {t!r} at {s / sample_rate:.3f} s", i))
                    break
    info["chapter_sum_seconds"] = round(sum(e - s for s, e, _t in marks) / sample_rate, 3) if marks else 0
    return info, marks, sample_rate


def nero_title(title: str) -> str:
    """A title as the Nero chpl list holds it: at most 255 bytes of UTF-8, cut at a character
    boundary (its length is one byte; m4b.py cuts ffmpeg's byte cut back to a boundary)."""
    return title.encode("utf-8")[:NERO_TITLE_BYTES].decode("utf-8", "ignore")


def _ffmpeg_chapters(path: Path, sample_rate: int) -> list[tuple[int, int, str]]:
    """ffmpeg's chapter listing (`-f ffmetadata`) as (start, end, title) in samples."""
    proc = subprocess.run([ffmpeg_exe(), "-v", "error", "-i", str(path), "-f", "ffmetadata", "-"],
                          capture_output=True)
    text = proc.stdout.decode("utf-8", "replace")
    chapters = []
    for block in text.split("[CHAPTER]")[1:]:
        fields = {}
        for line in block.split("\n"):
            key, eq, value = line.partition("=")
            if eq:
                fields[key.strip()] = re.sub(r"\\(.)", r"\1", value)
        try:
            tb = Fraction(fields.get("TIMEBASE", "1/1000"))
            start = round(int(fields["START"]) * tb * sample_rate)
            end = round(int(fields["END"]) * tb * sample_rate)
        except (KeyError, ValueError, ZeroDivisionError):
            continue
        chapters.append((start, end, fields.get("title", "")))
    return chapters


def _boxes(data: bytes, start: int = 0, end: int | None = None):
    end = len(data) if end is None else end
    pos = start
    while pos + 8 <= end:
        size, kind = struct.unpack(">I4s", data[pos:pos + 8])
        head = 8
        if size == 1:
            size = struct.unpack(">Q", data[pos + 8:pos + 16])[0]
            head = 16
        elif size == 0:
            size = end - pos
        if size < head:
            return
        yield kind.decode("latin-1"), pos + head, min(pos + size, end)
        pos += size


def _child(data: bytes, start: int, end: int, *names: str):
    for name in names:
        for kind, s, e in _boxes(data, start, end):
            if kind == name:
                start, end = s, e
                break
        else:
            return None
    return start, end


def _read_moov(path: Path) -> bytes | None:
    with open(path, "rb") as f:
        total = f.seek(0, 2)
        pos = 0
        while pos + 8 <= total:
            f.seek(pos)
            size, kind = struct.unpack(">I4s", f.read(8))
            head = 8
            if size == 1:
                size = struct.unpack(">Q", f.read(8))[0]
                head = 16
            elif size == 0:
                size = total - pos
            if kind == b"moov":
                f.seek(pos + head)
                return f.read(size - head)
            if size < 8:
                return None
            pos += size
    return None


def _qt_track(path: Path) -> dict | None:
    """The chapter text track that the audio track's tref/chap points at: timescale, sample
    durations and sample offsets/sizes (for the titles)."""
    moov = _read_moov(path)
    if moov is None:
        return None
    traks, chap_ids = {}, set()
    for kind, s, e in _boxes(moov):
        if kind != "trak":
            continue
        tkhd = _child(moov, s, e, "tkhd")
        hdlr = _child(moov, s, e, "mdia", "hdlr")
        if not tkhd or not hdlr:
            continue
        version = moov[tkhd[0]]
        track_id = struct.unpack(">I", moov[tkhd[0] + (20 if version == 1 else 12):][:4])[0]
        handler = moov[hdlr[0] + 8:hdlr[0] + 12].decode("latin-1")
        traks[track_id] = (s, e, handler)
        chap = _child(moov, s, e, "tref", "chap")
        if chap:
            chap_ids.update(struct.unpack(f">{(chap[1] - chap[0]) // 4}I", moov[chap[0]:chap[1]]))
    for track_id in sorted(chap_ids):
        if track_id not in traks or traks[track_id][2] != "text":
            continue
        s, e, _h = traks[track_id]
        mdhd = _child(moov, s, e, "mdia", "mdhd")
        stbl = _child(moov, s, e, "mdia", "minf", "stbl")
        if not mdhd or not stbl:
            return None
        v = moov[mdhd[0]]
        timescale = struct.unpack(">I", moov[mdhd[0] + (20 if v == 1 else 12):][:4])[0]
        stts = _child(moov, *stbl, "stts")
        durations = []
        if stts:
            (count,) = struct.unpack(">I", moov[stts[0] + 4:stts[0] + 8])
            for i in range(count):
                n, delta = struct.unpack(">II", moov[stts[0] + 8 + 8 * i:stts[0] + 16 + 8 * i])
                durations += [delta] * n
        elst = _child(moov, s, e, "edts", "elst")
        return {"timescale": timescale, "durations": durations, "stbl": stbl, "moov": moov,
                "has_edit_list": bool(elst)}
    return None


def _qt_chapters(path: Path, sample_rate: int) -> list[tuple[int, int, str]] | None:
    """(start, end in samples, title) per chapter of the QuickTime chapter track; None without one.
    Each chapter is one text sample: its start is the sum of the sample durations before it."""
    track = _qt_track(path)
    if track is None:
        return None
    scale = track["timescale"] or 1
    bounds = [round(Fraction(t, scale) * sample_rate) for t in itertools.accumulate(track["durations"], initial=0)]
    titles = _qt_titles(path, track, len(bounds) - 1)
    return [(s, e, t) for s, e, t in zip(bounds, bounds[1:], titles)]


def _qt_titles(path: Path, track: dict, n: int) -> list[str]:
    """Each text sample is a 16-bit length and UTF-8 text (then optional atoms)."""
    moov, stbl = track["moov"], track["stbl"]
    try:
        stsz = _child(moov, *stbl, "stsz")
        stsc = _child(moov, *stbl, "stsc")
        stco = _child(moov, *stbl, "stco")
        co64 = _child(moov, *stbl, "co64")
        fixed, count = struct.unpack(">II", moov[stsz[0] + 4:stsz[0] + 12])
        sizes = [fixed] * count if fixed else list(struct.unpack(f">{count}I", moov[stsz[0] + 12:stsz[0] + 12 + 4 * count]))
        if stco:
            (nc,) = struct.unpack(">I", moov[stco[0] + 4:stco[0] + 8])
            offsets = list(struct.unpack(f">{nc}I", moov[stco[0] + 8:stco[0] + 8 + 4 * nc]))
        else:
            (nc,) = struct.unpack(">I", moov[co64[0] + 4:co64[0] + 8])
            offsets = list(struct.unpack(f">{nc}Q", moov[co64[0] + 8:co64[0] + 8 + 8 * nc]))
        (ne,) = struct.unpack(">I", moov[stsc[0] + 4:stsc[0] + 8])
        runs = [struct.unpack(">III", moov[stsc[0] + 8 + 12 * i:stsc[0] + 20 + 12 * i]) for i in range(ne)]
        positions, sample = [], 0
        for chunk in range(len(offsets)):
            per = next((spc for first, spc, _d in reversed(runs) if first - 1 <= chunk), 1)
            pos = offsets[chunk]
            for _ in range(per):
                if sample >= len(sizes):
                    break
                positions.append((pos, sizes[sample]))
                pos += sizes[sample]
                sample += 1
        titles = []
        with open(path, "rb") as f:
            for pos, size in positions[:n]:
                f.seek(pos)
                raw = f.read(size)
                (length,) = struct.unpack(">H", raw[:2])
                titles.append(raw[2:2 + length].decode("utf-8", "replace"))
        return titles + [""] * (n - len(titles))
    except (TypeError, struct.error, OSError):
        return [""] * n
