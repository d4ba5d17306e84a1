"""The batched fast path for tensor data (issue 23): the loader's batches, bit for bit.

Each equality test iterates the same loader twice from the same random state, once
through the fast path and once as torch iterates it, and compares every batch (values,
dtype, shape, order, container) and every generator after every epoch: the loader's,
its sampler's and torch's global stream.
"""

from __future__ import annotations

import engine_factories as f
import pytest
import torch
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    Sampler,
    Subset,
    TensorDataset,
)

import nnx_lab
from nnx_lab import NNModel, NNParams, NNTrainParams
from nnx_lab.engine.fast_batches import batches, fast_path_applies

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(autouse=True)
def _switch_restored():
    before = nnx_lab.set_fast_batches(None)
    yield
    nnx_lab.set_fast_batches(before)


def _tensors(n: int = 50):
    g = torch.Generator().manual_seed(5)
    return (
        torch.randn(n, 3, 2, generator=g, dtype=torch.float64),
        torch.randint(0, 7, (n,), generator=g),
        torch.rand(n, 4, generator=g) > 0.5,
        torch.randn(n, 4, 2, generator=g).transpose(1, 2),  # not contiguous: the stack is
        torch.arange(n, dtype=torch.int16),
    )


def _generators(loader: DataLoader) -> list[torch.Generator]:
    """The loader's, its sampler's, its batch sampler's and that one's sampler's."""
    batch_sampler = loader.batch_sampler
    found = [
        loader.generator,
        getattr(loader.sampler, "generator", None),
        getattr(batch_sampler, "generator", None),
        getattr(getattr(batch_sampler, "sampler", None), "generator", None),
    ]
    unique: list[torch.Generator] = []
    for gen in found:
        if gen is not None and all(gen is not u for u in unique):
            unique.append(gen)
    return unique


def _states(loader: DataLoader) -> list[torch.Tensor]:
    return [torch.get_rng_state(), *(g.get_state() for g in _generators(loader))]


def _epochs(loader: DataLoader, fast: bool, n_epochs: int = 3):
    """Every batch of ``n_epochs`` epochs, and the random states after each epoch."""
    seen, states = [], []
    for _ in range(n_epochs):
        it = batches(loader) if fast else iter(loader)
        seen.append(list(it))
        states.append(_states(loader))
    return seen, states


def _same(loader: DataLoader) -> None:
    assert fast_path_applies(loader)
    start = [s.clone() for s in _states(loader)]
    fast, fast_states = _epochs(loader, fast=True)
    torch.set_rng_state(start[0])
    for gen, state in zip(_generators(loader), start[1:], strict=True):
        gen.set_state(state)
    slow, slow_states = _epochs(loader, fast=False)
    assert len(fast) == len(slow)
    for epoch_fast, epoch_slow in zip(fast, slow, strict=True):
        assert len(epoch_fast) == len(epoch_slow)
        for a, b in zip(epoch_fast, epoch_slow, strict=True):
            assert type(a) is type(b) is list
            for ta, tb in zip(a, b, strict=True):
                assert ta.dtype == tb.dtype
                assert ta.shape == tb.shape
                assert ta.stride() == tb.stride()
                assert torch.equal(ta, tb)
    for sa, sb in zip(fast_states, slow_states, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(sa, sb, strict=True))
    # shuffled epochs differ from each other: the comparison is not of one fixed order
    if isinstance(loader.sampler, RandomSampler):
        assert not torch.equal(fast[0][0][-1], fast[1][0][-1])


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("own_generator", [False, True])
def test_shuffled_epochs_are_the_loaders_bit_for_bit(drop_last, own_generator):
    gen = torch.Generator().manual_seed(3) if own_generator else None
    loader = DataLoader(
        TensorDataset(*_tensors()), batch_size=8, shuffle=True, drop_last=drop_last, generator=gen
    )
    _same(loader)  # 50 rows by 8: an uneven last batch of 2 (or dropped)


def test_unshuffled_and_one_tensor_datasets_match():
    _same(DataLoader(TensorDataset(*_tensors()), batch_size=16))
    _same(DataLoader(TensorDataset(torch.arange(10.0)), batch_size=3, shuffle=True))


def test_a_sampler_with_its_own_generator_and_a_plain_batch_sampler_match():
    data = TensorDataset(*_tensors())
    sampler = RandomSampler(data, generator=torch.Generator().manual_seed(9))
    _same(DataLoader(data, sampler=sampler, batch_size=6))
    replacement = RandomSampler(data, replacement=True, num_samples=30)
    _same(DataLoader(data, batch_sampler=BatchSampler(replacement, 7, drop_last=False)))


@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true")
def test_a_pinning_loader_keeps_the_fast_path_and_its_batches():
    """``pin_memory=True``: pinned as the loader pins (only with an accelerator)."""
    loader = DataLoader(TensorDataset(*_tensors()), batch_size=8, shuffle=True, pin_memory=True)
    _same(loader)
    pinned = torch.accelerator.is_available()
    assert all(t.is_pinned() == pinned for t in next(batches(loader)))


