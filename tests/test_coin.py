"""COIN annotations, the five task builders and the Top-1 metric (vrex_lib.coin)."""
from __future__ import annotations

import csv
import importlib.util
import json
import re
import sys
import warnings

import pytest

from vrex_lib import coin, video
from vrex_lib.config import REPO_ROOT

TINY = REPO_ROOT / "data" / "coin_tiny" / "COIN.json"


def _entry(steps, *, cls="ChangeCarTire", subset="testing", duration=60.0, start=0.0, end=None):
    return {"recipe_type": 13, "class": cls, "subset": subset, "start": start, "end": end or duration,
            "duration": duration,
            "annotation": [{"id": str(i), "segment": list(seg), "label": lab} for i, (seg, lab) in enumerate(steps)]}


def _write(tmp_path, db, name="COIN.json"):
    p = tmp_path / name
    p.write_text(json.dumps({"database": db}))
    return p


@pytest.fixture(scope="module")
def tiny():
    return coin.load_annotations(TINY)


# ------------------------------------------------------------------------------------------ names


@pytest.mark.parametrize("camel, words", [
    ("PutOnHair", "put on hair"),
    ("ReplaceCDDriveWithSSD", "replace CD drive with SSD"),
    ("ReplaceSIMCard", "replace SIM card"),
    ("MakeRJ45Cable", "make RJ45 cable"),
    ("InstallTVStand", "install TV stand"),
    ("PlayNBAGame", "play NBA game"),
    ("ChangeCarTire", "change car tire"),
])
def test_clean_task_name(camel, words):
    assert coin.clean_task_name(camel) == words


def test_step_label_fix_and_normalize():
    assert coin.clean_step_label("process (crop, fold) paper") == "crop and fold paper"
    assert coin.clean_step_label("dig a hole") == "dig a hole"
    assert coin.normalize("  2. Take out the CD drive. ") == "take out the cd drive"
    assert coin.normalize("1.5 litres.") == "1.5 litres"  # a number that is not a list prefix stays


# ------------------------------------------------------------------------------------------ loading


def test_load_tiny(tiny):
    assert list(tiny) == ["tinyA-ssd01", "tinyB-ssd02", "tinyC-plane1", "tinyD-tire01"]
    b = tiny["tinyB-ssd02"]
    assert (b.task_class, b.task, b.subset, b.recipe_type) == ("ReplaceCDDriveWithSSD", "replace CD drive with SSD",
                                                               "testing", 131)
    assert [s.label for s in tiny["tinyC-plane1"].steps][0] == "crop and fold paper"
    assert all(x.start <= y.start for a in tiny.values() for x, y in zip(a.steps, a.steps[1:]))


def test_malformed_json_names_file(tmp_path):
    p = tmp_path / "COIN.json"
    p.write_text('{"database": {"abc": ')
    with pytest.raises(coin.CoinFormatError, match=r"COIN\.json.*not valid JSON.*line 1"):
        coin.load_annotations(p)
    p.write_text('{"videos": {}}')
    with pytest.raises(coin.CoinFormatError, match="no top-level 'database'"):
        coin.load_annotations(p)
    with pytest.raises(FileNotFoundError, match="make data"):
        coin.load_annotations(tmp_path / "nope.json")


def test_non_utf8_annotations_name_the_file_and_the_fix(tmp_path):
    p = tmp_path / "COIN.json"
    p.write_bytes('{"database": {"v": {"class": "Caf\u00e9"}}}'.encode("latin-1"))  # é as one Latin-1 byte
    with pytest.raises(coin.CoinFormatError,
                       match=rf"{re.escape(str(p))}: not UTF-8 text \(byte 0xe9 at offset 33.*save it as UTF-8"):
        coin.load_annotations(p)
    p.write_bytes('{"database": {}}'.encode("utf-16"))  # UTF-16 with a BOM is still JSON that json reads
    assert coin.load_annotations(p) == {}


