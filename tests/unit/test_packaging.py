"""pyproject names every package the wheel needs: each folder of gnnq/ and hydra_plugins/ that holds Python files, and
the top-level conf/ and sweeps/ mapped to gnnq.conf and gnnq.sweeps (tests/e2e/test_wheel_install.py builds the
wheel)."""

from __future__ import annotations

import tomllib

from tests.conftest import REPO


def _setuptools() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_folder_is_listed_and_nothing_else():
    folders = {p.parent for top in ("gnnq", "hydra_plugins") for p in (REPO / top).rglob("*.py")}
    expected = {".".join(f.relative_to(REPO).parts) for f in folders if "__pycache__" not in f.parts}
    listed = set(_setuptools()["packages"])
    assert expected - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert listed - expected == {"gnnq.conf", "gnnq.sweeps", "hydra_plugins"}


def test_conf_and_sweeps_ship_with_their_yaml_files():
    tool = _setuptools()
    assert tool["package-dir"] == {"gnnq.conf": "conf", "gnnq.sweeps": "sweeps"}
    assert (REPO / "conf" / "config.yaml").is_file() and (REPO / "sweeps" / "peers.yaml").is_file()
    assert tool["package-data"]["gnnq.conf"] == tool["package-data"]["gnnq.sweeps"] == ["**/*.yaml"]
    assert not (REPO / "gnnq" / "conf").exists() and not (REPO / "gnnq" / "sweeps").exists()  # one copy, at the top


def test_compose_reads_the_checkouts_conf_and_sweeps():
    from gnnq.config.compose import CONF_DIR, SWEEPS_DIR, resolve_config_dir

    assert CONF_DIR == REPO / "conf" and SWEEPS_DIR == REPO / "sweeps"
    assert resolve_config_dir("sweeps") == REPO / "sweeps"