class _Backwards(Sampler[int]):
    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        return iter(range(self.n - 1, -1, -2))

    def __len__(self) -> int:
        return (self.n + 1) // 2


def test_the_indices_are_the_loaders_batch_samplers():
    """A sampler the fast path cannot guess: every other row, backwards."""
    data = TensorDataset(torch.arange(11))
    loader = DataLoader(data, sampler=_Backwards(11), batch_size=4)
    got = [b[0].tolist() for b in batches(loader)]
    assert got == [[10, 8, 6, 4], [2, 0]]
    assert fast_path_applies(loader)


def test_the_loader_draws_its_seed_before_the_first_batch():
    """``iter(loader)`` draws from torch's global stream at once (its base seed), and
    the sampler draws at the first batch: the fast path does both, in that order."""
    loader = DataLoader(TensorDataset(torch.arange(20)), batch_size=5, shuffle=True)
    torch.manual_seed(1)
    iter(loader)
    want = torch.get_rng_state()
    torch.manual_seed(1)
    batches(loader)
    assert torch.equal(torch.get_rng_state(), want)


class _Declared(BatchSampler):
    nnx_index_batches = True  # "I yield lists of indices": the fast path may take it


def test_a_batch_sampler_that_declares_index_batches_takes_the_path():
    data = TensorDataset(*_tensors())
    sampler = RandomSampler(data, generator=torch.Generator().manual_seed(4))
    _same(DataLoader(data, batch_sampler=_Declared(sampler, 9, drop_last=False)))


def test_the_data_parallel_shard_loaders_take_the_path():
    from nnx_lab.distributed import train_loader, validation_loader

    data = TensorDataset(*_tensors())
    for rank in (0, 1):
        train = train_loader(data, 7, seed=2, rank=rank, world_size=2)
        _same(train)
        assert _generators(train) == [train.batch_sampler.generator]
        _same(validation_loader(data, 6, rank=rank, world_size=2))


# -- what takes the ordinary path ----------------------------------------------------------
class _Dicts(Dataset):
    def __len__(self) -> int:
        return 6

    def __getitem__(self, i):
        return {"x": torch.tensor([float(i)]), "y": torch.tensor(i)}


class _Stream(IterableDataset):
    def __iter__(self):
        return iter((torch.tensor([float(i)]), torch.tensor(i)) for i in range(6))


class _MyLoader(DataLoader):
    pass


class _MyTensors(TensorDataset):
    pass


class _MyBatches(BatchSampler):
    pass


def _plain():
    return TensorDataset(torch.arange(6.0).reshape(6, 1), torch.arange(6))


ORDINARY = {
    "workers": lambda: DataLoader(_plain(), batch_size=2, num_workers=1),
    "iterable dataset": lambda: DataLoader(_Stream(), batch_size=2),
    "dict dataset": lambda: DataLoader(_Dicts(), batch_size=2),
    "subset": lambda: DataLoader(Subset(_plain(), [0, 2, 4]), batch_size=2),
    "loader subclass": lambda: _MyLoader(_plain(), batch_size=2),
    "dataset subclass": lambda: DataLoader(_MyTensors(*_plain().tensors), batch_size=2),
    "custom batch sampler": lambda: DataLoader(
        _plain(), batch_sampler=_MyBatches(range(6), 2, drop_last=False)
    ),
    "no automatic batching": lambda: DataLoader(_plain(), batch_size=None),
    "a timeout without workers": lambda: DataLoader(_plain(), batch_size=2, timeout=1.0),
}


@pytest.mark.parametrize("name", sorted(ORDINARY))
def test_other_loaders_take_the_ordinary_path(name):
    loader = ORDINARY[name]()
    assert not fast_path_applies(loader)
    if name == "a timeout without workers":  # torch refuses it; so does the engine
        with pytest.raises(AssertionError, match="timeout == 0"):
            batches(loader)
    elif name != "workers":  # starting a worker process proves nothing more
        assert [_plain_values(b) for b in batches(loader)] == [_plain_values(b) for b in loader]


def _plain_values(batch):
    if isinstance(batch, dict):
        return {k: v.tolist() for k, v in batch.items()}
    return [t.tolist() for t in batch]


def test_a_custom_collate_is_called():
    calls = []

    def collate(samples):
        calls.append(len(samples))
        return [torch.stack([s[0] for s in samples]), torch.stack([s[1] for s in samples])]

    loader = DataLoader(_plain(), batch_size=4, collate_fn=collate)
    assert not fast_path_applies(loader)
    assert [b[1].tolist() for b in batches(loader)] == [[0, 1, 2, 3], [4, 5]]
    assert calls == [4, 2]


