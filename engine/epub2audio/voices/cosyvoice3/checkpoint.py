"""Load an official CosyVoice3 model directory (Fun-CosyVoice3-0.5B-2512 layout), checked.

    <model_dir>/
        cosyvoice3.yaml            HyperPyYAML recipe: read for its plain settings only
        llm.pt flow.pt hift.pt     fp32 state dicts (the fine-tuned weights)
        campplus.onnx              speaker encoder       (only to make a voice profile)
        speech_tokenizer_v3.onnx   speech tokenizer      (only to make a voice profile)
        CosyVoice-BlankEN/
            config.json            Qwen2 dimensions
            vocab.json merges.txt tokenizer_config.json
            model.safetensors      PRETRAINED Qwen2 weights: never read (see below)

The BlankEN trap: upstream builds its Qwen2 from ``CosyVoice-BlankEN`` and then overwrites every
parameter with ``llm.pt``. Only the config and tokenizer of that folder matter; its
``model.safetensors`` is the untrained "blank" LM and this module never opens it.

``cosyvoice3.yaml`` is HyperPyYAML: tags like ``!new:cosyvoice.llm.llm.CosyVoice3LM``, ``!ref
<x>``, ``!name:...`` and ``!apply:...`` that would import and construct upstream classes. We parse it
with a PyYAML SafeLoader that turns every ``!...`` tag into plain data remembering its tag (nothing
is imported or executed), resolve simple ``!ref <key>`` references, and use the result only to
check that this is a CosyVoice3 recipe and that the checkpoints' dimensions agree with it.
All dimensions come from the tensors themselves (and BlankEN's config.json for the Qwen2 LLM).

``model_id`` identifies the weights cheaply: SHA-256 over, for every file that influences the
output (the three .pt files, the YAML, config.json and the tokenizer files), its name, byte size
and 16 evenly spaced 1 MiB blocks (first and last included; small files whole). The two ONNX
models count by name and size only: they are prompt-only parts (``voice add``), a synthesis
worker never opens them (a test proves it), and what they compute is in the voice profile, whose
arrays are hashed into the voice's identity anyway.

A folder written by ``epub2audio model compress`` (marked by ``compressed.json``) holds
safetensors weights instead of the .pt files and may lack the ONNX models; ``load_checkpoint``
hands it to compress.py, and its model id covers its manifest and the files synthesis reads.
That reads at most ~100 MB instead of ~4.4 GB, is independent of paths and mtimes (a copied model
keeps its id), and changes for any retrained or re-exported file in practice; a change confined
to unsampled bytes of an equal-sized file would go unnoticed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import yaml

from epub2audio.errors import InputError
from epub2audio.files import sampled_digest_update

from . import meta

SAMPLE_RATE = 24000
SPEECH_TOKEN_SIZE = 6561
SPEECH_EXTRA_SLOTS = 200  # speech vocab = 6561 codes + 200 special slots

BLANK_EN = "CosyVoice-BlankEN"
WEIGHT_FILES = ("llm.pt", "flow.pt", "hift.pt")
ONNX_FILES = ("campplus.onnx", "speech_tokenizer_v3.onnx")
CONFIG_FILES = ("cosyvoice3.yaml",)
BLANK_EN_FILES = ("config.json", "vocab.json", "merges.txt", "tokenizer_config.json")
MANIFEST = "compressed.json"  # marks a folder written by `epub2audio model compress` (compress.py)



# ---------------------------------------------------------------------------------------------
# Paths


@dataclass(frozen=True)
class CheckpointPaths:
    model_dir: Path

    @property
    def yaml(self) -> Path:
        return self.model_dir / "cosyvoice3.yaml"

    @property
    def llm(self) -> Path:
        return self.model_dir / "llm.pt"

    @property
    def flow(self) -> Path:
        return self.model_dir / "flow.pt"

    @property
    def hift(self) -> Path:
        return self.model_dir / "hift.pt"

    @property
    def campplus(self) -> Path:
        return self.model_dir / "campplus.onnx"

    @property
    def speech_tokenizer(self) -> Path:
        return self.model_dir / "speech_tokenizer_v3.onnx"

    @property
    def blank_en(self) -> Path:
        return self.model_dir / BLANK_EN

    @property
    def qwen_config(self) -> Path:
        return self.blank_en / "config.json"

    def required(self) -> list[Path]:
        """Every file a conversion or a profile needs, in a fixed order (used for model_id too)."""
        files = [self.model_dir / n for n in (*CONFIG_FILES, *WEIGHT_FILES, *ONNX_FILES)]
        return files + [self.blank_en / n for n in BLANK_EN_FILES]


def check_layout(model_dir: str | os.PathLike) -> CheckpointPaths:
    """The paths of an official model directory; InputError naming every missing file."""
    d = Path(model_dir).expanduser()
    if not d.exists():
        raise InputError(f"CosyVoice3 model directory {d} does not exist")
    if not d.is_dir():
        raise InputError(f"CosyVoice3 model path {d} is not a directory")
    paths = CheckpointPaths(d)
    required = paths.required()
    if (d / MANIFEST).is_file():  # a compressed folder: safetensors weights, prompt parts optional
        from .compress import compressed_files

        required = compressed_files(d)
    missing = [str(p.relative_to(d)) for p in required if not p.is_file()]
    if missing:
        raise InputError(f"{d} is not a complete CosyVoice3 model directory; missing: {', '.join(missing)}")
    return paths


# ---------------------------------------------------------------------------------------------
# model_id


def compute_model_id(paths: CheckpointPaths) -> str:
    """``cosyvoice3-<16 hex>``; see the module docstring for what it covers."""
    if (paths.model_dir / MANIFEST).is_file():
        from .compress import compressed_model_id

        return compressed_model_id(paths)
    h = hashlib.sha256(b"epub2audio cosyvoice3 model_id v2\0")
    for p in paths.required():
        name = p.relative_to(paths.model_dir).as_posix()
        if p.name in ONNX_FILES:  # prompt-only parts: synthesis never opens them (name and size only)
            h.update(f"{name}\0{p.stat().st_size}\0".encode())
            continue
        sampled_digest_update(h, p, name)
    return "cosyvoice3-" + h.hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# cosyvoice3.yaml without HyperPyYAML


class TaggedMapping(dict):
    """A mapping that carried a HyperPyYAML tag (e.g. ``!new:cosyvoice.llm.llm.CosyVoice3LM``)."""

    def __init__(self, tag: str, *args: Any) -> None:
        super().__init__(*args)
        self.tag = tag


class TaggedSequence(list):
    def __init__(self, tag: str, *args: Any) -> None:
        super().__init__(*args)
        self.tag = tag


class TaggedScalar(str):
    tag: str

    def __new__(cls, tag: str, value: str) -> "TaggedScalar":
        obj = super().__new__(cls, value)
        obj.tag = tag
        return obj


class _InertLoader(yaml.SafeLoader):
    """SafeLoader that keeps unknown ``!tags`` as inert data instead of failing or executing."""


def _construct_tagged(loader: _InertLoader, tag_suffix: str, node: yaml.Node) -> Any:
    tag = "!" + tag_suffix
    if isinstance(node, yaml.MappingNode):
        return TaggedMapping(tag, loader.construct_mapping(node, deep=True))
    if isinstance(node, yaml.SequenceNode):
        return TaggedSequence(tag, loader.construct_sequence(node, deep=True))
    return TaggedScalar(tag, loader.construct_scalar(node))


_InertLoader.add_multi_constructor("!", _construct_tagged)

_SIMPLE_REF = re.compile(r"^\s*<([A-Za-z_][\w.]*)>\s*$")


def _resolve_refs(node: Any, root: Mapping[str, Any], depth: int = 0) -> Any:
    """Replace ``!ref <key>`` scalars by the top-level value they name (expressions stay strings)."""
    if depth > 20:
        return node
    if isinstance(node, TaggedScalar) and node.tag == "!ref":
        m = _SIMPLE_REF.match(node)
        if m and m.group(1) in root:
            return _resolve_refs(root[m.group(1)], root, depth + 1)
        return node
    if isinstance(node, TaggedMapping):
        return TaggedMapping(node.tag, {k: _resolve_refs(v, root, depth + 1) for k, v in node.items()})
    if isinstance(node, dict):
        return {k: _resolve_refs(v, root, depth + 1) for k, v in node.items()}
    if isinstance(node, TaggedSequence):
        return TaggedSequence(node.tag, [_resolve_refs(v, root, depth + 1) for v in node])
    if isinstance(node, list):
        return [_resolve_refs(v, root, depth + 1) for v in node]
    return node


def read_recipe(path: str | os.PathLike) -> dict[str, Any]:
    """cosyvoice3.yaml as plain data (tags kept on TaggedMapping/TaggedSequence/TaggedScalar)."""
    p = Path(path)
    try:
        raw = yaml.load(p.read_text(encoding="utf-8"), Loader=_InertLoader)  # noqa: S506 (inert loader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise InputError(f"cannot parse {p.name}: {e}".replace("\n", " ")) from None
    if not isinstance(raw, dict):
        raise InputError(f"{p.name} is not a YAML mapping")
    return {k: _resolve_refs(v, raw) for k, v in raw.items()}


def _class_of(node: Any) -> str | None:
    tag = getattr(node, "tag", None)
    if tag and ":" in tag:
        return tag.split(":", 1)[1].rsplit(".", 1)[-1]
    return None


def _int_or_none(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and not isinstance(v, TaggedScalar) and v.strip().lstrip("-").isdigit():
        return int(v)
    return None


def _check_recipe(recipe: Mapping[str, Any], name: str) -> None:
    expected = {"llm": "CosyVoice3LM", "flow": "CausalMaskedDiffWithDiT", "hift": "CausalHiFTGenerator"}
    for section, cls in expected.items():
        got = _class_of(recipe.get(section))
        if got != cls:
            raise InputError(
                f"{name} builds {section} as {got or 'nothing'}, not {cls}: this is not a CosyVoice3 model directory"
            )
    sr = _int_or_none(recipe.get("sample_rate"))
    if sr is not None and sr != SAMPLE_RATE:
        raise InputError(f"{name} says sample_rate {sr}; CosyVoice3 runs at {SAMPLE_RATE}")


# ---------------------------------------------------------------------------------------------
# state dicts


def _load_state_dict(path: Path) -> dict[str, torch.Tensor]:
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as e:  # pickle / zip / weights_only errors come in many types
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InputError(f"cannot read {path.name} as a PyTorch checkpoint: {msg[:200]}") from None
    if not isinstance(obj, Mapping) or not obj:
        raise InputError(f"{path.name} does not hold a state dict (found {type(obj).__name__})")
    bad = [k for k, v in obj.items() if not isinstance(k, str) or not isinstance(v, torch.Tensor)]
    if bad:
        raise InputError(f"{path.name} is not a state dict: entry {bad[0]!r} is not a named tensor")
    return dict(obj)


def _few(keys: list[str], n: int = 3) -> str:
    shown = ", ".join(keys[:n])
    return shown + (f" and {len(keys) - n} more" if len(keys) > n else "")


def _compare(name: str, sd: Mapping[str, torch.Tensor], expected: Mapping[str, tuple[int, ...]], what: str) -> None:
    """InputError naming a few missing / unexpected / mis-shaped keys of one checkpoint."""
    missing = [k for k in expected if k not in sd]
    unexpected = [k for k in sd if k not in expected]
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"{len(missing)} missing key(s): {_few(missing)}")
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected key(s): {_few(unexpected)}")
        raise InputError(f"{name} does not match a CosyVoice3 {what}: {'; '.join(parts)}")
    wrong = [f"{k} {list(sd[k].shape)} (expected {list(s)})" for k, s in expected.items() if tuple(sd[k].shape) != tuple(s)]
    if wrong:
        raise InputError(f"{name} has tensors of the wrong shape for {what}: {_few(wrong)}")
    not_float = [k for k, v in sd.items() if not v.is_floating_point()]
    if not_float:
        raise InputError(f"{name} has non-float tensors: {_few(not_float)}")


def _mismatch(name: str, pairs: list[tuple[str, Any, Any]]) -> None:
    bad = [f"{what}: checkpoint {got}, yaml {want}" for what, got, want in pairs if want is not None and got != want]
    if bad:
        raise InputError(f"{name} disagrees with cosyvoice3.yaml: {_few(bad)}")


def _check_llm(sd: dict, qwen_config: dict, recipe: Mapping[str, Any]) -> None:
    from .llm import LLMArgs

    try:
        args = LLMArgs.from_config(qwen_config)
    except ValueError as e:
        raise InputError(f"{BLANK_EN}/config.json: {e}") from None
    # the speech vocabulary is fixed by the checkpoint, not by config.json
    expected = args.expected_shapes()
    _compare("llm.pt", sd, expected, f"LLM with the dimensions of {BLANK_EN}/config.json")
    llm = recipe.get("llm") or {}
    token_size = _int_or_none(llm.get("speech_token_size"))
    _mismatch(
        "llm.pt",
        [
            ("speech vocabulary", sd["speech_embedding.weight"].shape[0], token_size and token_size + SPEECH_EXTRA_SLOTS),
            ("hidden size", args.hidden_size, _int_or_none(llm.get("llm_input_size"))),
        ],
    )


def _meta_shapes(module_factory, device: str = "meta") -> dict[str, tuple[int, ...]]:
    with meta.shell(device):
        m = module_factory()
    return {k: tuple(v.shape) for k, v in m.state_dict().items()}


def _check_flow(sd: dict, recipe: Mapping[str, Any]) -> None:
    from .flow import Flow, FlowArgs

    try:
        args = FlowArgs.from_state_dict(sd)
    except (KeyError, IndexError, ValueError, ZeroDivisionError) as e:
        raise InputError(f"flow.pt is not a CosyVoice3 flow state dict (cannot read {e})") from None
    _compare("flow.pt", sd, _meta_shapes(lambda: Flow(args)), "flow")
    flow = recipe.get("flow") or {}
    pre = flow.get("pre_lookahead_layer") or {}
    est = (flow.get("decoder") or {}).get("estimator") or {}
    _mismatch(
        "flow.pt",
        [
            ("speech vocabulary", args.vocab_size, _int_or_none(flow.get("vocab_size"))),
            ("mel bins", args.mel_dim, _int_or_none(flow.get("output_size"))),
            ("speaker embedding size", args.spk_embed_dim, _int_or_none(flow.get("spk_embed_dim"))),
            ("pre-lookahead length", args.pre_lookahead_len, _int_or_none(flow.get("pre_lookahead_len"))),
            ("pre-lookahead channels", args.pre_lookahead_channels, _int_or_none(pre.get("channels"))),
            ("DiT dim", args.dim, _int_or_none(est.get("dim"))),
            ("DiT depth", args.depth, _int_or_none(est.get("depth"))),
            ("DiT heads", args.heads, _int_or_none(est.get("heads"))),
            ("DiT head dim", args.dim_head, _int_or_none(est.get("dim_head"))),
            ("DiT ff_mult", args.ff_mult, _int_or_none(est.get("ff_mult"))),
        ],
    )


def _check_hift(sd: dict, recipe: Mapping[str, Any]) -> dict:
    """Validate and return the HiFT state dict in hift.py's canonical form."""
    from . import hift as hift_mod

    try:
        sd = hift_mod.normalize_hift_state_dict(sd)
        args = hift_mod.HiFTArgs.from_state_dict(sd)
    except (KeyError, IndexError, ValueError, ZeroDivisionError) as e:
        raise InputError(f"hift.pt is not a CosyVoice3 HiFT state dict (cannot read {e})") from None
    _compare("hift.pt", sd, _meta_shapes(lambda: hift_mod.HiFT(args), "cpu"), "HiFT vocoder")  # cpu: see meta.shell
    h = recipe.get("hift") or {}
    pairs = []
    for field_name, key in (
        ("in_channels", "in_channels"),
        ("base_channels", "base_channels"),
        ("nb_harmonics", "nb_harmonics"),
    ):
        if hasattr(args, field_name):
            pairs.append((key, getattr(args, field_name), _int_or_none(h.get(key))))
    for field_name, key in (("upsample_rates", "upsample_rates"), ("upsample_kernel_sizes", "upsample_kernel_sizes")):
        want = h.get(key)
        if hasattr(args, field_name) and isinstance(want, list):
            pairs.append((key, list(getattr(args, field_name)), [_int_or_none(x) for x in want]))
    _mismatch("hift.pt", pairs)
    return sd


