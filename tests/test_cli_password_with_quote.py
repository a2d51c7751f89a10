"""A URL password holding a quote or a space (turbolock's URL parser accepts both) given in the
wrong place on the command line: argparse quotes the refused value back, and the redaction, a
pattern for URLs that stopped at a quote, let the password through. Each argument holding
credentials is now taken out of the message whole. Found in review."""

from __future__ import annotations

import pytest

from _cli import run_cli
from turbolock.options import options_from_url


@pytest.mark.parametrize("secret", ["it'sSECRET-pw", "it sSECRET-pw", 'a"SECRET', "it's\"SECRET"],
                         ids=["quote", "space", "dquote", "both-quotes"])
@pytest.mark.parametrize("argv", [
    ["locks", "redis://:{pw}@127.0.0.1:6390/0", "list"],  # the action forgotten: invalid choice
    ["demo", "redis://user:{pw}@127.0.0.1:6390"],  # --url forgotten: unrecognized arguments
    ["redis://:{pw}@127.0.0.1:6390/0"],  # no command: the top level's invalid choice
], ids=["invalid-choice", "unrecognized", "no-command"])
def test_a_password_is_not_quoted_back_by_argument_errors(argv: list[str], secret: str) -> None:
    url = next(part for part in argv if "{pw}" in part).format(pw=secret)
    assert options_from_url(url).password == secret  # a URL turbolock itself accepts
    done = run_cli(*[part.format(pw=secret) for part in argv])
    assert done.returncode == 2
    assert "SECRET" not in done.stdout + done.stderr, done.stderr
    assert "<a URL with credentials>" in done.stderr