# -- the switch -----------------------------------------------------------------------------
def test_the_switch_returns_the_previous_value_and_turns_the_path_off():
    loader = DataLoader(_plain(), batch_size=2)
    assert nnx_lab.set_fast_batches(None) is True  # on by default
    assert nnx_lab.set_fast_batches(False) is True
    assert nnx_lab.set_fast_batches(None) is False
    assert isinstance(batches(loader), type(iter(loader)))  # the loader's own iterator
    assert nnx_lab.set_fast_batches(True) is False
    assert not isinstance(batches(loader), type(iter(loader)))
    with pytest.raises(TypeError, match="enabled='yes'"):
        nnx_lab.set_fast_batches("yes")  # type: ignore[arg-type]
    assert nnx_lab.set_fast_batches(None) is True


# -- through training -----------------------------------------------------------------------
def _train(root, fast: bool, **kw):
    nnx_lab.set_fast_batches(fast)
    model = f.model()
    run = model.train(f.train_params(root, n_epochs=2, checkpoint_every_s=0, **kw))
    return model, run


def test_a_trained_run_is_bit_identical_with_the_path_on_and_off(tmp_path):
    fast_model, fast_run = _train(tmp_path / "on", True)
    slow_model, slow_run = _train(tmp_path / "off", False)
    assert fast_run.id == slow_run.id
    for (name, a), (_, b) in zip(
        fast_model.net.state_dict().items(), slow_model.net.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
    assert [p.train_edp.loss for p in fast_run.idps] == [p.train_edp.loss for p in slow_run.idps]
    val = [[p.val_edp.loss for p in r.idps if p.val_edp] for r in (fast_run, slow_run)]
    assert val[0]
    assert val[0] == val[1]


def test_a_run_resumed_with_the_path_off_continues_a_fast_one_bit_for_bit(tmp_path):
    def fresh():
        return NNModel(
            net_params=NNParams(input_dim=8, output_dim=3, hidden_dims=[16], dropout_prob=0.2),
        )

    def params(n_epochs, **kw):
        train, val = f.loaders(batch=24)  # 256 rows: an uneven last batch
        return NNTrainParams(
            n_epochs=n_epochs, seed=3, train_loader=train, val_loader=val,
            runs_root=str(tmp_path), checkpoint_every_s=0, **kw,
        )  # fmt: skip

    nnx_lab.set_fast_batches(True)
    full_model = fresh()
    full = full_model.train(params(4))
    first = fresh().train(params(2))
    nnx_lab.set_fast_batches(False)
    resumed_model = fresh()
    resumed = resumed_model.train(params(2, resume_from_run_id=first.id))
    assert resumed.resume_status["mode"] == "stateful"
    for (name, a), (_, b) in zip(
        full_model.net.state_dict().items(), resumed_model.net.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
    assert [p.train_edp.loss for p in full.idps] == [p.train_edp.loss for p in resumed.idps]


def test_evaluate_and_predict_from_a_loader_take_the_path_and_agree(monkeypatch, runs_root):
    import nnx_lab.engine.fast_batches as fast_batches

    model = f.model()
    model.train(f.train_params(runs_root, n_epochs=1, checkpoint_every_s=0))
    X, y, _, _ = f.data()
    loader = DataLoader(TensorDataset(X, y), batch_size=40)
    taken = []
    indexed = fast_batches._indexed
    monkeypatch.setattr(fast_batches, "_indexed", lambda ld: taken.append(ld) or indexed(ld))
    nnx_lab.set_fast_batches(True)
    fast = model.evaluate(loader), model.predict(loader)
    assert taken == [loader] * 3  # evaluate's first-batch check, its pass, predict's pass
    nnx_lab.set_fast_batches(False)
    slow = model.evaluate(loader), model.predict(loader)
    assert len(taken) == 3
    assert fast[0].loss == slow[0].loss
    assert fast[0].accuracy == slow[0].accuracy
    assert torch.equal(fast[1].logits, slow[1].logits)


@pytest.mark.parametrize("fast", [True, False])
def test_the_first_batch_check_takes_the_path_and_leaves_every_stream_as_it_was(fast, monkeypatch):
    """train() checks the loader's first batch before any run: through the fast path
    (one indexing, not a fetch per row), with the same batch and no random draw left."""
    import nnx_lab.engine.fast_batches as fast_batches
    from nnx_lab.engine.data import first_batch

    taken = []
    indexed = fast_batches._indexed
    monkeypatch.setattr(fast_batches, "_indexed", lambda ld: taken.append(ld) or indexed(ld))
    X, y = torch.randn(50, 3), torch.randint(0, 4, (50,))
    loader = DataLoader(TensorDataset(X, y), batch_size=8, shuffle=True)
    previous = nnx_lab.set_fast_batches(fast)
    try:
        torch.manual_seed(5)
        got = first_batch(loader, "NNTrainParams.train_loader")
        after = torch.get_rng_state()
        torch.manual_seed(5)
        want = next(iter(loader))
    finally:
        nnx_lab.set_fast_batches(previous)
    assert taken == ([loader] if fast else [])
    assert all(torch.equal(a, b) and a.dtype == b.dtype for a, b in zip(got, want, strict=True))
    torch.manual_seed(5)
    assert torch.equal(after, torch.get_rng_state())  # the check drew nothing
