"""os-update.json as odd input: mutated records (as os-update writes them) and wholly generated JSON and text,
fed to its one reader and to what reads through it (the hold line, the run record's summary, verify's hold);
nothing but the documented BadRecord may come out (the style of test_odd_input.py)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks import os_update as ou
from test_odd_input import JSON_VALUES, ODD_TEXT, SETTINGS, deep_json, mutated_json

CURRENT = {"m1": {"version": "26.2", "build": "25C56"}, "m2": {"version": "26.2", "build": "25C56"}}
PLAN = {"target": {"version": "26.5.2", "build": "25F84"}, "labels": {"m2": "macOS Tahoe 26.5.2-25F84"},
        "current": CURRENT, "offers": {}, "order": ["m2", "m1"], "install": ["m2", "m1"], "done": [],
        "rank0": "m1", "resumed": False}


def _written() -> dict:
    record = ou.new_record(PLAN, None)
    ou.mark(record, "m2", ou.DONE, before=CURRENT["m2"], after=PLAN["target"])
    ou.mark(record, "m1", ou.STARTED, before=CURRENT["m1"], installed=True)
    return dict(record, inventory="inventory/mine")


RECORD = _written()
RUNS = 0
FOLDER = Path(tempfile.mkdtemp(prefix="os-update-odd-"))


ODD = [None, [], {}, "", 0, -1, 1.5, True, "done", {"status": "done"}, ["25F84"]]


def records():
    return st.one_of(mutated_json(RECORD), mutated_json(RECORD), mutated_json(RECORD),
                     mutated_json(RECORD["macs"]["m1"]).map(lambda m: dict(RECORD, macs={"m1": m})), JSON_VALUES)


def variants(value, seed: int):
    """VALUE, then each of its top-level fields and each field of its first Mac swapped for an odd value
    or dropped (a cheap dozen more inputs per generated one), then the text cut short."""
    yield json.dumps(value)
    if isinstance(value, dict):
        for i, key in enumerate(value):
            for step in (0, 4, 7):
                yield json.dumps(dict(value, **{key: ODD[(seed + i + step) % len(ODD)]}))
            yield json.dumps({k: v for k, v in value.items() if k != key})
        macs = value.get("macs")
        if isinstance(macs, dict) and macs and isinstance(next(iter(macs.values())), dict):
            name, mac = next(iter(macs.items()))
            for i, key in enumerate(mac):
                yield json.dumps(dict(value, macs=dict(macs, **{name: dict(mac, **{key: ODD[(seed + i) % len(ODD)]})})))
    text = json.dumps(value)
    yield text[:seed % (len(text) + 1)]


def read_all(text: str) -> None:
    """Each reader of the record on TEXT: read_record raises BadRecord alone; what read_record accepts, those
    that read through it (the hold, the run record's summary, the interrupt's lines) use without raising."""
    global RUNS
    RUNS += 1
    (FOLDER / ou.RECORD_FILE).write_text(text)
    try:
        record = ou.read_record(FOLDER / ou.RECORD_FILE)
    except ou.BadRecord as exc:
        assert len(exc.lines) == 1 and exc.bad_input
        record = None
    assert record is None or isinstance(record, dict)
    if record is not None:  # else they have nothing to read (None) or catch the BadRecord just seen
        ou.hold_line(FOLDER, "inventory/mine")
        ou.hold_reason(FOLDER)
        ou.record_summary(FOLDER)
        ou.interrupted_lines(record)


@settings(max_examples=250, **SETTINGS)
@given(records(), st.integers(0, 10_000))
def test_every_reader_of_a_malformed_record_raises_bad_record_alone(value, seed):
    for text in variants(value, seed):
        read_all(text)


@settings(max_examples=100, **SETTINGS)
@given(ODD_TEXT | st.integers(1, 50_000).map(deep_json))
def test_text_that_is_no_json_object_is_bad_record(text):
    read_all(text)


def test_the_generated_inputs_were_many():
    print(f"\nos-update.json odd input: {RUNS} inputs")
    assert RUNS >= 5000, RUNS
