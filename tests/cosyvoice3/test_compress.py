"""`epub2audio model compress`: compact model folders that every loader accepts, lossless where
claimed (the int8 LLM is the runtime int8 LLM bit for bit; a vocabulary map changes no log-prob
of a text inside it), refusing what they cannot read, and synthesis never opening prompt parts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from epub2audio.errors import InputError
from epub2audio.voices.cosyvoice3 import checkpoint as ck
from epub2audio.voices.cosyvoice3 import compress as cz
from epub2audio.voices.cosyvoice3 import frontend
from epub2audio.voices.cosyvoice3 import profile as pr
from epub2audio.voices.cosyvoice3.backends import build_torch_llm
from epub2audio.voices.cosyvoice3.flow import load_flow, set_flow_dtype
from epub2audio.voices.cosyvoice3.vocab import OutsideVocabulary, check_text_ids
from epub2audio.voices.cosyvoice3.voice import CosyVoice3Voice

from . import fixtures as fx

WORDS = {"en": ["the", "quick", "brown", "fox", "jumps"]}  # a small synthetic word list
INSIDE = "The quick brown fox jumps."
OUTSIDE = "She sells sea shells"  # pieces like ' se' / 'lls' are not made by WORDS


def compressed(src: Path, dst: Path, **options) -> Path:
    options.setdefault("words", WORDS)
    cz.compress_folder(src, dst, **options)
    return dst


def logp(lm, tokenizer, text: str) -> torch.Tensor:
    """Log-probs of a prefill plus three fed tokens: every table and layer is read."""
    step = lm.start_decoding(tokenizer.encode(text), [1, 2, 3])
    return torch.stack([step(None), step(7), step(8), step(9)])


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return frontend.load_text_tokenizer(tiny_model_dir / ck.BLANK_EN)


def test_folder_layout_manifest_and_identity(tiny_model_dir, tmp_path):
    out = compressed(tiny_model_dir, tmp_path / "small", llm="int8", flow="bf16", hift="fp16", vocab=("en",),
                     prompt_parts="drop")
    names = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert names == ["CosyVoice-BlankEN/config.json", "CosyVoice-BlankEN/merges.txt", "CosyVoice-BlankEN/tokenizer_config.json",
                     "CosyVoice-BlankEN/vocab.json", "compressed.json", "cosyvoice3.yaml", "flow.safetensors",
                     "hift.safetensors", "llm.safetensors"]
    manifest = json.loads((out / "compressed.json").read_text())
    source = ck.load_checkpoint(tiny_model_dir)
    assert manifest["source_model_id"] == source.model_id
    assert manifest["options"] == {"llm": "int8", "tables": "fp32", "flow": "bf16", "hift": "fp16", "vocab": ["en"], "prompt_parts": "drop"}
    assert manifest["tool"].startswith("epub2audio ")
    loaded = ck.load_checkpoint(out)
    assert loaded.model_id.startswith("cosyvoice3-z") and loaded.model_id != source.model_id
    assert loaded.source_model_id == source.model_id
    other = ck.load_checkpoint(compressed(tiny_model_dir, tmp_path / "other", llm="bf16"))
    assert other.model_id not in (loaded.model_id, source.model_id)
    assert {v.dtype for k, v in loaded.flow_state_dict.items() if not k.endswith("inv_freq")} == {torch.bfloat16}
    assert "llm.model.lm_head.weight" not in loaded.llm_state_dict  # never used: not stored


def test_refuses_an_existing_target_and_leaves_no_temp_folder(tiny_model_dir, tmp_path):
    (tmp_path / "taken").mkdir()
    with pytest.raises(InputError, match="already exists"):
        cz.compress_folder(tiny_model_dir, tmp_path / "taken")
    with pytest.raises(InputError, match="--llm"):
        cz.compress_folder(tiny_model_dir, tmp_path / "new", llm="int3")
    with pytest.raises(InputError, match="--tables int8: with --llm bf16 the tables are stored at bf16"):
        cz.compress_folder(tiny_model_dir, tmp_path / "new", llm="bf16", tables="int8")
    with pytest.raises(InputError, match="--tables fp32: with --llm int4 the tables are stored at int8"):
        cz.compress_folder(tiny_model_dir, tmp_path / "new", llm="int4", tables="fp32")
    with pytest.raises(InputError, match="word list"):
        cz.compress_folder(tiny_model_dir, tmp_path / "new", vocab=("xx",), words={})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_fp32_folder_is_the_original_and_int8_is_the_runtime_int8_bit_for_bit(tiny_model_dir, tmp_path, tokenizer):
    source = ck.load_checkpoint(tiny_model_dir)
    reference = logp(build_torch_llm(source.qwen_config, dict(source.llm_state_dict), "fp32"), tokenizer, OUTSIDE)
    runtime_int8 = logp(build_torch_llm(source.qwen_config, dict(source.llm_state_dict), "int8"), tokenizer, OUTSIDE)

    fp32 = ck.load_checkpoint(compressed(tiny_model_dir, tmp_path / "fp32", llm="fp32"))
    assert torch.equal(logp(cz.build_llm_from_folder(fp32, "torch", "fp32"), tokenizer, OUTSIDE), reference)
    int8 = ck.load_checkpoint(compressed(tiny_model_dir, tmp_path / "int8", llm="int8"))
    lm = cz.build_llm_from_folder(int8, "auto", "fp32")  # auto on an int8 folder: torch int8, as stored
    assert (lm.backend, lm.precision) == ("torch", "int8")
    assert torch.equal(logp(lm, tokenizer, OUTSIDE), runtime_int8)
    assert not torch.equal(runtime_int8, reference)  # the comparison can tell int8 from fp32


def test_int4_keeps_tables_at_8_bits_and_stays_close(tiny_model_dir, tmp_path, tokenizer):
    folder = compressed(tiny_model_dir, tmp_path / "int4", llm="int4")
    stored = ck.load_checkpoint(folder).llm_state_dict
    assert {stored[k].dtype for k in cz.TABLE_KEYS} == {torch.int8}
    assert stored["llm.model.model.layers.0.mlp.up_proj.weight"].dtype == torch.uint8  # two 4-bit weights a byte
    w = torch.randn(8, 64)
    packed, scale = cz.quantize_int4_groups(w)
    assert (cz.dequantize_int4_groups(packed, scale) - w).abs().max() <= scale.float().max() / 2 + 1e-6


def test_int4_bytes_decode_to_their_signed_nibbles_low_first():
    packed = torch.arange(256, dtype=torch.uint8).reshape(16, 16)  # every byte once
    scale = torch.tensor([[0.5]] * 8 + [[2.0]] * 8, dtype=torch.float16)  # one group of 32 per row
    signed = [v - 16 if v > 7 else v for v in range(16)]
    want = torch.tensor([[signed[b & 0xF] * s, signed[b >> 4] * s][i] for row, s in enumerate([0.5] * 8 + [2.0] * 8)
                         for b in range(16 * row, 16 * row + 16) for i in (0, 1)]).reshape(16, 32)
    assert torch.equal(cz.dequantize_int4_groups(packed, scale), want)
    w = torch.tensor([[-7.0, 7.0, -1.0, 3.0] * 8]) * 0.25  # scale max/7 = 0.25: on the grid, comes back as is
    assert torch.equal(cz.dequantize_int4_groups(*cz.quantize_int4_groups(w)), w)


def dequantized_tables(sd: dict) -> dict:
    """llm.pt's state with the three tables replaced by their int8-per-row round trip."""
    out = dict(sd)
    for key in cz.TABLE_KEYS:
        out[key] = cz.dequantize_int8_rows(*cz.quantize_int8_rows(sd[key]))
    out[cz._LM_HEAD_KEY] = out[cz.EMBED_KEY]
    return out


