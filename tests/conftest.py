"""Shared fixtures: the MMIE rubric, the seeded tiny scorer, a small generated demo set."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing in the tests may reach a hub
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

#: pytest-xdist's worker count (``-n``; 0 in a plain serial run).
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
if WORKERS > 1:
    # The cores shared out between the workers (and the processes their tests launch, which inherit it): two
    # workers each running two torch threads on two cores stall each other (every op waits for its slowest
    # thread). Read by torch at import; pytest_configure below sets it again in case torch came first.
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // WORKERS)))

#: OpenRLHF's and verl's client code, installed without their GPU dependencies into this folder rather than
#: the environment (``pip install --no-deps --target .clients -r tests/requirements-clients.txt``): their
#: wheels also carry a top-level ``tests`` package. Appended last, so nothing of it shadows anything.
CLIENTS = Path(__file__).resolve().parents[1] / ".clients"
if CLIENTS.is_dir():
    sys.path.append(str(CLIENTS))


#: The longest test files, in seconds of one serial run on the 2-core development host
#: (``python -m pytest --durations=0``, summed per file; see CONTRIBUTING.md). With pytest-xdist (``-n auto``,
#: the test command README.md gives) each file goes whole to one worker (pytest_xdist_make_scheduler below),
#: in collection order: these go first, so that a long file is not started last while the other worker idles.
SLOW_FILES: dict[str, float] = {
    "test_help_examples.py": 416,
    "test_bench_scripts.py": 324,
    "test_serve_fuzz.py": 322,
    "test_train_sharded.py": 293,
    "test_family_conformance.py": 156,
    "test_train_learning.py": 135,
    "test_train_run.py": 94,
    "test_serve.py": 91,
    "test_family_serve.py": 77,
    "test_serve_scripts.py": 75,
    "test_reproducible.py": 72,
    "test_serve_chat.py": 69,
    "test_load_test.py": 62,
    "test_calibration_paths.py": 61,
    "test_newcomer.py": 54,
    "test_api.py": 53,
    "test_serve_hosts.py": 52,
}


def pytest_configure(config):
    if WORKERS > 1 and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: absent under -p no:xdist or without it
def pytest_xdist_make_scheduler(config, log):
    """``-n`` runs each test file whole on one worker (``--dist loadfile``), in the order
    ``pytest_collection_modifyitems`` gives: a module's fixtures (a demo workspace, a server, a trained
    judge) are built once, not once per worker. ``load`` (what ``-n`` implies, and so also an explicit
    ``--dist load``, which cannot be told apart from it) becomes ``loadfile``; any other ``--dist`` is kept."""
    if config.getoption("dist") not in ("load", "loadfile"):
        return None  # xdist's own scheduler for the --dist asked for
    from xdist.scheduler import LoadFileScheduling

    config.option.loadscopereorder = False  # xdist >= 3.8 would order files by their number of tests
    return LoadFileScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist, the files of ``SLOW_FILES`` first, longest first (a stable sort: every file's
    tests stay together and in order, the other files keep their order)."""
    if WORKERS:
        items.sort(key=lambda item: -SLOW_FILES.get(item.path.name, 0.0))


