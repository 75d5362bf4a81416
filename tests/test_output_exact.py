"""Fast, exact tests of writing a built site (generator/report/output.py): what a build counts as its own, what
it keeps for the user, what it refuses and in which words, and what it leaves on disk. No build runs here: the
pages are a few strings, so `nox -s mutation` can run these against every planted bug in the module."""

import os
from pathlib import Path

import pytest

from generator.report import output
from generator.report.output import (
    KEEP_LIST,
    MANIFEST,
    OutputError,
    check_output,
    is_kept,
    keep_patterns,
    manifest_text,
    owned,
    write_site,
)


def files(folder: Path) -> dict[str, str]:
    """Every file under a folder, by relative path, with its text."""
    return {path.relative_to(folder).as_posix(): path.read_text(encoding="utf-8")
            for path in sorted(folder.rglob("*")) if path.is_file()}


def put(folder: Path, entries: dict[str, str]) -> None:
    for name, text in entries.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")


def test_the_manifest_by_hand() -> None:
    assert manifest_text(["a.md", "b/c.svg"]) == ("# written by memory-budget build: the next build replaces "
                                                  "these files\na.md\nb/c.svg\n")
    assert manifest_text([]) == "# written by memory-budget build: the next build replaces these files\n"


def test_entries_list_files_and_links_walked_sorted_and_relative(tmp_path: Path) -> None:
    put(tmp_path, {"b.md": "", "a/z.txt": "", "a/y/x.txt": ""})
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    put(tmp_path / "elsewhere", {"inner.txt": ""})
    assert output._entries(tmp_path) == ["a/y/x.txt", "a/z.txt", "b.md", "elsewhere/inner.txt", "link"]


def test_keep_patterns_skip_blank_and_comment_lines_and_strip_slashes(tmp_path: Path) -> None:
    assert keep_patterns(tmp_path) == ("CNAME", ".nojekyll", ".git", KEEP_LIST)
    (tmp_path / KEEP_LIST).write_text("# mine\n\n  /assets/  \nnotes/*.txt\n  # indented\nx#y\n", encoding="utf-8")
    assert keep_patterns(tmp_path) == ("CNAME", ".nojekyll", ".git", KEEP_LIST, "assets", "notes/*.txt", "x#y")


@pytest.mark.parametrize(("entry", "kept"), [
    ("CNAME", True), ("assets", True), ("assets/logo.png", True), ("assets/deep/a.css", True),
    ("notes/a.txt", True), ("notes/a.md", False), ("Assets/x", False), ("x/assets", False), ("index.md", False),
])
def test_a_path_is_kept_by_itself_or_a_folder_above_it(entry: str, kept: bool) -> None:
    assert is_kept(entry, ("CNAME", "assets", "notes/*.txt")) is kept


def test_what_a_build_owns(tmp_path: Path) -> None:
    assert owned(tmp_path) == set()
    put(tmp_path, {"index.md": "", "fit.svg": "", "sub/page.md": "", "Notes.md": "", "index.html": "",
                   "data.json": ""})
    assert owned(tmp_path) == {"index.md", "index.html", "fit.svg"}  # a build before manifests: its names only
    (tmp_path / "index.html").unlink()
    assert owned(tmp_path) == set()  # index.md alone is not a built site
    put(tmp_path, {MANIFEST: "# written by memory-budget build\nindex.md\n\nsub/page.md\n"})
    assert owned(tmp_path) == {"index.md", "sub/page.md", MANIFEST}