def test_bad_entry_raises_or_is_counted(tmp_path):
    good = _entry([((1, 5), "loosen the nuts"), ((6, 9), "jack up the car")])
    missing = {k: v for k, v in good.items() if k != "duration"}
    outside = _entry([((1, 5), "loosen the nuts"), ((70, 75), "jack up the car")], duration=60.0)
    past_end = _entry([((1, 5), "loosen the nuts"), ((50, 61.5), "jack up the car")], duration=60.0)
    p = _write(tmp_path, {"good": good, "nodur": missing, "outside": outside, "pastend": past_end})
    with pytest.raises(coin.CoinFormatError, match=r"'nodur'.*missing field.*duration"):
        coin.load_annotations(p)
    log = coin.SkipLog()
    ann = coin.load_annotations(p, skip_log=log)
    assert list(ann) == ["good", "pastend"]
    assert log.count("skip") == 2 and log.count("clamp") == 1
    assert {e[0] for e in log.entries if e[2] == "skip"} == {"nodur", "outside"}
    assert "outside the video" in next(e[3] for e in log.entries if e[0] == "outside")
    out = log.write(tmp_path / "res" / "coin_skips.csv")
    rows = list(csv.reader(out.open()))
    assert rows[0] == ["video_id", "stage", "action", "reason"] and len(rows) == 4
    # The step past the video's end keeps its annotated time and is clamped to the duration when frames are picked.
    s = coin.build_task(ann, "step", "testing")[-1]
    assert s.end == 61.5 and s.frame_range()[-1] == 120


def test_validation_subset_is_testing_with_warning(tmp_path):
    p = _write(tmp_path, {"v1": _entry([((1, 5), "loosen the nuts")], subset="validation"),
                          "v2": _entry([((1, 5), "loosen the nuts")], subset="Training")})
    with pytest.warns(UserWarning, match="1 video.*subset 'validation'.*treated as 'testing'"):
        ann = coin.load_annotations(p)
    assert (ann["v1"].subset, ann["v2"].subset) == ("testing", "training")


def test_segment_outside_video_raises(tmp_path):
    p = _write(tmp_path, {"vid1": _entry([((10, 5), "loosen the nuts")])})
    with pytest.raises(coin.CoinFormatError, match=r"COIN\.json: video 'vid1'.*outside the video.*reversed"):
        coin.load_annotations(p)


# ------------------------------------------------------------------------------------------ tasks


def test_task_counts_and_shapes_tiny(tiny):
    n = {t: len(coin.build_task(tiny, t, "testing")) for t in coin.TASKS}
    # tinyB has 4 steps, tinyC 3: step 4+3, next/procedure 3+2, task 2.
    assert n == {"step": 7, "next": 5, "task": 2, "procedure": 5, "taskprocedure": 5}
    assert len(coin.build_task(tiny, "step", "training")) == 5
    for t in coin.TASKS:
        for s in coin.build_task(tiny, t, "testing"):
            assert s.task == t and s.split == "testing" and s.prompt and s.answer
            assert isinstance(s.target, tuple if t in coin.PROCEDURE_TASKS else str)
            assert all(x in s.categories for x in s.targets)
            assert 0 <= s.start <= s.end and s.num_frames() >= 1
            assert s.frame_range()[-1] <= int(s.duration * 2.0)


