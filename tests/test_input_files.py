"""Bad input files name themselves and the fix: videos (vrex_lib.video), model folders (runtime.model), and the
atomic writes honour the umask (vrex_lib._io)."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess

import pytest
import torch

from vrex_lib import _io, video
from vrex_lib.config import REPO_ROOT, arg_name, use_notebook_arg_names
from vrex_lib.runtime.model import validate_full_paths

GOOD = REPO_ROOT / "data" / "coin_tiny" / "videos" / "tinyA-ssd01.mp4"


def _fails(path, match):
    with pytest.raises(video.VideoDecodeError, match=match) as e:
        video.read_frames(path)
    msg = str(e.value)
    assert str(path) in msg and "decord" not in msg.lower() and "video_reader" not in msg
    return msg


def test_directory_named_like_a_video(tmp_path):
    (tmp_path / "x.mp4").mkdir()
    _fails(tmp_path / "x.mp4", "is a folder, not a video file")


def test_empty_truncated_and_junk_videos(tmp_path):
    (tmp_path / "empty.mp4").write_bytes(b"")
    _fails(tmp_path / "empty.mp4", r"empty \(0 bytes\).*download it again")
    (tmp_path / "trunc.mp4").write_bytes(GOOD.read_bytes()[:3000])
    _fails(tmp_path / "trunc.mp4", "not a video container.*download it again")
    (tmp_path / "junk.mp4").write_bytes(b"garbage" * 200)
    _fails(tmp_path / "junk.mp4", "not a video container")


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="ffmpeg builds the audio-only file")
def test_audio_only_file(tmp_path):
    p = tmp_path / "audio.mp4"
    subprocess.run(["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", "sine=frequency=440:duration=1",
                    "-c:a", "aac", str(p)], check=True)
    msg = _fails(p, "no video stream")
    assert "audio" in msg and "re-encode" not in msg


def test_unreadable_file(tmp_path, monkeypatch):
    p = tmp_path / "x.mp4"
    p.write_bytes(GOOD.read_bytes())
    p.chmod(0)
    if os.access(p, os.R_OK):  # root reads anything: make open() fail the way it does for a user
        real_open = open

        def deny(f, *a, **k):
            if str(f) == str(p):
                raise PermissionError(13, "Permission denied", str(f))
            return real_open(f, *a, **k)

        monkeypatch.setattr("builtins.open", deny)
        err = video._corrupt(p, RuntimeError("decoder internals"))
    else:
        with pytest.raises(video.VideoDecodeError) as e:
            video.read_frames(p)
        err = e.value
    assert str(p) in str(err) and "Permission denied" in str(err) and "chmod" in str(err)


def _full_folders(tmp_path):
    from safetensors.torch import save_file

    llm_d, vis_d, ck_d = (tmp_path / n for n in ("llm", "vis", "ck"))
    for d in (llm_d, vis_d, ck_d):
        d.mkdir()
    (llm_d / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 64,
                                                   "num_attention_heads": 4, "num_hidden_layers": 2}))
    (vis_d / "config.json").write_text(json.dumps({"model_type": "siglip_vision_model", "hidden_size": 32}))
    (ck_d / "adapter_config.json").write_text(json.dumps({"r": 4, "lora_alpha": 8}))
    save_file({"base_model.model.connector.0.weight": torch.zeros(64, 32)}, str(ck_d / "adapter_model.safetensors"))
    return llm_d, vis_d, ck_d


def test_invalid_config_json_names_the_file(tmp_path):
    llm_d, vis_d, ck_d = _full_folders(tmp_path)
    assert validate_full_paths(llm_d, vis_d, ck_d)["llm"]["hidden_size"] == 64  # the good folders pass
    (vis_d / "config.json").write_text('{"model_type": "siglip", ')  # cut short
    with pytest.raises(ValueError, match="not a valid JSON file") as e:
        validate_full_paths(llm_d, vis_d, ck_d)
    assert str(vis_d / "config.json") in str(e.value) and "--vision-path" in str(e.value)
    (vis_d / "config.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="expected a JSON object"):
        validate_full_paths(llm_d, vis_d, ck_d)


@pytest.mark.parametrize("data", [b"", b"\x10\x00", (10 ** 18).to_bytes(8, "little") + b"{}",
                                  (5).to_bytes(8, "little") + b"nope!"])
def test_empty_or_broken_adapter_safetensors_names_the_file(tmp_path, data):
    llm_d, vis_d, ck_d = _full_folders(tmp_path)
    (ck_d / "adapter_model.safetensors").write_bytes(data)
    with pytest.raises(ValueError) as e:
        validate_full_paths(llm_d, vis_d, ck_d)
    assert str(ck_d / "adapter_model.safetensors") in str(e.value) and "safetensors" in str(e.value)


def test_notebook_messages_name_the_parameter_not_the_flag(tmp_path):
    llm_d, vis_d, ck_d = _full_folders(tmp_path)
    try:
        use_notebook_arg_names()
        with pytest.raises(ValueError, match="VISION_PATH") as e:
            validate_full_paths(llm_d, None, ck_d)
        assert "--vision-path" not in str(e.value)
        with pytest.raises(FileNotFoundError, match="the notebook parameter VISION_PATH"):
            validate_full_paths(llm_d, tmp_path / "nope", ck_d)
        assert arg_name("--coin-root") == "the notebook parameter COIN_ROOT"
    finally:
        use_notebook_arg_names(False)
    with pytest.raises(ValueError, match="--vision-path"):
        validate_full_paths(llm_d, None, ck_d)


def test_atomic_writes_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        for mask, mode in ((0o022, 0o644), (0o077, 0o600), (0o002, 0o664)):
            os.umask(mask)
            p = _io.write_json(tmp_path / f"x{mask}.json", {"a": 1})
            assert stat.S_IMODE(p.stat().st_mode) == mode and json.loads(p.read_text()) == {"a": 1}
    finally:
        os.umask(old)
    # a failed write leaves the old file and no temp file behind
    p = _io.write_text(tmp_path / "keep.txt", "old")
    with pytest.raises(TypeError):
        _io.write_bytes(p, "not bytes")  # type: ignore[arg-type]
    assert p.read_text() == "old" and [q.name for q in tmp_path.glob(".keep*")] == []


def test_report_and_trace_files_follow_the_umask(tmp_path):
    import pandas as pd

    from vrex_lib import report
    from vrex_lib.coin import SkipLog

    old = os.umask(0o027)
    try:
        report.write_frame("d", pd.DataFrame({"a": [1]}), out=tmp_path)
        report.write_table("t", [report.info_row("c", "q", "u", 1.0)], profile="smoke", out=tmp_path)
        report.build_report(tmp_path)
        SkipLog().write(tmp_path / "s.skips.csv")
        files = [tmp_path / "data" / "d.csv", tmp_path / "tables" / "t.csv", tmp_path / "REPORT.md",
                 tmp_path / "s.skips.csv"]
        for p in files:
            assert stat.S_IMODE(p.stat().st_mode) == 0o640, p
    finally:
        os.umask(old)


def test_damaged_tables_are_listed_not_a_traceback(tmp_path, capsys):
    from vrex_lib import report

    report.write_table("good", [report.info_row("c", "q", "u", 1.0)], profile="smoke", out=tmp_path)
    (tmp_path / "tables" / "empty.csv").write_text("")
    (tmp_path / "tables" / "other.csv").write_text("a,b\n1,2\n")
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    assert report.main(["--results", str(tmp_path), "--notebooks", str(nbs)]) == 1
    err = capsys.readouterr().err
    assert "empty.csv: unreadable" in err and "other.csv" not in err  # a table without verdicts is no damage
    text = (tmp_path / "REPORT.md").read_text()
    assert "`results/tables/empty.csv`: unreadable" in text and "| `c` — q |" in text
    assert report.main(["--results", str(tmp_path), "--notebooks", str(tmp_path / "nope")]) == 2
    assert "notebook folder" in capsys.readouterr().err


def test_notebook_setup_checks_the_results_folder_first(tmp_path):
    from vrex_lib import notebook

    blocker = tmp_path / "file"
    blocker.write_text("")
    try:
        with pytest.raises(PermissionError, match="the notebook parameter RESULTS_DIR: cannot write in"):
            notebook.setup("smoke", str(blocker / "results"))
    finally:
        use_notebook_arg_names(False)


def test_tables_of_several_profiles_are_flagged(tmp_path, capsys):
    from vrex_lib import report

    report.write_table("a", [report.info_row("c", "q", "u", 1.0)], profile="default", out=tmp_path)
    report.write_table("b", [report.info_row("c", "q", "u", 1.0)], profile="smoke", out=tmp_path)
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    assert report.main(["--results", str(tmp_path), "--notebooks", str(nbs)]) == 1
    assert "profile smoke produced b" in capsys.readouterr().err
    assert "tables from several profiles (default: a; smoke: b)" in (tmp_path / "REPORT.md").read_text()
    (tmp_path / "tables" / "b.csv").unlink()
    assert report.main(["--results", str(tmp_path), "--notebooks", str(nbs)]) == 0


@pytest.mark.parametrize("value", ["abc", "0", "-2", "1.5", "2x"])
def test_bad_vrex_threads_is_one_line_naming_it(tmp_path, monkeypatch, value):
    from vrex_lib import notebook
    from vrex_lib.config import torch_threads

    monkeypatch.setenv("VREX_THREADS", value)
    with pytest.raises(ValueError, match=r"VREX_THREADS=.* is not a torch thread count: set it to a whole number"):
        torch_threads()
    try:
        with pytest.raises(ValueError, match="VREX_THREADS"):
            notebook.setup("smoke", str(tmp_path / "results"))
    finally:
        use_notebook_arg_names(False)


def test_vrex_threads_unset_empty_or_a_count(monkeypatch):
    from vrex_lib.config import torch_threads

    monkeypatch.delenv("VREX_THREADS", raising=False)
    assert torch_threads() == 1 and torch_threads(default=3) == 3
    monkeypatch.setenv("VREX_THREADS", "")
    assert torch_threads() == 1
    monkeypatch.setenv("VREX_THREADS", " 4 ")
    assert torch_threads() == 4
