"""A conversion job: book → segments → workers → segment store → M4B.

Every front door (the command, the calibre plugin through the command, the folder watcher) runs
exactly this. The job lives in a work directory keyed by the output path, so running the same
command again resumes it.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from .book import Book
from .book.epub import load_book
from .book.language import foreign, runs as language_runs, split_voice, with_voice
from .book.lexicon import (PHONEME_VOICES, Entry, Lexicon, apply as apply_lexicons, job_lexicon, load_book_settings,
                           voice_text)
from .book.model import Chapter
from .book.normalize import normalize
from .book.normalize_en import letter_headings, numbered_headings, numeral_label
from .book.segment import segment_chapter, split_in_two, split_sentences
from .book.skips import plan_fields
from .config import cache_dir, load_config
from .errors import InputError, JobFailed
from .outputs import assemble, audio_chapters, write_outputs  # noqa: F401  (audio_chapters: tests)
from .progress import Eta, Progress
from .store import PlannedSegment, SegmentStore, job_dir_for, job_voice, segment_key, segment_seed
from .voices.catalog import AUTO, VoiceChoice, choose_voice, language_changes_audio, language_warning, resolve
from .voices.passages import Readers, passage_readers
from .worker.autoscale import AutoWorkersArgs, Throughput, WorkerCountCache, cache_key, choose_workers
from .worker.supervisor import (SegmentCapped, SegmentFailed, Stopped, Supervisor, VoiceDetails, VoiceLoadFailed,
                                WorkerPolicy)

DEFAULT_JOB_SEED = 1986


@dataclass
class ConvertOptions:
    voice: str = AUTO  # the book's language decides (voices.catalog.choose_voice), as on the command line
    voice_options: dict = field(default_factory=dict)  # what the worker needs to load the voice
    chapters: list[int] | None = None  # 0-based chapter indices; None = all
    workers: int = 1
    auto_workers: bool = False  # --workers auto: on a GPU, measure how many (render._auto_workers)
    threads_per_worker: int = 1
    job_seed: int = DEFAULT_JOB_SEED
    work_dir: Path | None = None
    policy: WorkerPolicy = field(default_factory=WorkerPolicy)
    metadata: dict = field(default_factory=dict)  # overrides for the book's metadata (calibre)
    verify: bool = True  # check the M4B after writing it (container, audio, speech recognition)
    # How the book is read. None = the per-book file's setting (BOOK.epub2audio.toml), else the
    # default: notes "skip", titles said. Each changes segment texts, so the store re-renders.
    notes: str | None = None  # "skip" | "inline" | "chapter-end"
    say_titles: bool | None = None
    keep_front_matter: bool | None = None  # read title/copyright pages, transcriber's notes, adverts
    lexicon: Path | None = None  # --lexicon; wins over the per-book file's and config.toml's
    image_alt: bool | None = None  # read content pictures' alt texts; None: per-book file, config.toml, yes
    # What renders the segments: called like WorkerPool(voice, voice_options, workers, threads,
    # policy, log_path). None = local worker processes; ray_pool.RayWorkerPool and library.py's
    # shared pool have the same interface.
    pool: Callable | None = None
    audio_format: str = "m4b"  # "mp3" | "opus": the audiobook itself (outputs.py), the same audio
    # "audiobookshelf": the output path is a library folder; the book goes to
    # Author/Series/Book N - Title/Title.<format> under it, with cover, desc.txt (audiobook/shelf.py)
    layout: str = "flat"
    # Files beside the M4B, from the same timings (audiobook/subtitles.py, audiobook/readalong.py):
    subtitles: str | None = None  # "srt" | "vtt"
    readalong: str | None = None  # "sentences" (BOOK.readalong.epub)


@dataclass
class Reading:
    """The resolved reading settings of one job."""
    notes: str = "skip"
    say_titles: bool = True
    lexicon: Lexicon = field(default_factory=Lexicon)
    keep_front_matter: bool = False
    image_alt: bool = True


def reading_for(book_path: Path, options: ConvertOptions, config: dict | None = None) -> Reading:
    """--notes/--say-titles/--keep-front-matter/--lexicon/--image-alt over BOOK.epub2audio.toml over config.toml
    over defaults."""
    settings = load_book_settings(book_path)
    notes = options.notes or settings.get("notes") or "skip"
    say_titles = options.say_titles
    if say_titles is None:
        say_titles = _setting_bool(settings.get("say_titles", True))
    keep = options.keep_front_matter
    if keep is None:
        keep = _setting_bool(settings.get("keep_front_matter", False))
    config = load_config() if config is None else config
    image_alt = options.image_alt
    if image_alt is None:
        image_alt = _setting_bool(settings.get("image_alt", config.get("image_alt", True)))
    return Reading(notes, say_titles, job_lexicon(book_path, config, options.lexicon), keep, image_alt)


def _setting_bool(raw) -> bool:
    return raw if isinstance(raw, bool) else str(raw).lower() in ("yes", "true", "1")


@dataclass
class ConvertResult:
    output: Path
    duration_seconds: float
    chapters: int
    segments: int
    rendered: int
    work_dir: Path


# Voices whose audio is not speech: the speech-recognition check would only fail them.
SILENT_VOICES = {"tone"}


def _verify(out_path: Path, work_dir: Path, progress: Progress, *, asr: bool) -> None:
    """Check what we just wrote, as `epub2audio verify` would; a structural failure fails the job
    (exit 1) but keeps the M4B; doubtful speech only comes out in the verify event, with where to listen."""
    from .audiobook.verify import verify_conversion

    report = verify_conversion(out_path, work_dir, progress, asr=asr)
    failed = [p for p in report.problems if p.severity == "fail"]  # doubtful speech is reported, not failed
    if failed:
        problems = "; ".join(p.message for p in failed[:3])
        more = f" (and {len(failed) - 3} more)" if len(failed) > 3 else ""
        raise JobFailed(f"{out_path.name} was written but failed verification: {problems}{more}. "
                        f"Details: epub2audio verify {out_path}")


class Interrupted(Exception):
    """Ctrl-C (or SIGTERM) during rendering: the job is consistent and resumable."""

    def __init__(self, done: int, total: int):
        super().__init__(f"interrupted with {done} of {total} segments done")
        self.done, self.total = done, total


def select_chapters(book: Book, wanted: list[int] | None) -> list[int]:
    if wanted is None:
        return list(range(len(book.chapters)))
    for i in wanted:
        if not 0 <= i < len(book.chapters):
            raise InputError(
                f"{Path(book.path).name}: there is no chapter {i + 1} (the book has {len(book.chapters)})"
            )
    return sorted(set(wanted))


def read_indices(chapter: Chapter, say_titles: bool) -> list[int]:
    """The chapter's paragraphs that are read, in order: all, or without the leading headings."""
    indices = list(range(len(chapter.paragraphs)))
    if not say_titles:
        lead = 0
        while lead < len(indices) and chapter.kind(lead) == "heading":
            lead += 1
        if lead < len(indices):  # a chapter that is nothing but headings keeps them
            indices = indices[lead:]
    return indices


