"""What every command module prints through: the two consoles, and :class:`CliError`, the one-line error ``main``
shows. Apart from ``cli/__init__.py`` so that the command modules, which ``cli/__init__.py`` loads by name, do not
import the module that loads them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from zkconsumer.consoles import make_console
from zkconsumer.errors import ZkConsumerError

console = make_console()
err_console = make_console(stderr=True, soft_wrap=True)


class CliError(ZkConsumerError):
    """An error to show the user as one clear line, with an exit code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


@contextmanager
def as_cli_error(*errors: type[Exception]) -> Iterator[None]:
    """The library's ``errors`` raised in the block shown as their message on one line (a :class:`CliError`), not
    as a traceback: they are the user's to fix (a missing group, a malformed node), not bugs."""
    try:
        yield
    except errors as e:
        raise CliError(str(e)) from None
