"""Every URL the tool takes or writes goes through the one grammar, `safety.urls` (issue 40): this test fails when
a module outside `n8n_sizer/safety/` parses a URL another way.

It scans the AST of every module for `urllib.parse` (urlsplit, urlparse, urljoin, ...), `httpx.URL(...)`, and any
string constant that is a URL pattern (`https?://` in a regular expression): a hand-written check beside the
grammar is how `https://user:pass@host/` and port 99999 got through `--public-url` (issue 40). A new one fails the
test until it uses `safety.urls.url_parts` / `check_url` / `require_url`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from n8n_sizer.safety.urls import check_url, url_parts

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "n8n_sizer"
PARSERS = {"urlsplit", "urlparse", "urljoin", "urlunsplit", "urlunparse", "parse_qs", "parse_qsl", "quote", "unquote"}


def _stray(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("urllib.parse", "urlparse", "yarl", "furl"):
            found.append(f"line {node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Import) and any(a.name in ("urllib.parse", "yarl", "furl") for a in node.names):
            found.append(f"line {node.lineno}: import {node.names[0].name}")
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            base = ast.unparse(f.value) if isinstance(f, ast.Attribute) else ""
            if name in PARSERS and (base in ("", "parse", "urllib.parse") or "urllib" in base):
                found.append(f"line {node.lineno}: {ast.unparse(f)}()")
            elif base == "httpx" and name == "URL":
                found.append(f"line {node.lineno}: httpx.URL()")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "https?" in node.value:
            found.append(f"line {node.lineno}: a URL pattern {node.value[:40]!r}")
    return found


def test_no_module_parses_a_url_around_the_one_grammar() -> None:
    stray = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("safety/"):
            continue
        if found := _stray(path):
            stray[rel] = found
    assert not stray, f"parse these URLs with n8n_sizer.safety.urls (url_parts / check_url / require_url): {stray}"


def test_the_scan_sees_a_hand_written_url_check(tmp_path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "import re\nfrom urllib.parse import urlsplit\n"
        "URL = re.compile(r'^https?://[^ ]+$')\n"
        "def f(u):\n    return urlsplit(u).hostname\n"
    )
    assert len(_stray(module)) == 3


@pytest.mark.parametrize(
    "url",
    [
        "http://n8n.example.com/",
        "https://n8n.example.com:5678/",
        "http://10.89.0.10:5678",
        "http://[::1]:5678/webhook/x",
        "https://xn--bcher-kva.example/a%20b",
        "http://localhost:5678/",
    ],
)
def test_the_grammar_takes_plain_urls(url) -> None:
    assert check_url(url) == url


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://user:pass@n8n.example.com/", "credentials"),
        ("https://user@n8n.example.com/", "credentials"),
        ("http://h.example.com:99999/", "port"),
        ("http://h.example.com:0/", "port"),
        ("http://h.example.com:/", "port"),
        ("http://h.example.com:65536/", "port"),
        ("http://h.example.com:-1/", "port"),
        ("ftp://h.example.com/", "http:// or https://"),
        ("javascript:alert(1)", "http:// or https://"),
        ("HTTP://h.example.com/", "http:// or https://"),
        ("//h.example.com/", "http:// or https://"),
        ("http://h.example.com/\nX=1", "whitespace or control"),
        ("http://h.example.com/\x1b[2J", "whitespace or control"),
        ("http://h .example.com/", "whitespace or control"),
        ("http://h.example.com/\u2028", "non-ASCII"),
        ("http://bücher.example/", "non-ASCII"),
        ("http://999.1.1.1/", "neither a name nor an IPv4"),
        ("http://1.2.3/", "neither a name nor an IPv4"),
        ("http://-bad-.example/", "not a DNS name"),
        ("http://a..b/", "not a DNS name"),
        ("http:///path", "no host"),
        ("http://[::1/", "unclosed"),
        ("http://[zz::1]/", "IPv6"),
        ("http://h.example.com/?q=1", "query"),
        ("http://h.example.com/#frag", "query"),
        ("http://h.example.com/${SECRET}", "$"),
        ("http://h.example.com/'", "'"),
        ("http://h.example.com/%zz", "path"),
        ("http://" + "a" * 3000 + ".com/", "characters long"),
        ("", "empty"),
        (None, "not text"),
        (5678, "not text"),
    ],
)
def test_the_grammar_refuses_what_would_leak_or_break(url, why) -> None:
    with pytest.raises(ValueError) as caught:
        url_parts(url, "--public-url")
    message = str(caught.value)
    assert why in message and "--public-url" in message and "\n" not in message and "\x1b" not in message


def test_loopback_is_told_apart() -> None:
    assert url_parts("http://127.0.0.2:5678/").is_loopback and url_parts("http://[::1]/").is_loopback
    assert url_parts("http://api.localhost/").is_loopback and not url_parts("http://10.0.0.1/").is_loopback