def spoken_chapter(book: Book, chapter: Chapter, *, say_titles: bool = True, lexicon: Lexicon | None = None,
                   book_lexicon: Lexicon | None = None, phonemes: bool = True,
                   letters: dict[int, str] | None = None, voices: frozenset[str] = frozenset()) -> Chapter:
    """A chapter as it is read: title dropped if asked, pronunciations marked, text normalised.
    phonemes=False (a voice that cannot take IPA): the book's ssml:ph and PLS entries and the
    user's IPA entries are left out, so the written words are normalised in their context.
    `letters`: heading index → "letter" (a letter of the alphabet, not a Roman numeral) or
    "numeral" ("Chapter C" among Roman chapter numbers), from letter_paragraphs.
    `voices`: the voice names the book gives passages (data-calibre-tts) that a voice of their own
    reads; a passage naming another is read as if it named none (its sentences are not cut there)."""
    letters = letters or {}
    if book_lexicon is None:
        book_lexicon = Lexicon([Entry(g, ipa=ipa) for g, ipa in book.pronunciation_lexicon])
    if not phonemes:
        book_lexicon = None
        lexicon = Lexicon([e for e in lexicon.entries if e.ipa is None]) if lexicon else None
    indices = read_indices(chapter, say_titles)
    paragraphs, kinds, breaks, languages = [], [], set(), {}
    for new, old in enumerate(indices):
        spans = chapter.pronunciations.get(old) if phonemes else None
        heading = chapter.kind(old) == "heading" and letters.get(old) != "letter"
        # Each run of one language is marked and normalised on its own, by its own language's
        # rules (no English number words inside a French quotation).
        source = chapter.paragraphs[old]
        runs = [(a, b, _without_unread_voice(tag, voices)) for a, b, tag in chapter.languages.get(old, [])]
        if letters.get(old) == "numeral":  # respelt: spans over the written heading no longer fit
            source, spans, runs = numeral_label(source), None, None
        pieces: list[str] = []
        spoken_runs: list[tuple[int, int, str]] = []
        length = 0
        for start, end, lang in language_runs(source, runs, book.language):
            inside = [(a - start, b - start, ipa) for a, b, ipa in spans or [] if start <= a and b <= end]
            text = apply_lexicons(source[start:end], inside, book_lexicon, lexicon)
            text = normalize(text, split_voice(lang)[0] or book.language, heading=heading)
            if not text:
                continue
            length += bool(pieces)  # the space that joins runs
            if lang:
                spoken_runs.append((length, length + len(text), lang))
            pieces.append(text)
            length += len(text)
        paragraphs.append(" ".join(pieces))
        if spoken_runs:
            languages[new] = spoken_runs
        kinds.append(chapter.kind(old))
        if old in chapter.breaks and new > 0:
            breaks.add(new)
    return replace(chapter, paragraphs=paragraphs, kinds=kinds, breaks=breaks, pronunciations={},
                   languages=languages)


def _without_unread_voice(tag: str, voices: frozenset[str]) -> str | None:
    lang, voice = split_voice(tag)
    return with_voice(lang, voice if voice in voices else None)


