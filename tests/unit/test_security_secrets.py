"""Issue 12, defect 1: an existing .env never gets a made-up secret, and no value it holds is dropped."""

from __future__ import annotations

from pathlib import Path

import pytest

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.bundle.render import write_bundle
from n8n_sizer.bundle.secrets import ENV_NAMES, parse_env_text
from n8n_sizer.errors import InputError


def write_private_env(path, text):
    """A user's own .env as a careful user keeps it: mode 0600 (a group/other-readable one is refused)."""
    path.write_text(text)
    path.chmod(0o600)


QUEUE = Setup(mode="queue", workers=2)
KEY = "k" * 40
FULL = (
    f"N8N_ENCRYPTION_KEY={KEY}\nPOSTGRES_PASSWORD={'p' * 32}\nREDIS_PASSWORD={'r' * 32}\n"
    f"RUNNERS_AUTH_TOKEN={'t' * 32}\n"
)
WITHOUT_KEY = FULL.replace(f"N8N_ENCRYPTION_KEY={KEY}\n", "")

MANGLED = {
    "key line lost": WITHOUT_KEY,
    "empty value": "N8N_ENCRYPTION_KEY=\n" + WITHOUT_KEY,
    "empty quoted value": "N8N_ENCRYPTION_KEY=''\n" + WITHOUT_KEY,
    "lowercase name": f"n8n_encryption_key={KEY}\n" + WITHOUT_KEY,
    "dashes in the name": f"N8N-ENCRYPTION-KEY={KEY}\n" + WITHOUT_KEY,
    "colon instead of =": f"N8N_ENCRYPTION_KEY: {KEY}\n" + WITHOUT_KEY,
    "space in the name": f"N8N ENCRYPTION_KEY={KEY}\n" + WITHOUT_KEY,
    "empty file": "",
    "comments only": "# my stack\n\n",
    "a password lost": FULL.replace(f"POSTGRES_PASSWORD={'p' * 32}\n", ""),
}


@pytest.mark.parametrize("text", MANGLED.values(), ids=MANGLED.keys())
def test_a_mangled_env_is_refused_and_left_as_it_was(tmp_path: Path, text: str) -> None:
    write_private_env(tmp_path / ".env", text)
    with pytest.raises(InputError) as err:
        write_bundle(QUEUE, tmp_path)
    message = str(err.value)
    assert str(tmp_path / ".env") in message and "\n" not in message
    assert (tmp_path / ".env").read_text() == text
    assert not (tmp_path / "docker-compose.yml").exists()
    assert KEY not in message


def test_the_refusal_names_the_flag_and_the_lookalike(tmp_path: Path) -> None:
    write_private_env(tmp_path / ".env", f"n8n_encryption_key={KEY}\n" + WITHOUT_KEY)
    with pytest.raises(InputError, match="n8n_encryption_key .*--generate-missing-secrets"):
        write_bundle(QUEUE, tmp_path)


def test_two_key_lines_are_refused_and_both_values_stay(tmp_path: Path) -> None:
    text = FULL + f"N8N_ENCRYPTION_KEY={'z' * 40}\n"
    write_private_env(tmp_path / ".env", text)
    with pytest.raises(InputError, match="N8N_ENCRYPTION_KEY twice .*lines 1 and 5"):
        write_bundle(QUEUE, tmp_path)
    assert (tmp_path / ".env").read_text() == text


def test_the_flag_generates_only_what_is_missing_and_keeps_the_lookalike(tmp_path: Path) -> None:
    write_private_env(tmp_path / ".env", f"n8n_encryption_key={KEY}\n" + WITHOUT_KEY)
    messages = write_bundle(QUEUE, tmp_path, generate_missing_secrets=True)
    env = parse_env_text((tmp_path / ".env").read_text())
    assert env["n8n_encryption_key"] == KEY  # read, so written back
    assert len(env["N8N_ENCRYPTION_KEY"]) == 64 and env["POSTGRES_PASSWORD"] == "p" * 32
    assert any("new secret(s): N8N_ENCRYPTION_KEY" in m for m in messages)


def test_a_complete_env_rerenders_without_the_flag_and_keeps_other_lines_as_written(tmp_path: Path) -> None:
    extra = "SMTP_PASS='a b #c $d'\nGREETING=\"hi there\" # note\nREF=${HOME}\n"
    write_private_env(tmp_path / ".env", FULL + extra)
    write_bundle(QUEUE, tmp_path)
    text = (tmp_path / ".env").read_text()
    for line in extra.splitlines():
        assert line in text
    env = parse_env_text(text)
    assert all(env[n] == parse_env_text(FULL)[n] for n in ENV_NAMES.values() if n != "REDIS_N8N_PASSWORD")
    # written before n8n had a Redis user of its own: that password alone is generated (nothing depends on it)
    assert len(env["REDIS_N8N_PASSWORD"]) == 48 and env["REDIS_N8N_PASSWORD"] not in FULL


def test_a_new_folder_still_gets_fresh_secrets(tmp_path: Path) -> None:
    write_bundle(QUEUE, tmp_path / "new")
    assert len(parse_env_text((tmp_path / "new" / ".env").read_text())["N8N_ENCRYPTION_KEY"]) == 64


def test_a_linked_env_is_neither_read_nor_replaced(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.env"
    elsewhere.write_text(FULL)
    out = tmp_path / "out"
    out.mkdir()
    (out / ".env").symlink_to(elsewhere)
    with pytest.raises(InputError, match="symbolic link"):
        write_bundle(QUEUE, out)
    assert elsewhere.read_text() == FULL and (out / ".env").is_symlink()


def test_render_cli_refuses_with_one_line_and_accepts_the_flag(tmp_path: Path, capsys, monkeypatch) -> None:
    import sys

    from n8n_sizer.cli import main

    write_private_env(tmp_path / ".env", WITHOUT_KEY)

    def run(*args: str) -> int:
        monkeypatch.setattr(sys, "argv", ["n8n-sizer", *args])
        with pytest.raises(SystemExit) as exit_:
            main()
        return exit_.value.code

    assert run("render", "--mode", "queue", "--out", str(tmp_path)) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--generate-missing-secrets" in err
    assert run("render", "--mode", "queue", "--out", str(tmp_path), "--generate-missing-secrets") == 0
    assert parse_env_text((tmp_path / ".env").read_text())["POSTGRES_PASSWORD"] == "p" * 32
