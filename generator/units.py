"""Byte counts: parse sizes people type, and show stored integer bytes in one labelled binary unit."""

import re
from decimal import Decimal

KIB = 1024
MIB = 1024**2
GIB = 1024**3

_UNITS = {
    "": 1, "b": 1,
    "k": KIB, "kib": KIB, "m": MIB, "mib": MIB, "g": GIB, "gib": GIB, "t": 1024**4, "tib": 1024**4,
    "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
}
# Larger than any machine's memory: a size above it is a typing slip, refused rather than computed with.
MAX_SIZE = 1024**6  # 1 EiB
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str, require_unit: bool = False) -> int:
    """Parse '3GiB', '512MiB', '2.5G' (binary) or '3GB' (decimal) into bytes; raise ValueError otherwise.

    With require_unit, a bare number is refused with a hint: '--budget 24' means 24 GiB to a person, never
    24 bytes. Digits are read exactly (Decimal), so a thousand-digit size is refused as too large instead of
    overflowing a float."""
    if text.strip().startswith("-"):
        raise ValueError(f"a size must be above zero: {text!r}")
    match = _SIZE.match(text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise ValueError(f"not a size: {text!r} (try 3GiB, 512MiB or 3000000000B)")
    if require_unit and not unit:
        raise ValueError(f"{text!r} has no unit: say {match.group(1)}GiB, {match.group(1)}MiB or "
                         f"{match.group(1)}B")
    amount = Decimal(match.group(1)) * _UNITS[unit]
    if amount > MAX_SIZE:
        raise ValueError(f"a size over 1 EiB is not a machine's memory: {text[:40]!r}")
    value = int(amount)
    if value <= 0:
        raise ValueError(f"a size must be above zero: {text!r}")
    return value


def mib(n_bytes: int) -> float:
    """Bytes to mebibytes (2**20 bytes)."""
    return n_bytes / MIB


def gib(n_bytes: int) -> float:
    """Bytes to gibibytes (2**30 bytes)."""
    return n_bytes / GIB


def format_mib(n_bytes: int) -> str:
    """'1,234 MiB': the unit every table on the page uses."""
    return f"{mib(n_bytes):,.0f} MiB"


def format_mib_above(n_bytes: int, limit: int) -> str:
    """A figure over a limit, with as many decimals as it takes to read as more than the limit does: never
    'batch 44 needs 162 MiB' beside '162 MiB usable'."""
    for digits in range(4):
        shown, bound = f"{mib(n_bytes):,.{digits}f}", f"{mib(limit):,.{digits}f}"
        if n_bytes <= limit or shown != bound:
            return f"{shown} MiB"
    return f"{n_bytes:,} bytes"


def format_gib_above(n_bytes: int, limit: int) -> str:
    """A figure over a limit in GiB, with as many decimals as it takes to read as more than the limit does."""
    for digits in range(1, 4):
        if n_bytes <= limit or f"{gib(n_bytes):,.{digits}f}" != f"{gib(limit):,.{digits}f}":
            return format_gib(n_bytes, digits)
    return f"{n_bytes:,} bytes"


def format_gib(n_bytes: int, digits: int = 1) -> str:
    """'13.0 GiB': for the large figures of the worked example."""
    return f"{gib(n_bytes):,.{digits}f} GiB"


def signed_percent(fraction: float, digits: int = 1) -> str:
    """'+3.1 %' or '−2.0 %': a change, with a true minus sign."""
    return f"{fraction * 100:+.{digits}f} %".replace("-", "−")


def signed_mib(n_bytes: int) -> str:
    """'+210 MiB' or '−289 MiB': a change in bytes, with a true minus sign; under half a MiB either way it
    reads '0 MiB', never '−0 MiB'."""
    shown = f"{mib(n_bytes):+,.0f}"
    return "0 MiB" if shown in ("+0", "-0") else f"{shown} MiB".replace("-", "−")


def mib_range(low: int, high: int) -> str:
    """'6,483–6,688': the lowest and highest of some repeats, in MiB, without the unit."""
    return f"{mib(low):,.0f}–{mib(high):,.0f}"


def mib_spread(low: int, high: int, two: bool) -> str:
    """The repeats' lowest and highest, in MiB, without the unit: with exactly two repeats both ('616 and 620'),
    since their median is only their midpoint; otherwise their range ('6,483–6,688')."""
    return f"{mib(low):,.0f} and {mib(high):,.0f}" if two else mib_range(low, high)


def format_size(n_bytes: int) -> str:
    """Pick MiB or GiB for a one-off figure such as a memory cap."""
    return format_gib(n_bytes, 2) if n_bytes >= GIB else format_mib(n_bytes)
