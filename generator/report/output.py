"""Writing a built site: the output folder is replaced whole, and only if it is safe to replace."""

import shutil
import tempfile
from pathlib import Path


class OutputError(ValueError):
    """An output path that build must not replace."""


def check_output(output: Path) -> None:
    """Refuse to replace a file, or a folder that holds something other than a previous build."""
    if output.exists() and not output.is_dir():
        raise OutputError(f"--output {output}: is a file, not a folder")
    if output.is_dir() and any(output.iterdir()) and not (output / "index.md").is_file():
        raise OutputError(f"--output {output}: not empty and not a previous build (no index.md); "
                          "refusing to replace it")


def write_site(files: dict[str, str], output: Path) -> list[Path]:
    """Replace the output folder with exactly these files; a failure leaves the old folder as it was."""
    check_output(output)
    output = output.resolve()
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}-", dir=output.parent))
    staging.chmod(0o755)  # mkdtemp makes it private; a site is meant to be served
    try:
        for name, text in sorted(files.items()):
            (staging / name).write_text(text, encoding="utf-8")
        old = output.with_name(f".{output.name}-old")
        shutil.rmtree(old, ignore_errors=True)
        if output.exists():
            output.rename(old)
        staging.rename(output)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return [output / name for name in sorted(files)]