def test_sample_construction_pinned(tiny):
    step = coin.build_task(tiny, "step", "testing")[1]
    assert step.sample_id == "step/tinyB-ssd02/1"
    assert (step.start, step.end) == (4.0, 7.3)
    assert step.frame_range() == range(8, 16)  # ceil(4.0*2)=8 .. ceil(7.3*2)=15 inclusive
    assert step.target == "Take out the laptop cd drive." and step.prompt == coin.PROMPT_STEP
    nxt = coin.build_task(tiny, "next", "testing")[0]
    assert (nxt.start, nxt.end, nxt.target) == (0.5, 3.5, "Take out the laptop cd drive.")
    task = coin.build_task(tiny, "task", "testing")[0]
    assert (task.start, task.end, task.target) == (0.0, 16.0, "Replace cd drive with ssd.")
    # the vocabulary is the testing split's own (ChangeCarTire is a training video)
    assert task.categories == ("Make paper airplane.", "Replace cd drive with ssd.")
    assert task.vocab == ("make paper airplane", "replace cd drive with ssd") and task.labels == (
        "replace cd drive with ssd",)
    proc = coin.build_task(tiny, "procedure", "testing")
    assert proc[0].target == ("Take out the laptop cd drive.", "Insert the caddy into the laptop.",
                              "Screw the back cover.")
    assert proc[0].answer == ("1. Take out the laptop cd drive.\n2. Insert the caddy into the laptop.\n"
                              "3. Screw the back cover.")
    assert proc[0].prompt.startswith("What is the next 3 actions for the video?")
    assert proc[2].prompt == coin.PROMPT_NEXT and proc[2].answer == "Screw the back cover."  # one step left
    tp = coin.build_task(tiny, "taskprocedure", "testing")
    assert tp[0].prompt.startswith("To replace CD drive with SSD, what is the next 3 actions")
    assert tp[2].prompt.startswith("To replace CD drive with SSD, what is the next action for the video?")
    assert [s.target for s in tp] == [s.target for s in proc]


def test_procedure_at_most_five_steps(tmp_path):
    steps = [((10 * i, 10 * i + 5), f"step number {i}") for i in range(8)]
    ann = coin.load_annotations(_write(tmp_path, {"v": _entry(steps, duration=90.0)}))
    proc = coin.build_task(ann, "procedure", "testing")
    assert [len(s.target) for s in proc] == [5, 5, 5, 4, 3, 2, 1]
    assert proc[0].target[0] == "Step number 1." and proc[0].target[-1] == "Step number 5."


def test_split_and_task_errors(tiny):
    assert len(coin.build_task(tiny, "task", "test")) == 2
    with pytest.warns(UserWarning, match="calls the evaluation split 'testing'"):
        assert len(coin.build_task(tiny, "task", "validation")) == 2
    with pytest.raises(ValueError, match="unknown COIN split 'dev'"):
        coin.build_task(tiny, "task", "dev")
    with pytest.raises(ValueError, match="unknown COIN task 'caption'.*step, next, task, procedure"):
        coin.build_task(tiny, "caption", "testing")


# ------------------------------------------------------------------------------------------ metric

CATS = ("Loosen the nuts.", "Jack up the car.", "Remove the tire.", "Install the new tire.", "Tighten the nuts.")


@pytest.mark.parametrize("pred, label, ok", [
    ("Remove the tire.", "Remove the tire.", True),
    ("remove the tire", "Remove the tire.", True),
    ("Remove the tyre", "Remove the tire.", True),  # near miss: nearest category is the label
    ("Remove the tires and rims", "Remove the tire.", True),
    ("Install a new tire", "Remove the tire.", False),  # nearest is another category
    ("Loosen nuts", "Tighten the nuts.", False),
    ("", "Jack up the car.", False),  # equidistant: ties go to the first category, "Loosen the nuts."
])
def test_fuzzy_match(pred, label, ok):
    assert coin.fuzzy_match(pred, label, CATS) is ok


def _samples(task, targets):
    return [coin.Sample(f"{task}/v/{i}", "v", task, "testing", 0.0, 1.0, 10.0, "q", t,
                        "\n".join(t) if isinstance(t, tuple) else t, CATS) for i, t in enumerate(targets)]


def test_score_single_answer():
    s = _samples("step", ["Remove the tire.", "Jack up the car.", "Tighten the nuts."])
    assert coin.score("step", ["remove the tyre.", "jack up car", "Loosen the nuts."], s,
                      metric="strict") == pytest.approx(200 / 3)
    assert coin.score("step", [x.target for x in s], s, metric="strict") == 100.0