def test_int8_tables_are_the_runtime_int8_on_8_bit_tables_and_stay_near_int8(tiny_model_dir, tmp_path, tokenizer):
    source = ck.load_checkpoint(tiny_model_dir)
    reference = logp(build_torch_llm(source.qwen_config, dict(source.llm_state_dict), "fp32"), tokenizer, OUTSIDE)
    want = logp(build_torch_llm(source.qwen_config, dequantized_tables(source.llm_state_dict), "int8"), tokenizer, OUTSIDE)
    int8 = ck.load_checkpoint(compressed(tiny_model_dir, tmp_path / "int8", llm="int8"))
    small = ck.load_checkpoint(compressed(tiny_model_dir, tmp_path / "tables", llm="int8", tables="int8"))
    # stored: the projections exactly as --llm int8 stores them, the tables as int8 rows + fp32 scales
    assert small.compressed["options"]["tables"] == "int8" and small.model_id != int8.model_id
    assert {k: v.dtype for k, v in small.llm_state_dict.items() if k in cz.TABLE_KEYS} == dict.fromkeys(cz.TABLE_KEYS, torch.int8)
    assert {small.llm_state_dict[k + cz.SCALE].dtype for k in cz.TABLE_KEYS} == {torch.float32}
    assert all(torch.equal(v, small.llm_state_dict[k]) for k, v in int8.llm_state_dict.items() if k not in cz.TABLE_KEYS)

    lm = cz.build_llm_from_folder(small, "auto", "fp32")  # torch int8, the text table left int8
    assert (lm.backend, lm.precision) == ("torch", "int8")
    assert isinstance(lm.model.qwen2.embed_tokens, cz.Int8RowEmbedding) and lm.model.qwen2.embed_tokens.weight.dtype == torch.int8
    got = logp(lm, tokenizer, OUTSIDE)
    assert torch.equal(got, want)  # the runtime int8 LLM on the round-tripped tables, bit for bit
    int8_logp = logp(cz.build_llm_from_folder(int8, "torch", "fp32"), tokenizer, OUTSIDE)
    assert not torch.equal(got, int8_logp)  # the tables really are 8-bit
    # The bound: each step's distribution within 0.1 total variation of fp32 (the int8 bound of
    # test_llm_mlx), and the largest log-prob error at most twice --tables fp32's (1.5x here).
    assert (0.5 * (got.exp() - reference.exp()).abs().sum(-1)).max() < 0.1
    assert (got - reference).abs().max() <= 2 * (int8_logp - reference).abs().max()

    # ONNX runs the folder's dequantised weights (fp32): the same numbers as torch fp32 on them
    onnx = cz.build_llm_from_folder(ck.load_checkpoint(small.paths.model_dir), "onnx", "fp32")
    dense = build_torch_llm(source.qwen_config, cz.dequantized_llm_state_dict(ck.load_checkpoint(small.paths.model_dir).llm_state_dict), "fp32")
    assert onnx.backend == "onnx"
    assert (logp(onnx, tokenizer, OUTSIDE) - logp(dense, tokenizer, OUTSIDE)).abs().max() < 1e-4
    w = torch.randn(8, 64)
    q, scale = cz.quantize_int8_rows(w)
    assert (cz.dequantize_int8_rows(q, scale) - w).abs().max() <= scale.max() / 2 + 1e-6


