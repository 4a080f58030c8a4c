"""One error and interrupt handler for the commands that judge, generate or write (eval, sweep, build).

The library raises typed errors; :func:`command_errors` turns each into one line on stderr and an
exit status, and Ctrl-C into the command's interrupt message:

* another process holds the output directory: its message, exit status :data:`EXIT_BUSY` (75);
* Ctrl-C: progress bars closed, then the message of the :class:`~medrewardbench.errors.EvaluationInterrupted`
  (how far it got and how to resume) or the command's own, exit status :data:`EXIT_INTERRUPTED` (130);
* any other :class:`~medrewardbench.errors.MedRewardBenchError` (and, where asked, a ``ValueError``):
  ``error: ...`` with secrets scrubbed, exit status 2;
* where asked, an ``OSError`` while writing: the output, the file and the system's reason, exit
  status :data:`EXIT_WRITE_FAILED` (1).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

import typer

from medrewardbench.cli.support import err_console, fail
from medrewardbench.errors import EvaluationInterrupted, MedRewardBenchError, OutputLockedError
from medrewardbench.utils.secrets import scrub

__all__ = [
    "EXIT_BUSY",
    "EXIT_INTERRUPTED",
    "EXIT_WRITE_FAILED",
    "INTERRUPTED_STORED",
    "command_errors",
    "write_failure",
]

EXIT_WRITE_FAILED = 1
"""Writing an output failed part-way (a full disk); the files of an earlier export stay as they were."""
EXIT_BUSY = 75
"""Another process is using the output or project directory (EX_TEMPFAIL: try again later)."""
EXIT_INTERRUPTED = 130
"""Ctrl-C (128 + SIGINT), after storing what had finished."""
INTERRUPTED_STORED = "interrupted: what was stored is kept; rerun the same command to resume"
"""The interrupt message of a command that stores as it goes."""


class _Closable(Protocol):
    def close(self) -> None: ...


def write_failure(exc: OSError, out: Path | None) -> str:
    """One line for an OSError while writing: the output, the file and the system's reason.

    Args:
        exc: the error.
        out: the command's output (``--out``), when it has one.

    Returns:
        The line.
    """
    reason = exc.strerror or str(exc)
    file = exc.filename
    if out is None:
        return f"{file}: {reason}" if file else reason
    at = f" ({file})" if file and Path(file) != out else ""
    return f"--out {out}: writing failed{at}: {reason}"


@contextmanager
def command_errors(
    interrupted: str | None = INTERRUPTED_STORED,
    *,
    sink: _Closable | None = None,
    value_errors: bool = True,
    write_errors: bool = False,
    out: Path | None = None,
) -> Iterator[None]:
    """Turn the library's errors and Ctrl-C inside the block into one-line messages and exit statuses.

    Args:
        interrupted: what Ctrl-C prints (an EvaluationInterrupted prints its own message); None
            exits with :data:`EXIT_INTERRUPTED` silently (everything was stored and written).
        sink: progress bars, closed before any message and at the end of the block.
        value_errors: a ``ValueError`` is bad input too (else it propagates).
        write_errors: an ``OSError`` is a failed write (else it propagates).
        out: the command's output, named when writing it fails.

    Raises:
        typer.Exit: with the exit status of the error.
    """
    try:
        yield
    except OutputLockedError as exc:
        raise fail(str(exc), EXIT_BUSY) from exc
    except KeyboardInterrupt as exc:
        if sink is not None:
            sink.close()
        message = str(exc) if isinstance(exc, EvaluationInterrupted) else interrupted
        if message is not None:
            err_console.print(message, highlight=False, markup=False)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except MedRewardBenchError as exc:
        raise fail(scrub(str(exc))) from exc
    except ValueError as exc:
        if not value_errors:
            raise
        raise fail(scrub(str(exc))) from exc
    except OSError as exc:
        if not write_errors:
            raise
        raise fail(scrub(write_failure(exc, out)), EXIT_WRITE_FAILED) from exc
    finally:
        if sink is not None:
            sink.close()