def letter_paragraphs(book: Book) -> dict[int, dict[int, str]]:
    """Chapter index → {heading index: "letter" | "numeral"}: headings that are letters of the
    alphabet ("C" in a dictionary's A, B, C …) and "Chapter C" headings that are Roman numerals
    (among "Chapter XCIX", "Chapter CI"), judged over the whole book's headings in reading order.
    English books only: the Roman numeral rules are English ones."""
    if (book.language or "en").split("-")[0].lower() != "en":
        return {}
    places = [(ci, pi) for ci, chapter in enumerate(book.chapters)
              for pi in range(len(chapter.paragraphs)) if chapter.kind(pi) == "heading"]
    headings = [book.chapters[ci].paragraphs[pi] for ci, pi in places]
    found: dict[int, dict[int, str]] = {}
    for kind, indices in (("letter", letter_headings(headings)), ("numeral", numbered_headings(headings))):
        for k in indices:
            ci, pi = places[k]
            found.setdefault(ci, {})[pi] = kind
    return found


def plan_segments(book: Book, chapter_indices: list[int], job_seed: int, voice: str,
                  model_id: str, *, say_titles: bool = True, lexicon: Lexicon | None = None,
                  readers: Readers | None = None, model_ids: dict[str, str] | None = None) -> list[PlannedSegment]:
    """The book's segments as the job renders them. `readers` (--voice auto): which voice reads
    each passage (voices/passages.py), `model_ids` the model each of those other voices loaded;
    None: `voice` reads everything. A segment's key is its own voice's."""
    planned, seen = [], Counter()
    book_lexicon = Lexicon([Entry(g, ipa=ipa) for g, ipa in book.pronunciation_lexicon])
    letters = letter_paragraphs(book)
    for ci in chapter_indices:
        spoken = spoken_chapter(book, book.chapters[ci], say_titles=say_titles, lexicon=lexicon,
                                book_lexicon=book_lexicon, phonemes=voice in PHONEME_VOICES,
                                letters=letters.get(ci), voices=frozenset(readers.named if readers else ()))
        segments = segment_chapter(ci, spoken)
        sources = sentence_sources(book.chapters[ci], spoken, read_indices(book.chapters[ci], say_titles),
                                   segments, book.language)
        for seg, source in zip(segments, sources):
            lang, named = split_voice(seg.lang)  # named: the voice the book gives it (data-calibre-tts)
            reader = readers.voice_for(lang, named) if readers else voice
            text = voice_text(seg.text, reader)  # pronunciation markup only for voices that speak it
            occurrence = seen[text]
            seen[text] += 1
            seed = segment_seed(job_seed, text, occurrence)
            # A voice whose audio depends on the language is told the book's too (a whole Japanese
            # book must not reach Kokoro untagged); the others only hear of foreign passages.
            lang = lang or (book.language if book.language and language_changes_audio(reader) else None)
            key = _key(reader, (model_ids or {}).get(reader, model_id), text, seed, lang)
            planned.append(PlannedSegment(ci, seg.index, key, text, seed, seg.pause_after_ms, lang, source,
                                          voice=reader if reader != voice else None))
    return planned


def passage_readings(book: Book, chapter_indices: list[int]) -> tuple[set[str], set[str]]:
    """The selected chapters' passages: the languages other than the book's they are in, and the
    voice names the book gives some of them (calibre's data-calibre-tts)."""
    langs, named = set(), set()
    for ci in chapter_indices:
        for spans in book.chapters[ci].languages.values():
            for _start, _end, tag in spans:
                lang, voice = split_voice(foreign(tag, book.language))
                langs.update([lang] if lang else [])
                named.update([voice] if voice else [])
    return langs, named


def sentence_sources(chapter: Chapter, spoken: Chapter, indices: list[int], segments: list,
                     language: str) -> list[tuple[int, int, str] | None]:
    """For each segment of `spoken` (the chapter as read), the sentence of the book it says:
    (paragraph of `chapter`, where the sentence starts in it, its text before normalisation).
    The subtitles and the read-along book show these words, timed by the segments' audio.

    Normalising may add or remove sentence ends ("3.5", "Mr.") and a long sentence is said in
    several segments, so within a paragraph the book's sentences are matched to the segments by
    their letters and digits once normalised one by one; where that fails (normalisation that
    depends on the sentence's neighbours) all the paragraph's segments say the whole paragraph."""
    sources: list[tuple[int, int, str] | None] = []
    all_said: list[str] = []
    for new, old in enumerate(indices):
        one = replace(spoken, paragraphs=[spoken.paragraphs[new]], kinds=[spoken.kind(new)], breaks=set(),
                      languages={0: spoken.languages[new]} if new in spoken.languages else {})
        said = [s.text for s in segment_chapter(0, one)]
        all_said += said
        sources += _paragraph_sources(old, chapter.paragraphs[old], said, language)
    if all_said != [s.text for s in segments]:
        return [None] * len(segments)  # the paragraphs did not add up to the chapter's segments
    return sources


def _letters(text: str) -> str:
    return "".join(ch for ch in text.casefold() if ch.isalnum())


def _paragraph_sources(paragraph: int, text: str, said: list[str], language: str) -> list[tuple[int, int, str]]:
    sentences, at = [], 0
    for sentence in split_sentences(text):
        start = text.find(sentence, at)
        if start < 0:
            break
        sentences.append((start, sentence))
        at = start + len(sentence)
    else:
        if len(sentences) == len(said):
            return [(paragraph, start, sentence) for start, sentence in sentences]
        groups = _match_groups([_letters(normalize(s, language)) for _, s in sentences],
                               [_letters(s) for s in said])
        if groups is not None:
            out = []
            for (first, last), count in groups:
                start = sentences[first][0]
                end = sentences[last][0] + len(sentences[last][1])
                out += [(paragraph, start, text[start:end])] * count
            return out
    whole = text.strip()
    return [(paragraph, text.find(whole), whole)] * len(said)


