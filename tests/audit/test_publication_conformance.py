"""MarinSkyRL's publication checks (``test_model_publication_checks.py``), mirrored on our own
downloads: the four artifacts a published RL model must carry, absent or present as the peer
reports them. rlhealth also reads the weights' headers, where the peer only lists file names."""
from __future__ import annotations

from rlhealth.audit.publication import verify_published
from rlhealth.audit.safefs import Root

FOUR = ("weights", "tokenizer_configuration", "training_logs", "training_traces_link")


def _statuses(pub):
    return {a["artifact"]: a["status"] for a in pub["artifacts"]}


def test_a_card_only_repository_is_absent_on_all_four_checks(tmp_path):
    (tmp_path / "README.md").write_text("# A model card and nothing else\n")
    pub = verify_published(Root("published", tmp_path), "agentic", [])
    assert _statuses(pub) == {k: "absent" for k in FOUR}
    assert pub["complete"] is False
    assert pub["message"] == "Incomplete RL model publication: missing " + ", ".join(FOUR)


def test_a_complete_download_is_present_on_all_four_checks(tmp_path, B):
    B.write_model(tmp_path, shards=1)
    (tmp_path / "training_logs").mkdir()
    (tmp_path / "training_logs" / "rewards.csv").write_text("step,reward\n1,0.5\n")
    (tmp_path / "README.md").write_text("# M\n\n## Training Traces\n\nhttps://huggingface.co/datasets/bob/m-traces\n")
    pub = verify_published(Root("published", tmp_path), "agentic", [])
    assert _statuses(pub) == {k: "present" for k in FOUR} and pub["complete"] is True
    assert all(c["status"] == "pass" for c in pub["weight_checks"])


def test_a_weights_file_that_is_not_safetensors_is_present_but_fails_its_header(tmp_path):
    (tmp_path / "model-00001-of-00001.safetensors").write_bytes(b"wts")
    (tmp_path / "config.json").write_text("{}\n")
    (tmp_path / "tokenizer.json").write_text("{}\n")
    (tmp_path / "training_logs").mkdir()
    (tmp_path / "training_logs" / "rewards.csv").write_text("step,reward\n1,0.5\n")
    (tmp_path / "README.md").write_text("# M\n\n## Training Traces\n\nhttps://huggingface.co/datasets/bob/m-traces\n")
    pub = verify_published(Root("published", tmp_path), "agentic", [])
    assert _statuses(pub) == {k: "present" for k in FOUR}
    assert [c["status"] for c in pub["weight_checks"]] == ["fail"] and "truncated" in pub["weight_checks"][0]["detail"]
