"""An unknown WANDB_MODE in the environment is named in one line with the values W&B accepts (issue 31 item 15),
before W&B's own settings validation fails with an error that names neither the variable nor logger.mode."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from gnnq.config.compose import compose_config
from gnnq.errors import GnnqError
from gnnq.track.wandb_logger import WandbLogger, check_wandb_mode_env


def test_unknown_wandb_mode_is_named_with_the_allowed_values(monkeypatch, tmp_path):
    monkeypatch.setenv("WANDB_MODE", "sometimes")
    cfg = compose_config(["logger=wandb"])
    with pytest.raises(GnnqError) as e:
        WandbLogger(OmegaConf.create(OmegaConf.to_container(cfg)), tmp_path)
    line = str(e.value)
    assert "\n" not in line
    assert "WANDB_MODE=sometimes" in line and "online, offline" in line and "logger=none" in line


def test_unknown_wandb_mode_is_a_config_error_before_anything_runs(monkeypatch):
    """gnnq's preflight refuses it (exit 2, nothing written), as every other config error (issue 45.15)."""
    from gnnq.errors import ConfigError
    from gnnq.launch.preflight import plan

    monkeypatch.setenv("WANDB_MODE", "sometimes")
    with pytest.raises(ConfigError, match="WANDB_MODE=sometimes"):
        plan(["logger=wandb"], multirun=False)
    plan(["logger=none"], multirun=False)  # W&B not used: its variable is not W&B's business here


@pytest.mark.parametrize("mode", [None, "offline", "disabled"])
def test_known_or_absent_wandb_mode_passes(monkeypatch, mode):
    if mode is None:
        monkeypatch.delenv("WANDB_MODE", raising=False)
    else:
        monkeypatch.setenv("WANDB_MODE", mode)
    check_wandb_mode_env()