def _match_groups(book: list[str], said: list[str]) -> list[tuple[tuple[int, int], int]] | None:
    """Runs of book sentences and of said segments whose letters are the same: ((first, last)
    book sentence, number of segments) each, in order; None if they never line up to the end."""
    groups, i, j = [], 0, 0
    while i < len(book) and j < len(said):
        first, a, b, count = i, book[i], said[j], 1
        while a != b:
            if len(a) < len(b) and i + 1 < len(book):
                i += 1
                a += book[i]
            elif len(b) < len(a) and j + 1 < len(said):
                j += 1
                b += said[j]
                count += 1
            else:
                return None
        groups.append(((first, i), count))
        i, j = i + 1, j + 1
    return groups if i == len(book) and j == len(said) else None


def _key(voice: str, model_id: str, text: str, seed: int, lang: str | None) -> str:
    # the language is part of the segment's identity only where it changes the audio
    return segment_key(voice, model_id, text, seed, lang if language_changes_audio(voice) else None)


def split_segment(segment: PlannedSegment, voice: str, model_id: str) -> list[PlannedSegment] | None:
    """A segment the voice could not say within its length cap, as two pieces (None for a single
    word: see book.segment.split_in_two). A piece's seed comes from its parent's seed, its text and
    its place, so re-splitting the same segment gives the same pieces, keys and audio on resume."""
    halves = split_in_two(segment.text)
    if halves is None:
        return None
    left, right, pause = halves
    pieces = []
    for place, (text, pause_after) in enumerate(((left, pause), (right, 0))):
        seed = segment_seed(segment.seed, text, place)
        pieces.append(replace(segment, key=_key(voice, model_id, text, seed, segment.lang), text=text, seed=seed,
                              pause_ms=pause_after))
    return pieces


def apply_metadata(book: Book, overrides: dict) -> Book:
    """calibre's database knows better than the EPUB: let its fields win where given."""
    from .book.model import Cover

    fields = {k: v for k, v in overrides.items() if k in Book.__dataclass_fields__ and k != "cover" and v}
    if overrides.get("isbn"):  # the M4B's ISBN tag is read from the identifier
        fields["identifier"] = f"urn:isbn:{overrides['isbn']}"
    if isinstance(fields.get("authors"), str):
        fields["authors"] = [fields["authors"]]
    book = replace(book, **fields)
    cover_path = overrides.get("cover")
    if cover_path:
        data = Path(cover_path).read_bytes()
        kind = "image/png" if data.startswith(b"\x89PNG") else "image/jpeg"
        book = replace(book, cover=Cover(data, kind))
    return book


