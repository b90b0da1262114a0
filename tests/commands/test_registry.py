"""``fleetwatch registry diff | check | log`` on a scratch git repository (real ``git``).

Three commits: the first registers ``ranker`` with a quota file and a placement, the
second raises the ``search`` team's quota without an approval record, the third appends
the platform team's approval to the changes log. ``check`` between commits 1 and 2 fails
naming the change and the approver it needs; between 1 and 3 it passes; the record of
commit 1's log (an older approval) does not approve commit 2's change.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from fleetwatch.cli import main

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

REGISTRY = {"models": [{"name": "ranker", "team": "search", "owner": "alice@example.com",
                        "oncall": "search-oncall", "latency_tier": "interactive"}]}
QUOTAS = {"teams": {"search": {"gpus": 2, "gpu_memory_bytes": 1 << 34, "instances": 4}}}
SIDECAR = {"placement": [{"gpu_uuid": "GPU-0", "models": [{"model": "ranker",
                                                            "model_version": "1"}]}]}
POLICY = {"approvals": {"quota": ["platform"], "engine_swap": ["owner", "platform"],
                        "owner": ["owner"], "placement": ["platform"]}}
OLD_RECORD = {"ticket": "PLAT-1", "change": "quota:search", "approver": "platform",
              "date": "2026-11-01"}
NEW_RECORD = {"ticket": "PLAT-2", "change": "quota:search", "approver": "platform",
              "date": "2026-12-06"}


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "Alice", "GIT_AUTHOR_EMAIL": "a@example.com",
           "GIT_COMMITTER_NAME": "Alice", "GIT_COMMITTER_EMAIL": "a@example.com",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True,
                          capture_output=True, text=True).stdout


def _write(repo: Path, name: str, doc: object) -> None:
    (repo / name).write_text(yaml.safe_dump(doc, sort_keys=False))


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The scratch repository with its three commits, as the current folder."""
    r = tmp_path / "platform"
    r.mkdir()
    _git(r, "init", "-q", "-b", "main")
    _write(r, "models.yaml", REGISTRY)
    _write(r, "quotas.yaml", QUOTAS)
    _write(r, "sidecar.yaml", SIDECAR)
    _write(r, "approvals.yaml", POLICY)
    _write(r, "changes.yaml", {"changes": [OLD_RECORD]})
    _git(r, "add", ".")
    _git(r, "commit", "-q", "-m", "register ranker")
    raised = {"teams": {"search": {**QUOTAS["teams"]["search"], "gpus": 3}}}
    _write(r, "quotas.yaml", raised)
    _git(r, "commit", "-q", "-am", "raise search's GPU quota")
    _write(r, "changes.yaml", {"changes": [OLD_RECORD, NEW_RECORD]})
    _git(r, "commit", "-q", "-am", "approve search's GPU quota")
    monkeypatch.chdir(r)
    return r