def test_score_procedure_per_step_position():
    s = _samples("procedure", [("Jack up the car.", "Remove the tire.", "Install the new tire."),
                               ("Tighten the nuts.",)])
    preds = ["1. Jack up the car.\n2. Install the new tire.\n\n3. Install new tire\n4. Tighten the nuts.",
             "Tighten nuts."]
    # sample 0: positions 1 and 3 right, 2 wrong (extra 4th line ignored); sample 1: right -> 3 of 4 steps.
    assert coin.score("procedure", preds, s, metric="strict") == 75.0
    # too few lines count as wrong
    assert coin.score("procedure", ["Jack up the car.", ""], s, metric="strict") == 25.0


def test_score_errors():
    s = _samples("step", ["Remove the tire."])
    with pytest.raises(ValueError, match="2 predictions for 1 samples"):
        coin.score("step", ["a", "b"], s)
    with pytest.raises(ValueError, match="samples of another task"):
        coin.score("next", ["a"], s)
    with pytest.raises(ValueError, match="unknown COIN task"):
        coin.score("nope", ["a"], s)
    with pytest.raises(ValueError, match="unknown COIN metric 'exact'"):
        coin.score("step", ["a"], s, metric="exact")
    with pytest.raises(ValueError, match="no labels/vocabulary"):
        coin.score("step", ["a"], s)  # hand-made Sample without VideoLLM-online labels


# ------------------------------------------------------------------------------------------ VideoLLM-online metric
# Hand-computed cases of compute_metrics (showlab/videollm-online data/coin/benchmarks.py).

VOCAB = ("jack up the car", "loosen the nuts", "remove the tire", "tighten the nuts")


def _vs(task, labels):
    """Samples with VideoLLM-online labels (lower case) over VOCAB."""
    out = []
    for i, lab in enumerate(labels):
        lab = tuple(lab) if isinstance(lab, (tuple, list)) else (lab,)
        tgt = tuple(coin.as_category(x) for x in lab)
        out.append(coin.Sample(f"{task}/v/{i}", "v", task, "testing", 0.0, 1.0, 10.0, "q",
                               tgt if task in coin.PROCEDURE_TASKS else tgt[0], "", CATS, labels=lab, vocab=VOCAB))
    return out


def test_vlo_single_answer_lower_rstrip_and_nearest():
    s = _vs("step", ["remove the tire", "jack up the car", "tighten the nuts"])
    # "Remove the tire..." -> lower + rstrip('.') == label; " jack up the car." keeps its space: distance 1 to the
    # label (nearest); "loosen the nuts" is itself a label -> wrong. 2 of 3.
    assert coin.score("step", ["Remove the tire...", " jack up the car.", "loosen the nuts"], s) == pytest.approx(
        200 / 3, abs=1e-12)
    assert coin.score_counts("step", ["Remove the tire...", " jack up the car.", "loosen the nuts"], s) == (2, 3)


def test_vlo_ties_go_to_smallest_label():
    vocab = ("abc", "abd")
    s = [coin.Sample("step/v/0", "v", "step", "testing", 0, 1, 10, "q", "Abd.", "", (), labels=("abd",),
                     vocab=vocab)]
    assert coin.nearest_label("abx", vocab) == "abc"   # distance 1 to both: smallest label wins
    assert coin.score("step", ["abx"], s) == 0.0
    assert coin.nearest_label("abx", ("abd", "abc")) == "abc"  # independent of vocabulary order


