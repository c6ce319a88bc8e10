"""Word error rate of the multilingual Whisper base in French, German, Spanish, Italian and
Portuguese, on good audio and on audio of the wrong text: where verify's doubt thresholds sit.

    PYTHONPATH=engine .venv/bin/python bench/wer_languages.py [--languages fr,de] [--chapters 3] [--windows 2]

For each language, a few chapters of its corpus books (1,000-20,000 characters, or longer where a
book has none; evenly spread, the middle one for one chapter of a book) are planned as a conversion plans them (load_book, segment_chapter, the
language's normaliser), and `--windows` windows of consecutive segments, at most 30 s of audio
with the conversion's pause between sentences, are read by the language's Kokoro pack and heard
by the multilingual base told the language, scored as verify scores them (score_window against the
book's own words). Only the windows are synthesised, not the whole chapter: the cost is that of
the windows verify hears.

Italian and Portuguese have no corpus book: two public-domain passages each (Manzoni, Collodi;
Machado de Assis) stand in as chapters. Kokoro has no German pack, and no German voice is
installed: German is read by the em_alex pack with espeak-ng's German phonemes, i.e. a foreign
speaker reading German, which is harder to hear than a German voice would be.

Wrong text: each chapter's transcripts scored against the next chapter's references (same
language, pooled over the chapter, and window by window) -- what a chapter of the wrong audio
scores. Costs no extra synthesis or ASR. `--voice joe`: the wrong voice, English joe reading the
text (what a book gets when no installed voice speaks its language).
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus"
BOOKS = {
    "fr": ["vingt-mille-lieues-sous-les-mers-fr-epub2-ncx.epub", "esprit-des-lois-fr-deep-toc-epub2-ncx.epub",
           "fleurs-du-mal-fr-poetry-pg-epub2-ncx.epub"],
    "es": ["don-quijote-es-pg-long-novel-epub3.epub"],
    "de": ["die-verwandlung-de-pg-ebookmaker-0-12-boilerplate-epub3.epub"],
}
# Public-domain passages, each a "chapter": the openings of I promessi sposi (1840), Pinocchio
# (1883) and the Inferno; of Dom Casmurro (1899), Memórias Póstumas de Brás Cubas (1881) and Os
# Lusíadas (1572), the verse with its line breaks as a book joins them.
PASSAGES = {
    "it": [
        "Quel ramo del lago di Como, che volge a mezzogiorno, tra due catene non interrotte di monti, tutto a "
        "seni e a golfi, a seconda dello sporgere e del rientrare di quelli, vien, quasi a un tratto, a "
        "ristringersi, e a prender corso e figura di fiume, tra un promontorio a destra, e un'ampia costiera "
        "dall'altra parte; e il ponte, che ivi congiunge le due rive, par che renda ancor più sensibile "
        "all'occhio questa trasformazione, e segni il punto in cui il lago cessa, e l'Adda rincomincia, per "
        "ripigliar poi nome di lago dove le rive, allontanandosi di nuovo, lascian l'acqua distendersi e "
        "rallentarsi in nuovi golfi e in nuovi seni.",
        "C'era una volta... Un re! diranno subito i miei piccoli lettori. No, ragazzi, avete sbagliato. C'era "
        "una volta un pezzo di legno. Non era un legno di lusso, ma un semplice pezzo da catasta, di quelli "
        "che d'inverno si mettono nelle stufe e nei caminetti per accendere il fuoco e per riscaldare le "
        "stanze. Non so come andasse, ma il fatto gli è che un bel giorno questo pezzo di legno capitò nella "
        "bottega di un vecchio falegname, il quale aveva nome mastr'Antonio, se non che tutti lo chiamavano "
        "maestro Ciliegia, per via della punta del suo naso, che era sempre lustra e paonazza, come una "
        "ciliegia matura.",
        "Nel mezzo del cammin di nostra vita mi ritrovai per una selva oscura, ché la diritta via era smarrita. "
        "Ahi quanto a dir qual era è cosa dura esta selva selvaggia e aspra e forte che nel pensier rinova la "
        "paura! Tant'è amara che poco è più morte; ma per trattar del ben ch'i' vi trovai, dirò de l'altre "
        "cose ch'i' v'ho scorte.",
    ],
    "pt": [
        "Uma noite destas, vindo da cidade para o Engenho Novo, encontrei no trem da Central um rapaz aqui do "
        "bairro, que eu conheço de vista e de chapéu. Cumprimentou-me, sentou-se ao pé de mim, falou da lua e "
        "dos ministros, e acabou recitando-me versos. A viagem era curta, e os versos pode ser que não fossem "
        "inteiramente maus. Sucedeu, porém, que, como eu estava cansado, fechei os olhos três ou quatro vezes; "
        "tanto bastou para que ele interrompesse a leitura e metesse os versos no bolso.",
        "Algum tempo hesitei se devia abrir estas memórias pelo princípio ou pelo fim, isto é, se poria em "
        "primeiro lugar o meu nascimento ou a minha morte. Suposto o uso vulgar seja começar pelo nascimento, "
        "duas considerações me levaram a adotar diferente método: a primeira é que eu não sou propriamente um "
        "autor defunto, mas um defunto autor, para quem a campa foi outro berço; a segunda é que o escrito "
        "ficaria assim mais galante e mais novo.",
        "As armas e os barões assinalados, Que da ocidental praia Lusitana, Por mares nunca de antes "
        "navegados, Passaram ainda além da Taprobana, Em perigos e guerras esforçados, Mais do que prometia a "
        "força humana, E entre gente remota edificaram Novo Reino, que tanto sublimaram;",
    ],
}
VOICES = {"fr": "kokoro:ff_siwis", "es": "kokoro:ef_dora", "it": "kokoro:if_sara", "pt": "kokoro:pf_dora",
          "de": "kokoro:em_alex"}
MIN_CHARS, MAX_CHARS = 1000, 20000
PAUSE_SECONDS = 0.4  # between sentences, about what the conversion leaves


def chapters_of(language: str, per_language: int) -> list[tuple[str, list[str]]]:
    """(name, raw segment texts) for up to per_language chapters of the language."""
    if language in PASSAGES:
        from epub2audio.book.segment import split_long, split_sentences

        return [(f"{language}-passage-{n}", [piece for sentence in split_sentences(text) for piece in split_long(sentence)])
                for n, text in enumerate(PASSAGES[language], 1)]
    from epub2audio.book.epub import load_book
    from epub2audio.book.segment import segment_chapter

    books = [load_book(CORPUS / name) for name in BOOKS[language]]
    picked = []
    for k, (book, name) in enumerate(zip(books, BOOKS[language])):
        sizes = [sum(len(p) for p in ch.paragraphs) for ch in book.chapters]
        fits = [i for i, n in enumerate(sizes) if MIN_CHARS <= n <= MAX_CHARS] \
            or [i for i, n in enumerate(sizes) if n >= MIN_CHARS]  # Die Verwandlung: three long chapters
        share = per_language // len(books) + (k < per_language % len(books))
        # evenly spread, away from the first (often a preface: Les Fleurs du mal's is prose)
        for i in sorted({fits[len(fits) * (2 * j + 1) // (2 * share)] for j in range(share)}) if fits else []:
            texts = [s.text for s in segment_chapter(i, book.chapters[i])]
            picked.append((f"{name.split('-')[0]}-{name.split('-')[1]} ch{i + 1}", texts))
    return picked[:per_language]


def synthesize(voice, text: str) -> np.ndarray:
    return np.frombuffer(voice.synthesize(text, 0), dtype="<i2").astype(np.float32) / 32768.0


def to16k(audio: np.ndarray, rate: int) -> np.ndarray:
    """Resampled by ffmpeg, as verify's windows are."""
    import subprocess

    from epub2audio.audiobook.ffmpeg import ffmpeg_exe

    cmd = [ffmpeg_exe(), "-v", "error", "-f", "f32le", "-ar", str(rate), "-ac", "1", "-i", "-",
           "-ar", "16000", "-f", "f32le", "-"]
    out = subprocess.run(cmd, input=audio.astype("<f4").tobytes(), capture_output=True, check=True).stdout
    return np.frombuffer(out, dtype="<f4")