def _run(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(main, ["registry", *args])
    return res.exit_code, res.stdout, res.stderr


def _check(old: str, new: str, policy: str = "") -> tuple[int, str, str]:
    return _run("check", f"git:{old}:models.yaml", f"git:{new}:models.yaml",
                "--quotas", f"git:{old}:quotas.yaml", f"git:{new}:quotas.yaml",
                "--approvals", policy or f"git:{new}:approvals.yaml",
                "--changes", f"git:{new}:changes.yaml",
                "--changes-base", f"git:{old}:changes.yaml")


def test_diff_names_the_quota_change(repo: Path) -> None:
    code, out, err = _run("diff", "git:HEAD~2:models.yaml", "git:HEAD~1:models.yaml",
                          "--quotas", "git:HEAD~2:quotas.yaml", "quotas.yaml")
    assert code == 0, err
    assert out == "quota:search\tquota.search.gpus 2 → 3\n"


def test_check_without_the_record_fails_naming_change_and_approver(repo: Path) -> None:
    code, out, _ = _check("HEAD~2", "HEAD~1")
    assert code == 1
    assert out.splitlines() == [
        "quota:search: needs approval by platform: no record in git:HEAD~1:changes.yaml "
        "(quota.search.gpus 2 → 3)"]


def test_check_with_the_record_appended_passes(repo: Path) -> None:
    code, out, err = _check("HEAD~2", "HEAD")
    assert (code, out) == (0, ""), err
    assert "1 change, every approval recorded" in err


def test_an_older_record_does_not_approve_a_new_change(repo: Path) -> None:
    # without --changes-base, commit 1's record (PLAT-1) would count: with it, it does not
    code, _, _ = _run("check", "git:HEAD~2:models.yaml", "git:HEAD~1:models.yaml",
                      "--quotas", "git:HEAD~2:quotas.yaml", "git:HEAD~1:quotas.yaml",
                      "--approvals", "approvals.yaml", "--changes", "git:HEAD~1:changes.yaml")
    assert code == 0
    assert _check("HEAD~2", "HEAD~1")[0] == 1


def test_engine_owner_and_placement_changes_need_their_approvers(repo: Path) -> None:
    reg = {"models": [{**REGISTRY["models"][0], "owner": "bob@example.com"}]}
    _write(repo, "models.yaml", reg)
    _write(repo, "sidecar.yaml", {"placement": [{"gpu_uuid": "GPU-1", "models": [
        {"model": "ranker", "model_version": "1"}]}]})
    code, out, _ = _run("check", "git:HEAD:models.yaml", "models.yaml",
                        "--placement", "git:HEAD:sidecar.yaml", "sidecar.yaml",
                        "--approvals", "approvals.yaml", "--changes", "changes.yaml",
                        "--changes-base", "git:HEAD:changes.yaml")
    assert code == 1
    lines = out.splitlines()
    assert [line.split(":", 2)[:2] for line in lines] == [["owner", "ranker"],
                                                          ["placement", "ranker@1"]]
    assert "needs approval by bob@example.com (the owner)" in lines[0]
    assert "placement.GPU-0.ranker@1.present true → -" in lines[1]


def test_log_prints_each_record_with_its_commit(repo: Path) -> None:
    code, out, err = _run("log", "--changes", "changes.yaml")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 2
    first = _git(repo, "rev-parse", "--short=7", "HEAD~2").strip()
    last = _git(repo, "rev-parse", "--short=7", "HEAD").strip()
    assert lines[0].startswith("2026-11-01  quota:search  approved by platform  ticket "
                               f"PLAT-1  commit {first} ")
    assert lines[0].endswith("Alice <a@example.com>: register ranker")
    assert f"ticket PLAT-2  commit {last} " in lines[1]
    assert lines[1].endswith(": approve search's GPU quota")


def test_log_marks_an_uncommitted_record(repo: Path) -> None:
    rec = {**NEW_RECORD, "ticket": "PLAT-3", "change": "owner:ranker"}
    _write(repo, "changes.yaml", {"changes": [OLD_RECORD, NEW_RECORD, rec]})
    out = _run("log", "--changes", "changes.yaml")[1]
    assert out.splitlines()[-1].endswith("ticket PLAT-3  (not committed)")


@pytest.mark.parametrize(("policy", "message"), [
    ({"approvals": {"quota": ["owner"]}}, "field 'approvals.quota': a quota change has no "
                                          "model, so 'owner' names nobody"),
    ({"approvals": {"quotas": ["platform"]}}, "field 'approvals.quotas': not a change class"),
    ({"approval": {}}, "approvals.yaml"),
])
def test_bad_policy_exits_2_naming_file_and_field(repo: Path, policy: object,
                                                  message: str) -> None:
    _write(repo, "approvals.yaml", policy)
    code, _, err = _check("HEAD~2", "HEAD", "approvals.yaml")
    assert code == 2
    assert message in err


def test_bad_revision_exits_2_with_gits_message(repo: Path) -> None:
    code, _, err = _run("diff", "git:nosuchrev:models.yaml", "models.yaml")
    assert code == 2
    assert "git:nosuchrev:models.yaml: git show:" in err


def test_bad_record_exits_2_naming_the_field(repo: Path) -> None:
    _write(repo, "changes.yaml", {"changes": [{**NEW_RECORD, "date": "yesterday"}]})
    code, _, err = _run("log", "--changes", "changes.yaml")
    assert code == 2
    assert "changes.yaml" in err and "date" in err


@pytest.mark.parametrize(("content", "message"), [
    (b"\xff\xfe models", "models.yaml: not UTF-8 text (byte 0)"),
    (b"models: [", "models.yaml: not valid YAML: line"),
    (b"- a list", "models.yaml: expected a mapping with a 'models:' list, not a list"),
])
def test_a_bad_file_exits_2_naming_it(repo: Path, content: bytes, message: str) -> None:
    (repo / "models.yaml").write_bytes(content)
    code, out, err = _run("diff", "git:HEAD:models.yaml", "models.yaml")
    assert (code, out) == (2, "")
    assert message in err


def test_a_declared_block_needs_only_the_engine_swap_approvals(repo: Path) -> None:
    reg = {"models": [{**REGISTRY["models"][0], "declared": {"engine_version": "0.32.0"}}]}
    _write(repo, "models.yaml", reg)
    code, out, _ = _run("check", "git:HEAD:models.yaml", "models.yaml",
                        "--approvals", "approvals.yaml", "--changes", "changes.yaml",
                        "--changes-base", "git:HEAD:changes.yaml")
    assert code == 1
    assert [line.split(": needs approval by ")[0] for line in out.splitlines()] == [
        "engine_swap:ranker", "engine_swap:ranker"]


@pytest.mark.parametrize("base", ["git:nosuchrev:changes.yaml", "git:HEAD~5:changes.yaml",
                                  "missing-changes.yaml"])
def test_an_unreadable_changes_base_exits_2_naming_it(repo: Path, base: str) -> None:
    # read as an empty log, the base would let commit 1's record approve commit 2's change
    code, out, err = _run("check", "git:HEAD~2:models.yaml", "git:HEAD~1:models.yaml",
                          "--quotas", "git:HEAD~2:quotas.yaml", "git:HEAD~1:quotas.yaml",
                          "--approvals", "approvals.yaml", "--changes",
                          "git:HEAD~1:changes.yaml", "--changes-base", base)
    assert (code, out) == (2, "")
    assert base in err


def test_a_changes_log_absent_in_the_base_revision_reads_as_empty(repo: Path) -> None:
    (repo / "changes.yaml").rename(repo / "approvals-log.yaml")
    code, out, err = _run("check", "git:HEAD~2:models.yaml", "git:HEAD:models.yaml",
                          "--quotas", "git:HEAD~2:quotas.yaml", "git:HEAD:quotas.yaml",
                          "--approvals", "approvals.yaml", "--changes", "approvals-log.yaml",
                          "--changes-base", "git:HEAD~2:approvals-log.yaml")
    assert (code, out) == (0, ""), err


def test_a_revision_that_looks_like_an_option_is_refused(repo: Path, tmp_path: Path) -> None:
    target = tmp_path / "written-by-git"
    for cmd in (["diff", f"git:--output={target}:models.yaml", "models.yaml"],
                ["check", "models.yaml", "models.yaml", "--approvals", "approvals.yaml",
                 "--changes", "changes.yaml", "--changes-base",
                 f"git:--output={target}:changes.yaml"]):
        code, out, err = _run(*cmd)
        assert (code, out) == (2, "")
        assert "a revision cannot start with '-'" in err
    assert not target.exists()


def test_a_typod_change_class_in_the_log_exits_2_naming_record_and_field(repo: Path) -> None:
    # "quotas:search" would approve nothing, silently
    _write(repo, "changes.yaml", {"changes": [OLD_RECORD, {**NEW_RECORD,
                                                           "change": "quotas:search"}]})
    code, out, err = _run("check", "git:HEAD~2:models.yaml", "models.yaml",
                          "--quotas", "git:HEAD~2:quotas.yaml", "quotas.yaml",
                          "--approvals", "approvals.yaml", "--changes", "changes.yaml")
    assert (code, out) == (2, "")
    assert "changes.yaml: changes[1].change: 'quotas' is not a change class" in err


def test_a_placement_validate_refuses_is_refused_by_diff_too(repo: Path) -> None:
    # one GPU listed twice: `fleetwatch validate` exits 2 on it, so must `registry diff`
    placement = [{"gpu_uuid": "GPU-0", "models": [{"model": "ranker"}]},
                 {"gpu_uuid": "GPU-0", "models": [{"model": "other"}]}]
    _write(repo, "sidecar.yaml", {"targets": [{"name": "t", "kind": "triton",
                                               "url": "http://triton:8002/metrics"}],
                                  "placement": placement})
    message = "sidecar.yaml: placement: [1].gpu_uuid: 'GPU-0' is already placement[0]"
    validated = CliRunner().invoke(main, ["validate", "--config", "sidecar.yaml"])
    assert validated.exit_code == 2 and message in validated.stderr
    code, out, err = _run("diff", "git:HEAD:models.yaml", "models.yaml",
                          "--placement", "git:HEAD:sidecar.yaml", "sidecar.yaml")
    assert (code, out) == (2, "")
    assert message in err
