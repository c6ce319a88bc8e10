"""--readalong words: each word highlighted at the time the voice says it (Piper's phoneme durations);
voices that cannot say when a word starts fall back to sentences, in one line."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from lxml import etree

from cli_run import SAMPLE, epub2audio
from epub_factory import in_language, make_epub, xhtml
from epub2audio.audiobook.timings import book_timings
from epub2audio.audiobook.words import written_word_begins
from epub2audio.store import SegmentStore
from test_readalong import EPUBCHECK, OPF, SMIL, XHTML, clock, epubcheck, needs_epubcheck, read_zip

EPUB_NS = "{http://www.idpf.org/2007/ops}"


@pytest.fixture(autouse=True)
def homes(tmp_path, monkeypatch):
    monkeypatch.setenv("EPUB2AUDIO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("EPUB2AUDIO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EPUB2AUDIO_CONFIG", str(tmp_path / "config.toml"))


# ---- the book's words and the spoken ones -------------------------------------------------------

def test_written_words_take_the_time_of_the_spoken_words_they_were_said_as():
    spoken = [("Doctor", 100, 180), ("Watson", 190, 260), ("paid", 270, 300), ("three", 310, 350),
              ("pounds", 360, 400), ("in", 410, 420), ("nineteen", 430, 470), ("eighty-six.", 480, 560)]
    text = "Dr. Watson paid 3 pounds in 1986."
    got = [(text[a:b], begin) for a, b, begin in written_word_begins(text, spoken)]
    assert got == [("Dr.", 100), ("Watson", 190), ("paid", 270), ("3", 310), ("pounds", 360), ("in", 410),
                   ("1986.", 430)]
    # a word said that is not written ("Note" before a note read inline) adds no highlight; a word
    # written and not said joins the one before it, punctuation alone is no word
    spoken = [("Note", 0, 40), ("Pop-up", 50, 90), ("note.", 95, 130)]
    assert [(t[a:b], s) for t in ["Pop-up — note. 12"] for a, b, s in written_word_begins(t, spoken)] == \
        [("Pop-up", 50), ("note. 12", 95)]


def _aligned(words, text):
    return [(text[a:b], s, e) for a, b, s, e in words]


def test_a_word_espeak_merges_with_the_next_gets_the_sounds_between_its_neighbours():
    from epub2audio.voices.piper_alignment import word_times

    id_map = {c: [i] for i, c in enumerate("_^$ fɚɹəkˈoʊtɔː", start=0)}
    # espeak says "for a coat" as two words, fɚɹə kˈoʊt; alone "for" is fɔːɹ and "a" ˈeɪ
    stream, at = [], 0
    for p in "fɚɹə kˈoʊt":
        stream.append((p, at, at + 10))
        at += 10
    alone = {"for": list("fɔːɹ"), "a": list("ˈeɪ"), "coat": list("kˈoʊt")}
    got = _aligned(word_times("for a coat", stream, lambda w: alone[w], id_map), "for a coat")
    assert got == [("for", 0, 30), ("a", 30, 40), ("coat", 50, 100)]


# ---- Piper: the durations the graph reports ------------------------------------------------------

piper = pytest.importorskip("epub2audio.voices.piper")
TEXT = "A famished Fox saw some clusters of ripe black grapes. She resorted to all her tricks, in vain!"


@pytest.fixture(scope="module")
def joe():
    return piper.load()


def test_the_alignment_output_changes_no_byte_of_the_audio(joe, monkeypatch):
    """The graph with piper-tts 1.8's alignment output (w_ceil) gives today's audio, byte for byte."""
    with monkeypatch.context() as m:
        m.setattr(piper, "_expose_durations", lambda model: None)  # the graph as it was before
        plain = piper.load()
    assert [o.name for o in plain._piper.session.get_outputs()] == ["output"]
    assert [o.name for o in joe._piper.session.get_outputs()] == ["output", joe._durations]
    for seed in (7, 1986):
        audio, sentences = joe.synthesize_aligned(TEXT, seed)
        assert audio == plain.synthesize(TEXT, seed) == joe.synthesize(TEXT, seed)
        # samples per phoneme id add up to the audio: frames × hop length, sentence after sentence
        assert len(sentences) == 2 and sum(int(s.sum()) for _, s in sentences) == len(audio) // 2
        # the durations graph (no decoder) reports the same durations, so the same length
        assert joe.word_times(TEXT, seed)["samples"] == len(audio) // 2


def _expected_word_starts(voice, text: str, seed: int) -> list[list[tuple[int, int, int]]]:
    """Per espeak sentence, (start of the word's first phoneme, duration of the phoneme before it,
    duration of its first phoneme) of each word espeak says, from the durations the voice reported
    while making the audio."""
    from epub2audio.voices.piper_alignment import phoneme_spans

    _, sentences = voice.synthesize_aligned(text, seed)
    out, at = [], 0
    for phonemes, samples in sentences:
        ids = voice._piper.phonemes_to_ids(phonemes)
        spans = phoneme_spans(phonemes, ids, samples, voice._config.phoneme_id_map)
        words, previous, new_word = [], (0, 0), True
        for phoneme, a, b in spans:
            if phoneme == " ":
                new_word = True
            elif new_word and phoneme not in "ˈˌ":
                words.append((at + a, previous[1] - previous[0], b - a))
                new_word = False
            previous = (a, b)
        out.append(words)
        at += int(samples.sum())
    return out


def _word_pars(files: dict[str, bytes]) -> list[tuple[str, list[tuple[str, float, float]]]]:
    """(sentence fragment, [(word text, clipBegin, clipEnd)]) of each seq of each overlay."""
    out = []
    for item in etree.fromstring(files["OEBPS/content.opf"]).iter(f"{OPF}item"):
        if item.get("media-type") != "application/smil+xml":
            continue
        smil = etree.fromstring(files["OEBPS/" + item.get("href")])
        for seq in smil.iter(f"{SMIL}seq"):
            doc, _, sentence = seq.get(f"{EPUB_NS}textref").partition("#")
            root = etree.fromstring(files["OEBPS/" + doc.removeprefix("../")])
            words = []
            for par in seq.iter(f"{SMIL}par"):
                word_id = par.find(f"{SMIL}text").get("src").partition("#")[2]
                (element,) = root.xpath("//*[@id=$id]", id=word_id)
                (holder,) = root.xpath("//*[@id=$id]", id=sentence)
                assert holder in element.iterancestors()  # each word inside its sentence
                audio = par.find(f"{SMIL}audio")
                words.append(("".join(element.itertext()), clock(audio.get("clipBegin")), clock(audio.get("clipEnd"))))
            out.append((sentence, words))
    return out


def _check_words_against_durations(folder: Path, book: Path, voice_name: str, voice,
                                   expected_starts=_expected_word_starts) -> dict:
    """Convert with --readalong words and compare each word's clipBegin with the start of the
    word's first phoneme as the voice reported it: within one phoneme (the phoneme before or the
    phoneme itself) plus the clock's half millisecond."""
    out, work = folder / "book.m4b", folder / "job"
    run = epub2audio(book, "-o", out, "--voice", voice_name, "--no-verify", "--progress", "none",
                     "--work-dir", work, "--readalong", "words", "--chapters", "1")
    assert run.code == 0, run.stderr
    assert "cannot say when each word starts" not in run.stderr
    files = read_zip(folder / "book.readalong.epub")
    store = SegmentStore(work)
    rate = voice.info.sample_rate
    (chapter,) = book_timings(store, rate)
    keys = {(c, i): k for c, i, k, _ in store.plan()}
    pars = _word_pars(files)
    assert len(pars) == len(chapter.cues)
    deviations, checked, words_total = [], 0, 0
    for (sentence, words), cue in zip(pars, chapter.cues, strict=True):
        words_total += len(words)
        (index, seg_start, _), = cue.segments  # one segment a sentence in these books
        row = store.segment_row(keys[(cue.chapter, index)])
        expected = [w for s in expected_starts(voice, row["text"], row["seed"]) for w in s]
        written = cue.text.split()
        # the words' clips tile the sentence's clip
        assert words[0][1] == pytest.approx((cue.start - chapter.start) / rate, abs=0.0005)
        assert words[-1][2] == pytest.approx((cue.end - chapter.start) / rate, abs=0.0005)
        assert all(a[2] == b[1] for a, b in zip(words, words[1:]))
        if len(expected) != len(written) or len(words) != len(written):
            continue  # espeak joined or split words here: no one-to-one reference
        assert [w[0] for w in words] == [w.lstrip("“‘\"'(") for w in written]
        for (_, begin, _), (start, before, first) in list(zip(words, expected))[1:]:
            want = (seg_start - chapter.start + start) / rate
            deviation = abs(begin - want)
            assert deviation <= max(before, first) / rate + 0.0005, (cue.text, begin, want)
            deviations.append(deviation / (max(before, first) / rate))
            checked += 1
    store.close()
    assert checked >= 10
    return {"files": files, "checked": checked, "words": words_total, "worst_in_phonemes": max(deviations),
            "mean_in_phonemes": float(np.mean(deviations))}


