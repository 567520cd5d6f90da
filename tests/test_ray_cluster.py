"""A bench over a Ray cluster of two nodes, driven through the `arts` command as a user on the head node
drives it (README, "Ray for more than one machine"). The test starts the cluster on this machine with
Ray's own `cluster_utils.Cluster`: a head and a worker node, each its own raylet with one CPU, so a search
that declares one CPU fits only one per node. Searches spread over both nodes, and a driver killed in the
middle of a bench resumes from the bench folder. Skipped, saying why, where Ray is missing or cannot start."""

from __future__ import annotations

import csv
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arts.search.bench.ray_jobs import NODE_LINE
from tests.doubles import make_task


@pytest.fixture(scope="module")
def cluster():
    try:
        from ray.cluster_utils import Cluster
    except ImportError:
        pytest.skip("Ray is not installed (pip install 'arts[ray]')")
    try:
        c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
        c.add_node(num_cpus=1)
        c.wait_for_nodes()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"a two-node Ray cluster could not start here: {e}")
    yield c
    c.shutdown()


def slow_task(root: Path, seconds: float) -> Path:
    """The toy task, each evaluation taking at least `seconds` (so a search lasts long enough to be seen
    running and to be killed)."""
    task = make_task(root)
    evaluate = task / "evaluate.py"
    evaluate.write_text(f"import time\ntime.sleep({seconds})\n" + evaluate.read_text())
    return task


def bench(task: Path, out: Path, address: str, seeds: int) -> list[str]:
    return [sys.executable, "-c", "from arts.search.cli.main import main; raise SystemExit(main())", "bench",
            "--tasks", str(task), "--methods", "mutate", "--seeds", str(seeds), "--evals", "3", "--out",
            str(out), "--ray", "--ray-address", address, "--ray-cpus", "1", "--jobs", "2"]  # fmt: skip


def nodes(out: Path) -> dict[str, set[str]]:
    """The Ray nodes each run's search ran on, from the first line of each attempt in its log."""
    found = {}
    for log in sorted(out.glob("runs/*/bench.log")):
        found[log.parent.name] = set(re.findall(rf"{NODE_LINE} (\w+)", log.read_text()))
    return found


def rows(out: Path) -> list[dict]:
    path = out / "runs.csv"
    return list(csv.DictReader(path.open())) if path.exists() else []


def test_a_bench_spreads_its_searches_over_the_nodes_of_a_cluster(cluster, tmp_path):
    task, out = slow_task(tmp_path / "task", 0.5), tmp_path / "bench"
    done = subprocess.run(bench(task, out, cluster.address, 2), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [(r["seed"], r["status"]) for r in rows(out)] == [("0", "finished"), ("1", "finished")]
    ran = nodes(out)
    assert len(ran) == 2 and all(len(n) == 1 for n in ran.values()), ran
    # one CPU per node and per search: the two searches ran at once, one on each node
    assert set.union(*ran.values()) == {n.node_id for n in cluster.list_all_nodes()}, ran


def test_a_killed_driver_resumes_the_bench_from_its_folder(cluster, tmp_path):
    task, out = slow_task(tmp_path / "task", 1.5), tmp_path / "bench"
    driver = subprocess.Popen(bench(task, out, cluster.address, 4), stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not any(r["status"] == "finished" for r in rows(out)) and time.monotonic() < deadline:
        assert driver.poll() is None, driver.stdout.read()
        time.sleep(0.2)
    driver.send_signal(signal.SIGKILL)  # the head node's driver dies without any clean-up
    driver.wait(timeout=30)
    finished = {r["seed"] for r in rows(out) if r["status"] == "finished"}
    assert finished and len(finished) < 4
    again = subprocess.run(bench(task, out, cluster.address, 4), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    kept = int(re.search(r"(\d+) already finished", again.stdout).group(1))
    assert len(finished) <= kept < 4  # kept, not rerun (a search may have ended as the driver died)
    assert sorted((r["seed"], r["status"]) for r in rows(out)) == [(str(s), "finished") for s in range(4)]
    for seed in finished:  # a run finished before the kill was not started again
        (attempts,) = [log.read_text().count(NODE_LINE) for log in out.glob(f"runs/*--s{seed}/bench.log")]
        assert attempts == 1