class WorkerPool:
    """N supervised worker slots sharing one queue of segments."""

    def __init__(self, voice: str, voice_options: dict, workers: int, threads: int,
                 policy: WorkerPolicy, log_path: Path | None):
        self.config, self.policy, self.log_path = {"voice": voice, "threads": threads, "options": voice_options}, policy, log_path
        self.supervisors = [Supervisor(self.config, policy, log_path) for _ in range(max(1, workers))]

    def resize(self, workers: int) -> None:
        """Run `workers` slots from now on: new ones start on first use, extra ones are closed."""
        workers = max(1, workers)
        while len(self.supervisors) > workers:
            self.supervisors.pop().close()
        while len(self.supervisors) < workers:
            self.supervisors.append(Supervisor(self.config, self.policy, self.log_path))

    def measure(self, workers: int, segments: list[PlannedSegment], sample_rate: int, per_worker: int = 2) -> float | None:
        """Throughput (audio seconds per wall second, finished segments only) of `workers` slots
        rendering `per_worker` segments each, taken from `segments` in turn; the results are thrown
        away (the job renders them again; their bytes do not depend on the worker count). Loading
        and each new worker's first request (allocator, kernels, CUDA graph capture) are outside the
        clock. None when a worker cannot start (e.g. the GPU is full)."""
        self.resize(workers)
        fresh = [s for s in self.supervisors if s.worker is None]
        failures = []

        def warm(supervisor: Supervisor) -> None:  # the new workers load at once, in parallel
            try:
                supervisor.details
            except (VoiceLoadFailed, Stopped) as error:  # this many workers cannot run here (e.g. the GPU is full)
                failures.append(error)
                return
            first = segments[0]
            try:
                supervisor.synthesize(first.text, first.seed, first.lang)
            except (SegmentFailed, Stopped):  # a failed warm-up says nothing of the count: the timed round counts
                pass

        warmers = [threading.Thread(target=warm, args=(s,), daemon=True) for s in fresh]
        for t in warmers:
            t.start()
        for t in warmers:
            t.join()
        if failures:
            return None
        batch = [segments[i % len(segments)] for i in range(workers * per_worker)]
        meter = Throughput(sample_rate)
        started = time.perf_counter()
        self.render(batch, lambda segment, pcm, seconds, details, error: meter.add(pcm, error))
        return meter.rate(time.perf_counter() - started)

    def details(self) -> VoiceDetails:
        try:
            return self.supervisors[0].details
        except VoiceLoadFailed as error:
            raise JobFailed(str(error)) from None

    def render(self, todo: list[PlannedSegment], on_result) -> None:
        """Synthesise `todo`; on_result(segment, pcm | None, seconds, details, error) runs in this thread.
        error: None, a str, or the SegmentCapped of a segment that reached the voice's length cap."""
        tasks: queue.Queue = queue.Queue()
        for item in todo:
            tasks.put(item)
        results: queue.Queue = queue.Queue()

        def take():
            try:
                segment = tasks.get_nowait()
            except queue.Empty:
                return None
            return segment, segment.text, segment.seed, segment.lang

        def give(segment, pcm, seconds, details, error) -> None:
            results.put((segment, pcm, seconds, details, error))

        def work_pipelined(supervisor: Supervisor) -> None:
            # up to policy.pipeline_depth segments in flight on this worker (see worker/pipeline.py)
            while True:
                left = tasks.qsize()
                try:
                    supervisor.run_pipelined(take, give)
                    return
                except Stopped:
                    return
                except Exception:  # run_pipelined has reported the segments it held: go on,
                    if tasks.qsize() == left:  # unless it could not even take one
                        return

        def work(supervisor: Supervisor) -> None:
            if supervisor.policy.pipeline_depth > 1:
                return work_pipelined(supervisor)
            while True:
                try:
                    segment = tasks.get_nowait()
                except queue.Empty:
                    return
                try:
                    pcm, seconds, details = supervisor.synthesize(segment.text, segment.seed, segment.lang)
                    results.put((segment, pcm, seconds, details, None))
                except SegmentCapped as error:  # handed over as such: the job re-splits the segment
                    results.put((segment, None, 0.0, None, error))
                except SegmentFailed as error:
                    results.put((segment, None, 0.0, None, str(error)))
                except Stopped:
                    return
                except Exception as error:  # a supervisor bug must not hang the job
                    results.put((segment, None, 0.0, None, f"{type(error).__name__}: {error}"))

        threads = [threading.Thread(target=work, args=(s,), daemon=True) for s in self.supervisors]
        for t in threads:
            t.start()
        try:
            for _ in range(len(todo)):
                while True:
                    try:
                        result = results.get(timeout=0.2)  # short waits keep Ctrl-C responsive
                        break
                    except queue.Empty:
                        if not any(t.is_alive() for t in threads) and results.empty():
                            return
                on_result(*result)
        except BaseException:
            self.kill()
            raise
        finally:
            for t in threads:
                t.join(timeout=5)

    def kill(self) -> None:
        for s in self.supervisors:
            s.kill()

    def close(self) -> None:
        for s in self.supervisors:
            s.close()