def test_refusals_in_their_words(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x", encoding="utf-8")
    with pytest.raises(OutputError, match=r"^--output .*a-file: is a file, not a folder$"):
        check_output(tmp_path / "a-file")
    measurements = tmp_path / "measurements"
    measurements.mkdir()
    for inside in (measurements, measurements / "site", tmp_path):
        with pytest.raises(OutputError) as refused_here:
            check_output(inside, measurements, force=True)
        assert str(refused_here.value) == (f"--output {inside}: is, holds or lies inside the measurements folder "
                                           f"{measurements}; a build would replace the results it reads. Write "
                                           "the site elsewhere")
    check_output(tmp_path / "site", measurements)  # beside it: fine, and nothing there yet
    site = tmp_path / "site"
    put(site, {"index.md": "", "index.html": "", "a.txt": "", "b.txt": "", "c.txt": "", "d.txt": "", "CNAME": ""})
    with pytest.raises(OutputError) as refused:
        check_output(site, measurements)
    assert str(refused.value) == (f"--output {site}: holds files memory-budget did not write (a.txt, b.txt, c.txt "
                                  f"and 1 more); list them in {KEEP_LIST} to keep them across builds, or pass "
                                  "--force to replace the folder")
    (site / "d.txt").unlink()
    with pytest.raises(OutputError, match=r"\(a.txt, b.txt, c.txt\); list them"):
        check_output(site, measurements)
    check_output(site, measurements, force=True)
    (site / KEEP_LIST).write_text("*.txt\n", encoding="utf-8")
    check_output(site, measurements)


def test_a_build_replaces_its_own_files_keeps_the_users_and_writes_its_manifest(tmp_path: Path) -> None:
    site = tmp_path / "site"
    written = write_site({"index.md": "one", "fit.md": "two"}, site)
    assert written == [site.resolve() / "fit.md", site.resolve() / "index.md"]
    assert files(site) == {MANIFEST: manifest_text(["fit.md", "index.md"]), "fit.md": "two", "index.md": "one"}
    assert oct(site.stat().st_mode & 0o777) == oct(0o777 & ~_umask())
    put(site, {"CNAME": "example.org", KEEP_LIST: "assets\n", "assets/img/a.png": "png", ".git/HEAD": "ref"})
    put(tmp_path, {".site-old/left-by-a-crash": ""})
    write_site({"index.md": "three", "CNAME": "built"}, site)
    assert files(site) == {MANIFEST: manifest_text(["CNAME", "index.md"]), "index.md": "three",
                           "CNAME": "built", KEEP_LIST: "assets\n", "assets/img/a.png": "png", ".git/HEAD": "ref"}
    assert sorted(path.name for path in tmp_path.iterdir()) == ["site"]  # no staging or old folder left
    put(site, {"notes.txt": "mine"})
    with pytest.raises(OutputError, match="holds files memory-budget did not write"):
        write_site({"index.md": "four"}, site)  # refused unless forced
    assert files(site)["notes.txt"] == "mine" and files(site)["index.md"] == "three"
    write_site({"index.md": "four"}, site, force=True)
    assert "notes.txt" not in files(site)


def test_a_failed_write_leaves_the_old_site_and_no_staging(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    write_site({"index.md": "old"}, site)

    staged: list[str] = []

    def broken(self: Path, text: str, encoding: str) -> int:
        staged.append(self.parent.name)
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "write_text", broken)
    with pytest.raises(OutputError, match=r"^--output .*site: cannot write there \(Permission denied\)$"):
        write_site({"index.md": "new"}, site)
    monkeypatch.undo()
    assert staged[0].startswith(".site-")  # a hidden folder beside the output, never served
    assert files(site) == {MANIFEST: manifest_text(["index.md"]), "index.md": "old"}
    assert sorted(path.name for path in tmp_path.iterdir()) == ["site"]


def test_an_interrupted_write_leaves_no_staging_and_goes_on_stopping(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def stopped(self: Path, text: str, encoding: str) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", stopped)
    with pytest.raises(KeyboardInterrupt):
        write_site({"index.md": "new"}, tmp_path / "site")
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_write_site_checks_for_itself_and_makes_the_folders_above(tmp_path: Path) -> None:
    measurements = tmp_path / "measurements"
    measurements.mkdir()
    with pytest.raises(OutputError, match="is, holds or lies inside the measurements folder"):
        write_site({"index.md": "x"}, measurements / "site", measurements)
    deep = tmp_path / "a" / "b" / "site"
    write_site({"index.md": "x"}, deep, measurements)
    assert files(deep) == {MANIFEST: manifest_text(["index.md"]), "index.md": "x"}
    (tmp_path / "plain-file").write_text("", encoding="utf-8")
    with pytest.raises(OutputError) as refused:
        write_site({"index.md": "x"}, tmp_path / "plain-file" / "site")
    assert str(refused.value) == f"--output {tmp_path / 'plain-file' / 'site'}: cannot write there (File exists)"


def test_the_staging_folder_is_a_hidden_sibling_of_the_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Path] = []
    write = Path.write_text

    def watched(self: Path, text: str, encoding: str) -> int:
        seen.append(self.parent)
        return write(self, text, encoding=encoding)

    monkeypatch.setattr(Path, "write_text", watched)
    write_site({"index.md": "x"}, tmp_path / "site")
    monkeypatch.undo()
    assert {folder.parent for folder in seen} == {tmp_path} and all(f.name.startswith(".site-") for f in seen)


def test_kept_links_stay_links_and_patterns_keep_their_letters(tmp_path: Path) -> None:
    site = tmp_path / "site"
    write_site({"index.md": "x"}, site)
    (tmp_path / "target.txt").write_text("outside", encoding="utf-8")
    (site / "notes").symlink_to(tmp_path / "target.txt")
    put(site, {KEEP_LIST: "notes\nXmas/\n", "Xmas/card.txt": "ho"})
    assert keep_patterns(site)[-2:] == ("notes", "Xmas")
    write_site({"index.md": "y"}, site)
    assert (site / "notes").is_symlink() and (site / "Xmas" / "card.txt").read_text(encoding="utf-8") == "ho"