@needs_epubcheck
def test_piper_word_times_are_within_one_phoneme_of_the_durations_it_reported(joe, tmp_path):
    found = _check_words_against_durations(tmp_path, SAMPLE, "joe", joe)
    errors, report = epubcheck(tmp_path / "book.readalong.epub")
    assert errors == 0, report
    print(f"joe: {found['checked']} word starts checked of {found['words']} words; deviation "
          f"{found['mean_in_phonemes']:.3f} phonemes on average, {found['worst_in_phonemes']:.3f} at worst")
    # the spans changed nothing else: the text of the first fable is word for word the same
    root = etree.fromstring(found["files"]["OEBPS/fable-1.xhtml"])
    source = etree.fromstring(read_zip(SAMPLE)["OEBPS/fable-1.xhtml"])
    assert " ".join("".join(root.find(f".//{XHTML}body").itertext()).split()) == \
        " ".join("".join(source.find(f".//{XHTML}body").itertext()).split())


FRENCH_BOOK = ["Le Chat et la Table",
               "Le chat dort sur la table de la cuisine depuis le matin.",
               "Personne ne sait pourquoi il a choisi cette place, mais il refuse de partir.",
               "Quand la nuit tombe, il descend enfin et regarde la fenêtre avec patience."]


@needs_epubcheck
def test_word_level_works_in_the_voices_own_language(tmp_path):
    """joe's weights under French espeak-ng, on a French book: French words, French timings."""
    from test_voices import french_joe

    model = french_joe(tmp_path / "m", "fr_FR-joe-medium")
    assert epub2audio("voice", "add", "jofr", "--piper", str(model)).code == 0
    body = f"<h1>{FRENCH_BOOK[0]}</h1>" + "".join(f"<p>{p}</p>" for p in FRENCH_BOOK[1:])
    book = in_language(make_epub(tmp_path, {"c1.xhtml": xhtml(body, FRENCH_BOOK[0])},
                                nav=[(FRENCH_BOOK[0], "c1.xhtml")], name="chat.epub"), "fr")
    french = piper.load(name="piper:jofr", options={"model": str(model), "config": str(model) + ".json"})
    found = _check_words_against_durations(tmp_path, book, "piper:jofr", french)
    assert [w[0] for w in _word_pars(found["files"])[1][1]] == FRENCH_BOOK[1].split()
    errors, report = epubcheck(tmp_path / "book.readalong.epub")
    assert errors == 0, report
    print(f"piper:jofr (fr): {found['checked']} word starts checked of {found['words']} words; deviation "
          f"{found['mean_in_phonemes']:.3f} phonemes on average, {found['worst_in_phonemes']:.3f} at worst")


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_word_times_are_kept_so_resume_and_regen_write_the_same_book(tmp_path):
    out, work = tmp_path / "fox.m4b", tmp_path / "job"
    args = [SAMPLE, "-o", out, "--voice", "joe", "--no-verify", "--progress", "none", "--work-dir", work,
            "--chapters", "1", "--readalong", "words", "--subtitles", "vtt"]
    assert epub2audio(*args).code == 0
    made = [out, tmp_path / "fox.readalong.epub", tmp_path / "fox.vtt"]
    first = [sha(p) for p in made]
    store = SegmentStore(work)
    assert len(store.word_times()) == 4  # one entry a segment, kept with the audio
    store.close()
    for path in made:
        path.unlink()
    run = epub2audio(*args)  # resumed: nothing rendered, the word times read back
    assert run.code == 0, run.stderr
    assert [sha(p) for p in made] == first
    run = epub2audio("regen", out, "--segment", "1.2", "--work-dir", work)
    assert run.code == 0, run.stderr
    assert "identical to the stored audio" in run.stdout
    assert [sha(p) for p in made] == first  # the segment's word times asked again: the same


