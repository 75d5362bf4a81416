"""Whether two results of a row may be compared, as an explicit list of checked keys in the spirit of
pyperf's checked metadata; environments may differ, and ENVIRONMENT_KEYS lists what is reported when they do."""

from generator.store.environment import HARDWARE_KEYS, UNKNOWN, Environment
from generator.store.records import RowResult, same_method

# What must agree for two results of one row to be compared: the row's definition, the model's architecture,
# the file format, and the measuring method (bumped whenever the harness changes what a figure means; versions
# that changed only other modes' rows count as one, records.METHOD_CHANGES).
CHECKED_KEYS = ("row", "model.config_sha256", "schema_version", "method_version")
# The libraries a diff is about, and everything else about a set-up that it reports when it differs.
LIBRARY_KEYS = ("torch", "transformers", "peft")
ENVIRONMENT_KEYS = ("python", "device", "device_name", "cpu", "cpu_features", "cpu_count", "total_memory_bytes",
                    "os", "machine", "libc", "thp", "packages_hash")


def checked_value(result: RowResult, key: str) -> object:
    """One checked key's value: a dotted key reads an attribute of an attribute."""
    value: object = result
    for part in key.split("."):
        value = getattr(value, part)
    return value


def comparable(before: RowResult, after: RowResult) -> str:
    """'' when two results of a row may be compared, else the first reason they may not."""
    for key in CHECKED_KEYS:
        old, new = checked_value(before, key), checked_value(after, key)
        if key == "method_version" and same_method(before.row.mode, before.method_version, after.method_version):
            continue  # no version between them changed how a row of this mode is measured
        if old != new:
            shown = (str(old)[:12], str(new)[:12]) if key == "model.config_sha256" else (old, new)
            return f"{key} differs ({shown[0]} against {shown[1]})"
    return ""


def same_machine(first: Environment, second: Environment) -> bool:
    """Whether two set-ups ran on the same kind of machine: device, CPU, its features, memory."""
    return all(getattr(first, key) == getattr(second, key) for key in ("device", *HARDWARE_KEYS))


def environment_differences(before: Environment, after: Environment) -> list[tuple[str, str, str]]:
    """(key, before, after) for every non-library key of two set-ups that differs, where both sides recorded
    it (files from before a key existed read as unknown, which says nothing about a difference)."""
    return [(key, str(getattr(before, key)), str(getattr(after, key))) for key in ENVIRONMENT_KEYS
            if getattr(before, key) != getattr(after, key) and UNKNOWN not in (getattr(before, key),
                                                                                getattr(after, key))]