# ---------------------------------------------------------------------------------------------
# Checkpoint


@dataclass
class Checkpoint:
    paths: CheckpointPaths
    llm_state_dict: dict[str, torch.Tensor]
    flow_state_dict: dict[str, torch.Tensor]
    hift_state_dict: dict[str, torch.Tensor]
    qwen_config: dict[str, Any]
    recipe: dict[str, Any] = field(repr=False)
    model_id: str = ""
    sample_rate: int = SAMPLE_RATE
    compressed: dict[str, Any] | None = None  # compressed.json of a compressed folder

    @property
    def source_model_id(self) -> str:
        """The official folder's id: what the voice profiles' prompt features were made with."""
        return self.compressed["source_model_id"] if self.compressed else self.model_id


def prompt_model_id(paths: CheckpointPaths) -> str:
    """The id a voice profile records: the source folder's for a compressed one (compression never
    changes the ONNX models or the tokenizer that make a profile)."""
    if (paths.model_dir / MANIFEST).is_file():
        from .compress import read_manifest

        return str(read_manifest(paths.model_dir)["source_model_id"])
    return compute_model_id(paths)


def read_qwen_config(paths: CheckpointPaths) -> dict[str, Any]:
    try:
        cfg = json.loads(paths.qwen_config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"cannot parse {BLANK_EN}/config.json: {e}") from None
    if not isinstance(cfg, dict):
        raise InputError(f"{BLANK_EN}/config.json is not a JSON object")
    return cfg


