"""The `crossroads` command line, run as a real process against the test database."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, crossroads


@pytest.fixture(scope="module")
def cli_env(make_database, tmp_path_factory):
    env = dict(os.environ)
    env.update(
        CROSSROADS_DATABASE_URL=make_database(),
        CROSSROADS_STATE_DIR=str(tmp_path_factory.mktemp("cli-state")),
        CROSSROADS_CHUNK_MAX_CHARS="600",
    )
    return env




def test_ingest_json_contract_resync_and_partial_exit_code(cli_env, tmp_path):
    corpus = tmp_path / "docs"
    corpus.mkdir()
    (corpus / "a.md").write_text("---\ntitle: Alpha\n---\nAlpha service retries five times.\n", encoding="utf-8")
    (corpus / "b.md").write_text("Бета-сервис хранит журналы 30 дней.\n", encoding="utf-8")
    first = crossroads(cli_env, "ingest", str(corpus), "--tenant", "cli", "--acl", "staff", "--json")
    out = json.loads(first.stdout)
    # not a terminal (a script, CI): a new tenant is created without asking, and said so
    assert out["tenant_created"] is True and "tenant 'cli' is new" in first.stderr
    assert set(out) >= {"documents", "chunks", "embeddings_computed", "seconds"}
    assert {k: out["documents"][k] for k in ("added", "changed", "unchanged", "deleted", "skipped")} == dict(
        added=2, changed=0, unchanged=0, deleted=0, skipped=0
    )
    assert set(out["chunks"]) >= {"added", "changed", "deleted"} and out["embeddings_computed"] == out["chunks"]["added"] == 2
    # search end to end with no threshold, one hit per document, as a reader of the group
    found = json.loads(crossroads(cli_env, "search", "how many retries", "--tenant", "cli", "--groups", "staff",
                                  "--min-score", "none", "--group-by", "document", "--k", "5", "--json").stdout)
    assert found["group_by"] == "document" and found["threshold"]["source"] == "none"
    assert found["threshold"]["cut"] == 0 and sorted(h["doc_id"] for h in found["hits"]) == ["a.md", "b.md"]
    assert found["unmentioned"] == []
    coded = crossroads(cli_env, "search", "how many retries after ERR_5150?", "--tenant", "cli", "--groups", "staff")
    assert "no document you can read mentions ERR_5150" in coded.stdout

    (corpus / "bad.md").write_bytes(b"\xff\xfe\x00garbage\x00")
    (corpus / "a.md").unlink()
    proc = crossroads(cli_env, "ingest", str(corpus), "--tenant", "cli", "--acl", "staff", "--prune", "--json", rc=3)
    again = json.loads(proc.stdout)
    assert again["tenant_created"] is False and "is new" not in proc.stderr
    assert again["documents"]["unchanged"] == 1 and again["documents"]["deleted"] == 1
    assert again["documents"]["skipped"] == 1 and again["embeddings_computed"] == 0
    assert "bad.md" in again["skipped"][0]["where"]


def test_documents_list_acl_delete(cli_env, tmp_path):
    corpus = tmp_path / "docs"
    corpus.mkdir()
    (corpus / "x.md").write_text("---\nacl: [public]\n---\nThe X document text.\n", encoding="utf-8")
    crossroads(cli_env, "ingest", str(corpus), "--tenant", "docs", "--json")
    listed = json.loads(crossroads(cli_env, "documents", "list", "--tenant", "docs", "--json").stdout)
    assert [(d["doc_id"], d["acl"], d["chunks"]) for d in listed["documents"]] == [("x.md", ["public"], 1)]
    changed = json.loads(crossroads(cli_env, "documents", "acl", "x.md", "--tenant", "docs", "--acl", "hr,staff", "--json").stdout)
    assert changed["acl"] == ["hr", "staff"]
    missing = crossroads(cli_env, "documents", "acl", "nope.md", "--tenant", "docs", "--acl", "hr", rc=1)
    assert "no document 'nope.md'" in missing.stderr
    deleted = json.loads(crossroads(cli_env, "documents", "delete", "x.md", "--tenant", "docs", "--json").stdout)
    assert deleted["documents_deleted"] == 1
    # nothing else holds the tenant (no levels, tokens or jobs): with its last document it is gone
    assert "docs" not in {t["tenant"] for t in json.loads(crossroads(cli_env, "tenants", "list", "--json").stdout)["tenants"]}


def test_missing_path_and_bad_database_fail_with_a_message(cli_env, tmp_path):
    proc = crossroads(cli_env, "ingest", str(tmp_path / "absent"), "--tenant", "t", rc=1)
    assert "does not exist" in proc.stderr and "Traceback" not in proc.stderr
    env = dict(cli_env, CROSSROADS_DATABASE_URL=f"postgresql://x@/db?host={tmp_path}&connect_timeout=1")
    proc = crossroads(env, "documents", "list", "--tenant", "t", rc=1)
    assert "Cannot connect to PostgreSQL" in proc.stderr and "Traceback" not in proc.stderr


def test_config_markdown_lists_every_setting(cli_env):
    from core.settings import Settings

    table = crossroads(cli_env, "config", "--markdown").stdout
    for name in Settings.model_fields:
        assert name.upper() in table


def test_configuration_table_matches_the_code():
    from api.cli.main import settings_markdown

    assert settings_markdown() in (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")


def _leaf_commands(command, path=()):
    subcommands = getattr(command, "commands", None)
    if not subcommands:
        yield " ".join(path), command
        return
    for name, sub in sorted(subcommands.items()):
        yield from _leaf_commands(sub, (*path, name))


def test_every_command_takes_json_and_has_help():
    import typer.main

    from api.cli.main import app

    # `serve` and `worker` run until stopped: their output is logs, not a result
    leaves = dict(_leaf_commands(typer.main.get_command(app)))
    assert {"ask", "route", "search", "token create", "levels set", "graph build"} <= set(leaves)
    for name, command in leaves.items():
        options = {o for p in command.params for o in getattr(p, "opts", [])}
        assert name in ("serve", "worker") or "--json" in options, f"`crossroads {name}` has no --json"
        assert command.help and len(command.help) > 20, f"`crossroads {name}` has no help text"


@pytest.mark.slow
def test_route_classifies_a_file_as_json_lines(tmp_path):
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        '{"qid": "a", "question": "What does ERR_2043 mean?"}\n'
        '{"qid": "b", "question": "What are the main themes across all incident reviews?"}\n'
        'not json\n'
        '{"qid": "c", "question": "Which is older, the Berlin office or the Moscow office?"}\n', encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "api.cli.main", "route", "--file", str(questions), "--json"],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 3, result.stderr  # one bad line: the rest classified, exit code says partial
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["qid"], r["route"]) for r in rows] == [("a", "local"), ("b", "global"), ("c", "multihop")]
    assert all(0 <= r["confidence"] <= 1 and r["reason"] for r in rows)
    assert "q.jsonl:3" in result.stderr


def test_fulltext_stats_check_finds_drift_and_rebuild_repairs_it(cli_env, tmp_path):
    import psycopg

    corpus = tmp_path / "docs"
    corpus.mkdir()
    (corpus / "s.md").write_text("---\nacl: [staff]\n---\nGateway retries back off. Gateway logs.\n", encoding="utf-8")
    crossroads(cli_env, "ingest", str(corpus), "--tenant", "stats", "--json")
    ok = json.loads(crossroads(cli_env, "fulltext-stats", "--tenant", "stats", "--check", "--json").stdout)
    assert ok["consistent"] and ok["chunks"] == ok["live_chunks"] == 1 and ok["drifted_lexeme_counts"] == 0
    with psycopg.connect(cli_env["CROSSROADS_DATABASE_URL"]) as conn:  # as a restore that skipped triggers would
        conn.execute("DELETE FROM fulltext_lexeme_stats WHERE tenant_id = 'stats' AND lexeme = 'gateway'")
    drift = json.loads(crossroads(cli_env, "fulltext-stats", "--tenant", "stats", "--check", "--json", rc=1).stdout)
    assert drift["consistent"] is False and drift["drifted_lexeme_counts"] == 1
    fixed = json.loads(crossroads(cli_env, "fulltext-stats", "--tenant", "stats", "--rebuild", "--check", "--json").stdout)
    assert fixed["rebuilt"] and fixed["consistent"] and fixed["pending_deltas"] == 0


def test_tenants_are_listed_and_a_mistyped_tenant_is_an_error_not_an_empty_answer(cli_env, tmp_path):
    corpus = tmp_path / "docs"
    corpus.mkdir()
    (corpus / "kept.md").write_text("---\nacl: [staff]\n---\nThe kept document.\n", encoding="utf-8")
    crossroads(cli_env, "ingest", str(corpus), "--tenant", "known", "--json")
    listed = json.loads(crossroads(cli_env, "tenants", "list", "--json").stdout)["tenants"]
    assert {"tenant": "known", "documents": 1, "chunks": 1} in [
        {k: t[k] for k in ("tenant", "documents", "chunks")} for t in listed]
    for command in (("documents", "list"), ("graph", "status"), ("levels", "list")):
        proc = crossroads(cli_env, *command, "--tenant", "knwon", rc=1)
        assert "no tenant 'knwon'" in proc.stderr and "known" in proc.stderr and "Traceback" not in proc.stderr
    for command in ("search", "ask"):  # a mistyped group hides what the reader may see: an error, not "nothing found"
        typo = crossroads(cli_env, command, "the kept document", "--tenant", "known", "--groups", "staff,stafff", rc=1)
        assert "no group 'stafff'" in typo.stderr and "its groups: staff" in typo.stderr, typo.stderr
    missing = crossroads(cli_env, "documents", "delete", "kept.md", "nosuch.md", "--tenant", "known", rc=3)
    assert "nosuch.md" in missing.stderr and "deleted 1 documents" in missing.stdout
    # a tenant whose last document is gone still exists while its levels do
    crossroads(cli_env, "levels", "set", "known", "staff", "staff", "--json")
    assert json.loads(crossroads(cli_env, "documents", "list", "--tenant", "known", "--json").stdout)["documents"] == []


def test_ctrl_c_during_an_ingest_says_what_was_saved_and_exits_130(cli_env, tmp_path):
    import signal

    corpus = tmp_path / "docs"
    corpus.mkdir()
    for i in range(40):  # ~120 chunks, 20 s or more of embedding: Ctrl-C comes while it works
        (corpus / f"d{i}.md").write_text(f"# Service {i}\n" + f"Service {i} retries the call {i} times. " * 40,
                                         encoding="utf-8")
    command = [sys.executable, "-m", "api.cli.main", "ingest", str(corpus), "--tenant", "sigint", "--acl", "staff"]
    # a test runner started in the background (`pytest &`) ignores SIGINT, and its children inherit that:
    # the CLI gets Ctrl-C's default disposition back, as it has at a terminal
    proc = subprocess.Popen(command + ["--yes"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=cli_env, cwd=ROOT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = []
    while not any(line.startswith("ingest: ") for line in seen):  # plain progress lines: no terminal here
        seen.append(proc.stderr.readline())
        assert seen[-1] or proc.poll() is None, seen
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, (seen, stderr)
    assert "interrupted: " in stderr and "of 40 documents saved" in stderr and "run the same command again" in stderr
    assert "Traceback" not in stderr and "is new" not in "".join(seen)  # --yes: no note


def test_version():
    from importlib.metadata import version

    assert crossroads(os.environ, "--version").stdout.strip() == f"crossroads {version('crossroads')}"


def test_serve_on_a_busy_port_says_so_before_printing_its_url(cli_env):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        proc = crossroads(cli_env, "serve", "--port", str(taken.getsockname()[1]), rc=1)
    assert "another server" in proc.stderr and "Crossroads API on" not in proc.stderr