def built_once(tmp_path_factory, name: str, build):
    """``build(folder)`` once per test run, its value shared. Serially that is a session fixture's own
    promise; under pytest-xdist each worker has its own session, so the first worker to ask builds into the
    run's shared temporary folder under a file lock and pickles the value (paths, a TrainResult) beside it,
    and the others wait for it and read it back (a build that fails is tried again by the next worker)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return build(tmp_path_factory.mktemp(name))
    import pickle
    import shutil

    from filelock import FileLock

    root = tmp_path_factory.getbasetemp().parent  # .../pytest-N/, shared by this run's workers
    folder, value_file = root / name, root / f"{name}.pickle"
    with FileLock(str(root / f"{name}.lock")):
        if value_file.is_file():
            return pickle.loads(value_file.read_bytes())
        shutil.rmtree(folder, ignore_errors=True)  # what a failed build left
        folder.mkdir()
        value = build(folder)
        value_file.write_bytes(pickle.dumps(value))
        return value


@pytest.fixture(scope="session", autouse=True)
def command_logging():
    """The library's log messages shown as the commands show them (INFO on stdout, ``warning: ...`` on
    stderr), also for tests that call a library function directly and read what it printed."""
    from judge.cli._logging import setup_logging

    setup_logging()


@pytest.fixture(scope="session")
def rubric():
    from judge.core.rubric import load_rubric

    return load_rubric("mmie")


@pytest.fixture(scope="session")
def tiny():
    """(model, processor) of the seeded tiny InternVL scorer; shared, so tests must not modify it."""
    from judge.models import build_tiny_scorer

    return build_tiny_scorer(seed=0)


@pytest.fixture(scope="session")
def tiny_qwen():
    """(model, processor) of the seeded tiny Qwen2.5-VL scorer; shared, so tests must not modify it."""
    from judge.models import build_tiny_scorer

    return build_tiny_scorer(seed=0, name="tiny-qwen2.5-vl")


@pytest.fixture(scope="session")
def tiny_qwen3():
    """(model, processor) of the seeded tiny Qwen3-VL scorer; shared, so tests must not modify it."""
    from judge.models import build_tiny_scorer

    return build_tiny_scorer(seed=0, name="tiny-qwen3-vl")


@pytest.fixture(scope="session")
def tiny_smol():
    """(model, processor) of the seeded tiny SmolVLM scorer; shared, so tests must not modify it."""
    from judge.models import build_tiny_scorer

    return build_tiny_scorer(seed=0, name="tiny-smolvlm")


@pytest.fixture(scope="session")
def tiny_gemma3():
    """(model, processor) of the seeded tiny Gemma 3 scorer; shared, so tests must not modify it."""
    from judge.models import build_tiny_scorer

    return build_tiny_scorer(seed=0, name="tiny-gemma3")


@pytest.fixture(scope="session")
def tiny_llava_onevision():
    """(model, processor) of the seeded tiny LLaVA-OneVision scorer; shared, so tests must not modify it."""
    from judge.models import build_tiny_scorer

    return build_tiny_scorer(seed=0, name="tiny-llava-onevision")


@pytest.fixture(scope="session")
def small_demo(tmp_path_factory):
    """A small synthetic annotation set (12 questions x 3 responses) with real PNG images."""
    from judge.testing.demo import generate_demo

    return built_once(tmp_path_factory, "demo", lambda folder: generate_demo(folder, n_questions=12, seed=0))


@pytest.fixture(scope="session")
def qlora_run(small_demo, tmp_path_factory):
    """(output folder, TrainResult) of one short QLoRA training (4-bit base, LoRA, 3 steps, every criterion)
    on the small demo set: trained once per test run for the tests that need a QLoRA judge
    (test_train_run, test_score_identity); shared, so tests must not modify it."""
    from judge.train import train_judge

    def train(out: Path):
        result = train_judge(
            "demo",
            overrides={
                "data.annotations": [str(small_demo)],
                "data.criteria": "all",  # demo.yaml trains the overall score only; the users score every one
                "output_dir": str(out),
                "quantization": "4bit",
                "train.finetune": "lora",
                "train.max_steps": 3,
                "train.per_device_train_batch_size": 4,
                "train.logging_steps": 1,
                "train.warmup_steps": 0,
                "train.learning_rate": 1e-2,
                "eval.strategy": "no",
                "eval.at_start": False,
            },
        )
        return out, result

    return built_once(tmp_path_factory, "qlora", train)


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op torch thread while a module runs (use with ``pytestmark``): on cores shared with other
    jobs, several threads stall each other (every op waits for its slowest thread), which made the scoring
    tests several times slower."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under ``JUDGE_FAIL_ON_SKIP=1`` (CI sets it) a skipped test fails unless it is marked ``gpu``: a skip
    hides a missing dependency or a broken fixture as easily as it marks a test that cannot run here."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("JUDGE_FAIL_ON_SKIP") == "1" and "gpu" not in item.keywords:
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.longrepr = f"skipped without the 'gpu' marker (JUDGE_FAIL_ON_SKIP=1): {reason}"


@pytest.fixture(scope="session")
def view_run(small_demo, tmp_path_factory):
    """What judge-view shows, made by the real commands' functions on the small demo set: a judge-score
    folder (the tiny judge), a report against the annotators and an audit (blank images, off-topic).
    Returns (score folder, report folder, audit folder)."""
    from judge import audit_judge, report, score_files

    def build(root: Path):
        score, rep, audit = root / "score", root / "report", root / "audit"
        score_files([str(small_demo)], judge="tiny", rubric="mmie", out=str(score), progress=False)
        report(
            human=[str(small_demo)], scores=[f"tiny={score / 'scores.jsonl'}"], out=str(rep), bootstrap=50,
            ppi_draws=0,
        )  # fmt: skip
        audit_judge(
            [str(small_demo)], judge="tiny", rubric="mmie", out=str(audit), perturb=["blank-images", "off-topic"],
            bootstrap=50, progress=False,
        )  # fmt: skip
        return score, rep, audit

    return built_once(tmp_path_factory, "view-run", build)


def pytest_sessionfinish(session, exitstatus):
    """End the fork servers this process started (tests/forkserver.py), with any command still running."""
    forkserver = sys.modules.get("forkserver")
    if forkserver is not None:
        forkserver.stop()