def load_checkpoint(model_dir: str | os.PathLike) -> Checkpoint:
    """Read and check an official CosyVoice3 directory. Tensors are memory-mapped, on CPU.

    Raises InputError (one line) for a missing/non-directory path, missing files, unreadable or
    non-state-dict .pt files, wrong or missing keys, and shapes that disagree with config.json or
    cosyvoice3.yaml. Never opens ``CosyVoice-BlankEN/model.safetensors``.
    """
    paths = check_layout(model_dir)
    recipe = read_recipe(paths.yaml)
    _check_recipe(recipe, paths.yaml.name)
    qwen_config = read_qwen_config(paths)
    if (paths.model_dir / MANIFEST).is_file():
        from .compress import load_compressed

        return load_compressed(paths, recipe, qwen_config)

    llm_sd = _load_state_dict(paths.llm)
    _check_llm(llm_sd, qwen_config, recipe)
    flow_sd = _load_state_dict(paths.flow)
    _check_flow(flow_sd, recipe)
    hift_sd = _check_hift(_load_state_dict(paths.hift), recipe)

    return Checkpoint(
        paths=paths,
        llm_state_dict=llm_sd,
        flow_state_dict=flow_sd,
        hift_state_dict=hift_sd,
        qwen_config=qwen_config,
        recipe=recipe,
        model_id=compute_model_id(paths),
        sample_rate=SAMPLE_RATE,
    )
