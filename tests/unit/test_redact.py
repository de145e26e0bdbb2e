"""rlhealth.redact: every shape of rules/secret_shapes.yaml, order, idempotence, scan().

All credential-shaped strings below are obviously fake (FAKE... bodies)."""
from __future__ import annotations

import time

import pytest

from rlhealth import redact as R

HF = "hf_" + "FAKEFAKEFAKEFAKEFAKEFAKE12"
OPENAI = "sk-" + "FAKEfakeFAKEfake_FAKE-fake"
GH = "ghp_" + "FAKEFAKEFAKEFAKEFAKEFAKEFAKE"
AWS = "AKIA" + "FAKEFAKEFAKE0000"
JWT = "eyJGQUtFIjoiRkFLRSJ9" + "." + "eyJzdWIiOiJGQUtFIn0" + "." + "RkFLRXNpZ25hdHVyZQ"
IRIS = "https://iris.oa.dev/proxy/t/" + JWT
PEM = "-----BEGIN RSA PRIVATE KEY-----\nRkFLRUZBS0VGQUtF\nRkFLRQ==\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize("secret,shape", [
    (HF, "huggingface_token"), (OPENAI, "openai_key"), (GH, "github_token"),
    (AWS, "aws_access_key"), (JWT, "jwt"), (IRIS, "iris_proxy_url"), (PEM, "pem_private_key"),
    ("ASIA" + "FAKEFAKEFAKE0000", "aws_access_key"), ("ghs_" + "F" * 20, "github_token"),
])
def test_each_shape_is_redacted(secret, shape):
    text = f"prefix {secret} suffix"
    out = R.redact(text)
    assert out == f"prefix <redacted:{shape}> suffix"
    assert secret not in out
    [m] = R.scan(text)
    assert m.shape == shape and text[m.start:m.end] == secret


def test_tokens_inside_urls_and_json_values():
    line = '{"api_base": "' + IRIS + '/v1", "token": "' + HF + '", "url": "https://x.example/?key=' + OPENAI + '&a=1"}'
    out = R.redact(line)
    assert HF not in out and JWT not in out and OPENAI not in out
    assert '"api_base": "<redacted:iris_proxy_url>/v1"' in out  # the URL shape wins over the embedded JWT
    assert "<redacted:huggingface_token>" in out and "<redacted:openai_key>" in out
    assert [m.shape for m in R.scan(line)] == ["iris_proxy_url", "huggingface_token", "openai_key"]


def test_bare_jwt_in_url_query():
    out = R.redact(f"GET https://api.example.com/x?auth={JWT} 200")
    assert out == "GET https://api.example.com/x?auth=<redacted:jwt> 200"


def test_short_or_glued_lookalikes_are_not_secrets():
    for text in ["hf_short", "sk-short", "ghp_tooShort", "AKIA1234", "task-abcdefghijklmnopqrstuvwxyz0123",
                 "eyJonlyonesegment", "-----BEGIN PUBLIC KEY-----"]:
        assert R.redact(text) == text, text
        assert R.scan(text) == []


def test_idempotent_and_lines():
    text = f"a\nb {HF}\n{PEM}\nc {GH}"
    once = R.redact(text)
    assert R.redact(once) == once
    assert [(m.shape, m.line) for m in R.scan(text)] == [
        ("huggingface_token", 2), ("pem_private_key", 3), ("github_token", 7)]


def test_unterminated_pem_header_line_is_redacted():
    assert R.redact("key: -----BEGIN PRIVATE KEY-----MIIEFAKE") == "key: <redacted:pem_private_key>"


def test_shapes_come_from_the_data_file():
    assert R.SHAPE_NAMES == ("pem_private_key", "iris_proxy_url", "jwt", "aws_access_key",
                             "openai_key", "huggingface_token", "github_token")


def test_fast_on_clean_text():
    line = "2026-08-01 14:02:11.532 | INFO | skyrl_train.trainer - WANDB_MIRROR kind=train step=12 metrics={}" * 3
    t0 = time.perf_counter()
    for _ in range(20000):
        assert R.redact(line) is line
    assert time.perf_counter() - t0 < 2.0
