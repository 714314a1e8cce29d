"""gui.widgets.lorebook.words: the comma-separated key text and field words."""

from __future__ import annotations

from engine.schema import LorebookEntry
from gui.widgets.lorebook.words import entry_title, escape, join_keys, split_keys


def test_split_and_join_keys():
    assert split_keys("a, b ,c,,") == ["a", "b", "c"]
    assert split_keys("/a,b/i, plain, /x\\/y/") == ["/a,b/i", "plain", "/x\\/y/"]
    assert split_keys("/unclosed, next") == ["/unclosed", "next"]
    keys = ["Dr. Smith", "#tag", "/dr(agon)?s?/i"]
    assert split_keys(join_keys(keys)) == keys


def test_entry_title_and_escape():
    assert entry_title(LorebookEntry(uid=7, comment="Keep")) == "Keep  #7"
    assert entry_title(LorebookEntry(uid=7, keys=["a", "b", "c", "d"])) == "[a, b, c, …]  #7"
    assert entry_title(LorebookEntry(uid=7)) == "#7"
    assert escape("<b>&</b>") == "&lt;b&gt;&amp;&lt;/b&gt;"