@needs_epubcheck
def test_a_voice_that_cannot_time_words_falls_back_to_sentences_in_one_line(tmp_path):
    out = tmp_path / "fox.m4b"
    run = epub2audio(SAMPLE, "-o", out, "--voice", "tone", "--no-verify", "--progress", "json",
                     "--readalong", "words", "--chapters", "1")
    assert run.code == 0, run.stderr
    said = [e["message"] for e in run.events("warning") if "read-along" in e["message"]]
    assert said == ["read-along: voice tone cannot say when each word starts; the read-along book highlights "
                    "whole sentences"]
    files = read_zip(tmp_path / "fox.readalong.epub")
    smil = etree.fromstring(files["OEBPS/readalong/overlay-001.smil"])
    assert len(list(smil.iter(f"{SMIL}seq"))) == 0 and len(list(smil.iter(f"{SMIL}par"))) == 4
    errors, report = epubcheck(tmp_path / "fox.readalong.epub")
    assert errors == 0, report


def test_the_config_key_takes_words(tmp_path):
    from epub2audio.config import outputs
    from epub2audio.errors import InputError

    assert outputs({"readalong": "words"}) == {"subtitles": None, "readalong": "words", "audio_format": "m4b"}
    assert outputs({"readalong": True}) == {"subtitles": None, "readalong": "sentences", "audio_format": "m4b"}
    with pytest.raises(InputError, match="setting readalong must be true or one of sentences, words, got 'letters'"):
        outputs({"readalong": "letters"})