def test_vocab_map_with_int8_tables_is_lossless_inside(tiny_model_dir, tmp_path, tokenizer):
    full = ck.load_checkpoint(compressed(tiny_model_dir, tmp_path / "all", llm="int8", tables="int8"))
    small = ck.load_checkpoint(compressed(tiny_model_dir, tmp_path / "en", llm="int8", tables="int8", vocab=("en",)))
    kept = small.compressed["kept_text_ids"]
    assert small.llm_state_dict[cz.EMBED_KEY].shape[0] == kept < len(tokenizer)
    assert small.llm_state_dict[cz.EMBED_KEY].dtype == torch.int8
    want = logp(cz.build_llm_from_folder(full, "torch"), tokenizer, INSIDE)
    lm = cz.build_llm_from_folder(small, "torch")
    assert torch.equal(logp(lm, tokenizer, INSIDE), want)  # rows quantise alone: identical, not close
    with pytest.raises(OutsideVocabulary):
        lm.start_decoding(tokenizer.encode(OUTSIDE), [1])


def test_vocab_map_is_lossless_inside_and_refuses_outside(tiny_model_dir, tmp_path, tokenizer):
    source = ck.load_checkpoint(tiny_model_dir)
    reference = logp(build_torch_llm(source.qwen_config, dict(source.llm_state_dict), "fp32"), tokenizer, INSIDE)
    small = ck.load_checkpoint(compressed(tiny_model_dir, tmp_path / "en", llm="fp32", vocab=("en",)))
    rows = small.llm_state_dict[cz.ROW_MAP_KEY]
    kept = int((rows >= 0).sum())
    assert kept < len(tokenizer) and small.compressed["kept_text_ids"] == kept
    assert small.llm_state_dict[cz.EMBED_KEY].shape[0] == kept
    lm = cz.build_llm_from_folder(small, "torch", "fp32")
    assert torch.equal(logp(lm, tokenizer, INSIDE), reference)  # identical, not close
    # Outside the map: refused with the pieces named, and the table itself never reads a row it lacks.
    with pytest.raises(OutsideVocabulary, match=r"outside the compressed model's vocabulary \(en\): .*--vocab all"):
        check_text_ids(rows, tokenizer.encode(OUTSIDE), tokenizer, "en")
    with pytest.raises(OutsideVocabulary):
        lm.start_decoding(tokenizer.encode(OUTSIDE), [1])
    check_text_ids(rows, tokenizer.encode(INSIDE), tokenizer, "en")  # no error inside