def test_vlo_procedure_checkpoint_format_and_min_denominator():
    labels = ("jack up the car", "remove the tire", "tighten the nuts")
    s = _vs("procedure", [labels])
    perfect = "1. Jack up the car.\n2. Remove the tire.\n3. Tighten the nuts."
    # each line: split('. ')[-1] -> "Jack up the car." (capital, dot kept): never equal, but nearest is right
    assert coin.score_counts("procedure", [perfect], s) == (3, 3)
    # one line for three targets: zip stops after one -> denominator 1
    assert coin.score_counts("procedure", ["Jack up the car."], s) == (1, 1)
    # a blank line is kept and takes position 2: "" is 15 edits from three labels, the tie goes to the
    # smallest, "jack up the car" != "remove the tire" -> 2 of 3 (strict drops the blank line: 1 of 3 positions
    # match, "3. Tighten the nuts." lands on position 2)
    c, t = coin.score_counts("procedure", ["1. Jack up the car.\n\n3. Tighten the nuts."], s)
    assert (c, t) == (2, 3)
    assert coin.score_counts("procedure", ["1. Jack up the car.\n\n3. Tighten the nuts."], s, "strict") == (1, 3)
    # '. ' split keeps only the last piece: "Step 1. Loosen. Remove the tire." -> "Remove the tire."
    assert coin.score_counts("procedure", ["tighten the nuts\nStep 1. Loosen. Remove the tire."], s) == (1, 2)
    # strict differs: normalised, blank lines dropped, denominator = all targets
    assert coin.score("procedure", ["Jack up the car."], s, metric="strict") == pytest.approx(100 / 3)


def test_vlo_perfect_answers_can_score_below_100():
    # The checkpoint's answer form (capital letter, final dot) can be nearer to another label:
    # line 1 "Ab.": d(.., "ab") = 2 but d(.., "b.") = 1 -> wrong; line 2 "B..": d(.., "b.") = 2 < d(.., "ab") = 3.
    vocab = ("ab", "b.")
    s = [coin.Sample("procedure/v/0", "v", "procedure", "testing", 0, 1, 10, "q", ("Ab.", "B..."), "", (),
                     labels=("ab", "b."), vocab=vocab)]
    assert coin.score_counts("procedure", ["1. Ab.\n2. B.."], s) == (1, 2)
    assert coin.score("procedure", ["1. Ab.\n2. B.."], s, metric="strict") == 100.0


# ------------------------------------------------------------------------------------------ files


def test_missing_video_error_and_skip(tmp_path, tiny):
    with pytest.raises(coin.MissingVideoError, match=r"video 'zzz'.*no file"):
        coin.video_path(tmp_path, "zzz")
    (tmp_path / "tinyB-ssd02.mp4").write_bytes(b"")
    log = coin.SkipLog()
    kept = coin.filter_available(coin.build_task(tiny, "step", "testing"), tmp_path, log)
    assert {s.video_id for s in kept} == {"tinyB-ssd02"} and len(kept) == 4
    assert [e[0] for e in log.entries] == ["tinyC-plane1"] and "1 skipped at video file" in log.summary()


def test_dataset_paths(tmp_path):
    js, vids = coin.dataset_paths("smoke")
    assert js == TINY and vids.is_dir()
    with pytest.raises(ValueError, match="unknown profile"):
        coin.dataset_paths("huge")
    with pytest.raises(ValueError, match="needs coin_root"):
        coin.dataset_paths("full")
    with pytest.raises(FileNotFoundError, match="COIN.json not found"):
        coin.dataset_paths("full", tmp_path)
    (tmp_path / "COIN.json").write_text("{}")
    (tmp_path / "videos").mkdir()
    assert coin.dataset_paths("full", tmp_path) == (tmp_path / "COIN.json", tmp_path / "videos")


def test_task_stats_with_approx_tokens(tiny):
    by = coin.build_all(tiny, "testing")
    df = coin.task_stats(by, coin.approx_token_count, "approx")
    assert list(df["task"]) == [*coin.TASKS, "all"]
    assert df.set_index("task").loc["all", "n_samples"] == sum(len(v) for v in by.values())
    # PROMPT_STEP has 15 words -> ceil(15 * 1.3) = 20 tokens.
    assert df.set_index("task").loc["step", "avg_question_tokens"] == 20
    assert coin.approx_token_count("one two three") == 4


def test_no_warning_for_official_names(tiny):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        coin.build_task(tiny, "step", "testing")


