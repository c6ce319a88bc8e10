"""Rendering on Ray: a two-node cluster on this machine (ray.cluster_utils.Cluster), one CPU a node.

Node B carries a one-shot fault: armed by creating a marker file, its worker hangs on its next
segment with a "." in it and deletes the marker. A test that needs "mid-segment" waits for that
(the marker gone = a segment is stuck on node B), then kills the actor, removes the node or kills
the driver. No test waits on the clock.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # loopback only (read at import)

import ray  # noqa: E402  (after the environment above)
from ray.cluster_utils import Cluster  # noqa: E402

from cli_run import SAMPLE, THREE_CHAPTERS, epub2audio, story_epub  # noqa: E402
from epub2audio.errors import JobFailed  # noqa: E402
from epub2audio.progress import Progress  # noqa: E402
from epub2audio.ray_pool import RayWorkerPool  # noqa: E402
from epub2audio.render import ConvertOptions, convert  # noqa: E402
from epub2audio.worker.supervisor import WorkerPolicy  # noqa: E402

# One worker process runs them all, so the module's one Ray cluster (lab) starts once a run, not in
# each xdist worker that ran one of its tests.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]
NODE = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024}
PATIENCE = 300  # seconds: a bound on waiting for an event, so a broken build fails instead of hanging


class Lab:
    def __init__(self, root: Path):
        self.root = root
        self.armed = root / "armed"
        self.cluster = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
        self.node_b = self.add_node_b()
        ray.init(address=self.cluster.address, log_to_driver=False)

    def add_node_b(self):
        return self.cluster.add_node(**NODE, env_vars={"EPUB2AUDIO_FAULTS": f"hang_on=.,marker={self.armed}"})

    def arm(self) -> None:
        self.armed.write_text("")

    def wait_until_stuck(self) -> None:
        """Until node B's worker has taken the fault (it deletes the marker as it starts to hang)."""
        until(lambda: not self.armed.exists(), "node B's worker never hung")