def convert(book_path: Path, out_path: Path, options: ConvertOptions, progress: Progress) -> ConvertResult:
    started = time.monotonic()
    reading = reading_for(Path(book_path), options)
    book = apply_metadata(load_book(book_path, notes=reading.notes, keep_front_matter=reading.keep_front_matter,
                                    image_alt=reading.image_alt), options.metadata)
    for warning in book.warnings:  # parts of the book that could not be read as they should
        progress.emit("warning", message=warning)
    auto = options.voice == AUTO
    requested = options.voice_options  # --model-dir and the like, for the passages' voices too
    language = None if auto else language_warning(book.language, options.voice)
    if language:
        progress.emit("warning", message=language)
    out_path = Path(out_path)
    if options.layout == "audiobookshelf":
        from .audiobook.shelf import shelf_path

        if not out_path.is_dir():
            raise InputError(f"{out_path}: with --layout audiobookshelf the output is the library folder, "
                             "which must exist")
        out_path = shelf_path(out_path, book.title or Path(book_path).stem, book.authors, book.series,
                              book.series_index, f".{options.audio_format}")
    work_dir = Path(options.work_dir or job_dir_for(out_path))
    if auto:  # it picked a voice that speaks the book's language, or said in one line that none does
        options = _auto_voice(book, options, progress, job_voice(work_dir))
    chapter_indices = select_chapters(book, options.chapters)
    if options.layout == "audiobookshelf":
        out_path.parent.mkdir(parents=True, exist_ok=True)
    if out_path.suffix.lower() != f".{options.audio_format}":
        raise InputError(f"{out_path}: the output must be a .{options.audio_format} file"
                         + (f" (--format {options.audio_format})" if options.audio_format != "m4b" else
                            " (--format mp3 or opus for the others)"))
    if not out_path.parent.is_dir():
        raise InputError(f"{out_path.parent}: the output folder does not exist")

    store = SegmentStore(work_dir)
    make_pool = partial(_make_pool, options.pool or WorkerPool, options, work_dir / "worker.log")
    readers, others = None, {}
    if auto:  # other voices for passages in other languages, each loaded once for its model id
        readers, others = _passage_voices(book, chapter_indices, options, requested, progress, make_pool)
    pool = make_pool(VoiceChoice(options.voice, options.voice_options, options.threads_per_worker))
    try:
        details = pool.details()
        for voice, (_choice, theirs) in list(others.items()):
            if theirs.sample_rate != details.sample_rate:  # the catalog's rate was not the loaded one
                progress.emit("warning", message=f"voice {voice} gives {theirs.sample_rate} Hz audio, the book's "
                                                 f"voice {options.voice} {details.sample_rate} Hz: {options.voice} "
                                                 "reads its passages")
                readers.drop(voice)
                del others[voice]
        planned = plan_segments(book, chapter_indices, options.job_seed, options.voice, details.model_id,
                                say_titles=reading.say_titles, lexicon=reading.lexicon, readers=readers,
                                model_ids={voice: theirs.model_id for voice, (_c, theirs) in others.items()})
        if not planned:  # refused before any progress line: a bad book gets one line, the error
            raise InputError(f"{Path(book_path).name}: the selected chapters contain no text to read")
        progress.emit("voice", name=details.name, narrator=details.narrator, backend=details.backend,
                      precision=details.precision, sample_rate=details.sample_rate, model_id=details.model_id,
                      load=details.load)  # the worker's meter: seconds, private bytes after, peak
        if options.auto_workers:
            # measured on the book voice's own segments (a passage voice's would say nothing of it)
            _auto_workers(pool, details, [s for s in planned if s.voice is None] or planned, options.policy, progress)
        progress.emit("book", title=book.title, chapters=len(chapter_indices), segments=len(planned),
                      characters=sum(len(s.text) for s in planned))
        store.set_meta(book=str(Path(book_path).resolve()), output=str(out_path.resolve()),
                       voice=options.voice, job_seed=options.job_seed, model_id=details.model_id,
                       voice_options=json.dumps(options.voice_options),  # what regen needs to load it again
                       passage_voice_options=json.dumps({v: c.options for v, (c, _d) in others.items()}))
        # Each chapter's own words too: verify scores the speech against them.
        store.replace_plan([(ci, book.chapters[ci].title, "\n".join(book.chapters[ci].sources),
                             "\n".join(book.chapters[ci].paragraphs)) for ci in chapter_indices], planned)
        todo = [s for s in planned if not store.finished(s.key)]
        voices = readers.summary() if readers else ""  # which other voices read which passages
        progress.emit("plan", total=len(planned), cached=len(planned) - len(todo), to_render=len(todo),
                      skipping=plan_fields(book), **({"voices": voices} if voices else {}))
        progress.emit("stage", stage="render")
        titles = {ci: book.chapters[ci].title for ci in chapter_indices}
        turns = [VoiceTurn(options.voice, details, lambda: pool)]
        turns += [VoiceTurn(voice, theirs, partial(make_pool, choice)) for voice, (choice, theirs) in others.items()]
        failures = _render(turns, store, todo, progress, titles)
    finally:
        pool.close()
    if failures:
        first = failures[0]
        raise JobFailed(
            f"{len(failures)} segment(s) failed, e.g. chapter {first[0].chapter + 1} segment "
            f"{first[0].index + 1}: {first[1]}. Finished segments are kept; rerun to retry."
        )

    progress.emit("stage", stage="assemble")
    result = assemble(store, book, out_path, details, options.audio_format)
    outputs = {"subtitles": options.subtitles, "readalong": options.readalong, "format": options.audio_format,
               "layout": options.layout}
    store.set_meta(outputs=json.dumps(outputs))  # regen rewrites them with the audiobook, in its format
    try:
        write_outputs(store, book, out_path, result, details, outputs, progress)
    finally:
        store.close()
    if options.verify:
        _verify(out_path, work_dir, progress, asr=details.name not in SILENT_VOICES)
    progress.emit("done", output=str(out_path), duration_seconds=result.duration_samples / details.sample_rate,
                  chapters=len(chapter_indices), segments_rendered=len(todo),
                  seconds=round(time.monotonic() - started, 2))
    return ConvertResult(out_path, result.duration_samples / details.sample_rate, len(chapter_indices),
                         len(planned), len(todo), work_dir)


def _auto_workers(pool, details: VoiceDetails, planned: list[PlannedSegment], policy: WorkerPolicy,
                  progress: Progress) -> None:
    """`--workers auto`: on a GPU, as many workers as still add 10 % throughput (worker/autoscale.py),
    measured on the book's first segments once per GPU and voice, then read from the cache. On the
    CPU (no GPU reported by the worker), or with a pool that cannot resize (Ray), nothing changes:
    one worker, as without the flag."""
    if not details.device or not hasattr(pool, "measure"):
        return
    args = AutoWorkersArgs()
    cache = WorkerCountCache(cache_dir() / "workers-auto.json")
    key = cache_key(details.device, details.model_id, policy.pipeline_depth)
    workers = cache.get(key)
    if workers is None:
        calibration = planned[: args.max_workers * args.segments_per_worker]  # the book's first segments
        choice = choose_workers(lambda n: pool.measure(n, calibration, details.sample_rate, args.segments_per_worker), args)
        cache.put(key, choice)
        workers = choice.workers
        progress.emit("workers", device=details.device, workers=workers, measured=True,
                      curve=[[n, None if r is None else round(r, 3)] for n, r in choice.curve], reason=choice.reason)
    else:
        progress.emit("workers", device=details.device, workers=workers, measured=False)
    pool.resize(workers)