def measure(language: str, per_language: int, windows: int, seed: int, voice_name: str | None = None) -> dict:
    from epub2audio.audiobook.verify.speech import WINDOW_PAD_SECONDS, WINDOW_SECONDS, score_window, transcribe
    from epub2audio.audiobook.verify.words import looks_like_verse, normalize_words
    from epub2audio.book.normalize import normalize
    from epub2audio.voices import kokoro

    if voice_name:  # the wrong voice: joe (English) reading the language's text
        from epub2audio.voices.registry import load_voice

        voice = load_voice(voice_name)
    else:
        voice = kokoro.load(VOICES[language])
    if language == "de" and not voice_name:
        voice.phonemize = kokoro.EnglishPhonemizer(kokoro.vocab(), "de")
    rate = voice.info.sample_rate
    limit = WINDOW_SECONDS - WINDOW_PAD_SECONDS
    rows, tts_s, asr_s, audio_s = [], 0.0, 0.0, 0.0
    for name, texts in chapters_of(language, per_language):
        rng = random.Random(f"{seed}:{name}")
        starts = sorted(rng.sample(range(len(texts)), min(windows, len(texts))))
        chapter = []
        for start in starts:
            pieces, seconds, raw, spoken = [], 0.0, [], []
            for text in texts[start:]:
                said = normalize(text, language)
                t0 = time.process_time()
                audio = synthesize(voice, said)
                tts_s += time.process_time() - t0
                if seconds + len(audio) / rate > limit:
                    break
                pieces += [audio, np.zeros(int(PAUSE_SECONDS * rate), np.float32)]
                seconds += len(audio) / rate + PAUSE_SECONDS
                raw.append(text), spoken.append(said)
            if not raw:
                continue
            audio = to16k(np.concatenate(pieces)[: int((seconds - PAUSE_SECONDS + WINDOW_PAD_SECONDS) * rate)], rate)
            t0 = time.process_time()
            transcript = transcribe(audio, language)
            asr_s += time.process_time() - t0
            audio_s += len(audio) / 16000
            planned = " ".join(spoken)
            score = score_window(planned, transcript, normalize_words(" ".join(raw), language), language)
            chapter.append({"reference": " ".join(raw), "transcript": transcript, "words": score["words"],
                            "errors": score["errors"], "wer": score["wer"],
                            "verse": looks_like_verse(planned), "seconds": len(audio) / 16000})
        rows.append((name, chapter))
        for w in chapter:
            if w["wer"] > 0.3:  # what the model got wrong, to read
                print(f"    {name} WER {w['wer']:.3f}\n      text:  {w['reference'][:400]}\n      heard: "
                      f"{w['transcript'][:400]}", file=sys.stderr, flush=True)
        print(f"... {language} {name}: " + ", ".join(f"{w['wer']:.3f}" for w in chapter), file=sys.stderr, flush=True)
    return {"rows": rows, "tts_s": tts_s, "asr_s": asr_s, "audio_s": audio_s}