def until(condition, failure: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < deadline, failure
        time.sleep(0.05)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("ray")
    os.environ["EPUB2AUDIO_CACHE_DIR"] = str(root / "cache")  # the nodes inherit it (their worker logs)
    lab = Lab(root)
    yield lab
    ray.shutdown()
    lab.cluster.shutdown()


@pytest.fixture(scope="module")
def book(lab):
    return story_epub(lab.root, THREE_CHAPTERS)


def run(book: Path, out: Path, pool=None, workers: int = 2) -> bytes:
    options = ConvertOptions(voice="tone", workers=workers, verify=False, work_dir=out.with_suffix(".job"), pool=pool)
    convert(book, out, options, Progress())
    return out.read_bytes()


class Capture:
    """A RayWorkerPool factory that keeps the pool, so a test can reach its actors."""

    def __init__(self):
        self.pool: RayWorkerPool | None = None
        self.made = threading.Event()

    def __call__(self, *args):
        self.pool = RayWorkerPool(*args)
        self.made.set()
        return self.pool

    def stuck_slot(self, lab: Lab):
        return next(s for s in self.pool.ready if lab.node_b.node_id[:8] in s.node)


@pytest.fixture(scope="module")
def local_bytes(lab, book):
    return run(book, lab.root / "local.m4b", workers=1)


def test_tone_on_two_nodes_gives_the_local_bytes(lab, book, local_bytes, tmp_path):
    capture = Capture()
    assert run(book, tmp_path / "ray.m4b", capture) == local_bytes
    assert len(capture.pool.stats.by_node) == 2  # both nodes rendered
    assert sum(capture.pool.stats.by_node.values()) == 12
    assert capture.pool.stats.died == 0


def test_the_default_voice_on_ray_gives_the_local_bytes(lab, tmp_path):
    local = epub2audio(SAMPLE, "--chapters", "2", "-o", tmp_path / "local.m4b", "--no-verify")
    assert local.code == 0, local.stderr
    remote = epub2audio(SAMPLE, "--chapters", "2", "-o", tmp_path / "ray.m4b", "--no-verify",
                        "--ray", lab.cluster.address)
    assert remote.code == 0, remote.stderr
    assert (tmp_path / "ray.m4b").read_bytes() == (tmp_path / "local.m4b").read_bytes()


def _kill_mid_segment(lab: Lab, book: Path, out: Path, kill) -> Capture:
    """Convert on Ray; once node B's worker is stuck in a segment, `kill(capture)`; the job must finish."""
    capture = Capture()
    lab.arm()
    errors = []

    def job():
        try:
            run(book, out, capture)
        except BaseException as error:  # reported by the test thread
            errors.append(error)

    thread = threading.Thread(target=job)
    thread.start()
    lab.wait_until_stuck()
    kill(capture)
    thread.join(PATIENCE)
    assert not thread.is_alive() and not errors, errors
    return capture


def test_an_actor_killed_mid_segment_loses_nothing(lab, book, local_bytes, tmp_path):
    def kill_actor(capture):
        slot = capture.stuck_slot(lab)
        assert capture.pool.in_flight()[slot.actor]  # it holds the stuck segment
        ray.kill(slot.actor)

    capture = _kill_mid_segment(lab, book, tmp_path / "a.m4b", kill_actor)
    assert (tmp_path / "a.m4b").read_bytes() == local_bytes
    assert capture.pool.stats.died == 1 and capture.pool.stats.resent >= 1


def test_a_node_without_the_model_folder_is_named(lab, tmp_path):
    missing = tmp_path / "Fun-CosyVoice3-0.5B"
    pool = RayWorkerPool("cosyvoice3:nobody", {"model_dir": str(missing), "profile_dir": str(tmp_path)},
                         2, 1, WorkerPolicy(start_timeout=PATIENCE))
    try:
        with pytest.raises(JobFailed) as failure:
            pool.details()
    finally:
        pool.kill()
    message = str(failure.value)
    assert message.startswith("Ray node 127.0.0.1 (node ")
    assert f"cannot load voice 'cosyvoice3:nobody': the model folder {missing} is not there." in message


def test_a_driver_killed_mid_library_resumes(lab, tmp_path):
    library = tmp_path / "calibre"
    for n, title in ((1, "First Book"), (2, "Second Book")):
        folder = library / "Ann Author" / f"{title} ({n})"
        folder.mkdir(parents=True)
        story_epub(folder, THREE_CHAPTERS, name=f"{title} - Ann Author.epub")
    local_out, ray_out = tmp_path / "local", tmp_path / "ray"
    local_out.mkdir(), ray_out.mkdir()
    local = epub2audio("library", library, "--out", local_out, "--voice", "tone", "--no-verify")
    assert local.code == 0, local.stderr

    command = [sys.executable, "-m", "epub2audio.cli", "library", str(library), "--out", str(ray_out),
               "--voice", "tone", "--no-verify", "--progress", "json", "--ray", lab.cluster.address]
    lab.arm()
    driver = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    segments = threading.Event()

    def read():
        for line in driver.stdout:
            if line.startswith("{") and json.loads(line)["event"] == "segment":
                segments.set()

    threading.Thread(target=read, daemon=True).start()
    lab.wait_until_stuck()
    assert segments.wait(PATIENCE)  # some segments of the first book are in its store
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    assert not list(ray_out.rglob("*.m4b"))

    again = epub2audio("library", library, "--out", ray_out, "--voice", "tone", "--no-verify",
                       "--progress", "json", "--ray", lab.cluster.address)
    assert again.code == 0, again.stderr
    assert again.events("plan")[0]["cached"] > 0  # resumed from the first book's store
    names = sorted(str(p.relative_to(local_out)) for p in local_out.rglob("*.m4b"))
    assert names == ["Ann Author/First Book (1)/First Book - Ann Author.m4b",
                     "Ann Author/Second Book (2)/Second Book - Ann Author.m4b"]
    for name in names:
        assert (ray_out / name).read_bytes() == (local_out / name).read_bytes()
    third = epub2audio("library", library, "--out", ray_out, "--voice", "tone", "--ray", lab.cluster.address)
    assert third.code == 0
    assert third.stderr.strip().endswith("library: 0 converted, 2 done already, 0 refused, 0 failed")


def test_a_node_removed_mid_segment_loses_nothing(lab, book, local_bytes, tmp_path):
    """Last: it takes node B away (and puts a fresh one back for any later test)."""
    capture = _kill_mid_segment(lab, book, tmp_path / "n.m4b", lambda _: lab.cluster.remove_node(lab.node_b))
    lab.node_b = lab.add_node_b()
    assert (tmp_path / "n.m4b").read_bytes() == local_bytes
    assert capture.pool.stats.died == 1 and capture.pool.stats.resent >= 1
