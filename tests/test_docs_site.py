"""The front pages' code blocks work as written, and the documentation site builds with the whole public API.

The front pages are what a newcomer copies from first: README.md, the site's home (docs/index.md), its
install page and the API page. Every shell command in their ``bash`` blocks is one this checkout has (a
``judge-*`` console script whose parser accepts the flags, a script that exists and accepts its flags, an
extra that pyproject.toml defines, ...), as ``--help`` examples are checked to run (test_help_examples.py);
every ``python`` block runs from a folder outside the checkout, or, when another test already runs it against
a server (a block marked ``<!-- ... tests/test_x.py runs this block ... -->``), compiles.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
FRONT_PAGES = ["README.md", "docs/index.md", "docs/install.md", "docs/api.md"]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
#: a fenced block with the HTML comment right above it, if any
BLOCK = re.compile(r"(?:(<!--[^>]*-->)\s*\n)?```(\w+)\n(.*?)```", re.S)


def blocks(page: str, language: str) -> list[tuple[str | None, str]]:
    """(marker comment or None, code) of each ``language`` block of ``page``."""
    text = (ROOT / page).read_text(encoding="utf-8")
    return [(m.group(1), m.group(3)) for m in BLOCK.finditer(text) if m.group(2) == language]


def shell_commands(code: str) -> list[list[str]]:
    """The commands of a shell block as tokens: continued lines joined, comments dropped, ``&&`` split."""
    out = []
    for line in code.replace("\\\n", " ").splitlines():
        line = line.split("  #")[0].strip()
        if not line or line.startswith("#"):
            continue
        for part in line.split("&&"):
            out.append(shlex.split(part, comments=True))
    return out


def _parser(script: str):
    """The argparse parser behind a console script of pyproject.toml."""
    module, func = PYPROJECT["project"]["scripts"][script].split(":")
    main = getattr(importlib.import_module(module), func)
    return importlib.import_module(main.__module__).build_parser()


def _demo_parse():
    spec = importlib.util.spec_from_file_location("demo_script", ROOT / "scripts" / "demo.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.parse


def check_command(tokens: list[str]) -> None:
    """Raise (or exit, for a flag the parser refuses) unless ``tokens`` is a command this checkout has."""
    name, args = tokens[0], tokens[1:]
    if name.startswith("judge-"):
        assert name in PYPROJECT["project"]["scripts"], f"{name} is no console script of pyproject.toml"
        _parser(name).parse_args(args)  # an unknown flag or a bad value exits
    elif name == "bash":
        script = ROOT / args[0]
        assert script.is_file(), f"{args[0]} does not exist"
        if args[0] == "scripts/demo.sh":
            _demo_parse()(args[1:])
    elif name == "pip":
        assert args[0] == "install", tokens
        extras = PYPROJECT["project"]["optional-dependencies"]
        for arg in args[1:]:
            for extra in re.findall(r"\.\[([\w,-]+)\]", arg):
                assert all(e in extras for e in extra.split(",")), f"no extra {extra!r} in pyproject.toml"
            if arg.startswith("torch=="):  # the pin of .ci/run, the version the project is tested on
                assert f"{arg} " in (ROOT / ".ci" / "run").read_text(encoding="utf-8"), arg
        if "-r" in args:
            assert (ROOT / args[args.index("-r") + 1]).is_file()
    elif name in ("python", "python3") and args[:1] == ["-m"]:
        assert importlib.util.find_spec(args[1]) is not None, f"no module {args[1]}"
        if args[1] == "pytest" and "-m" in args[2:]:
            markers = {m.split(":")[0] for m in PYPROJECT["tool"]["pytest"]["ini_options"]["markers"]}
            expression = args[2:][args[2:].index("-m") + 1]
            assert set(re.findall(r"\w+", expression)) - {"not", "and", "or"} <= markers, expression
    elif name == "mkdocs":
        assert importlib.util.find_spec("mkdocs") is not None and args[0] in ("serve", "build")
    else:
        raise AssertionError(f"a front page's shell block runs {name!r}, which this test does not know")


@pytest.mark.parametrize("page", FRONT_PAGES)
def test_every_shell_command_of_the_front_pages_exists_and_takes_its_flags(page):
    commands = [c for _, code in blocks(page, "bash") for c in shell_commands(code)]
    if page != "docs/api.md":
        assert commands, f"{page} has no shell block"
    for tokens in commands:
        check_command(tokens)


def test_the_check_refuses_a_flag_a_command_does_not_have():
    with pytest.raises(SystemExit):
        check_command(["judge-score", "preds.jsonl", "--judge", "tiny", "--no-such-flag"])
    with pytest.raises(SystemExit):
        check_command(["bash", "scripts/demo.sh", "--quick", "--steps", "5"])
    with pytest.raises(AssertionError):
        check_command(["judge-nothing", "--help"])
    with pytest.raises(AssertionError):
        check_command(["pip", "install", "-e", ".[no-such-extra]"])


def test_the_readme_gives_the_test_command_ci_runs():
    """.ci/run says it runs exactly the test command the README gives."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    (ci_line,) = [ln.split("||")[0].strip() for ln in ci.splitlines() if re.match(r"python3? -m pytest", ln)]
    readme = [c for _, code in blocks("README.md", "bash") for c in shell_commands(code)]
    pytest_runs = [c for c in readme if c[1:3] == ["-m", "pytest"]]
    assert [c[1:] for c in pytest_runs] == [shlex.split(ci_line)[1:]], (pytest_runs, ci_line)


@pytest.mark.slow  # imports torch and loads the tiny judge in a fresh process
@pytest.mark.parametrize("page", FRONT_PAGES)
def test_every_python_block_of_the_front_pages_runs_or_compiles(page, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    for marker, code in blocks(page, "python"):
        compile(code, f"{page} block", "exec")
        if marker and re.search(r"tests/test_\w+\.py runs this block", marker):
            continue  # run by the test the marker names (against a server, from another folder, ...)
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )
        assert out.returncode == 0, (page, code, out.stderr[-3000:])


def test_every_relative_link_of_the_readme_exists():
    """The README is not part of the site (mkdocs checks the site's links): its own links are checked here."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = [t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text) if not t.startswith("http")]
    assert targets
    missing = [t for t in targets if t and not (ROOT / t).exists()]
    assert not missing, missing


def _public_names() -> dict[str, str]:
    """Every public name (``judge.__all__``, ``judge.models.__all__``) -> the dotted path it is defined at."""
    import judge
    import judge.models

    names = {n: f"{judge._EXPORTS[n]}.{n}" for n in judge.__all__ if n != "__version__"}
    for n in judge.models.__all__:
        module = judge.models._EXPORTS.get(n)
        names[f"models.{n}"] = f"judge.models.{module}.{n}" if module else f"judge.models.{n}"
    return names


def test_the_api_reference_documents_every_public_name():
    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^::: ([\w.]+)$", page, re.M))
    missing = sorted(set(_public_names().values()) - documented)
    assert not missing, f"docs/api.md has no `::: NAME` for {missing}"


@pytest.mark.slow
def test_the_site_builds_strictly_with_every_page_and_the_public_api(tmp_path):
    """What .ci/run builds: every docs/ page becomes a page, and the API page holds each public name."""
    site = tmp_path / "site"
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    for md in (ROOT / "docs").glob("*.md"):
        html = site / "index.html" if md.stem == "index" else site / md.stem / "index.html"
        assert html.is_file(), md.name
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    missing = [path for path in _public_names().values() if f'id="{path}"' not in api]
    assert not missing, missing