def pooled(windows: list[dict]) -> float:
    words = sum(w["words"] for w in windows)
    return sum(w["errors"] for w in windows) / words if words else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--languages", default="fr,es,it,pt,de")
    parser.add_argument("--chapters", type=int, default=3, help="chapters a language (default 3)")
    parser.add_argument("--windows", type=int, default=2, help="windows a chapter (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--voice", help="read every language with this voice instead (joe: an English "
                                        "voice reading the book, what a book gets with no voice of its language)")
    args = parser.parse_args()

    from epub2audio.audiobook.verify.speech import WER_DOUBT_BY_LANGUAGE, wer_limits
    from epub2audio.audiobook.verify.words import edit_distance, normalize_words

    started = time.monotonic()
    summary = []
    for language in args.languages.split(","):
        result = measure(language, args.chapters, args.windows, args.seed, args.voice)
        rows = [(n, ws) for n, ws in result["rows"] if ws]
        print(f"\n{language}: {args.voice or VOICES[language]}, {len(rows)} chapters, "
              f"{sum(len(ws) for _n, ws in rows)} windows, {result['audio_s']:.0f} s of audio heard")
        print(f"  {'chapter':<28} {'win':>3} {'words':>5} {'WER':>6} {'worst':>6} {'wrong':>6} kind")
        good, wrong, good_w, wrong_w = [], [], [], []
        for k, (name, ws) in enumerate(rows):
            other = rows[(k + 1) % len(rows)][1]
            # this chapter's transcripts against the next chapter's references, window by window
            errors = words = 0
            for w, o in zip(ws, other * len(ws)):
                ref = normalize_words(o["reference"], language)
                e = edit_distance(ref, normalize_words(w["transcript"], language))
                errors, words = errors + e, words + len(ref)
                wrong_w.append(e / max(1, len(ref)))
            chapter_wrong = errors / max(1, words)
            verse = sum(w["words"] for w in ws if w["verse"]) * 2 > sum(w["words"] for w in ws)
            good.append((pooled(ws), verse)), wrong.append(chapter_wrong)
            good_w += [w["wer"] for w in ws]
            print(f"  {name:<28} {len(ws):>3} {sum(w['words'] for w in ws):>5} {pooled(ws):>6.3f} "
                  f"{max(w['wer'] for w in ws):>6.3f} {chapter_wrong:>6.3f} {'verse' if verse else 'prose'}")
        everything = [w for _n, ws in rows for w in ws]
        prose = [g for g, v in good if not v]
        limits = wer_limits(language) if language in WER_DOUBT_BY_LANGUAGE else None
        line = (f"  {language}: chapter WER good {min(g for g, _v in good):.3f}-{max(g for g, _v in good):.3f} "
                f"(pooled {pooled(everything):.3f}; prose max {max(prose, default=float('nan')):.3f}), "
                f"windows up to {max(good_w):.3f}; wrong text chapters {min(wrong):.3f}-{max(wrong):.3f}, "
                f"windows {min(wrong_w):.3f}-{max(wrong_w):.3f} (median {sorted(wrong_w)[len(wrong_w) // 2]:.3f}); "
                f"threshold {limits}")
        print(line)
        cost = result["asr_s"] / max(1e-9, result["audio_s"])
        print(f"  cost: {args.voice or 'Kokoro'} {result['tts_s']:.0f} CPU s, Whisper base {result['asr_s']:.0f} CPU s for "
              f"{result['audio_s']:.0f} s of audio ({cost:.2f} CPU s an audio second, 1 thread)")
        summary.append(line)
    print("\nSummary")
    print("\n".join(summary))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"Wall {time.monotonic() - started:.0f} s, CPU {usage.ru_utime + usage.ru_stime:.0f} s; "
          f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    if not os.environ.get("EPUB2AUDIO_DATA_DIR"):  # the joined models go to a scratch folder, not the user's
        os.environ["EPUB2AUDIO_DATA_DIR"] = tempfile.mkdtemp(prefix="epub2audio-wer-languages-")
    sys.exit(main())
