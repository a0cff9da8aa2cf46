"""The workgroup file: the guide's example parses; every wrong key or value is one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from taskq.app.workgroup.config import HealthSpec, RestartSpec, load_config, parse_config
from taskq.domain.errors import ConfigurationError

GUIDE_EXAMPLE = """
actors = "myapp.actors:registry"

[defaults]
poll_interval = 1.0
max_concurrency = 4

[[workers]]
name = "api"
queues = ["default"]
max_concurrency = 8
poll_interval = 0.5

[workers.health]
enabled = true
check_interval = 15
stale_after = 60

[[workers]]
name = "media"
queues = ["media"]
max_concurrency = 2
"""


def test_the_guides_example_parses_with_defaults_applied(tmp_path: Path) -> None:
    path = tmp_path / "workgroup.toml"
    path.write_text(GUIDE_EXAMPLE)
    api, media = load_config(path).workers
    assert (api.name, api.actors, api.queues, api.max_concurrency, api.poll_interval) == (
        "api",
        "myapp.actors:registry",
        ("default",),
        8,
        0.5,
    )
    assert api.health == HealthSpec(enabled=True, check_interval=15.0, stale_after=60.0)
    assert (media.max_concurrency, media.poll_interval, media.health.enabled) == (2, 1.0, False)
    assert load_config(path).restart == RestartSpec()


def test_defaults_health_applies_to_every_worker() -> None:
    config = parse_config(
        {
            "actors": "m:r",
            "defaults": {"health": {"enabled": True, "stale_after": 30}},
            "workers": [{"name": "a"}, {"name": "b", "health": {"enabled": False}}],
        },
        where="f",
    )
    assert [w.health.enabled for w in config.workers] == [True, False]
    assert config.workers[0].health.stale_after == 30.0


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"actors": "m:r", "workers": [{"name": "a"}], "colour": 1}, "f: unknown key 'colour'"),
        (
            {"actors": "m:r", "workers": [{"name": "a", "max_concurency": 2}]},
            "f: workers[0]: unknown key 'max_concurency'",
        ),
        (
            {"actors": "m:r", "defaults": {"nme": "x"}, "workers": [{"name": "a"}]},
            "f: defaults: unknown key 'nme'",
        ),
        (
            {"actors": "m:r", "workers": [{"name": "a", "health": {"stale": 3}}]},
            "f: workers[0] (a).health: unknown key 'stale'",
        ),
        (
            {"actors": "m:r", "restart": {"burst": 1}, "workers": [{"name": "a"}]},
            "restart: unknown",
        ),
        ({"actors": "m:r"}, "at least one [[workers]]"),
        ({"actors": "m:r", "workers": [{"name": "a/b"}]}, "'a/b': use letters"),
        ({"workers": [{"name": "a"}]}, "workers[0] (a).actors: expected a non-empty string"),
        ({"actors": "m:r", "workers": [{"name": "a"}, {"name": "a"}]}, "two workers are named 'a'"),
        ({"actors": "m:r", "workers": [{"name": "a", "max_concurrency": 0}]}, "max_concurrency"),
        ({"actors": "m:r", "workers": [{"name": "a", "queues": []}]}, "queues"),
        ({"actors": "m:r", "workers": [{"name": "a", "poll_interval": True}]}, "poll_interval"),
        (
            {"actors": "m:r", "workers": [{"name": "a", "health": {"stale_after": 5}}]},
            "stale_after (5) must be greater than check_interval (15)",
        ),
    ],
)
def test_a_wrong_file_is_refused_in_one_line(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        parse_config(raw, where="f")
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)


def test_unreadable_or_malformed_files_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read"):
        load_config(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("actors = \n")
    with pytest.raises(ConfigurationError, match="not valid TOML") as refused:
        load_config(bad)
    assert "\n" not in str(refused.value)
