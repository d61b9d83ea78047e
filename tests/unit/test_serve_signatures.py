"""Log signatures: errno names in every spelling, calls, programs, paths, devices, units; the query."""

from __future__ import annotations

import errno
import os

import pytest

from fixgraph.serve.signatures import clean_message, extract, query_of


def kinds(log: str) -> set[tuple[str, str]]:
    return {(s.kind, s.value) for s in extract(log)}


@pytest.mark.parametrize(
    "log",
    [
        "open: Permission denied (EACCES)",  # the name
        "cp: cannot create regular file 'x': Permission denied",  # only the message
        "[ 12.3] ath9k: probe failed, error -13",  # a negative kernel return code
    ],
)
def test_errno_is_found_by_name_message_or_kernel_code(log: str) -> None:
    found = [s for s in extract(log) if s.kind == "errno"]
    assert [s.value for s in found] == ["EACCES"]
    assert found[0].detail == os.strerror(errno.EACCES) == "Permission denied"


def test_spans_point_into_the_log() -> None:
    log = 'Dec 01 10:00:00 host app[7]: started\nopenat(AT_FDCWD, "/etc/shadow", 0) = -1 EACCES (Permission denied)'
    for sig in extract(log):
        assert log[sig.start : sig.end] == sig.text
        assert log.splitlines()[sig.line - 1].find(sig.text) >= 0
    assert {("function", "openat"), ("path", "/etc/shadow"), ("errno", "EACCES")} <= kinds(log)


def test_programs_units_devices_and_exit_codes() -> None:
    log = (
        "Dec 01 09:15:02 host systemd[1]: cups.service: Main process exited, code=exited, status=1/FAILURE\n"
        "Nov 30 10:02:11 laptop NetworkManager[812]: <warn> device (wlp2s0): association took too long\n"
        "bash: gnome-tweaks: command not found\n"
        "[ 1.2] usb 1-1: device descriptor read/64, error -110\n"
    )
    found = kinds(log)
    assert {("command", "systemd"), ("unit", "cups.service"), ("error_code", "1/FAILURE")} <= found
    assert {("command", "NetworkManager"), ("device", "wlp2s0"), ("command", "gnome-tweaks")} <= found
    assert {("device", "usb 1-1"), ("errno", "ETIMEDOUT"), ("error_code", "-110")} <= found
    devices = {s.value: s.detail for s in extract(log) if s.kind == "device"}
    assert devices == {"wlp2s0": "wireless Wi-Fi", "usb 1-1": "USB device"}
    assert ("command", "Nov") not in found and ("command", "error") not in found


def test_duplicates_are_kept_once_and_order_is_the_logs() -> None:
    log = "read: Input/output error (EIO)\nread: Input/output error (EIO)"
    values = [(s.kind, s.value) for s in extract(log)]
    assert values.count(("errno", "EIO")) == 1 and values.count(("command", "read")) == 1
    starts = [s.start for s in extract(log)]
    assert starts == sorted(starts)


def test_clean_message_drops_noise_but_keeps_words() -> None:
    noisy = 'ssid="Home" bssid=a4:2b:b0:11:22:33 error -110 [0x1f] (wlp2s0)'
    assert clean_message(noisy) == "ssid Home bssid error wlp2s0"


def test_query_puts_error_lines_first_and_adds_what_the_codes_mean() -> None:
    log = "Dec 01 10:00:00 host kernel: link up\n[ 3.1] mmc0: error -110 whilst initialising SD card"
    query = query_of(extract(log), log)
    assert query.startswith("mmc0: error whilst initialising SD card")
    assert "link up" in query and "Connection timed out" in query
    assert "Dec" not in query.split()  # timestamps are not words to search for