def _auto_voice(book: Book, options: ConvertOptions, progress: Progress, resumed: str | None = None) -> ConvertOptions:
    """`--voice auto`: the installed voice that speaks the book's language (voices.catalog.choose_voice),
    or, for a job begun with another voice (auto's choice then, before the default changed or another
    voice was installed, or one named), that voice if it is still installed: a resumed book is never
    read by two voices."""
    config = load_config()
    name, warning = choose_voice(book.language, config)
    if resumed and resumed != name and resumed != AUTO:
        try:
            resolve(resumed, config=config, workers=max(1, options.workers))
        except InputError:
            pass  # no longer installed: the voice auto chooses now reads it anew
        else:
            progress.emit("warning", message=f"resuming with {resumed}, the voice this job began with "
                                             f"(--voice {name} to read it anew with {name})")
            name, warning = resumed, None
    if warning:
        progress.emit("warning", message=warning)
    model_dir = options.voice_options.get("model_dir")
    choice = resolve(name, config=config, model_dir=Path(model_dir) if model_dir else None,
                     workers=max(1, options.workers), extra=options.voice_options.get("extra"))
    return replace(options, voice=choice.name, voice_options=choice.options, threads_per_worker=choice.threads)


def _make_pool(make, options: ConvertOptions, log_path: Path, choice: VoiceChoice):
    return make(choice.name, choice.options, options.workers, choice.threads, options.policy, log_path)


def _passage_voices(book: Book, chapter_indices: list[int], options: ConvertOptions, requested: dict,
                    progress: Progress, make_pool) -> tuple[Readers, dict[str, tuple[VoiceChoice, VoiceDetails]]]:
    """--voice auto: who reads the passages the book's voice does not speak (voices/passages.py),
    and each of those voices' choice and details. Each is loaded now, one at a time and closed
    again, for the model id its segment keys need; one that cannot be loaded leaves its passages
    to the book's voice, with one warning line."""
    config = load_config()
    readers = passage_readers(options.voice, book.language, *passage_readings(book, chapter_indices), config)
    for warning in readers.warnings:
        progress.emit("warning", message=warning)
    others: dict[str, tuple[VoiceChoice, VoiceDetails]] = {}
    model_dir = requested.get("model_dir")
    for voice in readers.others():
        try:
            choice = resolve(voice, config=config, model_dir=Path(model_dir) if model_dir else None,
                             workers=max(1, options.workers), extra=requested.get("extra"))
            probe = make_pool(choice)
            try:
                others[voice] = (choice, probe.details())
            finally:
                probe.close()
        except (InputError, JobFailed) as error:
            progress.emit("warning", message=f"voice {voice} could not be loaded ({error}); "
                                             f"{options.voice} reads its passages")
            readers.drop(voice)
    return readers, others


@dataclass
class VoiceTurn:
    """One voice's share of the rendering: `pool()` gives a pool holding it for its turn, closed
    after it, so one voice is loaded at a time (the book's voice first)."""
    voice: str
    details: VoiceDetails
    pool: Callable[[], WorkerPool]


def _render(turns: list[VoiceTurn], store: SegmentStore, todo: list[PlannedSegment], progress: Progress,
            titles: dict[int, str]) -> list[tuple[PlannedSegment, str]]:
    """Render `todo`, each segment by its voice (turns[0] is the book's). A segment the voice
    could not say within its length cap (its audio would be cut) is said in two pieces instead,
    recursively (split_segment); they render in a next round, and once all of a segment's pieces
    are done its WAV is composed from theirs (store.compose)."""
    failures = []
    parent_of: dict[str, PlannedSegment] = {}  # piece key -> the segment it is part of
    turn_of = {turn.voice: turn for turn in turns}

    def voice_of(segment: PlannedSegment) -> str:
        return segment.voice or turns[0].voice

    def details_of(segment: PlannedSegment) -> VoiceDetails:
        return turn_of[voice_of(segment)].details

    def unfinished(segment: PlannedSegment) -> list[PlannedSegment]:
        """What is left to render of `segment`: itself, or its unfinished pieces (a resumed job)."""
        pieces = store.pieces(segment)
        if not pieces:
            return [segment]
        left = []
        for piece in pieces:
            if not store.finished(piece.key):
                parent_of[piece.key] = segment
                left += unfinished(piece)
        if not left:  # stopped between its last piece and composing it
            store.compose(segment, voice_of(segment), details_of(segment))
        return left

    def finish(segment: PlannedSegment) -> None:
        """`segment` is done: compose each segment whose pieces are now all done."""
        parent = parent_of.pop(segment.key, None)
        if parent and all(store.finished(p.key, verify=False) for p in store.pieces(parent)):
            store.compose(parent, voice_of(parent), details_of(parent))
            finish(parent)

    todo = [leaf for segment in todo for leaf in unfinished(segment)]
    eta = Eta(len(todo))
    left = Counter(s.chapter for s in todo)  # segments still to render, by chapter
    chapters_done = 0
    more: list[PlannedSegment] = []  # the next round: pieces of segments that reached the cap

    def on_result(segment, pcm, seconds, seg_details, error):
        nonlocal chapters_done
        answered.add(segment.key)
        voice, details = voice_of(segment), details_of(segment)
        if isinstance(error, SegmentCapped):
            pieces = split_segment(segment, voice, details.model_id)
            if pieces is not None:
                store.record_pieces(segment, pieces)
                parent_of.update((p.key, segment) for p in pieces)
                more.extend(pieces)
                eta.total += len(pieces) - 1
                left[segment.chapter] += len(pieces) - 1
                progress.emit("split", chapter=segment.chapter, index=segment.index, pieces=len(pieces))
                return
            error = (f"the voice reached its length cap on the single word {segment.text!r} ({error}); "
                     "it cannot be said without cutting it")
        if error is not None:
            error = str(error)
            store.record_failed(segment, voice, details.model_id, error)
            failures.append((segment, error))
            progress.emit("warning", message=f"chapter {segment.chapter + 1} segment {segment.index + 1} failed: {error}")
            return
        if seg_details.model_id != details.model_id or seg_details.sample_rate != details.sample_rate:
            raise JobFailed("a worker loaded a different model than the first one; refusing to mix them")
        store.record_done(segment, voice, seg_details, pcm, seconds)
        finish(segment)
        progress.emit("segment", done=eta.done + 1, total=eta.total, chapter=segment.chapter,
                      index=segment.index, audio_seconds=round(len(pcm) / 2 / details.sample_rate, 3),
                      synth_seconds=round(seconds, 3), eta_seconds=eta.step())
        left[segment.chapter] -= 1
        if left[segment.chapter] == 0:
            chapters_done += 1
            progress.emit("chapter", chapter=segment.chapter, title=titles[segment.chapter],
                          done=chapters_done, total=len(left))

    answered: set[str] = set()
    for turn in turns:
        mine = [s for s in todo if voice_of(s) == turn.voice]
        if not mine:
            continue
        pool = turn.pool()
        try:
            while mine:
                answered = set()
                try:
                    pool.render(mine, on_result)
                except KeyboardInterrupt:
                    raise Interrupted(eta.done, eta.total) from None
                # Every segment must be accounted for: one that no worker answered (a worker thread
                # that stopped early) fails the job here rather than surfacing later as a missing WAV.
                failures += [(s, "no worker returned this segment") for s in mine if s.key not in answered]
                mine, more = more, []
        finally:
            pool.close()  # the next voice loads into the memory this one held
    return failures


