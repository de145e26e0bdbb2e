"""Candidate validation on tiny real safetensors checkpoints (each check fails when broken)."""
from __future__ import annotations

import json
import os
import struct

from rlhealth.audit.safefs import Root
from rlhealth.audit.weights import read_header, validate_weights


def _by(checks):
    out = {}
    for c in checks:
        out.setdefault(c["check"], []).append(c)
    return {k: v[0]["status"] if len(v) == 1 else [x["status"] for x in v] for k, v in out.items()}, checks


def _validate(d):
    root = Root("export", d)
    checks, size = validate_weights(root, d)
    return _by(checks)[0], checks, size, root


def test_complete_export_passes_and_size_comes_from_tensor_shapes(tmp_path, B):
    d = tmp_path / "m"
    params = B.write_model(d, layers=2, hidden=8, vocab=16, shards=2)
    st, checks, size, _ = _validate(d)
    assert st == {"shards_present": "pass", "shard_header": "pass", "weight_map_resolves": "pass",
                  "shard_naming": "pass", "total_size": "pass", "size_crosscheck": "pass",
                  "config_matches_tensors": "pass"}, checks
    assert size["parameters"] == params == 12 * 2 * 8 * 8 + 2 * 16 * 8
    assert size["estimate"] == params and size["estimate_disagreement"] == 0
    assert size["label"] == f"<1B ({params} parameters)"


def test_missing_shard_is_reported(tmp_path, B):
    d = tmp_path / "m"
    B.write_model(d, shards=3, drop_shard=2)
    st, checks, size, _ = _validate(d)
    assert st["shards_present"] == "fail" and "model-00002-of-00003.safetensors" in str(checks)
    assert st["weight_map_resolves"] == "fail"
    assert size is None


def test_index_total_size_lie_is_reported(tmp_path, B):
    d = tmp_path / "m"
    B.write_model(d, total_size_delta=4096)
    st, checks, _, _ = _validate(d)
    assert st["total_size"] == "fail"
    assert "total_size=" in next(c["detail"] for c in checks if c["check"] == "total_size")


def test_truncated_header_is_reported(tmp_path, B):
    d = tmp_path / "m"
    B.write_model(d, shards=2)
    shard = d / "model-00001-of-00002.safetensors"
    data = shard.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    shard.write_bytes(data[: 8 + n // 2])
    st, checks, _, _ = _validate(d)
    assert st["shard_header"] == "fail"
    assert "truncated header" in str(checks)


def test_truncated_data_region_is_reported(tmp_path, B):
    d = tmp_path / "m"
    B.write_model(d, shards=1)
    shard = d / "model-00001-of-00001.safetensors"
    shard.write_bytes(shard.read_bytes()[:-4])
    st, checks, _, _ = _validate(d)
    assert st["shard_header"] == "fail" and "beyond the data region" in str(checks)


def test_config_disagreeing_with_tensors(tmp_path, B):
    d = tmp_path / "m"
    B.write_model(d, config={"hidden_size": 4096, "num_hidden_layers": 32, "vocab_size": 151936})
    st, checks, size, _ = _validate(d)
    assert st["config_matches_tensors"] == "fail"
    assert st["size_crosscheck"] == "warn"
    assert size["parameters"] == 12 * 2 * 64 + 2 * 16 * 8  # the summed value is kept
    assert size["estimate"] == 12 * 32 * 4096 ** 2 + 2 * 151936 * 4096


def test_size_within_tolerance_passes_and_beyond_warns(tmp_path, B):
    d = tmp_path / "m"
    # 12*L*H^2 + 2*V*H with V=17 instead of 16 differs by 16/(1536+256) < 15%: pass, not warn
    B.write_model(d, config={"vocab_size": 17})
    st, _, _, _ = _validate(d)
    assert st["size_crosscheck"] == "pass"
    assert st["config_matches_tensors"] == "fail"  # embedding shape still disagrees


def test_huge_header_length_is_not_trusted(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    (d / "model.safetensors").write_bytes(struct.pack("<Q", 1 << 62) + b"{}")
    h = read_header(Root("x", d), d / "model.safetensors")
    assert not h.ok and "exceeds" in h.error
    st, checks, size, _ = _validate(d)
    assert st["shard_header"] == "fail" and size is None


def test_non_json_header_is_reported(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    (d / "model.safetensors").write_bytes(struct.pack("<Q", 8) + b"not json" + b"\0" * 16)
    h = read_header(Root("x", d), d / "model.safetensors")
    assert not h.ok and "not JSON" in h.error
    (d / "model.safetensors").write_bytes(struct.pack("<Q", 2) + b"[]")
    assert "not an object" in read_header(Root("x", d), d / "model.safetensors").error


def test_header_entry_that_lies_about_bytes(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    hdr = json.dumps({"w": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 8]}}).encode()
    (d / "model.safetensors").write_bytes(struct.pack("<Q", len(hdr)) + hdr + b"\0" * 8)
    h = read_header(Root("x", d), d / "model.safetensors")
    assert not h.ok and "needs 64 bytes" in h.error


def test_symlinked_shard_outside_the_tree_is_not_followed(tmp_path, B):
    d = tmp_path / "m"
    B.write_model(d, shards=2)
    outside = tmp_path / "elsewhere.safetensors"
    shard = d / "model-00002-of-00002.safetensors"
    os.replace(shard, outside)
    os.symlink(outside, shard)
    st, checks, _, root = _validate(d)
    assert st["shards_present"] == "fail"
    assert any("outside" in i["problem"] for i in root.issues)


def test_unsharded_model_and_no_weights(tmp_path):
    from safetensors.numpy import save_file
    import numpy as np
    d = tmp_path / "m"
    d.mkdir()
    st, checks, size, _ = _validate(d)
    assert st == {"weights": "fail"}
    save_file({"a": np.zeros((2, 3), np.float16)}, str(d / "model.safetensors"))
    st, checks, size, _ = _validate(d)
    assert st["shard_header"] == "pass" and size["parameters"] == 6


def test_moderate_size_disagreement_warns(tmp_path, B):
    d = tmp_path / "m"
    B.write_model(d, config={"num_hidden_layers": 3})  # estimate 2560 vs 1792 summed: 43% apart
    st, checks, size, _ = _validate(d)
    assert st["size_crosscheck"] == "warn" and size["estimate_disagreement"] == round(768 / 1792, 4)
    assert size["parameters"] == 1792


def test_trailing_bytes_after_tensors_are_reported(tmp_path, B):
    d = tmp_path / "m"
    B.write_model(d, shards=1)
    with open(d / "model-00001-of-00001.safetensors", "ab") as f:
        f.write(b"\0" * 16)
    st, checks, _, _ = _validate(d)
    assert st["shard_header"] == "fail" and "tensors end at" in str(checks)


def test_shard_names_disagreeing_with_count(tmp_path, B):
    d = tmp_path / "m"
    B.write_model(d, shards=2)
    (d / "model-00002-of-00002.safetensors").rename(d / "model-00002-of-00003.safetensors")
    idx = json.loads((d / "model.safetensors.index.json").read_text())
    idx["weight_map"] = {k: v.replace("00002-of-00002", "00002-of-00003") for k, v in idx["weight_map"].items()}
    (d / "model.safetensors.index.json").write_text(json.dumps(idx))
    st, checks, _, _ = _validate(d)
    assert st["shard_naming"] == "fail" and st["shards_present"] == "pass"
