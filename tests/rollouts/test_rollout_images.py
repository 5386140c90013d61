"""Image observations (``openenv.types.Image``) through collect, Parquet, the llm policy and the
Gymnasium adapter, against a real local server of ``pixel_env``."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from openenv_rollouts import collect, read_records
from openenv_rollouts.export import to_parquet
from openenv_rollouts.images import images_folder, is_image_ref, load_image

PIXEL = "pixel_env:PixelEnv"
pytestmark = pytest.mark.usefixtures("no_leftover_processes")


def _reply(body: dict[str, Any], n: int) -> Any:
    from openenv_rubrics.testing import Reply

    return Reply('{"n": 1}')


def test_collect_stores_images_as_files_and_the_llm_sees_them(tmp_path: Path) -> None:
    from pixel_env import frame

    from openenv_rubrics.testing import FakeChatServer

    out = tmp_path / "r.jsonl"
    with FakeChatServer(_reply) as chat:
        summary = collect(PIXEL, episodes=2, concurrency=1, seed=1, output=out, policy="llm",
                          llm={"base_url": chat.url, "model": "vision"})
        requests = list(chat.requests)
    assert summary.ok == 2
    records = list(read_records(out))
    assert "base64" not in out.read_text()  # no image inline
    for record in records:
        steps = record["steps"]
        assert [s["observation"]["total"] for s in steps] == [0, 1, 2]
        for step in steps:
            ref = step["observation"]["screen"]
            assert is_image_ref(ref) and ref["media_type"] == "image/png" and (ref["width"], ref["height"]) == (4, 3)
            assert ref["image"].startswith("r.images/") and ref["image"].endswith(".png")
            data = (tmp_path / ref["image"]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == ref["sha256"]
            pixels = load_image(ref, out).to_array()
            assert np.array_equal(pixels, frame(step["observation"]["total"]))
        # The Image | str field: text stays text, an image becomes a file like the others.
        assert steps[0]["observation"]["caption"] == "start" and is_image_ref(steps[1]["observation"]["caption"])
        final = record["final_observation"]
        assert final["total"] == 3 and np.array_equal(load_image(final["screen"], tmp_path).to_array(), frame(3))
    # Content-addressed: two episodes of the same frames store each distinct frame once (totals 0..3).
    assert len(list(images_folder(out).glob("*.png"))) == 4

    # The model got the newest frame as an image part, earlier frames as a note.
    last = requests[-1]["messages"]
    user = [m for m in last if m["role"] == "user"]
    newest, earlier = user[-1]["content"], user[0]["content"]
    assert newest[0]["type"] == "text" and '"screen": "<image: screen, attached>"' in newest[0]["text"]
    urls = [p["image_url"]["url"] for p in newest if p["type"] == "image_url"]
    assert len(urls) == 2 and all(u.startswith("data:image/png;base64,") for u in urls)  # screen, caption
    note = {"type": "text", "text": "(an earlier image, not sent again)"}
    assert not any(p["type"] == "image_url" for p in earlier) and note in earlier

    # Parquet: the bytes travel in the file (no images folder needed).
    import pyarrow.parquet as pq

    rows = pq.read_table(to_parquet(out, tmp_path / "r.parquet")).to_pylist()
    stored = {i["sha256"]: i for i in rows[0]["images"]}
    first = json.loads(rows[0]["steps"][0]["observation"])["screen"]
    assert stored[first["sha256"]]["media_type"] == "image/png"
    assert hashlib.sha256(stored[first["sha256"]]["data"]).hexdigest() == first["sha256"]
    assert len(stored) == 4  # frames 0..3 of the episode


def test_a_missing_or_changed_image_file_is_reported(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    collect(PIXEL, episodes=1, concurrency=1, seed=1, output=out)
    ref = next(read_records(out))["steps"][0]["observation"]["screen"]
    path = tmp_path / ref["image"]
    path.write_bytes(path.read_bytes() + b"x")
    with pytest.raises(ValueError, match="do not match the recorded sha256"):
        load_image(ref, out)
    path.unlink()
    with pytest.raises(FileNotFoundError, match=r"copy the r\.images folder along with the JSONL file"):
        load_image(ref, out)


def test_the_gym_adapter_gives_an_image_field_as_a_box_of_pixels() -> None:
    pytest.importorskip("gymnasium")
    from gymnasium import spaces
    from pixel_env import frame

    from openenv_rollouts.gym import OpenEnvGym

    env = OpenEnvGym(PIXEL, max_episode_steps=5)
    try:
        screen = env.observation_space["screen"]
        assert screen == spaces.Box(0, 255, (3, 4, 3), np.uint8)
        obs, _ = env.reset(seed=0)
        assert env.observation_space.contains(obs) and np.array_equal(obs["screen"], frame(0))
        obs, reward, *_ = env.step(1)
        assert reward == 1.0 and np.array_equal(obs["screen"], frame(1)) and obs["screen"].dtype == np.uint8
    finally:
        env.close()
