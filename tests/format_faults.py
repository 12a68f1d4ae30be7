"""Readers gone wrong, for tests/test_formats.py: run in the bounded child process, which imports this
module to find them, so it imports nothing heavy (the child's time limit would count the imports)."""
from __future__ import annotations

import os
import signal
import time


def sleep_forever() -> None:
    time.sleep(3600)


def crash() -> None:
    os.kill(os.getpid(), signal.SIGSEGV)  # what a bug in a parser's native code does


def eat_memory() -> bytearray:
    return bytearray(8 << 30)
