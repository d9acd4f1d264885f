"""The feature hasher (SPEC.md HASH-9, HASH-10): the reference's identity of processed
features, and the component tried as an engine team would — an adapter file of its own in
another folder, graded isolated from there, its failure replayed by the script written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from reference.hasher import FeatureHasher
from spec.errors import InvalidInputError
from tests.conftest import ROOT

IDENTITY = FeatureHasher().feature_identity
ELEMENTS = np.arange(24, dtype=np.float32)


def test_equal_features_in_other_objects_and_layouts_share_an_identity() -> None:
    matrix = ELEMENTS.reshape(4, 6)
    assert IDENTITY(matrix) == IDENTITY(matrix.copy()) == IDENTITY(np.asfortranarray(matrix))
    assert IDENTITY(matrix[:, ::2]) == IDENTITY(np.ascontiguousarray(matrix[:, ::2]))
    # any sequence of arrays is a list of them
    assert IDENTITY([matrix, ELEMENTS]) == IDENTITY((matrix.copy(), ELEMENTS.copy()))


def test_the_bytes_in_another_shape_dtype_or_split_are_another_identity() -> None:
    split = ELEMENTS[:6]
    identities = {
        IDENTITY(ELEMENTS.reshape(6, 4)),
        IDENTITY(ELEMENTS.reshape(4, 6)),
        IDENTITY(split),
        IDENTITY(split.view(np.int32)),
        IDENTITY([split[:2], split[2:]]),
        IDENTITY([split[:1], split[1:]]),
    }
    assert len(identities) == 6


@pytest.mark.parametrize("feature", [b"pixels", "pixels", 3, [np.zeros(2), b"x"], None])
def test_anything_but_an_array_or_a_list_of_arrays_is_a_clear_error(feature: object) -> None:
    with pytest.raises(InvalidInputError, match="an array or a list of arrays"):
        IDENTITY(feature)  # type: ignore[arg-type]


#: An engine team's feature hasher: the bytes alone, as SGLang's ``hash_feature``.
TEAM_ADAPTER = '''
import hashlib

import numpy as np

from spec.adapter import Adapter


class BytesOnly:
    def feature_identity(self, feature):
        arrays = [feature] if isinstance(feature, np.ndarray) else list(feature)
        digest = hashlib.sha256()
        for array in arrays:
            digest.update(np.ascontiguousarray(array).tobytes())
        return digest.hexdigest()


ADAPTER = Adapter(name="team-features", feature_hasher=BytesOnly)
'''


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MMSPEC_HOME")}
    return {**env, "PYTHONPATH": str(ROOT)}


def test_a_teams_feature_hasher_is_graded_from_its_own_folder_and_the_script_reproduces(
    tmp_path: Path,
) -> None:
    team = tmp_path / "team"
    team.mkdir()
    (team / "features_adapter.py").write_text(TEAM_ADAPTER)
    out, scripts = tmp_path / "report.json", tmp_path / "repro"
    graded = subprocess.run(
        [sys.executable, "-m", "properties", "grade", str(team / "features_adapter.py"),
         "--only", "HASH-9", "HASH-10", "--profile", "ci", "--format", "json",
         "--out", str(out), "--reproducers", str(scripts), "--quiet"],
        cwd=team, env=_env(), capture_output=True, text=True, timeout=600, check=False,
    )
    assert graded.returncode == 0, graded.stderr[-3000:]  # graded: the score says the rest
    report = json.loads(out.read_text(encoding="utf-8"))
    (item,) = [i for i in report["items"] if "processed features" in i["name"]]
    assert item["status"] == "failed", item
    assert [f["clause"] for f in item["failures"]] == ["HASH-10"], item["failures"]
    assert "float32 vs its int32 view" in item["failures"][0]["message"]
    (script,) = scripts.glob("repro_hash_feature_different_content*.py")
    replayed = subprocess.run(
        [sys.executable, str(script), str(team / "features_adapter.py")],
        cwd=tmp_path, env=_env(),
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert replayed.returncode == 1, replayed.stdout[-2000:] + replayed.stderr[-2000:]
    assert "REPRODUCED: step 2: feature_hasher.feature_identity(" in replayed.stderr
