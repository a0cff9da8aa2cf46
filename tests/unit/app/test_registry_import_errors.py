"""A registry module that fails to import is named with the error's class and where it
was raised in the application's code: ``taskq worker`` prints one line, no traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from taskq.app.actors import load_registry
from taskq.domain.errors import RegistryError


def test_an_error_raised_while_importing_names_its_class_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = tmp_path / "broken_actors_at_import.py"
    module.write_text('"""Actors."""\n\nraise RuntimeError("boom at import")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RegistryError) as caught:
        load_registry("broken_actors_at_import:registry")
    assert str(caught.value) == (
        "actor registry 'broken_actors_at_import:registry': cannot import "
        "'broken_actors_at_import': RuntimeError: boom at import "
        f"(at {module}:3)"
    )


def test_a_missing_dependency_names_the_import_that_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = tmp_path / "actors_missing_a_dependency.py"
    module.write_text("import json\nimport not_installed_anywhere_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(
        RegistryError,
        match=r"ModuleNotFoundError: No module named "
        r"'not_installed_anywhere_xyz' \(at .*actors_missing_a_dependency.py:2\)$",
    ):
        load_registry("actors_missing_a_dependency:registry")


def test_a_module_that_does_not_exist_has_no_location() -> None:
    with pytest.raises(RegistryError) as caught:
        load_registry("no_such_module_anywhere_xyz:registry")
    message = str(caught.value)
    assert (
        "ModuleNotFoundError: No module named 'no_such_module_anywhere_xyz' (searched: " in message
    )
    assert " (at " not in message


def test_a_module_not_found_under_app_dir_names_the_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))  # load_registry puts app_dir first
    with pytest.raises(RegistryError) as caught:
        load_registry("no_such_module_anywhere_xyz:registry", app_dir=tmp_path)
    message = str(caught.value)
    assert f"(searched: {tmp_path}, " in message
    assert message.endswith("or pass --app-dir DIR")
