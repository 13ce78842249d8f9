"""Tasks files: TOML, a Markdown checklist, a GitHub issues export; every bad input refused
with `invalid_tasks` saying what is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omp.backlog import files
from omp.backlog.files import Spec
from omp.errors import OmpError


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def refused(path: Path) -> str:
    with pytest.raises(OmpError) as info:
        files.load(path)
    assert info.value.code == "invalid_tasks"
    return info.value.message


# ---- TOML ------------------------------------------------------------------------------------

TOML = """
[[task]]
title = "Write the parser"
description = "Tokens first."
priority = 2

[[task]]
title = "The list command"
blocked_by = [1]
agent = "claude"
retries = 2

[[task]]
id = "docs"
title = "Document   both"
blocked_by = [1, 2]
verify = "pytest -q tests/docs"
model = "sonnet"
"""


def test_toml_gives_every_field_with_ids_by_position(tmp_path: Path) -> None:
    specs = files.load(write(tmp_path, "tasks.toml", TOML))
    assert [s.id for s in specs] == ["1", "2", "docs"]
    one, two, docs = specs
    assert (one.title, one.description, one.priority) == ("Write the parser", "Tokens first.", 2)
    assert (two.blocked_by, two.agent, two.retries) == (("1",), "claude", 2)
    assert docs.title == "Document both"  # whitespace of a title is one line
    assert (docs.verify, docs.model, docs.blocked_by) == ("pytest -q tests/docs", "sonnet",
                                                          ("1", "2"))  # fmt: skip


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('[[task]]\ntitle = "a"\n[[task]]\ntitle = "b"\nid = 1\n', "duplicate id 1"),
        ('[[task]]\ntitle = "a"\nblocked_by = [7]\n', "blocked by 7, which no task has"),
        ('[[task]]\ntitle = "a"\nblocked_by = [1]\n', "task 1 ('a') is blocked by itself"),
        (
            '[[task]]\ntitle = "a"\nblocked_by = [3]\n[[task]]\ntitle = "b"\nblocked_by = [1]\n'
            '[[task]]\ntitle = "c"\nblocked_by = [2]\n',
            "cycle: 1 -> 3 -> 2 -> 1",
        ),
        ('[[task]]\ndescription = "no title"\n', "task 1 has no title"),
        ('[[task]]\ntitle = "a"\nblockd_by = [2]\n', "unknown key 'blockd_by'"),
        ('[[task]]\ntitle = "a"\npriority = "high"\n', "priority must be a whole number"),
        ('[[task]]\ntitle = "a"\nretries = 99\n', "retries must be a whole number from 0 to 10"),
        ('[[task]]\ntitle = "a"\nid = "a/b"\n', "invalid id 'a/b'"),
        ('[[task]]\ntitle = "a"\nagent = "../x"\n', "invalid agent"),
        ('[team]\nmerge = "auto"\n', "unknown table or key 'team'"),
        ("title = 'a'\n", "unknown table or key 'title'"),
        ("[[task]\n", "is not valid TOML"),
        ("", "no [[task]] tables"),
    ],
)
def test_toml_refusals_say_what_is_wrong(tmp_path: Path, text: str, words: str) -> None:
    assert words in refused(write(tmp_path, "t.toml", text))


def test_a_cycle_is_named_in_the_message(tmp_path: Path) -> None:
    text = '[[task]]\ntitle="a"\nblocked_by=[2]\n[[task]]\ntitle="b"\nblocked_by=[1]\n'
    message = refused(write(tmp_path, "t.toml", text))
    assert "1 -> 2 -> 1" in message


def test_not_utf8_and_too_large_are_refused(tmp_path: Path) -> None:
    bad = write(tmp_path, "t.toml", b'[[task]]\ntitle = "caf\xe9"\n')
    assert "is not UTF-8 (byte" in refused(bad)
    big = write(tmp_path, "big.md", "- [ ] x\n" * (files.MAX_BYTES // 8 + 1))
    assert "larger than 1024 KiB" in refused(big)
    assert "does not exist" in refused(tmp_path / "missing.toml")
    assert "not a regular file" in refused(tmp_path)


# ---- a Markdown checklist --------------------------------------------------------------------

CHECKLIST = """# Sprint