def test_half_precision_flow_is_the_runtime_half_flow(tiny_model_dir, tmp_path):
    source = ck.load_checkpoint(tiny_model_dir)
    runtime = set_flow_dtype(load_flow(dict(source.flow_state_dict)), torch.bfloat16)
    folder = ck.load_checkpoint(compressed(tiny_model_dir, tmp_path / "bf16", llm="fp32", flow="bf16"))
    stored = load_flow(folder.flow_state_dict, keep_dtype=True)
    assert stored.state_dict().keys() == runtime.state_dict().keys()
    assert all(torch.equal(v, runtime.state_dict()[k]) and v.dtype == runtime.state_dict()[k].dtype
               for k, v in stored.state_dict().items())


@pytest.fixture(scope="module")
def profile_dir(tiny_model_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("profiles")
    wav = fx.write_sine_wav(d / "anna.wav", seconds=1.2, sample_rate=24000)
    return pr.save_profile(pr.make_profile(tiny_model_dir, wav, "Hello there."), d / "anna")


@pytest.mark.slow
def test_synthesis_never_opens_the_prompt_parts(tiny_model_dir, tmp_path, profile_dir):
    """The worker's whole job (load + synthesise) under an audit hook on "open"."""
    folder = compressed(tiny_model_dir, tmp_path / "small", llm="int8", flow="bf16", hift="fp16", prompt_parts="drop")
    code = f"""
import sys
opened = []
sys.addaudithook(lambda event, args: opened.append(str(args[0])) if event == "open" else None)
from epub2audio.voices.cosyvoice3.voice import CosyVoice3Voice
for model in ({str(tiny_model_dir)!r}, {str(folder)!r}):
    voice = CosyVoice3Voice.load(model, {str(profile_dir)!r}, llm_backend="torch", max_tokens_per_segment=20)
    pcm = voice.synthesize("The quick brown fox.", seed=3)
    assert len(pcm) > 0
    print(voice.info.model_id, voice.info.precision)
onnx = [p for p in opened if p.endswith(".onnx")]
print("OPENED_ONNX", onnx)
print("OPENED_MODEL_FILES", sorted({{p.rsplit("/", 1)[-1] for p in opened if p.startswith({str(folder)!r})}}))
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert "OPENED_ONNX []" in lines
    assert lines[1].split()[1] == "llm=int8,flow=bf16,hift=fp16"
    assert lines[1].split()[0].startswith("cosyvoice3-z")
    opened = lines[-1]
    assert "llm.safetensors" in opened and "flow.safetensors" in opened and "hift.safetensors" in opened


@pytest.mark.slow
def test_loading_a_voice_never_imports_torch_dynamo(tiny_model_dir, tmp_path, profile_dir):
    """Building the stages on the meta device used to run torch.nn.init there, and a meta normal_
    (or a meta norm, or a meta division) imports torch._dynamo: 0.8 s or more of every worker start."""
    folder = compressed(tiny_model_dir, tmp_path / "small", llm="int8", tables="int8", flow="bf16", hift="fp16")
    code = f"""
import sys
from epub2audio.voices.cosyvoice3.voice import CosyVoice3Voice
for model in ({str(tiny_model_dir)!r}, {str(folder)!r}):
    voice = CosyVoice3Voice.load(model, {str(profile_dir)!r}, llm_backend="torch", max_tokens_per_segment=20)
    print(voice.info.precision, "torch._dynamo" in sys.modules)
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines() == ["fp32 False", "llm=int8,flow=bf16,hift=fp16 False"]


def test_voice_add_on_a_folder_without_prompt_parts_says_so(tiny_model_dir, tmp_path):
    folder = compressed(tiny_model_dir, tmp_path / "small", llm="bf16", prompt_parts="drop")
    wav = fx.write_sine_wav(tmp_path / "anna.wav", seconds=1.2, sample_rate=24000)
    with pytest.raises(InputError, match="compressed model folder without campplus.onnx and speech_tokenizer_v3.onnx; "
                                         "voice add needs the full Fun-CosyVoice3-0.5B folder"):
        pr.make_profile(folder, wav, "Hello there.")


def test_cli_compress_runs_in_a_child_and_the_parent_never_imports_torch(tiny_model_dir, tmp_path):
    out = tmp_path / "small"
    code = f"""
import sys
from epub2audio.cli import main
rc = main(["model", "compress", "--model-dir", {str(tiny_model_dir)!r}, "--out", {str(out)!r}, "--llm", "int8",
           "--tables", "int8", "--flow", "fp16", "--prompt-parts", "drop"])
rc2 = main(["model", "compress", "--model-dir", {str(tiny_model_dir)!r}, "--out", {str(out)!r}])
print("RC", rc, rc2, "torch" in sys.modules, "onnxruntime" in sys.modules)
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert proc.stdout.splitlines()[-1] == "RC 0 2 False False", proc.stderr
    assert proc.stdout.startswith(f"Wrote {out} (")
    assert proc.stderr.strip() == f"epub2audio: error: {out} already exists; choose a new --out folder"
    assert {k: v for k, v in json.loads((out / "compressed.json").read_text())["options"].items() if k in ("tables", "flow")} == {
        "tables": "int8", "flow": "fp16"}
    wav = fx.write_sine_wav(tmp_path / "anna.wav", seconds=1.2, sample_rate=24000)
    env["EPUB2AUDIO_DATA_DIR"] = str(tmp_path / "data")
    env["EPUB2AUDIO_CONFIG"] = str(tmp_path / "none.toml")
    proc = subprocess.run([sys.executable, "-m", "epub2audio.cli", "voice", "add", "anna", "--wav", str(wav), "--text", "Hi.",
                           "--model-dir", str(out)], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "voice add needs the full Fun-CosyVoice3-0.5B folder" in proc.stderr


@pytest.mark.slow
def test_the_worker_meters_its_own_load_of_either_folder(tiny_model_dir, tmp_path, profile_dir):
    """Seconds and memory of the voice's load, measured inside the worker and sent with its
    details (no figures compared: tiny models are lost in the interpreter's own memory)."""
    from test_worker import assert_load_meter

    from epub2audio.worker.supervisor import Supervisor, WorkerPolicy

    folder = compressed(tiny_model_dir, tmp_path / "small", llm="int8", flow="bf16", hift="fp16", prompt_parts="drop")
    for model, precision in ((tiny_model_dir, "fp32"), (folder, "llm=int8,flow=bf16,hift=fp16")):
        options = {"model_dir": str(model), "profile_dir": str(profile_dir), "extra": {"llm_backend": "torch"}}
        s = Supervisor({"voice": "cosyvoice3:anna", "options": options}, WorkerPolicy(start_timeout=600))
        try:
            assert s.details.precision == precision
            assert_load_meter(s.details.load)
        finally:
            s.close()


def mapped_file(address: int) -> str:
    """The file whose mapping holds `address` in this process ("" for anonymous memory)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split()
            low, high = (int(x, 16) for x in parts[0].split("-"))
            if low <= address < high:
                return parts[5] if len(parts) > 5 and parts[5].startswith("/") else ""
    return ""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_weights_are_memory_mapped_and_adopted_not_copied(tiny_model_dir, tmp_path, profile_dir):
    folder = compressed(tiny_model_dir, tmp_path / "fp32", llm="fp32", flow="fp32", hift="fp32")
    for model, suffix in ((tiny_model_dir, ".pt"), (folder, ".safetensors")):
        loaded = ck.load_checkpoint(model)
        for stem, sd in (("llm", loaded.llm_state_dict), ("flow", loaded.flow_state_dict), ("hift", loaded.hift_state_dict)):
            assert {mapped_file(t.data_ptr()) for t in sd.values() if t.numel()} == {str(model / (stem + suffix))}
    voice = CosyVoice3Voice.load(folder, profile_dir, llm_backend="torch")
    # the modules run on the mapped pages themselves: the flow whole, the LLM's matrices (its
    # small biases and norms own their memory on purpose, see compress._build_stored_torch_llm)
    assert {mapped_file(p.data_ptr()) for p in voice.flow.parameters()} == {str(folder / "flow.safetensors")}
    assert {mapped_file(p.data_ptr()) for p in voice.llm.model.parameters() if p.numel() >= 1 << 16} == {
        str(folder / "llm.safetensors")}


def _resident_of(path: Path) -> int:
    """Bytes of `path`'s mappings resident in this process (smaps Rss)."""
    total, current = 0, None
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5 and fields[0][0] in "0123456789abcdef" and ":" in fields[3]:
            current = fields[5] if len(fields) > 5 else None
        elif fields[0] == "Rss:" and current == str(path):
            total += int(fields[1]) * 1024
    return total


def _linux_at_least(major: int, minor: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    numbers = [int(n) for n in os.uname().release.split("-")[0].split(".")[:2]]
    return tuple(numbers) >= (major, minor)


@pytest.mark.skipif(not _linux_at_least(5, 4), reason="MADV_PAGEOUT came with Linux 5.4")
def test_packed_weights_file_pages_are_given_back_and_values_kept(tmp_path):
    """After packing, a stored int8 projection's file pages are handed back to the kernel (they
    would count as private memory beside the packed copy); the tensor still reads the same values,
    from the file, and an in-memory tensor is never zeroed by it."""
    from safetensors.torch import load_file, save_file

    weight = torch.randint(-127, 128, (2048, 1024), dtype=torch.int8, generator=torch.Generator().manual_seed(0))
    path = tmp_path / "w.safetensors"
    save_file({"w": weight}, str(path))
    mapped = load_file(str(path))["w"]
    assert torch.equal(mapped, weight)  # reads every page
    before = _resident_of(path)
    assert before >= 1 << 20
    cz._page_out(mapped)
    assert _resident_of(path) < before // 4
    assert torch.equal(mapped, weight)
    in_memory = weight.clone()
    cz._page_out(in_memory)
    assert torch.equal(in_memory, weight)
