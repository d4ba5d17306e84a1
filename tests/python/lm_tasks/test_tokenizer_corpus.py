"""CharTokenizer (encode / decode, its vocabulary as JSON data), the generated corpus,
and the windows and loaders made of it."""

from __future__ import annotations

import json

import pytest
import torch

from nnx_lab import ConfigError, DataError
from nnx_lab.errors import FileError
from nnx_lab.lm_tasks import CharTokenizer, lm_loaders, token_windows, toy_corpus


def test_the_tokenizer_round_trips_text_and_its_saved_vocabulary(tmp_path):
    texts = toy_corpus(50, seed=1)
    tok = CharTokenizer.from_texts(texts)
    assert tok.pad_id == 0
    assert tok.eos_id == 1
    assert tok.vocab_size == len(set("".join(texts))) + 2
    ids = tok.encode(texts[0], eos=True)
    assert ids[-1] == tok.eos_id
    assert min(ids[:-1]) >= 2
    assert tok.decode(ids) == texts[0]
    assert tok.decode(ids, specials=True) == texts[0] + "<eos>"
    assert tok.decode(torch.tensor(ids)) == texts[0]
    path = tok.save(tmp_path / "vocab.json")
    data = json.loads(path.read_text())
    assert data["format"] == "nnx_lab.char_tokenizer"
    assert data["chars"] == sorted(set("".join(texts)))
    again = CharTokenizer.load(path)
    assert again == tok
    assert again.encode(texts[3]) == tok.encode(texts[3])


def test_the_tokenizer_refuses_what_it_cannot_read(tmp_path):
    tok = CharTokenizer("ab")
    with pytest.raises(DataError, match=r"character 'z' at position 1"):
        tok.encode("az")
    with pytest.raises(DataError, match=r"token id 9 is outside the vocabulary \[0, 4\)"):
        tok.decode([2, 9])
    with pytest.raises(ConfigError, match="once"):
        CharTokenizer("aba")
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    with pytest.raises(FileError, match=r"not a nnx_lab\.char_tokenizer file"):
        CharTokenizer.load(bad)
    bad.write_text("{not json")
    with pytest.raises(FileError, match="not a JSON vocabulary"):
        CharTokenizer.load(bad)


def test_the_corpus_is_seeded_and_documented_by_its_grammar():
    a, b = toy_corpus(20, seed=3), toy_corpus(20, seed=3)
    assert a == b
    assert a != toy_corpus(20, seed=4)
    assert all(s.startswith(("the ", "a ")) and s.endswith(".") for s in a)
    sums = toy_corpus(30, seed=0, kind="arithmetic")
    for s in sums:
        left, right = s[:-1].split("=")
        x, y = left.split("+")
        assert int(x) + int(y) == int(right)
    with pytest.raises(ConfigError, match="kind"):
        toy_corpus(3, kind="poems")


def test_windows_and_loaders():
    w = token_windows(list(range(10)), 4)
    assert w.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert token_windows(torch.arange(6), 4, stride=2).tolist() == [[0, 1, 2, 3], [2, 3, 4, 5]]
    with pytest.raises(DataError, match="3 ids for windows of 4"):
        token_windows([1, 2, 3], 4)
    texts = toy_corpus(100, seed=0)
    tok = CharTokenizer.from_texts(texts)
    train, val = lm_loaders(texts, tok, length=17, batch_size=8, val_fraction=0.2)
    (batch,) = next(iter(train))
    assert batch.shape == (8, 17)
    assert batch.dtype == torch.long
    val_text = "".join(tok.decode(row) for (x,) in val for row in x)
    assert texts[-1][:10] in val_text or texts[-2][:10] in val_text
    assert texts[0] not in val_text  # split by sentence before windows
    again, _ = lm_loaders(texts, tok, length=17, batch_size=8, val_fraction=0.2)
    assert torch.equal(next(iter(again))[0], batch)  # the shuffle is seeded