def _leaves(store: SegmentStore, segment: PlannedSegment) -> list[PlannedSegment]:
    """The segments actually rendered for `segment`: itself, or its pieces' leaves in order."""
    pieces = store.pieces(segment)
    return [leaf for p in pieces for leaf in _leaves(store, p)] if pieces else [segment]


def _compose_all(store: SegmentStore, segment: PlannedSegment, voice: str, details: VoiceDetails) -> None:
    """Compose `segment` (if it is said in pieces) from its pieces, the nested ones first."""
    pieces = store.pieces(segment)
    for piece in pieces:
        _compose_all(store, piece, voice, details)
    if pieces:
        store.compose(segment, voice, details)


@dataclass
class RegenResult:
    text: str
    identical: bool  # the new audio equals what the store held


def regen(out_path: Path, chapter: int, index: int, *, work_dir: Path | None = None,
          policy: WorkerPolicy | None = None, voice_options: dict | None = None) -> RegenResult:
    """Re-make one stored segment (chapter and index 0-based) with its own seed, then the M4B.

    The seed is the segment's, so a healthy voice gives the same bytes again; a different result
    means the voice, its model or the machine's numerics changed since the job ran."""
    work_dir = Path(work_dir or job_dir_for(out_path))
    if not (work_dir / "job.sqlite3").exists():
        raise InputError(f"{out_path}: no conversion job found for this output (looked in {work_dir})")
    store = SegmentStore(work_dir)
    keys = {(c, i): k for c, i, k, _ in store.plan()}
    key = keys.get((chapter, index))
    if key is None:
        raise InputError(f"{out_path}: the job has no segment {index + 1} in chapter {chapter + 1}")
    row = store.segment_row(key)
    if row is None:
        raise InputError(f"{out_path}: segment {chapter + 1}.{index + 1} was never rendered; rerun the conversion")
    old = store.audio_path(key).read_bytes() if store.audio_path(key).exists() else b""
    segment = PlannedSegment(chapter, index, key, row["text"], row["seed"], 0, row.get("lang"), voice=row["voice"])
    if voice_options is None:  # the options of the voice that read it: the job's, or a passage voice's
        passages = json.loads(store.get_meta("passage_voice_options", "{}"))
        voice_options = passages[row["voice"]] if row["voice"] in passages else \
            json.loads(store.get_meta("voice_options", "{}"))
    pool = WorkerPool(row["voice"], voice_options, 1, 1, policy or WorkerPolicy(), work_dir / "worker.log")
    # a segment said in pieces (it reached the voice's length cap) is re-made piece by piece
    parts = _leaves(store, segment)
    try:
        details = pool.details()
        made = [(part, *pool.supervisors[0].synthesize(part.text, part.seed, part.lang)) for part in parts]
    except SegmentFailed as error:
        raise JobFailed(f"segment {chapter + 1}.{index + 1} failed again: {error}") from None
    finally:
        pool.close()
    if details.model_id != row["model_id"]:
        raise JobFailed(f"the voice now loads model {details.model_id}, the job used {row['model_id']}")
    for part, pcm, seconds, details in made:
        store.record_done(part, row["voice"], details, pcm, seconds)
    _compose_all(store, segment, row["voice"], details)
    identical = store.audio_path(key).read_bytes() == old
    book = load_book(store.get_meta("book"))
    outputs = json.loads(store.get_meta("outputs", "{}"))
    m4b = assemble(store, book, Path(out_path), details, outputs.get("format") or "m4b")
    write_outputs(store, book, Path(out_path), m4b, details, outputs)
    store.close()
    return RegenResult(row["text"], identical)