# ------------------------------------------------------------------------------------------ the fixture script

def _load_script():
    spec = importlib.util.spec_from_file_location("make_coin_mini", REPO_ROOT / "data" / "make_coin_mini.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("make_coin_mini", mod)  # dataclasses resolve their module by name
    spec.loader.exec_module(mod)
    return mod


mcm = _load_script()


def test_spec_is_deterministic_and_coin_shaped(tmp_path):
    a, plan = mcm.mini_spec()
    assert a == mcm.mini_spec()[0]
    db = a["database"]
    assert 6 <= len(db) <= 8 and {e["subset"] for e in db.values()} == {"training", "testing"}
    assert "ReplaceCDDriveWithSSD" in {e["class"] for e in db.values()}
    for vid, e in db.items():
        assert 20 <= e["duration"] <= 60 and 3 <= len(e["annotation"]) <= 5
        segs = [x["segment"] for x in e["annotation"]]
        assert all(0 <= s < t <= e["duration"] for s, t in segs)
        assert all(t0 <= s1 for (_, t0), (s1, _) in zip(segs, segs[1:]))  # ordered, non-overlapping
    p = tmp_path / "COIN.json"
    p.write_text(json.dumps(a))
    ann = coin.load_annotations(p)
    assert all(len(coin.build_task(ann, t, "testing")) > 0 for t in coin.TASKS)


def test_every_label_has_a_shot():
    tiny = json.loads((REPO_ROOT / "data" / "coin_tiny" / "COIN.json").read_text())["database"]
    labels = {x["label"] for e in tiny.values() for x in e["annotation"]}
    labels |= {lab for _, labs in mcm.TASKS.values() for lab in labs}
    assert labels <= set(mcm.SHOTS)


@pytest.mark.skipif(not (REPO_ROOT / "data" / "coin_mini" / "COIN.json").exists(), reason="run `make data` first")
def test_built_fixture_matches_spec_and_decodes():
    root = REPO_ROOT / "data" / "coin_mini"
    assert json.loads((root / "COIN.json").read_text()) == mcm.mini_spec()[0]
    ann = coin.load_annotations(root / "COIN.json")
    for vid, a in ann.items():
        info = video.probe(coin.video_path(root / "videos", vid))
        assert (info.width, info.height) == mcm.MINI_SIZE
        assert abs(info.last_time - a.duration) <= 1.0 / mcm.MINI_FPS + 1e-3  # a frame exists at ~duration


# ------------------------------------------------------------------------------------------ parsing rules


def test_steps_keep_file_order(tmp_path):
    steps = [((20, 25), "second in time"), ((1, 5), "first in time")]
    ann = coin.load_annotations(_write(tmp_path, {"v": _entry(steps)}))
    assert [st.label for st in ann["v"].steps] == ["second in time", "first in time"]
    nxt = coin.build_task(ann, "next", "testing")
    assert nxt[0].labels == ("first in time",) and (nxt[0].start, nxt[0].end) == (20.0, 25.0)


def test_duplicate_video_id_is_an_error_naming_file_and_id(tmp_path):
    one = json.dumps(_entry([((1, 2), "a")]))
    p = tmp_path / "COIN.json"
    p.write_text('{"database": {"vidX": %s, "vidY": %s, "vidX": %s}}' % (one, one, one))
    with pytest.raises(coin.CoinFormatError, match=r"COIN.json: duplicate video id 'vidX'.*Remove or rename"):
        coin.load_annotations(p)
    with pytest.raises(coin.CoinFormatError, match="duplicate video id 'vidX'"):
        coin.load_annotations(p, coin.SkipLog())  # not a per-entry problem: never skipped silently


def test_vocabulary_follows_split_and_available_videos(tiny):
    both = coin.build_task(tiny, "step", "testing")
    assert "Unscrew the back cover." in both[0].categories and "Loosen the nuts." not in both[0].categories
    only_c = coin.build_task(tiny, "step", "testing", available={"tinyC-plane1"})
    assert {s.video_id for s in only_c} == {"tinyC-plane1"}
    assert only_c[0].vocab == ("crop and fold paper", "fold the wings", "throw the airplane")


def test_span_frames_truncate_like_the_reference():
    # end clamped to a duration off the 2 fps grid: int(12.3456 * 2) = 24 (round would give 25)
    assert coin.span_frame_range(10.0, 20.0, 12.3456) == range(20, 25)
    assert coin.span_frame_range(4.0, 7.3, 16.5) == range(8, 16)


# ------------------------------------------------------------------------------------------ decoded length (D59)

def test_spans_clamp_to_the_decoded_length_as_videollm_online(tmp_path):
    """Hand-computed against VideoLLM-online's rule (data/coin/benchmarks.py with COIN.get_metadata's duration
    (len(frames) - 1) / fps): COIN.json says 60 s, the file decodes to 41.5 s."""
    p = _write(tmp_path, {"v": _entry([((1, 5), "loosen the nuts"), ((40.2, 59.0), "jack up the car")])})
    ann = coin.load_annotations(p)
    by_json = coin.build_task(ann, "step", "testing")[1]
    assert by_json.frame_range() == range(81, 119)  # ceil(80.4)=81 .. int(59 * 2)=118 under 60 s
    dec = coin.build_task(ann, "step", "testing", durations={"v": 41.5})[1]
    # start_time = min(ceil(80.4) / 2, 41.5) = 40.5, end_time = min(118 / 2, 41.5) = 41.5 -> int(81) .. int(83)
    assert dec.frame_range() == range(81, 84) and dec.duration == 41.5
    assert by_json.with_duration(41.5) == dec  # the same sample, clamped afterwards
    assert (dec.start, dec.end) == (40.2, 59.0)  # the annotated times are kept; only the clamp moved
    # a span that starts past the decoded end still shows the last frame, as the reference's range does
    late = coin.build_task(ann, "step", "testing", durations={"v": 30.0})[1]
    assert late.frame_range() == range(60, 61)
    with pytest.raises(ValueError, match="no decoded duration for video"):
        coin.build_task(ann, "step", "testing", durations={})
    with pytest.raises(ValueError, match="not a length in seconds"):
        dec.with_duration(float("nan"))


def test_decoded_duration_is_that_of_the_2fps_video(tmp_path):
    clip = REPO_ROOT / "data" / "coin_tiny" / "videos" / "tinyC-plane1.mp4"
    info = video.probe(clip)
    # default: the video ffmpeg's -r 2 writes (VideoLLM-online's preprocessing): its last frame outlives the grid's
    d = coin.decoded_duration(clip)
    frames, _ = video.read_frames(clip, fps=2.0, max_side=32, sampling="ffmpeg")
    assert (len(frames) - 1) / 2.0 == d == (video.resampled_count(clip, 2.0) - 1) / 2  # (len(frames) - 1) / fps
    assert d > info.last_time  # 8 fps source: the last source frame lasts until 12.125 s and fills one more frame
    # 'grid': the last whole point of the 2 fps grid with a decoded frame
    g = coin.decoded_duration(clip, sampling="grid")
    assert g == int(info.last_time * 2 + 1e-6) / 2
    frames, _ = video.read_frames(clip, fps=2.0, max_side=32)
    assert (len(frames) - 1) / 2.0 == g
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"\x00" * 64)
    with pytest.raises(video.VideoDecodeError, match="junk.mp4"):
        coin.decoded_duration(junk)


def test_a_fifo_or_folder_is_not_a_video_file(tmp_path):
    import os

    os.mkfifo(tmp_path / "a.mp4")
    (tmp_path / "b.mp4").mkdir()
    for vid in ("a", "b"):
        with pytest.raises(coin.MissingVideoError, match=f"{vid}.mp4 is not a regular file"):
            coin.video_path(tmp_path, vid)
