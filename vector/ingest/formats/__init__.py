"""Documents in the formats people have (PDF, DOCX, HTML, email) as the Markdown the chunker reads:
headings as '#' lines, so sections keep their heading path, and tables as Markdown tables, so the
chunker keeps each one whole.

Parsing these formats means running large parsers on files nobody checked, and a hostile file is
normal input: an encrypted or truncated PDF, a zip bomb DOCX, a deeply nested or huge HTML page,
malformed MIME. Each file is therefore converted in a child process (forked from a forkserver that
has the parsers loaded, so a document costs a fork, not an import) with a wall-clock limit and an
address-space limit: a parser that loops, exhausts memory or crashes costs that one file, which is
skipped with the reason, never the ingest. The result is capped at the document size limit too.

Library choices were measured (docs/architecture.md, Ingest): pypdf over pdfminer.six (about twice
as fast, and keeps table rows together), python-docx, lxml with our own walk over the page (kept
headings and tables where trafilatura and readability dropped content), the standard `email` package.
"""
from __future__ import annotations

import multiprocessing
import os
import resource
from pathlib import PurePath

from core.errors import BadDocument
from core.text_safety import SURROGATE
from vector.ingest.formats.converted import Converted

# suffix -> the name a user knows the format by (in messages)
FORMAT_SUFFIXES = {".pdf": "PDF", ".docx": "DOCX", ".html": "HTML", ".htm": "HTML", ".eml": "email",
                   ".mbox": "mailbox"}
# Generous for a real document (a 300-page PDF takes a few seconds), short enough that a parser
# stuck on a crafted file does not hold an ingest for long.
CONVERT_TIMEOUT_S = 60.0
# On top of what the child already maps: a real document needs far less; a decompression bomb
# inside a PDF stream or a DOCX part would take all of the machine's memory.
CONVERT_MEMORY_BYTES = 2 << 30


def convert(name: str, data: bytes, max_bytes: int, timeout_s: float = CONVERT_TIMEOUT_S) -> Converted:
    """The document `data` (file `name`, whose suffix says the format) as Markdown, converted in a
    bounded child process; `BadDocument` saying why not."""
    return run_bounded(convert_here, (name, data, max_bytes), timeout_s, FORMAT_SUFFIXES[_suffix(name)])


def convert_here(name: str, data: bytes, max_bytes: int) -> Converted:
    """The conversion itself, in this process: only for input already known to be safe, and for the child."""
    from vector.ingest.formats import mail, office, pdf, web

    suffix = _suffix(name)
    readers = {".pdf": pdf.read_pdf, ".docx": office.read_docx, ".html": web.read_html, ".htm": web.read_html,
               ".eml": mail.read_email, ".mbox": mail.read_mbox}
    converted = readers[suffix](data, max_bytes)
    # PDF font maps and email parts can yield NUL or lone surrogates, which PostgreSQL cannot store:
    # dropping the document for a character its reader made up would lose the rest of its text
    converted = Converted(converted.title and _clean(converted.title), _clean(converted.text))
    if suffix == ".mbox":  # a mailbox is many messages: its first subject would not name it
        converted = Converted(PurePath(name).stem, converted.text)
    size = len(converted.text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise BadDocument(f"its text is {size / 1e6:.1f} MB, over the {max_bytes / 1e6:.1f} MB limit "
                          "(raise CROSSROADS_MAX_DOCUMENT_BYTES or split the file)")
    if not converted.text.strip():
        raise BadDocument(f"no text in this {FORMAT_SUFFIXES[suffix]} file")
    return converted


def _clean(text: str) -> str:
    return SURROGATE.sub("\ufffd", text.replace("\x00", ""))


def _suffix(name: str) -> str:
    return PurePath(name).suffix.lower()


_context = None


def _forkserver():
    """The forkserver context, started on first use with the converters imported: the parsers (pypdf,
    lxml, python-docx) take longer to import than to read a typical document."""
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload([__name__, f"{__name__}.pdf", f"{__name__}.office", f"{__name__}.web",
                                         f"{__name__}.mail"])
    return _context


def run_bounded(function, args: tuple, timeout_s: float, what: str):
    """`function(*args)` in a child process with a time and memory limit: its result, or `BadDocument`
    (the child's own, or one saying it took too long, ran out of memory or crashed)."""
    context = _forkserver()
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(send, function, args), daemon=True)
    child.start()
    send.close()
    try:
        if not receive.poll(timeout_s):
            raise BadDocument(f"reading this {what} file took over {timeout_s:.0f} s and was stopped: "
                              "it may be crafted or damaged; re-export it or convert it to Markdown")
        try:
            status, value = receive.recv()
        except EOFError:  # the child died without a word: killed for memory, or a crash in native code
            child.join(5)
            raise BadDocument(f"the {what} reader crashed on this file (exit code {child.exitcode}): "
                              "it may be damaged; re-export it or convert it to Markdown") from None
    finally:
        receive.close()
        if child.is_alive():
            child.kill()
        child.join(5)
    if status == "bad":
        raise BadDocument(value)
    return value


def _child(send, function, args) -> None:
    _limit_memory()
    try:
        result = ("ok", function(*args))
    except BadDocument as exc:
        result = ("bad", str(exc))
    except MemoryError:
        result = ("bad", f"needs more than {CONVERT_MEMORY_BYTES >> 30} GiB of memory to read: it may be a "
                         "decompression bomb; re-export it or convert it to Markdown")
    except RecursionError:
        result = ("bad", "nested too deeply to read; re-export it or convert it to Markdown")
    except Exception as exc:  # a parser's own error on damaged input: that file only
        result = ("bad", f"cannot be read, it may be truncated or damaged ({type(exc).__name__}: "
                         f"{str(exc)[:200]}); re-export it or convert it to Markdown")
    send.send(result)
    send.close()


def _limit_memory() -> None:
    with open("/proc/self/statm") as statm:  # size of the address space now, in pages
        mapped = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = mapped + CONVERT_MEMORY_BYTES
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
