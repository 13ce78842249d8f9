"""A worker's diff cut into files and numbered lines (`omp.board.diffs`)."""

from __future__ import annotations

from omp.board.diffs import line_of, split

DIFF = """\
diff --git a/app.py b/app.py
index 1111111..2222222 100644
--- a/app.py
+++ b/app.py
@@ -1,3 +1,4 @@
 import os
-print("old")
+print("new")
+print("\x1b[31mred")
 x = 1
@@ -10,2 +11,2 @@ def f():
 a
-b
+c
diff --git a/new.md b/new.md
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/new.md
@@ -0,0 +1,2 @@
+# title
+<script>alert(1)</script>
diff --git a/img.png b/img.png
new file mode 100644
index 0000000..4444444
GIT binary patch
literal 3
Kcmb=e$N&HU1ONa4

literal 0
HcmV?d00001

"""


def test_files_lines_and_numbers() -> None:
    files = split(DIFF)
    assert [f["path"] for f in files] == ["app.py", "new.md", "img.png"]
    app, new, img = files
    assert (app["status"], app["added"], app["deleted"]) == ("modified", 3, 2)
    first = app["hunks"][0]["lines"]
    assert [(ln["kind"], ln["old"], ln["new"]) for ln in first] == [
        ("ctx", 1, 1), ("del", 2, None), ("add", None, 2), ("add", None, 3), ("ctx", 3, 4),
    ]  # fmt: skip
    assert first[3]["text"] == 'print("\\x1b[31mred")'  # the escape made visible
    second = app["hunks"][1]["lines"]
    assert [(ln["old"], ln["new"]) for ln in second] == [(10, 11), (11, None), (None, 12)]
    assert (
        new["status"] == "added"
        and new["hunks"][0]["lines"][1]["text"] == "<script>alert(1)</script>"
    )
    assert img["binary"] and img["hunks"] == []


def test_a_comment_names_a_line_the_branch_has() -> None:
    files = split(DIFF)
    assert line_of(files, "app.py", 3) == {"kind": "add", "old": None, "new": 3,
                                           "text": 'print("\\x1b[31mred")'}  # fmt: skip
    assert line_of(files, "app.py", 12)["text"] == "c"  # type: ignore[index]
    assert line_of(files, "app.py", 99) is None
    assert line_of(files, "nope.py", 1) is None
