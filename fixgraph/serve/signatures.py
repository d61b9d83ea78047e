"""Signatures of an error log: what in a pasted log can be looked up (errno names, error codes, the
program or function that failed, file paths, devices, systemd units) and the error messages themselves.

Errno names are the C library's own (Python's `errno` table): `EACCES` written out, its message
(`Permission denied`, from `os.strerror`), or a negative kernel return code (`error -13`) all give
the same signature. Each signature keeps where it was found in the log (character span, line).
Log noise (timestamps, host names, PIDs, hex addresses) is removed from the messages that become the
search query.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

KINDS = ("errno", "error_code", "function", "command", "path", "device", "unit", "message")

ERRNO_NAME = re.compile(r"\b(E[A-Z0-9]{2,15})\b")
NEGATIVE_CODE = re.compile(r"\b(?:error|err|ret|returned|status|failed with|code)\s*[=:]?\s*(-\d{1,4})\b", re.I)
EXIT_CODE = re.compile(
    r"\b(?:exit (?:code|status)|status|code)\s*[=:]?\s*(\d{1,3}(?:/[A-Z_]+)?)\b|\b(0x[0-9a-fA-F]{4,8})\b", re.I
)
# `prog: message`, `prog[123]: message`, `prog(123): message` at the start of a line (after log prefixes)
PROGRAM = re.compile(r"^(?P<name>[A-Za-z_][\w.+-]{1,40}?)(?:\[\d+\]|\(\d+\))?:\s+(?P<rest>.+)$")
CALL = re.compile(r"^(?P<name>[a-z_][a-z0-9_]{1,30})\((?P<args>.*)\)\s*=\s*-1\s+(?P<errno>E[A-Z0-9]+)")  # strace
SHELL_NOT_FOUND = re.compile(r"^(?:\w+: )?(?:line \d+: )?(?P<name>[\w.+-]+): command not found")
PATH = re.compile(r"(?<![\w/.])(?:~|/)(?:[\w.@%+-]+/)*[\w.@%+-]+/?")
DEVICE = re.compile(
    r"\b(?:wlan\d+|wlp\w+|wlx\w+|enp\w+|eno\d+|eth\d+|hci\d+|sd[a-z]\d*|nvme\d+n\d+(?:p\d+)?|mmcblk\d+(?:p\d+)?"
    r"|card\d+|ata\d+(?:\.\d+)?|usb \d+-[\d.]+|input\d+|video\d+)\b"
)
# what a device name says about the hardware, in the words help pages use
DEVICE_CLASSES = (
    (re.compile(r"^(?:wlan|wlp|wlx)"), "wireless Wi-Fi"),
    (re.compile(r"^(?:enp|eno|eth)"), "wired Ethernet network"),
    (re.compile(r"^hci"), "Bluetooth"),
    (re.compile(r"^(?:sd[a-z]|nvme|mmcblk|ata|/dev/sd|/dev/nvme|/dev/mmcblk)"), "disk drive"),
    (re.compile(r"^(?:card|/dev/dri)"), "graphics card"),
    (re.compile(r"^(?:usb|/dev/bus/usb)"), "USB device"),
    (re.compile(r"^(?:video|/dev/video)"), "webcam video"),
    (re.compile(r"^(?:input|/dev/input)"), "input device"),
)
UNIT = re.compile(r"\b[\w@.-]+\.(?:service|socket|mount|timer|target|device|path)\b")
# log prefixes: syslog/journal timestamps, ISO times, dmesg [   12.345678], host names after the date
TIMESTAMP = re.compile(
    r"^\s*(?:\[\s*\d+\.\d+\]\s*|\d{4}-\d\d-\d\d[T ][\d:.,]+(?:Z|[+-]\d\d:?\d\d)?\s*"
    r"|[A-Z][a-z]{2}\s+\d{1,2}\s+\d\d:\d\d:\d\d\s+(?:[\w.-]+\s+)?)"
)
LEVEL = re.compile(r"^\s*(?:<\w+>|\[\w+\]|(?:ERROR|WARNING|WARN|CRITICAL|FATAL|INFO|DEBUG|NOTICE)\b:?)\s*", re.I)
NOISE = re.compile(
    r"\b(?:[0-9a-f]{2}:){5}[0-9a-f]{2}\b|\b[0-9a-f]{8}-[0-9a-f-]{27}\b"  # MAC addresses, UUIDs
    r"|\b0x[0-9a-f]+\b|\b[0-9a-f]{8,}\b|\b\d+\b|[\[\](){}<>=\"']",
    re.I,
)
ERRORISH = re.compile(
    r"error|fail|denied|cannot|can't|could not|couldn't|unable|not found|no such|timed? ?out|refused|invalid|"
    r"missing|unknown|unsupported|not permitted|broken|crash|segfault|abort|panic|warn|lost|disconnect",
    re.I,
)
GENERIC_PROGRAMS = frozenset({"error", "warning", "warn", "info", "note", "fatal", "debug", "kernel", "usage", "hint"})


@dataclass(frozen=True)
class Signature:
    kind: str  # one of KINDS
    value: str  # normalised: EACCES, open, /etc/fstab, wlp2s0, -13 ...
    text: str  # as written in the log
    start: int  # character span in the log
    end: int
    line: int  # 1-based
    detail: str = ""  # e.g. the errno's message

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@lru_cache(maxsize=1)
def errno_tables() -> tuple[dict[str, int], dict[str, str]]:
    """(errno name -> number, lower-cased message -> name) from the C library Python was built on."""
    names = {name: code for code, name in errno.errorcode.items()}
    for name in dir(errno):  # aliases such as EWOULDBLOCK = EAGAIN
        if name.startswith("E") and isinstance(getattr(errno, name), int):
            names.setdefault(name, getattr(errno, name))
    messages: dict[str, str] = {}
    for code, name in sorted(errno.errorcode.items()):
        messages.setdefault(os.strerror(code).lower(), name)
    return names, messages


def strip_prefix(line: str) -> str:
    """The line without its timestamp, host and level markers."""
    line = TIMESTAMP.sub("", line, count=1)
    return LEVEL.sub("", line, count=1)


def extract(log: str) -> list[Signature]:
    """Every signature of `log`, in order of appearance, without duplicates (kind, value)."""
    found: list[Signature] = []
    offset = 0
    for number, raw in enumerate(log.splitlines(keepends=True), start=1):
        line = raw.rstrip("\r\n")
        if line.strip():
            found += line_signatures(line, offset, number)
        offset += len(raw)
    unique: dict[tuple[str, str], Signature] = {}
    for sig in found:
        unique.setdefault((sig.kind, sig.value), sig)
    return sorted(unique.values(), key=lambda s: (s.start, KINDS.index(s.kind)))


def line_signatures(line: str, base: int, number: int) -> list[Signature]:
    """The signatures of one log line; `base` is the line's offset in the log."""
    names, messages = errno_tables()
    found: list[Signature] = []

    def add(kind: str, value: str, start: int, end: int, detail: str = "") -> None:
        found.append(Signature(kind, value, line[start:end], base + start, base + end, number, detail))

    for m in ERRNO_NAME.finditer(line):
        if m.group(1) in names:
            add("errno", m.group(1), m.start(1), m.end(1), os.strerror(names[m.group(1)]))
    lowered = line.lower()
    for message, name in messages.items():
        at = lowered.find(message)
        if at >= 0 and len(message) > 6:
            add("errno", name, at, at + len(message), os.strerror(names[name]))
    for m in NEGATIVE_CODE.finditer(line):
        code = -int(m.group(1))
        if code in errno.errorcode:
            add("errno", errno.errorcode[code], m.start(1), m.end(1), os.strerror(code))
        add("error_code", m.group(1), m.start(1), m.end(1))
    for m in EXIT_CODE.finditer(line):
        group = 1 if m.group(1) else 2
        add("error_code", m.group(group), m.start(group), m.end(group))
    head_at = len(line) - len(strip_prefix(line))
    head = line[head_at:]
    call = CALL.match(head)
    if call:
        add("function", call.group("name"), head_at + call.start("name"), head_at + call.end("name"))
    shell = SHELL_NOT_FOUND.match(head)
    if shell:
        add("command", shell.group("name"), head_at + shell.start("name"), head_at + shell.end("name"))
    program = PROGRAM.match(head)
    if program and program.group("name").lower() not in GENERIC_PROGRAMS and not call:
        add("command", program.group("name"), head_at + program.start("name"), head_at + program.end("name"))
    for m in PATH.finditer(line):
        value = m.group(0).rstrip("/.,:;") or m.group(0)
        if len(value) > 1 and not value.startswith("//"):
            is_device = value.startswith("/dev/")
            kind, detail = ("device", device_class(value)) if is_device else ("path", "")
            add(kind, value, m.start(), m.start() + len(value), detail)
    for m in DEVICE.finditer(line):
        add("device", m.group(0), m.start(), m.end(), device_class(m.group(0)))
    for m in UNIT.finditer(line):
        add("unit", m.group(0), m.start(), m.end())
    if ERRORISH.search(head):
        add("message", clean_message(head), head_at, len(line))
    return found


def device_class(name: str) -> str:
    return next((words for pattern, words in DEVICE_CLASSES if pattern.match(name)), "")


def clean_message(text: str) -> str:
    """An error message as words a search engine can use: numbers, addresses and brackets dropped."""
    words = NOISE.sub(" ", text)
    words = re.sub(r"(?<![\w])[^\w\s]+(?![\w])", " ", words)  # punctuation left standing alone
    return re.sub(r"\s+", " ", words).strip()


def query_of(signatures: list[Signature], log: str, max_chars: int = 800) -> str:
    """The search query of a log: its error lines first, then its other lines (nothing is thrown away:
    a line without an error word may still say what failed), all without log noise, then the errno
    and device-class words the text did not already say."""
    lines = [clean_message(strip_prefix(line)) for line in log.splitlines() if line.strip()]
    errors = [s.value for s in signatures if s.kind == "message"]
    parts = list(dict.fromkeys([*errors, *lines]))
    text = " ".join(parts)
    for s in signatures:
        extra = s.detail if s.kind in ("errno", "device") else s.value if s.kind in ("function", "command") else ""
        if extra and extra.lower() not in text.lower():
            parts.append(extra)
            text = " ".join(parts)
    return text[:max_chars]