Some prose that is not a task.

- [ ] Write the parser
  It reads tokens.

  Numbers too.
- [x] Set up CI
* [ ] The list command (depends on #1)
- [ ] Document it
\tblocked by #3 and #1, and #2
Trailing prose.
"""


def test_checklist_items_with_indented_descriptions(tmp_path: Path) -> None:
    specs = files.load(write(tmp_path, "todo.md", CHECKLIST))
    assert [(s.id, s.title) for s in specs] == [
        ("1", "Write the parser"),
        ("3", "The list command (depends on #1)"),
        ("4", "Document it"),
    ]
    assert specs[0].description == "It reads tokens.\n\nNumbers too."
    assert specs[1].blocked_by == ("1",)
    # #2 is ticked (done): a dependency on it is met already
    assert specs[2].blocked_by == ("3", "1")


def test_checklist_refusals(tmp_path: Path) -> None:
    assert "no tasks in it" in refused(write(tmp_path, "a.md", "# nothing\n- [x] done\n"))
    assert "blocked by 9" in refused(write(tmp_path, "b.md", "- [ ] a (blocked by #9)\n"))
    assert "blocked by itself" in refused(write(tmp_path, "c.md", "- [ ] a, depends on #1\n"))


# ---- a GitHub issues export ------------------------------------------------------------------


def issue(
    number: int, title: str, body: str = "", *labels: str, **extra: object
) -> dict[str, object]:
    return {"number": number, "title": title, "body": body,
            "labels": [{"name": n} for n in labels], **extra}  # fmt: skip


def test_github_export_numbers_bodies_and_labels(tmp_path: Path) -> None:
    export = [
        issue(12, "Parser crashes on empty input", "Steps...\n\nBlocked by #10"),
        issue(10, "Tokenizer", "", "agent:claude", "priority:3", "bug"),
        issue(11, "Old one", "", state="CLOSED"),
        issue(13, "Docs", "Depends on #11, #12"),
    ]
    specs = files.load(write(tmp_path, "issues.json", json.dumps(export)))
    by = {s.id: s for s in specs}
    assert list(by) == ["12", "10", "13"]
    assert by["12"].blocked_by == ("10",) and by["12"].description.startswith("Steps")
    assert (by["10"].agent, by["10"].priority) == ("claude", 3)
    assert by["13"].blocked_by == ("12",)  # #11 is closed: done


def test_github_refusals(tmp_path: Path) -> None:
    def bad(obj: object) -> str:
        return refused(write(tmp_path, "i.json", json.dumps(obj)))

    assert "expected a list of issues" in bad({"number": 1})
    assert "no issue number" in bad([{"title": "x"}])
    assert "issue #1 has no title" in bad([issue(1, "")])
    assert "blocked by 5" in bad([issue(1, "a", "blocked by #5")])
    assert "duplicate id 1" in bad([issue(1, "a"), issue(1, "b")])
    assert "not valid JSON" in refused(write(tmp_path, "j.json", "[{"))


def test_format_is_sniffed_for_other_names(tmp_path: Path) -> None:
    assert files.kind_of(Path("x"), '[{"number": 1}]') == "github"
    assert files.kind_of(Path("x"), '[[task]]\ntitle = "a"') == "toml"
    assert files.kind_of(Path("x"), "- [ ] a") == "checklist"
    specs = files.load(write(tmp_path, "BACKLOG", "- [ ] only one\n"))
    assert specs == [Spec("1", "only one", where=specs[0].where)]


def test_check_against_existing_tasks() -> None:
    new = [Spec("5", "a", blocked_by=("2",), where="task 5")]
    assert files.check(new, "add", {"2": []}) == new
    with pytest.raises(OmpError, match="duplicate id 2"):
        files.check([Spec("2", "a", where="task 2")], "add", {"2": []})
    with pytest.raises(OmpError, match=r"cycle: 1 -> 2 -> 1|cycle: 2 -> 1 -> 2"):
        files.check([Spec("1", "a", blocked_by=("2",), where="task 1")], "add", {"2": ["1"]})
